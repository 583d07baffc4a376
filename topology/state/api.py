"""Store values and protocols shared by every backend.

A *versioned* key-value store keeps, for each key, a history of versions: a version is a
value (or a delete marker) valid from its timestamp (ms, inclusive) until the timestamp of the
next version of the same key (exclusive). :class:`VersionedKeyValueStore` is the protocol
every backend implements; ``topology.state.versioned`` holds the semantics they share and
``topology.testing.contracts.check_versioned_store`` checks a backend against them.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, final, overload, runtime_checkable

from ..errors import StoreClosedError

if TYPE_CHECKING:  # PEP 696 defaults: a bare ``KeyValueStore`` is ``KeyValueStore[Any, Any]``
    from typing_extensions import TypeVar

    from ..windows import Windowed

    K = TypeVar("K", default=Any)
    V_co = TypeVar("V_co", covariant=True, default=Any)
else:  # typing.TypeVar takes ``default`` from Python 3.13 on only
    from typing import TypeVar

    K = TypeVar("K")
    V_co = TypeVar("V_co", covariant=True)

__all__ = (
    "MAX_TIMESTAMP",
    "PUT_RETURN_CODE_NOT_PUT",
    "KeyValueStore",
    "SessionStore",
    "WindowStore",
    "PUT_RETURN_CODE_VALID_TO_UNDEFINED",
    "Operation",
    "StoreClosedError",
    "StoreWatcher",
    "VersionEntry",
    "VersionedKeyValueStore",
    "VersionedRecord",
)

PUT_RETURN_CODE_VALID_TO_UNDEFINED = -1
"""``put`` result: the new version is the latest of its key (Kafka's constant of that name)."""

PUT_RETURN_CODE_NOT_PUT = -(2**63)
"""``put`` result: nothing was written (Kafka's ``Long.MIN_VALUE``).

The write was older than ``observed stream time - history retention``, or the
``max_versions`` policy discarded it at once; either way it is counted in
``dropped_records``.
"""

MAX_TIMESTAMP = 2**63 - 1
"""The largest timestamp (ms) a store accepts: Kafka's ``Long.MAX_VALUE``."""


@final
@dataclass(frozen=True, slots=True)
class VersionedRecord:
    """One version of a key in a versioned store: value, timestamp (ms) and ``valid_to``.

    ``valid_to`` is exclusive, and ``None`` for the latest version.
    """

    value: Any
    timestamp: int
    valid_to: int | None = None


class Operation(enum.StrEnum):
    """What a version records: a value, a delete marker or a purge marker.

    >>> Operation.DELETE == "delete"
    True
    """

    PUT = "put"
    """A value."""
    DELETE = "delete"
    """A delete marker (a tombstone): the key reads as absent from its timestamp on, and the
    versions before it stay readable as of their times."""
    PURGE = "purge"
    """A purge marker: like a delete marker, but every earlier version of the key is gone."""


@final
@dataclass(frozen=True, slots=True)
class VersionEntry:
    """A version of a key with its kind: an entry of ``history``/``scan_versions``, a watch event.

    ``value`` is ``None`` for delete and purge markers. ``valid_to`` (exclusive, ms) is the
    timestamp of the next version of the key when the entry was produced, ``None`` if the
    entry was the latest.

    >>> e = VersionEntry("k", "v", 10, None, Operation.PUT)
    >>> e.is_latest, e.is_delete
    (True, False)
    """

    key: Any
    value: Any
    timestamp: int
    valid_to: int | None
    operation: Operation

    @property
    def is_latest(self) -> bool:
        """Whether this version was the latest of its key (``valid_to is None``)."""
        return self.valid_to is None

    @property
    def is_delete(self) -> bool:
        """Whether this is a delete or purge marker rather than a value."""
        return self.operation is not Operation.PUT


@runtime_checkable
class StoreWatcher(Protocol):
    """A subscription to a store's changes, returned by ``watch``."""

    @property
    def closed(self) -> bool:
        """Whether the watcher has stopped receiving events."""
        ...

    def drain(self) -> list[VersionEntry]:
        """Return the events collected since the last call, oldest first, and forget them."""
        ...

    def close(self) -> None:
        """Stop receiving events; idempotent."""
        ...


@runtime_checkable
class VersionedKeyValueStore(Protocol):
    """A key-value store keeping each key's history (KIP-889), with NATS/VerKV-style extras.

    All times are ``int`` milliseconds in ``[0, MAX_TIMESTAMP]``. Writes older than
    ``observed_stream_time - history_retention_ms`` are rejected and counted in
    ``dropped_records``. See ``docs/versioned.md`` for the full semantics; the shared
    implementation is ``topology.state.versioned.VersionedStoreBase``.
    """

    name: str
    persistent: bool

    @property
    def history_retention_ms(self) -> int:
        """How far behind the observed stream time history stays readable (also the grace)."""
        ...

    @property
    def segment_interval_ms(self) -> int:
        """Width of a time segment, the unit of physical expiry."""
        ...

    @property
    def max_versions(self) -> int | None:
        """Most versions kept per key (``None``: no limit)."""
        ...

    @property
    def observed_stream_time(self) -> int:
        """Largest timestamp of an accepted write (``-1`` before the first one)."""
        ...

    @property
    def dropped_records(self) -> int:
        """Writes rejected so far (too old for grace, or discarded by ``max_versions``)."""
        ...

    @property
    def is_open(self) -> bool:
        """Whether the store accepts calls (``False`` after ``close()``)."""
        ...

    def put(self, key: Any, value: Any, timestamp: int) -> int:
        """Write a version; return its ``valid_to``, ``-1`` if latest, or ``NOT_PUT``."""
        ...

    def delete(self, key: Any, timestamp: int) -> VersionedRecord | None:
        """Write a delete marker; return the record that was current as of ``timestamp``."""
        ...

    def get(self, key: Any, as_of: int | None = None) -> VersionedRecord | None:
        """The latest record of ``key``, or the one valid at ``as_of``."""
        ...

    def get_versions(self, key: Any, from_time: int | None = None,
                     to_time: int | None = None, descending: bool = False
                     ) -> list[VersionedRecord]:
        """Every record of ``key`` whose validity interval overlaps ``[from_time, to_time]``."""
        ...

    def restore(self, records: Iterable[tuple[Any, Any, int]], *,
                observed_stream_time: int | None = None) -> None:
        """Replay changelog records ``(key, value, timestamp)`` with Kafka's restore rules.

        Then the observed stream time moves to ``observed_stream_time`` (ms), if given.
        """
        ...

    def history(self, key: Any, newest_first: bool = True, include_deletes: bool = False
                ) -> list[VersionEntry]:
        """Every version of ``key`` within history retention."""
        ...

    def purge(self, key: Any, timestamp: int) -> bool:
        """Drop all history of ``key`` and leave a purge marker at ``timestamp``."""
        ...

    def create(self, key: Any, value: Any, timestamp: int) -> bool:
        """Write only if ``key`` has no current value; ``False`` if nothing was written."""
        ...

    def update(self, key: Any, value: Any, timestamp: int, expected_timestamp: int) -> bool:
        """Write only if the current value has ``expected_timestamp``."""
        ...

    def keys(self) -> list[Any]:
        """Keys with a current value, in key-bytes order."""
        ...

    def range(self, from_key: Any = None, to_key: Any = None
              ) -> list[tuple[Any, VersionedRecord]]:
        """``(key, latest record)`` for keys in ``[from_key, to_key]``, key-bytes order."""
        ...

    def reverse_range(self, from_key: Any = None, to_key: Any = None
                      ) -> list[tuple[Any, VersionedRecord]]:
        """:meth:`range`, reversed."""
        ...

    def scan_versions(self, from_key: Any = None, to_key: Any = None,
                      since: int | None = None, limit_per_key: int | None = None,
                      include_deletes: bool = False) -> list[VersionEntry]:
        """Versions written at or after ``since``, for keys in a range (VerKV's ScanNumWithSV)."""
        ...

    def watch(self, callback: Callable[[VersionEntry], Any] | None = None, *,
              key: Any = None, key_prefix: bytes | None = None, from_key: Any = None,
              to_key: Any = None, include_history: bool = False,
              ignore_deletes: bool = False, updates_only: bool = False) -> StoreWatcher:
        """Subscribe to the store's changes (synchronous delivery during each write)."""
        ...

    def close(self) -> None:
        """Release the store; later calls raise :class:`StoreClosedError`."""
        ...


# -- the read API of the other built-in store kinds (what the test driver's getters return) ----
# Static types only (nothing checks them at runtime): every backend of a kind has these
# methods; K and V_co are the types of the keys and values the store holds (V_co covariant:
# through this API values are only read).


class KeyValueStore(Protocol[K, V_co]):
    """A key-value store's read API (in memory or RocksDB): ``driver.get_key_value_store``.

    Range queries follow the order of the serialized keys; ``None`` bounds are open.
    """

    name: str

    @property
    def persistent(self) -> bool:
        """Whether the store is kept in RocksDB."""
        ...

    def get(self, key: K) -> V_co | None:
        """The value of ``key``, or ``None``."""
        ...

    def range(self, from_key: K | None = None, to_key: K | None = None
              ) -> Iterator[tuple[K, V_co]]:
        """``(key, value)`` pairs with ``from_key <= key <= to_key`` in key-bytes order."""
        ...

    def reverse_range(self, from_key: K | None = None, to_key: K | None = None
                      ) -> Iterator[tuple[K, V_co]]:
        """:meth:`range`, reversed."""
        ...

    def all(self) -> Iterator[tuple[K, V_co]]:
        """Every ``(key, value)`` in key-bytes order."""
        ...

    def reverse_all(self) -> Iterator[tuple[K, V_co]]:
        """:meth:`all`, reversed."""
        ...

    def prefix_scan(self, prefix: Any,
                    prefix_serializer: Callable[[Any], bytes | None] | None = None
                    ) -> Iterator[tuple[K, V_co]]:
        """``(key, value)`` pairs whose serialized key starts with the bytes of ``prefix``."""
        ...

    def reverse_prefix_scan(self, prefix: Any,
                            prefix_serializer: Callable[[Any], bytes | None] | None = None
                            ) -> Iterator[tuple[K, V_co]]:
        """:meth:`prefix_scan`, reversed."""
        ...

    def approximate_num_entries(self) -> int:
        """Number of keys."""
        ...


class WindowStore(Protocol[K, V_co]):
    """A window store's read API (in memory or RocksDB): ``driver.get_window_store``.

    Times are ``int`` ms; ``None`` bounds are open.
    """

    name: str

    @property
    def persistent(self) -> bool:
        """Whether the store is kept in RocksDB."""
        ...

    @overload
    def fetch(self, key: K, start: int, /) -> V_co | None: ...

    @overload
    def fetch(self, key: K, time_from: int | None, time_to: int | None, /
              ) -> Iterator[tuple[int, V_co]]: ...

    @overload
    def fetch(self, key_from: K | None, key_to: K | None, time_from: int | None,
              time_to: int | None, /) -> Iterator[tuple[Windowed[K], V_co]]: ...

    def fetch(self, *args: Any) -> Any:
        """One window's value, or the windows of a key (``(start, value)``) or key range."""
        ...

    @overload
    def backward_fetch(self, key: K, time_from: int | None, time_to: int | None, /
                       ) -> Iterator[tuple[int, V_co]]: ...

    @overload
    def backward_fetch(self, key_from: K | None, key_to: K | None, time_from: int | None,
                       time_to: int | None, /) -> Iterator[tuple[Windowed[K], V_co]]: ...

    def backward_fetch(self, *args: Any) -> Any:
        """:meth:`fetch` with a time range, reversed."""
        ...

    def fetch_all(self, time_from: int | None, time_to: int | None
                  ) -> Iterator[tuple[Windowed[K], V_co]]:
        """``(Windowed, value)`` for windows starting in ``[time_from, time_to]``."""
        ...

    def backward_fetch_all(self, time_from: int | None, time_to: int | None
                           ) -> Iterator[tuple[Windowed[K], V_co]]:
        """:meth:`fetch_all`, reversed."""
        ...

    def all(self) -> Iterator[tuple[Windowed[K], V_co]]:
        """Every ``(Windowed, value)``, in the store's order.

        In memory by window start then key bytes; on RocksDB by segment, then key bytes,
        then start (Kafka's orders).
        """
        ...

    def backward_all(self) -> Iterator[tuple[Windowed[K], V_co]]:
        """:meth:`all`, reversed."""
        ...


class SessionStore(Protocol[K, V_co]):
    """A session store's read API (in memory or RocksDB): ``driver.get_session_store``.

    Sessions are ``Windowed(key, Window(start, end))``, both ends inclusive (ms).
    """

    name: str

    @property
    def persistent(self) -> bool:
        """Whether the store is kept in RocksDB."""
        ...

    @property
    def observed_stream_time(self) -> int:
        """Largest session end written so far (``-1`` before the first write)."""
        ...

    def fetch_session(self, key: K, start: int, end: int) -> V_co | None:
        """The aggregate of the session ``[start, end]`` of ``key``, or ``None``."""
        ...

    @overload
    def find_sessions(self, key: K, earliest_session_end: int | None,
                      latest_session_start: int | None, /) -> Iterator[tuple[Windowed[K], V_co]]:
        ...

    @overload
    def find_sessions(self, key_from: K | None, key_to: K | None,
                      earliest_session_end: int | None, latest_session_start: int | None, /
                      ) -> Iterator[tuple[Windowed[K], V_co]]: ...

    def find_sessions(self, *args: Any) -> Iterator[tuple[Windowed[K], V_co]]:
        """Sessions ending at or after one time and starting at or before another."""
        ...

    @overload
    def backward_find_sessions(self, key: K, earliest_session_end: int | None,
                               latest_session_start: int | None, /
                               ) -> Iterator[tuple[Windowed[K], V_co]]: ...

    @overload
    def backward_find_sessions(self, key_from: K | None, key_to: K | None,
                               earliest_session_end: int | None,
                               latest_session_start: int | None, /
                               ) -> Iterator[tuple[Windowed[K], V_co]]: ...

    def backward_find_sessions(self, *args: Any) -> Iterator[tuple[Windowed[K], V_co]]:
        """:meth:`find_sessions`, reversed."""
        ...

    @overload
    def fetch(self, key: K, /) -> Iterator[tuple[Windowed[K], V_co]]: ...

    @overload
    def fetch(self, key_from: K | None, key_to: K | None, /
              ) -> Iterator[tuple[Windowed[K], V_co]]: ...

    def fetch(self, *args: Any) -> Iterator[tuple[Windowed[K], V_co]]:
        """Every live session of a key or of a key range."""
        ...

    @overload
    def backward_fetch(self, key: K, /) -> Iterator[tuple[Windowed[K], V_co]]: ...

    @overload
    def backward_fetch(self, key_from: K | None, key_to: K | None, /
                       ) -> Iterator[tuple[Windowed[K], V_co]]: ...

    def backward_fetch(self, *args: Any) -> Iterator[tuple[Windowed[K], V_co]]:
        """:meth:`fetch`, reversed."""
        ...

    def all(self) -> Iterator[tuple[Windowed[K], V_co]]:
        """Every live session."""
        ...

    def backward_all(self) -> Iterator[tuple[Windowed[K], V_co]]:
        """:meth:`all`, reversed."""
        ...

    def approximate_num_entries(self) -> int:
        """Number of live sessions."""
        ...
