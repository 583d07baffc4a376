"""Store specs the DSL registers: which store a name gets, in memory or on RocksDB.

The one place that picks a store's backend: every store of a topology comes from a function
here, one per kind (:func:`key_value_store_spec`, :func:`window_store_spec`,
:func:`session_store_spec`, :func:`versioned_store_spec`). Each returns a
:class:`~topology.runtime.graph.StoreSpec` for ``StreamsBuilder.add_store``: the in-memory
factory, the RocksDB factory (given a keyspace of the task's state database) and the user's
persistence choice (``Materialized.persistence``: ``None`` follows the runtime,
``True``/``False`` force RocksDB/memory), with the parameters that lay the store out on disk
(:attr:`~topology.runtime.graph.StoreSpec.signature`).

A durable task records the signature of every store in the meta entry :data:`STORES_META`
(:func:`store_signatures`) and, on restore, refuses state whose store changed its layout
under the same name (:func:`check_store_signatures`): a window store written with 60 s
windows read as 30 s ones would answer with wrong windows, silently.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..serde import serializer_of
from ..state.memory import (
    InMemoryKeyValueStore,
    InMemorySessionStore,
    InMemoryVersionedKeyValueStore,
    InMemoryWindowStore,
)
from ..state.segments import check_store_durations
from .graph import StoreSpec

if TYPE_CHECKING:
    from ..state.rocksdb import Keyspace

__all__ = ("STORES_META", "check_store_signatures", "key_value_store_spec", "session_store_spec",
           "store_signatures", "versioned_store_spec", "window_store_spec")

STORES_META = b"stores"
"""The meta entry of a durable task's stores: JSON ``{store name: signature}``."""


def store_signatures(specs: Iterable[StoreSpec]) -> bytes:
    """The :data:`STORES_META` entry of ``specs``: each store's signature, deterministic.

    >>> store_signatures([window_store_spec("w", None, 10, 15), StoreSpec("c", "key-value", dict)])
    b'{"c":"key-value","w":"window retention_ms=15 window_size_ms=10"}'
    """
    return json.dumps({spec.name: spec.signature for spec in specs}, sort_keys=True,
                      separators=(",", ":")).encode("utf-8")


def check_store_signatures(path: str | os.PathLike[str], committed: bytes | None,
                           specs: Iterable[StoreSpec]) -> None:
    """Refuse committed state whose stores were laid out otherwise than ``specs`` say.

    ``committed`` is the :data:`STORES_META` entry read from the state directory ``path``
    (``None``: nothing recorded, e.g. state written before signatures were, which is taken as
    it is). A store of ``specs`` that the entry does not name is new; a store the entry names
    and ``specs`` do not is left alone.

    :raises StateDirectoryError: a store's signature changed (naming the store, what it was
        written with and what it is now, and what to do), or the entry is damaged.
    """
    if committed is None:
        return
    from ..state.rocksdb.errors import StateDirectoryError

    try:
        recorded = json.loads(committed.decode("utf-8"))
    except ValueError:  # includes UnicodeDecodeError
        recorded = None
    if not isinstance(recorded, dict) or not all(
            isinstance(value, str) for value in recorded.values()):
        raise StateDirectoryError(path, "restore", f"its store signatures ({STORES_META!r} "
                                  f"meta entry) are damaged: {committed[:60]!r}")
    for spec in specs:
        old = recorded.get(spec.name)
        if old is not None and old != spec.signature:
            raise StateDirectoryError(
                path, "restore",
                f"store {spec.name!r} was written as '{old}' and this topology has it as "
                f"'{spec.signature}': its state is laid out for the old parameters and cannot "
                "be read with the new ones; keep the old parameters (window size, grace, "
                "retention), or start the changed topology from empty state under a new "
                "application_id or state_dir (or delete this directory)")


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
    checked = InMemorySessionStore(name, key_ser, retention_ms, segment_interval_ms)  # checks

    def memory() -> Any:
        return InMemorySessionStore(name, key_ser, retention_ms, segment_interval_ms)

    def persistent(keyspace: Keyspace) -> Any:
        from ..state.rocksdb import RocksDBSessionStore

        return RocksDBSessionStore(name, key_ser, retention_ms, keyspace, segment_interval_ms)

    return StoreSpec(name, "session", memory, persistent, persistence,
                     (("retention_ms", retention_ms),
                      ("segment_interval_ms", checked.segment_interval_ms)),  # default if None
                     key_serializer=key_ser)


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
    :raises ValueError: ``window_size_ms < 0`` (sliding windows of no time difference have
        size 0) or ``retention_ms < 0``.
    """
    check_store_durations(("window_size_ms", window_size_ms, 0),
                          ("retention_ms", retention_ms, 0))
    key_ser = serializer_of(key_serde)

    def memory() -> Any:
        return InMemoryWindowStore(name, key_ser, window_size_ms, retention_ms)

    def persistent(keyspace: Keyspace) -> Any:
        from ..state.rocksdb import RocksDBWindowStore

        return RocksDBWindowStore(name, key_ser, window_size_ms, retention_ms, keyspace)

    return StoreSpec(name, "window", memory, persistent, persistence,
                     (("window_size_ms", window_size_ms), ("retention_ms", retention_ms)),
                     key_serializer=key_ser)


def key_value_store_spec(name: str, key_serde: Any, persistence: bool | None = None
                         ) -> StoreSpec:
    """The spec of key-value store ``name``: a table's, an aggregation's, a processor's.

    The store is :class:`~topology.state.memory.InMemoryKeyValueStore` or
    :class:`~topology.state.rocksdb.RocksDBKeyValueStore`; the driver hands it out through
    ``get_key_value_store(name)``.

    >>> from topology.serde import Serdes
    >>> key_value_store_spec("counts", Serdes.string()).factory().name
    'counts'
    """
    key_ser = serializer_of(key_serde)

    def memory() -> Any:
        return InMemoryKeyValueStore(name, key_ser)

    def persistent(keyspace: Keyspace) -> Any:
        from ..state.rocksdb import RocksDBKeyValueStore

        return RocksDBKeyValueStore(name, key_ser, keyspace)

    return StoreSpec(name, "key-value", memory, persistent, persistence, key_serializer=key_ser)


def versioned_store_spec(name: str, key_serde: Any, history_retention_ms: int,
                         segment_interval_ms: int | None = None,
                         persistence: bool | None = None) -> StoreSpec:
    """The spec of versioned store ``name``, keeping ``history_retention_ms`` of history.

    The store is :class:`~topology.state.memory.InMemoryVersionedKeyValueStore` or
    :class:`~topology.state.rocksdb.RocksDBVersionedKeyValueStore`; the driver hands it out
    through ``get_versioned_key_value_store(name)``.

    >>> from topology.serde import Serdes
    >>> spec = versioned_store_spec("rates", Serdes.string(), 60_000)
    >>> spec.kind, spec.factory().history_retention_ms
    ('versioned', 60000)

    :raises TypeError: a duration is neither an ``int`` nor a ``timedelta``.
    :raises ValueError: a negative history retention, or a segment interval below 1.
    """
    key_ser = serializer_of(key_serde)
    checked = InMemoryVersionedKeyValueStore(name, key_ser,  # type: ignore[arg-type]
                                             history_retention_ms, segment_interval_ms)

    def memory() -> Any:
        return InMemoryVersionedKeyValueStore(name, key_ser,  # type: ignore[arg-type]
                                              history_retention_ms, segment_interval_ms)

    def persistent(keyspace: Keyspace) -> Any:
        from ..state.rocksdb import RocksDBVersionedKeyValueStore

        return RocksDBVersionedKeyValueStore(name, key_ser, keyspace,  # type: ignore[arg-type]
                                             history_retention_ms, segment_interval_ms)

    return StoreSpec(name, "versioned", memory, persistent, persistence,
                     (("history_retention_ms", checked.history_retention_ms),
                      ("segment_interval_ms", checked.segment_interval_ms)),
                     key_serializer=key_ser)
