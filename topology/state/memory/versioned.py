"""In-memory versioned key-value store: per key, two parallel lists (timestamps, values).

Data shapes (why: ``get(key, as_of)`` is one dict lookup and one ``bisect`` in C; a write
is a list append, or an insertion for an out-of-order one, and allocates nothing the garbage
collector has to track beyond the value itself):

- ``_data``: ``key identity -> (timestamps, values)`` (keys with equal bytes are one key,
  :mod:`topology._key_identity`), two parallel lists in ascending timestamp
  order; a delete or purge marker is stored as the value ``_DELETED`` or ``_PURGED``. The
  record a read returns is built then (``valid_to`` is the next timestamp), through the
  slots of :class:`VersionedRecord`, which costs half of its frozen ``__init__``.
- ``_order``: ``SortedDict`` of key bytes -> key (the one that created it), for key-ordered
  scans; ``_key_bytes_of`` remembers each identity's bytes (a ``str`` key of the string
  serde, or an ``int`` of the long one, is serialized once, when it first arrives; a key of
  another serde is found by its bytes, serialized at each access, as Kafka does).
- Physical expiry, off the read path: ``_due`` maps a segment id to the identities that have
  something to drop once history retention passes that segment (the segment of a key's second
  timestamp, where its oldest version stops being current; or of a lone marker's
  timestamp); ``_heap`` holds those segment ids. When the observed stream time moves the
  cutoff past a segment, its keys are trimmed to their visible versions, and a key left with
  only an invisible marker is forgotten. Reads never pay for it: they apply the visibility
  rules of :mod:`topology.state.versioned`, which hide anything not yet dropped.
"""

from __future__ import annotations

import datetime as _dt
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Hashable
from heapq import heappop, heappush
from typing import Any

from sortedcontainers import SortedDict

from ..._key_identity import key_identity, own_identity_type
from ..api import Operation, VersionedRecord, VersionEntry
from ..versioned import Item, VersionedStoreBase, segment_id

__all__ = ("InMemoryVersionedKeyValueStore",)

_Record = VersionedRecord
_PUT = Operation.PUT
_NEVER = float("inf")


class _Marker:
    """The stored value of a delete or purge marker."""

    __slots__ = ("operation",)

    def __init__(self, operation: Operation) -> None:
        self.operation = operation


_DELETED = _Marker(Operation.DELETE)
_PURGED = _Marker(Operation.PURGE)
_MARKERS = {Operation.DELETE: _DELETED, Operation.PURGE: _PURGED}

_new = object.__new__
_set_value = vars(VersionedRecord)["value"].__set__
_set_timestamp = vars(VersionedRecord)["timestamp"].__set__
_set_valid_to = vars(VersionedRecord)["valid_to"].__set__


def _item(key: Any, value: Any, timestamp: int, valid_to: int | None) -> Item:
    """The record (or marker entry) for one stored version."""
    if value.__class__ is _Marker:
        return VersionEntry(key, None, timestamp, valid_to, value.operation)
    record = _new(_Record)
    _set_value(record, value)
    _set_timestamp(record, timestamp)
    _set_valid_to(record, valid_to)
    return record


class InMemoryVersionedKeyValueStore(VersionedStoreBase):
    """A versioned key-value store held in Python objects (no persistence).

    All semantics come from :class:`~topology.state.versioned.VersionedStoreBase` (see it
    and ``docs/versioned.md``); this class stores versions.

    Runtime complexity, v versions of the key and n keys: ``get`` O(1), ``get(as_of)``
    O(log v); an in-order ``put`` O(1) amortised, an out-of-order one O(v) (list
    insertion, a memmove); a new key O(log n) (key order). Expiry is amortised over writes:
    each version is dropped once.

    >>> s = InMemoryVersionedKeyValueStore("rates", str.encode, history_retention_ms=60_000)
    >>> s.put("EUR", 1.10, 1_000), s.put("EUR", 1.12, 5_000), s.put("EUR", 1.11, 3_000)
    (-1, -1, 5000)
    >>> s.get("EUR", as_of=4_000)
    VersionedRecord(value=1.11, timestamp=3000, valid_to=5000)
    """

    persistent = False

    def __init__(self, name: str, key_serializer: Callable[[Any], bytes],
                 history_retention_ms: int | _dt.timedelta,
                 segment_interval_ms: int | _dt.timedelta | None = None, *,
                 max_versions: int | None = None) -> None:
        super().__init__(name, key_serializer, history_retention_ms, segment_interval_ms,
                         max_versions=max_versions)
        self._identity = key_identity(key_serializer)
        self._own = own_identity_type(key_serializer)
        self._data: dict[Hashable, tuple[list[int], list[Any]]] = {}
        self._order: SortedDict = SortedDict()
        self._key_bytes_of: dict[Hashable, bytes] = {}
        self._due: dict[int, set[Hashable]] = {}
        self._foreign = 0  # stored keys that are not their own identity
        self._heap: list[int] = []
        self._next_expiry: float = _NEVER

    # -- reads -----------------------------------------------------------------------------------

    def _id(self, key: Any) -> Hashable:
        """``key``'s identity; an unhashable key is refused as such, not by its serializer."""
        if key.__class__ is self._own:
            return key
        try:
            return self._identity(key)
        except Exception:
            hash(key)  # raises TypeError naming the unhashable type
            raise

    def _latest(self, key: Any) -> Item | None:
        entry = self._data.get(self._id(key))
        if entry is None:
            return None
        value = entry[1][-1]
        if value.__class__ is _Marker:
            return VersionEntry(key, None, entry[0][-1], None, value.operation)
        record = _new(_Record)
        _set_value(record, value)
        _set_timestamp(record, entry[0][-1])
        _set_valid_to(record, None)
        return record

    def _floor(self, key: Any, time: int) -> Item | None:
        entry = self._data.get(self._id(key))
        if entry is None:
            return None
        timestamps = entry[0]
        i = bisect_right(timestamps, time)
        if not i:
            return None
        value = entry[1][i - 1]
        if value.__class__ is _Marker:
            return VersionEntry(key, None, timestamps[i - 1],
                                timestamps[i] if i < len(timestamps) else None, value.operation)
        record = _new(_Record)
        _set_value(record, value)
        _set_timestamp(record, timestamps[i - 1])
        _set_valid_to(record, timestamps[i] if i < len(timestamps) else None)
        return record

    def _versions(self, key: Any, lo: int, hi: int) -> list[Item]:
        entry = self._data.get(self._id(key))
        if entry is None:
            return []
        timestamps, values = entry
        n = len(timestamps)
        return [_item(key, values[i], timestamps[i], timestamps[i + 1] if i + 1 < n else None)
                for i in range(bisect_left(timestamps, lo), bisect_right(timestamps, hi))]

    def _scan(self, lo: bytes | None, hi: bytes | None) -> list[tuple[Any, Item]]:
        order = self._order
        data = self._data
        out = []
        for key in map(order.__getitem__, order.irange(lo, hi)):
            timestamps, values = data[self._id(key)]
            out.append((key, _item(key, values[-1], timestamps[-1], None)))
        return out

    def _key_bytes(self, key: Any) -> bytes:
        known = self._key_bytes_of.get(self._id(key))
        return super()._key_bytes(key) if known is None else known

    # -- writes ----------------------------------------------------------------------------------

    def _write(self, key: Any, timestamp: int, value: Any, operation: Operation) -> int | None:
        if operation is not _PUT:
            value = _MARKERS[operation]
        identity = self._id(key)
        entry = self._data.get(identity)
        if entry is not None and (self._foreign or identity is not key):
            self._refuse_other_key(identity, key)
        if entry is None:
            self._add_key(key, identity)
            self._data[identity] = ([timestamp], [value])
            if operation is not _PUT:
                self._schedule(identity, timestamp)
            return None
        timestamps, values = entry
        last = timestamps[-1]
        if timestamp > last:
            timestamps.append(timestamp)
            values.append(value)
            if len(timestamps) == 2:
                self._schedule(identity, timestamp)
            return None
        if timestamp == last:
            values[-1] = value
            if len(timestamps) == 1 and operation is not _PUT:
                self._schedule(identity, timestamp)
            return None
        i = bisect_left(timestamps, timestamp)
        if timestamps[i] == timestamp:
            values[i] = value
            return timestamps[i + 1]
        timestamps.insert(i, timestamp)
        values.insert(i, value)
        if i <= 1:
            self._schedule(identity, timestamps[1])
        return timestamps[i + 1]

    def _purge(self, key: Any, timestamp: int) -> None:
        identity = self._id(key)
        if identity not in self._data:
            self._add_key(key, identity)
        elif self._foreign or identity is not key:
            self._refuse_other_key(identity, key)
        self._data[identity] = ([timestamp], [_PURGED])
        self._schedule(identity, timestamp)

    def _drop_oldest(self, key: Any, keep: int) -> int | None:
        timestamps, values = self._data[self._id(key)]
        n = len(timestamps) - keep
        if n <= 0:
            return None
        newest = timestamps[n - 1]
        del timestamps[:n]
        del values[:n]
        return newest

    def _add_key(self, key: Any, identity: Hashable) -> None:
        key_bytes = VersionedStoreBase._key_bytes(self, key)
        self._order[key_bytes] = key
        self._key_bytes_of[identity] = key_bytes
        if identity is not key:
            self._foreign += 1

    def _remove_key(self, identity: Hashable) -> None:
        del self._data[identity]
        if self._order.pop(self._key_bytes_of.pop(identity)) is not identity:
            self._foreign -= 1

    def _refuse_other_key(self, identity: Hashable, key: Any) -> None:
        """Refuse ``key`` where another key with its bytes is stored, as the RocksDB store."""
        key_bytes = self._key_bytes_of[identity]
        other = self._order[key_bytes]
        if other is not key and (other.__class__ is not key.__class__ or other != key):
            raise ValueError(
                f"key_serializer gives keys {other!r} and {key!r} the same bytes "
                f"{key_bytes!r}; distinct keys must serialize differently"
            )

    # -- physical expiry -------------------------------------------------------------------------

    def _schedule(self, key: Hashable, time: int) -> None:
        """Remember to look at ``key`` (an identity) once history retention passes ``time``."""
        segment = segment_id(time, self._si)
        keys = self._due.get(segment)
        if keys is None:
            self._due[segment] = {key}
            heappush(self._heap, segment)
            due_at = (segment + 1) * self._si
            if due_at < self._next_expiry:
                self._next_expiry = due_at
        else:
            keys.add(key)

    def _expire(self, cutoff: int) -> None:
        if cutoff < self._next_expiry:
            return
        live = segment_id(cutoff, self._si)
        heap = self._heap
        while heap and heap[0] < live:
            for key in self._due.pop(heappop(heap)):
                self._trim(key, cutoff)
        self._next_expiry = (heap[0] + 1) * self._si if heap else _NEVER

    def _trim(self, key: Hashable, cutoff: int) -> None:
        """Drop the versions of ``key`` (an identity) that no read can see any more.

        Invisible: a value no longer current at ``cutoff`` (its successor's timestamp
        ``<= cutoff``) and a marker older than ``cutoff``; a latest value never is.
        """
        entry = self._data.get(key)
        if entry is None:
            return
        timestamps, values = entry
        older = bisect_left(timestamps, cutoff)
        if older == len(timestamps):
            if values[-1].__class__ is _Marker:
                self._remove_key(key)
                return
            drop = older - 1
        elif older and (values[older - 1].__class__ is _Marker or timestamps[older] == cutoff):
            drop = older
        else:
            drop = older - 1
        if drop > 0:
            del timestamps[:drop]
            del values[:drop]
        if len(timestamps) > 1:
            self._schedule(key, timestamps[1])
        elif values[0].__class__ is _Marker:
            self._schedule(key, timestamps[0])

    def _close(self) -> None:
        self._data.clear()
        self._order.clear()
        self._key_bytes_of.clear()
        self._foreign = 0
        self._due.clear()
        self._heap.clear()

    # -- invariants ------------------------------------------------------------------------------

    def _check(self) -> None:
        """Assert every internal invariant (the tests call it after each operation).

        Timestamps strictly ascending, parallel to values; the key order and byte cache equal
        the keys; ``max_versions`` respected; every key with something that can expire is
        scheduled, and the next expiry time matches the earliest scheduled segment.
        """
        assert set(self._key_bytes_of) == set(self._data), "byte cache != keys"
        assert len(self._order) == len(self._data), "key order != keys"
        for key_bytes, key in self._order.items():
            assert self._key_bytes_of[self._id(key)] == key_bytes, (key, key_bytes)
        assert sorted(self._heap) == sorted(self._due), "heap != due segments"
        expected_next = (min(self._heap) + 1) * self._si if self._heap else _NEVER
        assert self._next_expiry == expected_next, (self._next_expiry, expected_next)
        scheduled = {k for keys in self._due.values() for k in keys}
        for key, (timestamps, values) in self._data.items():
            assert timestamps and len(timestamps) == len(values), key
            ascending = zip(timestamps, timestamps[1:], strict=False)
            assert all(a < b for a, b in ascending), (key, timestamps)
            if self._max_versions is not None:
                assert len(timestamps) <= self._max_versions, (key, timestamps)
            if len(timestamps) > 1 or values[0].__class__ is _Marker:
                assert key in scheduled, f"{key!r} has history but no expiry scheduled"
