"""The semantics of versioned key-value stores, shared by every backend.

:class:`VersionedStoreBase` implements the whole public contract of
:class:`~topology.state.api.VersionedKeyValueStore`: argument checks, the observed stream
time, history retention (which doubles as grace), Kafka's return codes, the dropped-records
counter, the visibility rules, ``max_versions``, guarded writes, purge, key-ordered scans,
restore and watch notifications. A backend stores versions and implements a handful of
primitives (the ``_`` methods marked *backend primitive* below); it never decides what a
read returns.

Stored items are :class:`VersionedRecord` (a value; its ``valid_to`` kept exact by the
backend) or :class:`VersionEntry` (a delete or purge marker, with its key, ``value=None`` and
an exact ``valid_to`` too). Backends return them as they are; they are immutable.

Visibility (what reads may return), with ``cutoff = observed_stream_time -
history_retention_ms``:

- a value is visible if it is the latest version of its key or its ``valid_to > cutoff``
  (it was still current at some time inside retention);
- a marker is visible if its ``timestamp >= cutoff``.

The invisible versions of a key are always its oldest ones, so a backend may drop them
physically whenever it likes (whole segments, lazily): no read can tell.
"""

from __future__ import annotations

import abc
import datetime as _dt
from collections.abc import Callable, Iterable
from typing import Any

from suppress.time import NO_TIMESTAMP, to_millis

from ..errors import IllegalStateError
from .api import (
    MAX_TIMESTAMP,
    PUT_RETURN_CODE_NOT_PUT,
    PUT_RETURN_CODE_VALID_TO_UNDEFINED,
    Operation,
    StoreClosedError,
    VersionedRecord,
    VersionEntry,
)

__all__ = (
    "Item",
    "VersionedStoreBase",
    "Watcher",
    "check_timestamp",
    "default_segment_interval",
    "is_visible",
    "segment_id",
)

Item = VersionedRecord | VersionEntry
"""A stored version: a value (:class:`VersionedRecord`) or a marker (:class:`VersionEntry`)."""

_PUT = Operation.PUT
_DELETE = Operation.DELETE
_PURGE = Operation.PURGE
_NOT_PUT = PUT_RETURN_CODE_NOT_PUT
_LATEST = PUT_RETURN_CODE_VALID_TO_UNDEFINED
_Record = VersionedRecord


def default_segment_interval(history_retention_ms: int) -> int:
    """Return Kafka's default segment interval (ms) for a history retention (ms).

    Retention up to 60 s: ``max(hr / 3, 2 s)``; up to 5 min: ``max(hr / 5, 20 s)``; up to
    1 h: ``max(hr / 12, 60 s)``; beyond: ``max(hr / 24, 5 min)`` (integer division).

    Runtime complexity: O(1).

    >>> default_segment_interval(0), default_segment_interval(300_000)
    (2000, 60000)
    >>> default_segment_interval(3_600_000), default_segment_interval(86_400_000)
    (300000, 3600000)
    """
    hr = history_retention_ms
    if hr <= 60_000:
        return max(hr // 3, 2_000)
    if hr <= 300_000:
        return max(hr // 5, 20_000)
    if hr <= 3_600_000:
        return max(hr // 12, 60_000)
    return max(hr // 24, 300_000)


def segment_id(timestamp: int, segment_interval_ms: int) -> int:
    """Return the segment of a non-negative ``timestamp`` (ms): ``timestamp // interval``.

    Timestamps are never negative here, so this equals Kafka's truncating division.

    >>> segment_id(199_999, 100_000)
    1
    """
    return timestamp // segment_interval_ms


def check_timestamp(value: Any, what: str) -> int:
    """Return ``value`` if it is a valid timestamp (an ``int`` in ``[0, MAX_TIMESTAMP]``).

    :param what: the argument name used in error messages.
    :raises TypeError: for anything but an ``int`` (``bool`` included).
    :raises ValueError: for a negative timestamp or one above ``MAX_TIMESTAMP``.

    >>> check_timestamp(5, "timestamp")
    5
    >>> check_timestamp(-1, "as_of")
    Traceback (most recent call last):
    ...
    ValueError: as_of must be a non-negative int of milliseconds, got -1
    """
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(
            f"{what} must be an int of milliseconds, got {type(value).__name__}: {value!r}"
        )
    if value < 0:
        raise ValueError(f"{what} must be a non-negative int of milliseconds, got {value}")
    if value > MAX_TIMESTAMP:
        raise ValueError(f"{what} must be at most {MAX_TIMESTAMP} (2**63 - 1), got {value}")
    return value


def _check_duration(value: int | _dt.timedelta, what: str) -> int:
    ms = to_millis(value, what)
    if ms > MAX_TIMESTAMP:
        raise ValueError(f"{what} must be at most {MAX_TIMESTAMP} ms, got {ms}")
    return ms


def _check_key(key: Any, what: str = "key") -> None:
    if key is None:
        raise ValueError(f"{what} must not be None")


def _check_flag(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{what} must be a bool, got {type(value).__name__}: {value!r}")
    return value


def is_visible(item: Item, cutoff: int) -> bool:
    """Tell whether a stored version is readable with history kept from ``cutoff`` (ms) on.

    A value is visible if it is the latest (``valid_to is None``) or ``valid_to > cutoff``; a
    delete or purge marker if ``timestamp >= cutoff``.

    Runtime complexity: O(1).

    >>> is_visible(VersionedRecord("v", 1, 10), 9), is_visible(VersionedRecord("v", 1, 10), 10)
    (True, False)
    """
    if item.__class__ is _Record:
        valid_to = item.valid_to
        return valid_to is None or valid_to > cutoff
    return item.timestamp >= cutoff


def _entry(key: Any, item: Item) -> VersionEntry:
    if item.__class__ is _Record:
        return VersionEntry(key, item.value, item.timestamp, item.valid_to, _PUT)
    assert isinstance(item, VersionEntry)
    return item


class Watcher:
    """A subscription to a versioned store's changes; created by ``store.watch(...)``.

    Events are :class:`VersionEntry` objects, delivered synchronously inside the write that
    caused them, after the store has changed: to the callback if one was given, otherwise
    into a queue that :meth:`drain` empties. A watcher filters by key (one key, a key-bytes
    prefix or an inclusive key range) and may skip delete and purge markers. Use it as a
    context manager, or call :meth:`close`, to stop it.

    >>> from topology.state.memory import InMemoryVersionedKeyValueStore
    >>> store = InMemoryVersionedKeyValueStore("s", str.encode, 1_000)
    >>> with store.watch(updates_only=True) as w:
    ...     _ = store.put("k", "v", 5)
    ...     [(e.key, e.value, e.timestamp, e.operation.value) for e in w.drain()]
    [('k', 'v', 5, 'put')]
    """

    __slots__ = (
        "_callback", "_closed", "_events", "_hi", "_ignore_deletes", "_key", "_lo",
        "_prefix", "_store", "needs_bytes",
    )

    def __init__(self, store: VersionedStoreBase,
                 callback: Callable[[VersionEntry], Any] | None, key: Any,
                 key_prefix: bytes | None, lo: bytes | None, hi: bytes | None,
                 ignore_deletes: bool) -> None:
        self._store: VersionedStoreBase | None = store
        self._callback = callback
        self._events: list[VersionEntry] = []
        self._key = key
        self._prefix = key_prefix
        self._lo = lo
        self._hi = hi
        self._ignore_deletes = ignore_deletes
        self._closed = False
        self.needs_bytes = key_prefix is not None or lo is not None or hi is not None
        """Whether the filter looks at key bytes (the store then computes them once)."""

    @property
    def closed(self) -> bool:
        """Whether the watcher has stopped receiving events."""
        return self._closed

    def wants(self, entry: VersionEntry, key_bytes: bytes | None) -> bool:
        """Tell whether ``entry`` passes this watcher's filters.

        ``key_bytes`` is the entry key's serialization when :attr:`needs_bytes` is set.
        Runtime complexity: O(len(prefix)).
        """
        if self._ignore_deletes and entry.operation is not _PUT:
            return False
        if self._key is not None:
            return bool(entry.key == self._key)
        if not self.needs_bytes:
            return True
        assert key_bytes is not None
        if self._prefix is not None:
            return key_bytes.startswith(self._prefix)
        return ((self._lo is None or key_bytes >= self._lo)
                and (self._hi is None or key_bytes <= self._hi))

    def deliver(self, entry: VersionEntry) -> None:
        """Hand one event to the callback, or queue it. Runtime complexity: O(1)."""
        callback = self._callback
        if callback is None:
            self._events.append(entry)
        else:
            callback(entry)

    def drain(self) -> list[VersionEntry]:
        """Return the queued events, oldest first, and clear the queue.

        Events still queued when the watcher closes can be drained afterwards.

        Runtime complexity: O(1).

        :raises IllegalStateError: if the watcher delivers to a callback (nothing is queued).
        """
        if self._callback is not None:
            raise IllegalStateError(
                "this watcher delivers its events to its callback; there is nothing to drain"
            )
        events, self._events = self._events, []
        return events

    def close(self) -> None:
        """Stop receiving events; idempotent. Runtime complexity: O(number of watchers)."""
        if self._closed:
            return
        self._closed = True
        store, self._store = self._store, None
        if store is not None:
            store._unwatch(self)

    def __enter__(self) -> Watcher:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class VersionedStoreBase(abc.ABC):
    """The semantics of a versioned key-value store over a backend's storage primitives.

    Methods by purpose:

    - Kafka's store (KIP-889, KIP-968): :meth:`put`, :meth:`delete`, :meth:`get`,
      :meth:`get_versions`, :meth:`restore`, :attr:`dropped_records`;
    - history and markers (NATS JetStream KV): :meth:`history`, :meth:`purge`;
    - guarded writes for processors: :meth:`create`, :meth:`update`;
    - key-ordered scans (VerKV): :meth:`keys`, :meth:`range`, :meth:`reverse_range`,
      :meth:`scan_versions`;
    - change subscriptions: :meth:`watch`;
    - lifecycle: :meth:`close`, :attr:`is_open`.

    Times are ``int`` milliseconds in ``[0, MAX_TIMESTAMP]``; durations also accept
    ``datetime.timedelta``. Keys are any hashable objects but ``None``; ``key_serializer``
    gives a key's bytes, which order the key scans (unsigned lexicographic, as Kafka) and must
    differ between distinct keys. Values are any objects; ``None`` written with :meth:`put`
    is a delete.

    :param name: the store's name.
    :param key_serializer: ``key -> bytes``.
    :param history_retention_ms: how long (ms) history stays readable behind the observed
        stream time; also the grace period for writes. 0 keeps no history.
    :param segment_interval_ms: the unit of physical expiry (ms, ``>= 1``); ``None`` picks
        Kafka's default from the retention (:func:`default_segment_interval`). It never
        changes what reads return.
    :param max_versions: most versions kept per key, markers included (``None``: no limit;
        otherwise ``>= 1``). The oldest go first; the latest is never dropped.
    :raises TypeError: for arguments of the wrong type.
    :raises ValueError: for an empty name, a negative retention, a segment interval below 1,
        or ``max_versions`` below 1.
    """

    persistent = False
    """Whether the backend keeps its data on disk."""

    def __init__(self, name: str, key_serializer: Callable[[Any], bytes],
                 history_retention_ms: int | _dt.timedelta,
                 segment_interval_ms: int | _dt.timedelta | None = None, *,
                 max_versions: int | None = None) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty str, got {name!r}")
        if not callable(key_serializer):
            raise TypeError(f"key_serializer must be callable, got {key_serializer!r}")
        hr = _check_duration(history_retention_ms, "history_retention_ms")
        if segment_interval_ms is None:
            si = default_segment_interval(hr)
        else:
            si = _check_duration(segment_interval_ms, "segment_interval_ms")
            if si < 1:
                raise ValueError(f"segment_interval_ms must be at least 1 ms, got {si}")
        if max_versions is not None:
            if not isinstance(max_versions, int) or isinstance(max_versions, bool):
                raise TypeError(
                    f"max_versions must be an int or None, got {type(max_versions).__name__}"
                )
            if max_versions < 1:
                raise ValueError(f"max_versions must be at least 1, got {max_versions}")
        self.name = name
        self._key_serializer = key_serializer
        self._hr = hr
        self._si = si
        self._max_versions = max_versions
        self._observed = NO_TIMESTAMP
        self._cutoff = NO_TIMESTAMP - hr
        self._dropped = 0
        self._watchers: list[Watcher] = []
        self._notifying = False
        self._open = True

    # -- backend primitives ------------------------------------------------------------------

    @abc.abstractmethod
    def _latest(self, key: Any) -> Item | None:
        """Backend primitive: the newest stored version of ``key`` (any kind), or ``None``."""

    @abc.abstractmethod
    def _floor(self, key: Any, time: int) -> Item | None:
        """Backend primitive: the newest stored version with ``timestamp <= time``, or ``None``.

        ``time`` is never negative.
        """

    @abc.abstractmethod
    def _versions(self, key: Any, lo: int, hi: int) -> list[Item]:
        """Backend primitive: stored versions with ``lo <= timestamp <= hi``, oldest first.

        May include versions that are no longer visible; the caller filters.
        """

    @abc.abstractmethod
    def _write(self, key: Any, timestamp: int, value: Any, operation: Operation) -> int | None:
        """Backend primitive: store one version, replacing any at the same timestamp.

        Store a :class:`VersionedRecord` for ``Operation.PUT``, a :class:`VersionEntry`
        marker otherwise, and correct the ``valid_to`` of the previous version. Return the new
        version's ``valid_to`` (``None`` if it is the latest). Must check a new key (its
        serialization) before changing anything.
        """

    @abc.abstractmethod
    def _purge(self, key: Any, timestamp: int) -> None:
        """Backend primitive: drop every version of ``key``; store a lone purge marker."""

    @abc.abstractmethod
    def _drop_oldest(self, key: Any, keep: int) -> int | None:
        """Backend primitive: keep the newest ``keep`` versions of ``key`` (which has some).

        Return the timestamp of the newest version dropped, or ``None`` if none was.
        """

    @abc.abstractmethod
    def _expire(self, cutoff: int) -> None:
        """Backend primitive: history is now kept from ``cutoff`` on; drop what is invisible.

        Called whenever the observed stream time advances. Dropping is optional and may be
        coarse (whole segments), but must never drop a visible version.
        """

    @abc.abstractmethod
    def _scan(self, lo: bytes | None, hi: bytes | None) -> list[tuple[Any, Item]]:
        """Backend primitive: ``(key, newest stored version)`` for keys with versions.

        Keys whose bytes lie in ``[lo, hi]`` (``None``: open), ascending by key bytes.
        """

    @abc.abstractmethod
    def _close(self) -> None:
        """Backend primitive: release storage (called once, by :meth:`close`)."""

    def _key_bytes(self, key: Any) -> bytes:
        """Return ``key``'s serialization (backends may answer from a cache).

        :raises TypeError: if the serializer returns something other than bytes.
        """
        data = self._key_serializer(key)
        if data.__class__ is not bytes:
            if not isinstance(data, (bytes, bytearray, memoryview)):
                raise TypeError(
                    f"key_serializer must return bytes, got {type(data).__name__} "
                    f"for key {key!r}"
                )
            data = bytes(data)
        return data

    # -- properties --------------------------------------------------------------------------

    @property
    def history_retention_ms(self) -> int:
        """How far (ms) behind the observed stream time history stays readable; the grace."""
        return self._hr

    @property
    def segment_interval_ms(self) -> int:
        """Width (ms) of a time segment, the unit of physical expiry."""
        return self._si

    @property
    def max_versions(self) -> int | None:
        """Most versions kept per key, markers included (``None``: no limit)."""
        return self._max_versions

    @property
    def observed_stream_time(self) -> int:
        """Largest timestamp (ms) of an accepted write; ``-1`` before the first.

        Reads and rejected writes never move it; restored records do.
        """
        return self._observed

    @property
    def dropped_records(self) -> int:
        """Number of writes rejected so far; the task adds it to ``dropped-records-total``.

        Counted: ``put``, ``delete``, ``purge``, ``create`` and ``update`` calls older than
        ``observed_stream_time - history_retention_ms``, and writes the ``max_versions`` policy
        discarded at once. Not counted: failed guards (``create``/``update`` return
        ``False``) and records skipped by :meth:`restore`.
        """
        return self._dropped

    @property
    def is_open(self) -> bool:
        """Whether the store accepts calls (``False`` after :meth:`close`)."""
        return self._open

    # -- Kafka's versioned store ---------------------------------------------------------------

    def put(self, key: Any, value: Any, timestamp: int) -> int:
        """Write ``value`` for ``key`` valid from ``timestamp`` (ms); ``None`` writes a delete.

        A version at the same timestamp is replaced. A write older than
        ``observed_stream_time - history_retention_ms`` is rejected (the boundary is
        accepted), changes nothing and is counted in :attr:`dropped_records`; so is a write
        the ``max_versions`` policy discards at once (it would be the oldest of too many).

        Runtime complexity: O(log v) to find the place, plus the backend's insertion cost
        (O(v) list insertion in memory for an out-of-order write, O(1) amortised in order),
        where v is the number of versions of the key.

        :return: the new version's ``valid_to`` (the next version's timestamp),
            ``PUT_RETURN_CODE_VALID_TO_UNDEFINED`` (-1) if it is now the latest, or
            ``PUT_RETURN_CODE_NOT_PUT`` (``-2**63``) if nothing was written.
        :raises ValueError: for a ``None`` key or a negative timestamp.
        :raises TypeError: for a timestamp that is not an ``int``.
        :raises StoreClosedError: after :meth:`close`.

        >>> from topology.state.memory import InMemoryVersionedKeyValueStore
        >>> s = InMemoryVersionedKeyValueStore("rates", str.encode, history_retention_ms=100)
        >>> s.put("EUR", 1.10, 50), s.put("EUR", 1.05, 20), s.put("EUR", 1.2, 200)
        (-1, 50, -1)
        >>> s.put("EUR", 1.0, 99), s.dropped_records   # 99 < 200 - 100: too late
        (-9223372036854775808, 1)
        """
        if key is None:
            _check_key(key)
        if timestamp.__class__ is not int or timestamp < 0 or timestamp > MAX_TIMESTAMP:
            check_timestamp(timestamp, "timestamp")
        self._check_writable()
        if timestamp < self._cutoff:
            self._dropped += 1
            return _NOT_PUT
        return self._apply(key, value, timestamp, _PUT if value is not None else _DELETE)

    def delete(self, key: Any, timestamp: int) -> VersionedRecord | None:
        """Write a delete marker for ``key`` at ``timestamp`` (ms); earlier history stays.

        Returns what ``get(key, as_of=timestamp)`` returned just before (its timestamp may be
        older than ``timestamp``; ``valid_to`` as that read gave it). A delete of a key
        without versions still records the marker. A delete older than
        ``observed_stream_time - history_retention_ms``, or discarded at once by
        ``max_versions``, changes nothing, returns ``None`` and is counted in
        :attr:`dropped_records`.

        Runtime complexity: as :meth:`get` plus :meth:`put`.

        :raises ValueError: for a ``None`` key or a negative timestamp.
        :raises TypeError: for a timestamp that is not an ``int``.
        :raises StoreClosedError: after :meth:`close`.

        >>> from topology.state.memory import InMemoryVersionedKeyValueStore
        >>> s = InMemoryVersionedKeyValueStore("s", str.encode, 1_000)
        >>> _ = s.put("k", "v", 10)
        >>> s.delete("k", 20), s.get("k"), s.get("k", as_of=15)
        (VersionedRecord(value='v', timestamp=10, valid_to=None), None, \
VersionedRecord(value='v', timestamp=10, valid_to=20))
        """
        _check_key(key)
        check_timestamp(timestamp, "timestamp")
        self._check_writable()
        if timestamp < self._cutoff:
            self._dropped += 1
            return None
        before = self._floor(key, timestamp)
        if self._apply(key, None, timestamp, _DELETE) == _NOT_PUT:
            return None
        return before if before.__class__ is _Record else None

    def get(self, key: Any, as_of: int | None = None) -> VersionedRecord | None:
        """Return the latest record of ``key``, or the one valid at ``as_of`` (ms, inclusive).

        Without ``as_of``: the latest version if it is a value (``valid_to`` ``None``); this
        never expires. With ``as_of``: the version with the largest timestamp
        ``<= as_of``, if it is a value, with its ``valid_to``. When ``as_of`` lies before
        ``observed_stream_time - history_retention_ms`` (history no longer kept), only the
        latest version can answer, and only if it is a value with ``timestamp <= as_of``,
        even if older versions are still stored. ``as_of`` in the future gives the latest.

        Runtime complexity: O(log v), v the number of versions of the key.

        :raises ValueError: for a ``None`` key or a negative ``as_of``.
        :raises TypeError: for an ``as_of`` that is not an ``int``.
        :raises StoreClosedError: after :meth:`close`.

        >>> from topology.state.memory import InMemoryVersionedKeyValueStore
        >>> s = InMemoryVersionedKeyValueStore("s", str.encode, 1_000)
        >>> _ = s.put("k", "a", 10); _ = s.put("k", "b", 20)
        >>> s.get("k", as_of=15), s.get("k", as_of=5)
        (VersionedRecord(value='a', timestamp=10, valid_to=20), None)
        """
        if key is None:
            _check_key(key)
        if not self._open:
            self._check_open()
        if as_of is None:
            item = self._latest(key)
        else:
            if as_of.__class__ is not int or as_of < 0 or as_of > MAX_TIMESTAMP:
                check_timestamp(as_of, "as_of")
            if as_of < self._cutoff:
                item = self._latest(key)
                if item is not None and item.timestamp > as_of:
                    return None
            else:
                item = self._floor(key, as_of)
        return item if item.__class__ is _Record else None

    def get_versions(self, key: Any, from_time: int | None = None,
                     to_time: int | None = None, descending: bool = False
                     ) -> list[VersionedRecord]:
        """Return every record of ``key`` whose validity overlaps ``[from_time, to_time]``.

        A version ``[timestamp, valid_to)`` is returned iff ``timestamp <= to_time`` and
        (``valid_to is None`` or ``valid_to > from_time``); both bounds are inclusive and
        ``None`` means unbounded. Delete markers are never returned. This is KIP-968's
        documented rule, without the gap of Kafka's implementation (which misses a version
        whose ``valid_to`` falls in a later segment than ``to_time``). Retention as for
        :meth:`get`: if ``to_time`` lies before ``observed_stream_time -
        history_retention_ms``, only the latest value can answer (if its ``timestamp <=
        to_time``); otherwise versions no longer current at that cutoff are left out.

        Runtime complexity: O(log v + r), r the number of versions returned.

        :param descending: newest first (Kafka's ``ResultOrder.ANY`` order); oldest first by
            default.
        :raises ValueError: for a ``None`` key, a negative bound, or ``from_time > to_time``.
        :raises TypeError: for bounds that are not ``int`` or ``None``.
        :raises StoreClosedError: after :meth:`close`.

        >>> from topology.state.memory import InMemoryVersionedKeyValueStore
        >>> s = InMemoryVersionedKeyValueStore("s", str.encode, 1_000)
        >>> _ = s.put("k", "a", 10); _ = s.put("k", "b", 20); _ = s.put("k", "c", 30)
        >>> [r.value for r in s.get_versions("k", 15, 20)]
        ['a', 'b']
        """
        _check_key(key)
        lo = 0 if from_time is None else check_timestamp(from_time, "from_time")
        hi = MAX_TIMESTAMP if to_time is None else check_timestamp(to_time, "to_time")
        if lo > hi:
            raise ValueError(f"from_time ({lo}) must not be greater than to_time ({hi})")
        _check_flag(descending, "descending")
        self._check_open()
        cutoff = self._cutoff
        if hi < cutoff:
            latest = self._latest(key)
            if latest.__class__ is _Record and latest.timestamp <= hi:
                return [latest]
            return []
        start = lo if lo > cutoff else cutoff
        first = self._floor(key, start)
        out: list[VersionedRecord] = [first] if first.__class__ is _Record else []
        if start < hi:
            out += [i for i in self._versions(key, start + 1, hi)
                    if i.__class__ is _Record]
        if descending:
            out.reverse()
        return out

    def restore(self, records: Iterable[tuple[Any, Any, int]], *,
                observed_stream_time: int | None = None) -> None:
        """Replay changelog records ``(key, value, timestamp)`` in order (``None``: delete).

        Kafka's restore: a record older than ``observed_stream_time - history_retention_ms``
        (as advanced by the records before it) is skipped silently, without counting it;
        any other record advances the observed stream time and is written as :meth:`put`
        would. ``max_versions`` applies; watchers are not notified (restore rebuilds state,
        it makes no new changes).

        ``observed_stream_time`` (ms), when given, is the stream time the store had seen
        when the records were taken from it (``-1``: none): after the records, the
        observed stream time moves to it if it is later, and versions that fell out of
        history retention go. That restores part of a store's keys: each key's
        :meth:`history` (deletes included), oldest first, all keys merged by timestamp,
        reads as in the store they came from.

        Runtime complexity: as many :meth:`put` calls.

        :raises ValueError: for a ``None`` key or a negative timestamp; the records before
            the bad one stay restored.
        :raises TypeError: for a record that is not a ``(key, value, timestamp)`` triple, or
            a timestamp (or ``observed_stream_time``) that is not an ``int``.
        :raises StoreClosedError: after :meth:`close`.
        """
        self._check_writable()
        if observed_stream_time is not None and observed_stream_time != NO_TIMESTAMP:
            check_timestamp(observed_stream_time, "observed_stream_time")
        max_versions = self._max_versions
        for record in records:
            try:
                key, value, timestamp = record
            except (TypeError, ValueError):
                raise TypeError(
                    f"restore records must be (key, value, timestamp) triples, got {record!r}"
                ) from None
            _check_key(key, "restored key")
            check_timestamp(timestamp, "restored timestamp")
            if timestamp < self._cutoff:
                continue
            self._write(key, timestamp, value, _PUT if value is not None else _DELETE)
            if max_versions is not None:
                self._drop_oldest(key, max_versions)
            if timestamp > self._observed:
                self._advance(timestamp)
        if observed_stream_time is not None and observed_stream_time > self._observed:
            self._advance(observed_stream_time)

    # -- history and markers -----------------------------------------------------------------

    def history(self, key: Any, newest_first: bool = True, include_deletes: bool = False
                ) -> list[VersionEntry]:
        """Return every visible version of ``key`` as :class:`VersionEntry` objects.

        Visible: the latest value; older values still current at some time within history
        retention (``valid_to > observed_stream_time - history_retention_ms``); delete and
        purge markers whose timestamp is within retention (only with
        ``include_deletes=True``). A purged key shows its purge marker and nothing older.

        Runtime complexity: O(v), v the number of stored versions of the key.

        :raises ValueError: for a ``None`` key.
        :raises TypeError: for non-bool flags.
        :raises StoreClosedError: after :meth:`close`.

        >>> from topology.state.memory import InMemoryVersionedKeyValueStore
        >>> s = InMemoryVersionedKeyValueStore("s", str.encode, 1_000)
        >>> _ = s.put("k", "a", 10); _ = s.delete("k", 20); _ = s.put("k", "b", 30)
        >>> [(e.value, e.operation.value) for e in s.history("k", include_deletes=True)]
        [('b', 'put'), (None, 'delete'), ('a', 'put')]
        """
        _check_key(key)
        _check_flag(newest_first, "newest_first")
        _check_flag(include_deletes, "include_deletes")
        self._check_open()
        out = [_entry(key, item) for item in self._visible_versions(key, 0)
               if include_deletes or item.__class__ is _Record]
        if newest_first:
            out.reverse()
        return out

    def purge(self, key: Any, timestamp: int) -> bool:
        """Drop all history of ``key`` and leave a purge marker at ``timestamp`` (ms).

        Contrast with :meth:`delete`, which keeps history readable as of earlier times. After
        a purge the key reads as absent at every time (``get`` with or without ``as_of``
        returns ``None``, ``get_versions`` returns ``[]``), ``history(include_deletes=True)``
        shows only the marker, and versions at any timestamp, newer ones included, are gone.
        A later write works as after a delete (one older than the marker becomes history
        ending at the marker). The grace rule and counting are those of :meth:`put`.

        Runtime complexity: O(v) to drop the versions.

        :return: ``True`` if applied, ``False`` if rejected as too old.
        :raises ValueError: for a ``None`` key or a negative timestamp.
        :raises TypeError: for a timestamp that is not an ``int``.
        :raises StoreClosedError: after :meth:`close`.

        >>> from topology.state.memory import InMemoryVersionedKeyValueStore
        >>> s = InMemoryVersionedKeyValueStore("s", str.encode, 1_000)
        >>> _ = s.put("k", "a", 10); _ = s.put("k", "b", 20)
        >>> s.purge("k", 30), s.get("k", as_of=15), len(s.history("k", include_deletes=True))
        (True, None, 1)
        """
        _check_key(key)
        check_timestamp(timestamp, "timestamp")
        self._check_writable()
        if timestamp < self._cutoff:
            self._dropped += 1
            return False
        self._purge(key, timestamp)
        if timestamp > self._observed:
            self._advance(timestamp)
        if self._watchers:
            self._notify(VersionEntry(key, None, timestamp, None, _PURGE))
        return True

    # -- guarded writes ------------------------------------------------------------------------

    def create(self, key: Any, value: Any, timestamp: int) -> bool:
        """Write ``value`` only if ``key`` has no current value; tell whether it was written.

        The guard holds if the key has no versions, or its latest version is a delete or purge
        marker with a timestamp ``<= timestamp`` (the new value becomes the latest). A failed
        guard returns ``False`` and changes nothing; it is not an error (a processor decides
        what to do) and is not counted. A write too old for grace also returns ``False`` and
        is counted in :attr:`dropped_records` (grace is checked first).

        Runtime complexity: O(1) guard plus :meth:`put`.

        :raises ValueError: for a ``None`` key or value (write a delete with :meth:`delete`),
            or a negative timestamp.
        :raises TypeError: for a timestamp that is not an ``int``.
        :raises StoreClosedError: after :meth:`close`.

        >>> from topology.state.memory import InMemoryVersionedKeyValueStore
        >>> s = InMemoryVersionedKeyValueStore("s", str.encode, 1_000)
        >>> s.create("k", "a", 10), s.create("k", "b", 20)
        (True, False)
        """
        _check_key(key)
        if value is None:
            raise ValueError("value must not be None (use delete() to write a delete marker)")
        check_timestamp(timestamp, "timestamp")
        self._check_writable()
        if timestamp < self._cutoff:
            self._dropped += 1
            return False
        latest = self._latest(key)
        if latest is not None and (latest.__class__ is _Record or latest.timestamp > timestamp):
            return False
        return self._apply(key, value, timestamp, _PUT) != _NOT_PUT

    def update(self, key: Any, value: Any, timestamp: int, expected_timestamp: int) -> bool:
        """Write ``value`` only if the current value has timestamp ``expected_timestamp``.

        Compare-and-set for processors: the guard holds if the key's latest version is a value
        whose timestamp equals ``expected_timestamp`` and ``timestamp >= expected_timestamp``
        (equal replaces it; the new value becomes the latest). A deleted or absent key fails
        the guard (use :meth:`create`). Failed guards return ``False`` and change nothing;
        too-old writes return ``False`` and are counted, as for :meth:`create`.

        Runtime complexity: O(1) guard plus :meth:`put`.

        :raises ValueError: for a ``None`` key or value, or negative timestamps.
        :raises TypeError: for timestamps that are not ``int``.
        :raises StoreClosedError: after :meth:`close`.

        >>> from topology.state.memory import InMemoryVersionedKeyValueStore
        >>> s = InMemoryVersionedKeyValueStore("s", str.encode, 1_000)
        >>> _ = s.put("k", "a", 10)
        >>> s.update("k", "b", 20, expected_timestamp=5), s.update("k", "b", 20, 10)
        (False, True)
        """
        _check_key(key)
        if value is None:
            raise ValueError("value must not be None (use delete() to write a delete marker)")
        check_timestamp(timestamp, "timestamp")
        check_timestamp(expected_timestamp, "expected_timestamp")
        self._check_writable()
        if timestamp < self._cutoff:
            self._dropped += 1
            return False
        latest = self._latest(key)
        if (latest.__class__ is not _Record or latest.timestamp != expected_timestamp
                or timestamp < expected_timestamp):
            return False
        return self._apply(key, value, timestamp, _PUT) != _NOT_PUT

    # -- key-ordered scans ---------------------------------------------------------------------

    def keys(self) -> list[Any]:
        """Return the keys whose latest version is a value, in key-bytes order.

        Runtime complexity: O(n), n the number of keys.

        >>> from topology.state.memory import InMemoryVersionedKeyValueStore
        >>> s = InMemoryVersionedKeyValueStore("s", str.encode, 1_000)
        >>> _ = s.put("b", 1, 0); _ = s.put("a", 2, 0); _ = s.delete("b", 5)
        >>> s.keys()
        ['a']
        """
        self._check_open()
        return [key for key, item in self._scan(None, None) if item.__class__ is _Record]

    def range(self, from_key: Any = None, to_key: Any = None
              ) -> list[tuple[Any, VersionedRecord]]:
        """Return ``(key, latest record)`` for keys with a current value in a key range.

        Keys are compared by their serialized bytes (unsigned lexicographic, as Kafka); both
        bounds are inclusive and ``None`` is open. Keys whose latest version is a delete or
        purge marker are left out.

        Runtime complexity: O(log n + k), k the number of keys in the range.

        :raises ValueError: if ``from_key`` serializes after ``to_key``.
        :raises StoreClosedError: after :meth:`close`.

        >>> from topology.state.memory import InMemoryVersionedKeyValueStore
        >>> s = InMemoryVersionedKeyValueStore("s", str.encode, 1_000)
        >>> for k in "abcd": _ = s.put(k, k.upper(), 0)
        >>> [(k, r.value) for k, r in s.range("b", "c")]
        [('b', 'B'), ('c', 'C')]
        """
        self._check_open()
        lo, hi = self._bounds(from_key, to_key)
        return [(key, item) for key, item in self._scan(lo, hi)
                if item.__class__ is _Record]

    def reverse_range(self, from_key: Any = None, to_key: Any = None
                      ) -> list[tuple[Any, VersionedRecord]]:
        """Return :meth:`range` ``(from_key, to_key)`` in reverse order (same arguments).

        Runtime complexity: O(log n + k).

        >>> from topology.state.memory import InMemoryVersionedKeyValueStore
        >>> s = InMemoryVersionedKeyValueStore("s", str.encode, 1_000)
        >>> for k in "abc": _ = s.put(k, k, 0)
        >>> [k for k, _ in s.reverse_range("a", "b")]
        ['b', 'a']
        """
        out = self.range(from_key, to_key)
        out.reverse()
        return out

    def scan_versions(self, from_key: Any = None, to_key: Any = None,
                      since: int | None = None, limit_per_key: int | None = None,
                      include_deletes: bool = False) -> list[VersionEntry]:
        """Return the versions written at or after ``since`` for keys in a key range.

        TiKV VerKV's ``ScanNumWithSV`` on a time-versioned store: for each key in
        ``[from_key, to_key]`` (key bytes, inclusive, ``None`` open) in key-bytes order, its
        visible versions with ``timestamp >= since``, newest first, at most
        ``limit_per_key`` of them (the newest). Unlike :meth:`get_versions`, a version written
        before ``since`` is not included even if it was still current at ``since``: this is
        the set of changes since a time. Keys whose latest version is a delete are included
        when they have such versions; markers only with ``include_deletes=True`` (they do
        count towards the limit then).

        Runtime complexity: O(k log v + r) for k keys in range and r entries returned.

        :raises ValueError: if ``from_key`` serializes after ``to_key``, for a negative
            ``since`` or a ``limit_per_key`` below 1.
        :raises TypeError: for arguments of the wrong type.
        :raises StoreClosedError: after :meth:`close`.

        >>> from topology.state.memory import InMemoryVersionedKeyValueStore
        >>> s = InMemoryVersionedKeyValueStore("s", str.encode, 1_000)
        >>> _ = s.put("a", 1, 10); _ = s.put("a", 2, 20); _ = s.put("b", 3, 5)
        >>> [(e.key, e.value) for e in s.scan_versions(since=10)]
        [('a', 2), ('a', 1)]
        """
        since_ms = 0 if since is None else check_timestamp(since, "since")
        if limit_per_key is not None:
            if not isinstance(limit_per_key, int) or isinstance(limit_per_key, bool):
                raise TypeError(f"limit_per_key must be an int or None, got {limit_per_key!r}")
            if limit_per_key < 1:
                raise ValueError(f"limit_per_key must be at least 1, got {limit_per_key}")
        _check_flag(include_deletes, "include_deletes")
        self._check_open()
        lo, hi = self._bounds(from_key, to_key)
        out: list[VersionEntry] = []
        for key, _ in self._scan(lo, hi):
            items = [item for item in self._visible_versions(key, since_ms)
                     if include_deletes or item.__class__ is _Record]
            items.reverse()
            if limit_per_key is not None:
                del items[limit_per_key:]
            out += [_entry(key, item) for item in items]
        return out

    # -- change subscriptions ----------------------------------------------------------------

    def watch(self, callback: Callable[[VersionEntry], Any] | None = None, *,
              key: Any = None, key_prefix: bytes | None = None, from_key: Any = None,
              to_key: Any = None, include_history: bool = False,
              ignore_deletes: bool = False, updates_only: bool = False) -> Watcher:
        """Subscribe to this store's changes, as NATS JetStream KV's watchers do.

        First, unless ``updates_only``, the current state of the matching keys is delivered
        at once, in key-bytes order: each key's latest visible version, or with
        ``include_history`` every visible version oldest first (as :meth:`history`). Then
        every accepted ``put``, ``delete``, ``purge``, ``create`` and ``update`` delivers one
        :class:`VersionEntry` synchronously, inside the write call, after the store has
        changed: ``valid_to is None`` (``is_latest``) unless the write landed before a newer
        version. Rejected writes, failed guards, restore, expiry and ``max_versions``
        trimming deliver nothing. Watchers are served in subscription order.

        Filters: ``key`` (one key, by equality), ``key_prefix`` (bytes the key's
        serialization starts with) or ``from_key``/``to_key`` (inclusive key-bytes range,
        ``None`` open), at most one kind; ``ignore_deletes`` skips delete and purge markers.

        A callback may read the store but not write to it (that raises ``RuntimeError``). If
        callbacks raise, every watcher still gets the event, then the first error propagates
        out of the write (which has been applied).

        Runtime complexity: O(state delivered) now; O(w) per later write for w watchers.

        :param callback: called with each event; without one, events queue until
            :meth:`Watcher.drain`.
        :raises ValueError: for ``include_history`` with ``updates_only``, several key
            filters, or a range whose ``from_key`` serializes after ``to_key``.
        :raises TypeError: for a non-callable callback, a non-bytes prefix or non-bool flags.
        :raises StoreClosedError: after :meth:`close`.

        >>> from topology.state.memory import InMemoryVersionedKeyValueStore
        >>> s = InMemoryVersionedKeyValueStore("s", str.encode, 1_000)
        >>> _ = s.put("k", "a", 10)
        >>> seen = []
        >>> w = s.watch(seen.append, key="k")
        >>> _ = s.put("k", "b", 5)
        >>> [(e.value, e.timestamp, e.is_latest) for e in seen]
        [('a', 10, True), ('b', 5, False)]
        """
        self._check_open()
        if callback is not None and not callable(callback):
            raise TypeError(f"callback must be callable or None, got {callback!r}")
        for flag, what in ((include_history, "include_history"),
                           (ignore_deletes, "ignore_deletes"), (updates_only, "updates_only")):
            _check_flag(flag, what)
        if include_history and updates_only:
            raise ValueError("include_history and updates_only cannot be combined: "
                             "updates_only delivers no existing state, history or latest")
        ranged = from_key is not None or to_key is not None
        if (key is not None) + (key_prefix is not None) + ranged > 1:
            raise ValueError("watch takes at most one key filter: key, key_prefix, or "
                             "from_key/to_key")
        if key_prefix is not None and not isinstance(key_prefix, bytes):
            raise TypeError(f"key_prefix must be bytes, got {type(key_prefix).__name__}")
        lo, hi = self._bounds(from_key, to_key)
        watcher = Watcher(self, callback, key, key_prefix, lo, hi, ignore_deletes)
        if not updates_only:
            self._deliver_state(watcher, include_history)
        self._watchers.append(watcher)
        return watcher

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the store and its watchers; idempotent. Later calls raise StoreClosedError.

        Runtime complexity: O(w) plus the backend's release.
        """
        if not self._open:
            return
        self._open = False
        for watcher in tuple(self._watchers):
            watcher.close()
        self._close()

    def __enter__(self) -> VersionedStoreBase:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.name!r}, history_retention_ms={self._hr}, "
                f"segment_interval_ms={self._si}, max_versions={self._max_versions})")

    # -- shared machinery ----------------------------------------------------------------------

    def _check_open(self) -> None:
        if not self._open:
            raise StoreClosedError(f"versioned store {self.name!r} is closed")

    def _check_writable(self) -> None:
        if not self._open:
            raise StoreClosedError(f"versioned store {self.name!r} is closed")
        if self._notifying:
            raise IllegalStateError(
                f"a watch callback of store {self.name!r} tried to write to it; callbacks "
                "may read the store but not write to it"
            )

    def _advance(self, timestamp: int) -> None:
        self._observed = timestamp
        self._cutoff = cutoff = timestamp - self._hr
        self._expire(cutoff)

    def _apply(self, key: Any, value: Any, timestamp: int, operation: Operation) -> int:
        """Write an accepted version: storage, stream time, max_versions, watchers."""
        valid_to = self._write(key, timestamp, value, operation)
        if timestamp > self._observed:
            self._advance(timestamp)
        max_versions = self._max_versions
        if max_versions is not None:
            newest_dropped = self._drop_oldest(key, max_versions)
            if newest_dropped is not None and newest_dropped >= timestamp:
                self._dropped += 1
                return _NOT_PUT
        if self._watchers:
            self._notify(VersionEntry(key, value, timestamp, valid_to, operation))
        return _LATEST if valid_to is None else valid_to

    def _visible_versions(self, key: Any, since: int) -> list[Item]:
        """Visible versions of ``key`` with ``timestamp >= since``, oldest first."""
        cutoff = self._cutoff
        return [item for item in self._versions(key, since, MAX_TIMESTAMP)
                if is_visible(item, cutoff)]

    def _bounds(self, from_key: Any, to_key: Any) -> tuple[bytes | None, bytes | None]:
        lo = None if from_key is None else self._key_bytes(from_key)
        hi = None if to_key is None else self._key_bytes(to_key)
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(
                f"from_key {from_key!r} serializes after to_key {to_key!r}; a key range "
                "must run from its smaller to its larger key (use reverse_range for the "
                "descending order)"
            )
        return lo, hi

    def _deliver_state(self, watcher: Watcher, include_history: bool) -> None:
        """Deliver the current state of the keys ``watcher`` follows."""
        cutoff = self._cutoff
        key = watcher._key
        prefix = watcher._prefix
        if key is not None:
            candidates = [key]
        else:
            candidates = [k for k, _ in self._scan(watcher._lo, watcher._hi)
                          if prefix is None or self._key_bytes(k).startswith(prefix)]
        ignore_deletes = watcher._ignore_deletes
        for k in candidates:
            if include_history:
                items = self._visible_versions(k, 0)
            else:
                latest = self._latest(k)
                items = [latest] if latest is not None and is_visible(latest, cutoff) else []
            for item in items:
                if ignore_deletes and item.__class__ is not _Record:
                    continue
                watcher.deliver(_entry(k, item))

    def _notify(self, entry: VersionEntry) -> None:
        key_bytes = None
        errors: list[Exception] = []
        self._notifying = True
        try:
            for watcher in tuple(self._watchers):
                if watcher.needs_bytes and key_bytes is None:
                    key_bytes = self._key_bytes(entry.key)
                if watcher.wants(entry, key_bytes):
                    try:
                        watcher.deliver(entry)
                    except Exception as error:  # noqa: BLE001 - re-raised below
                        errors.append(error)
        finally:
            self._notifying = False
        if len(errors) == 1:
            raise errors[0]
        if errors:
            raise ExceptionGroup(f"{len(errors)} watch callbacks of store {self.name!r} failed",
                                 errors)

    def _unwatch(self, watcher: Watcher) -> None:
        if watcher in self._watchers:
            self._watchers.remove(watcher)
