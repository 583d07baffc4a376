"""Store specs the DSL registers: which store a name gets, in memory or on RocksDB.

Each function returns a :class:`~topology.runtime.graph.StoreSpec` for
``StreamsBuilder.add_store``: the in-memory factory, the RocksDB factory (given a keyspace of
the task's state database) and the user's persistence choice (``Materialized.persistence``:
``None`` follows the runtime, ``True``/``False`` force RocksDB/memory).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..serde import serializer_of
from ..state.memory import InMemorySessionStore, InMemoryWindowStore
from ..state.segments import check_store_durations
from .graph import StoreSpec

if TYPE_CHECKING:
    from ..state.rocksdb import Keyspace

__all__ = ("session_store_spec", "window_store_spec")


def session_store_spec(name: str, key_serde: Any, retention_ms: int,
                       persistence: bool | None = None,
                       segment_interval_ms: int | None = None) -> StoreSpec:
    """The spec of session store ``name`` keeping sessions ``retention_ms`` behind stream time.

    A session aggregation keeps its sessions for ``inactivity gap + grace`` (Kafka's default
    retention of a session store); ``key_serde`` serializes the keys (they define equality
    and order). The store is :class:`~topology.state.memory.InMemorySessionStore` or
    :class:`~topology.state.rocksdb.RocksDBSessionStore`; the driver hands it out through
    ``get_session_store(name)``.

    >>> from topology.serde import Serdes
    >>> spec = session_store_spec("sessions", Serdes.string(), 5_000)
    >>> spec.kind, spec.factory().retention_ms
    ('session', 5000)

    :raises TypeError: ``retention_ms`` or ``segment_interval_ms`` is not an ``int``.
    :raises ValueError: ``retention_ms < 0`` or ``segment_interval_ms < 1``.
    """
    key_ser = serializer_of(key_serde)
    InMemorySessionStore(name, key_ser, retention_ms, segment_interval_ms)  # checks arguments

    def memory() -> Any:
        return InMemorySessionStore(name, key_ser, retention_ms, segment_interval_ms)

    def persistent(keyspace: Keyspace) -> Any:
        from ..state.rocksdb import RocksDBSessionStore

        return RocksDBSessionStore(name, key_ser, retention_ms, keyspace, segment_interval_ms)

    return StoreSpec(name, "session", memory, persistent, persistence)


def window_store_spec(name: str, key_serde: Any, window_size_ms: int, retention_ms: int,
                      persistence: bool | None = None) -> StoreSpec:
    """The spec of window store ``name``: windows of ``window_size_ms``, kept ``retention_ms``.

    The store is :class:`~topology.state.memory.InMemoryWindowStore` or
    :class:`~topology.state.rocksdb.RocksDBWindowStore`; the driver hands it out through
    ``get_window_store(name)``.

    >>> from topology.serde import Serdes
    >>> spec = window_store_spec("clicks", Serdes.string(), 60_000, 120_000)
    >>> spec.kind, spec.factory().window_size_ms
    ('window', 60000)

    :raises TypeError: ``window_size_ms`` or ``retention_ms`` is not an ``int``.
    :raises ValueError: ``window_size_ms < 1`` or ``retention_ms < 0``.
    """
    check_store_durations(("window_size_ms", window_size_ms, 1),
                          ("retention_ms", retention_ms, 0))
    key_ser = serializer_of(key_serde)

    def memory() -> Any:
        return InMemoryWindowStore(name, key_ser, window_size_ms, retention_ms)

    def persistent(keyspace: Keyspace) -> Any:
        from ..state.rocksdb import RocksDBWindowStore

        return RocksDBWindowStore(name, key_ser, window_size_ms, retention_ms, keyspace)

    return StoreSpec(name, "window", memory, persistent, persistence)
