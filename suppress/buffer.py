"""The time-ordered suppression buffer (in-memory tier).

Entries are ordered by ``(buffer time, serialized key bytes)``, bytes compared unsigned and
lexicographically (a shorter prefix first), exactly as Kafka's ``BufferKey``. Eviction always
takes the head of that order.

Layout (see docs/implementation.md): a dict ``key bytes -> entry`` (the index), a dict
``buffer time -> {key bytes -> entry}`` (buckets) and a heap of the distinct buffer times.
Windowed final results put many keys under few distinct times (window ends), so a put is a
dict insert (plus a heap push for a new time), and a bucket's keys are sorted only when the
bucket reaches the head and is evicted. Entries leave only through the head, so the heap never
needs arbitrary deletions.

Runtime complexity: put O(1) for a known time, O(log t) for a new one (t distinct times);
``min_time`` O(1); evicting a bucket of k keys O(k log k) in total.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from .entry import BufferedEntry, RecordContext, entry_size
from .errors import LONG_MAX

__all__ = ("SuppressionBuffer", "TimeOrderedBuffer")

EvictCallback = Callable[[BufferedEntry], None]


class SuppressionBuffer(Protocol):
    """What the suppress processor needs from a buffer tier (memory now, spill later)."""

    def put(
        self, time: int, key_bytes: bytes, key: Any, new: Any, old: Any, context: RecordContext
    ) -> None:
        """Buffer a change for ``key_bytes`` at ``time`` (kept if the key is already held)."""

    def evict_while(self, predicate: Callable[[], bool], callback: EvictCallback) -> int:
        """Pass head entries to ``callback`` (before removal) while ``predicate()`` holds."""

    def evict_expired(self, expiry: int, callback: EvictCallback) -> int:
        """Evict, in order, every entry whose buffer time is ``<= expiry``."""

    def prior_value(self, key_bytes: bytes) -> tuple[bool, Any]:
        """``(True, prior)`` for a buffered key, ``(False, None)`` otherwise."""

    @property
    def num_records(self) -> int:
        """Number of distinct buffered keys."""

    @property
    def size_bytes(self) -> int:
        """Sum of the entries' sizes (Kafka's estimate)."""

    @property
    def min_time(self) -> int:
        """Smallest buffer time, or ``2**63 - 1`` when empty."""


class TimeOrderedBuffer:
    """In-memory buffer of the latest change per key, ordered by (buffer time, key bytes).

    :param value_serializer: turns a value into bytes for byte accounting; needed when
        ``track_bytes`` is true.
    :param track_bytes: keep Kafka's byte-size estimate of every entry (needed for
        ``max_bytes`` limits and the buffer-size metric). When false, every size is 0.

    >>> buf = TimeOrderedBuffer(lambda v: v.encode())
    >>> ctx = RecordContext(0, 0, "topic")
    >>> buf.put(0, b"asdf", "asdf", "23roni", None, ctx)
    >>> buf.size_bytes, buf.num_records, buf.min_time
    (43, 1, 0)
    >>> buf.evict_while(lambda: True, lambda e: print(e.key, e.new))
    asdf 23roni
    1
    """

    def __init__(
        self,
        value_serializer: Callable[[Any], bytes] | None = None,
        track_bytes: bool = True,
    ) -> None:
        if track_bytes and value_serializer is None:
            raise ValueError("byte accounting needs a value serializer")
        self._serialize = value_serializer
        self._track_bytes = track_bytes
        self._index: dict[bytes, BufferedEntry] = {}
        self._buckets: dict[int, dict[bytes, BufferedEntry]] = {}
        self._times: list[int] = []
        self._head_keys: list[bytes] | None = None  # head bucket's keys, sorted descending
        self._bytes = 0

    # -- adding ------------------------------------------------------------------------------

    def put(
        self, time: int, key_bytes: bytes, key: Any, new: Any, old: Any, context: RecordContext
    ) -> None:
        """Buffer ``Change(new, old)`` for ``key_bytes``.

        A key already buffered keeps its buffer time and prior value; its latest change,
        context and size are replaced. A new key is buffered at ``time`` with
        ``prior = old``.

        Runtime complexity: O(1), or O(log t) when ``time`` is a new distinct buffer time.
        """
        entry = self._index.get(key_bytes)
        if self._track_bytes:
            ser = self._serialize
            new_b = None if new is None else ser(new)  # type: ignore[misc]
            old_b = None if old is None else ser(old)  # type: ignore[misc]
        else:
            new_b = old_b = None
        if entry is not None:
            entry.key = key
            entry.new = new
            entry.old = old
            entry.context = context
            if self._track_bytes:
                size = entry_size(key_bytes, entry.prior_bytes, old_b, new_b, context)
                self._bytes += size - entry.size
                entry.new_bytes = new_b
                entry.old_bytes = old_b
                entry.size = size
            return
        size = entry_size(key_bytes, old_b, old_b, new_b, context) if self._track_bytes else 0
        entry = BufferedEntry(time, key_bytes, key, new, old, old, new_b, old_b, old_b,
                              context, size)
        self._index[key_bytes] = entry
        self._bytes += size
        bucket = self._buckets.get(time)
        if bucket is None:
            self._buckets[time] = {key_bytes: entry}
            heapq.heappush(self._times, time)
            if self._times[0] == time:
                self._head_keys = None
        else:
            bucket[key_bytes] = entry
            if self._times[0] == time:
                self._head_keys = None

    # -- removing ----------------------------------------------------------------------------

    def _head(self) -> BufferedEntry:
        keys = self._head_keys
        if keys is None:
            keys = self._head_keys = sorted(self._buckets[self._times[0]], reverse=True)
        return self._buckets[self._times[0]][keys[-1]]

    def _remove_head(self, entry: BufferedEntry) -> None:
        keys = self._head_keys
        assert keys is not None
        keys.pop()
        time = self._times[0]
        bucket = self._buckets[time]
        del bucket[entry.key_bytes]
        del self._index[entry.key_bytes]
        self._bytes -= entry.size
        if not bucket:
            del self._buckets[time]
            heapq.heappop(self._times)
            self._head_keys = None

    def evict_while(self, predicate: Callable[[], bool], callback: EvictCallback) -> int:
        """Evict head entries, in order, while the buffer is not empty and ``predicate()``.

        ``callback(entry)`` runs *before* the entry is removed, so inside it
        ``num_records``, ``size_bytes`` and ``min_time`` still include the entry. If the
        callback raises, the entry stays buffered.

        :return: the number of evicted entries.
        """
        evicted = 0
        while self._index and predicate():
            entry = self._head()
            callback(entry)
            self._remove_head(entry)
            evicted += 1
        return evicted

    def evict_expired(self, expiry: int, callback: EvictCallback) -> int:
        """Evict, in order, every entry whose buffer time is ``<= expiry`` (ms).

        :return: the number of evicted entries.
        """
        times = self._times
        evicted = 0
        while times and times[0] <= expiry:
            entry = self._head()
            callback(entry)
            self._remove_head(entry)
            evicted += 1
        return evicted

    # -- looking up --------------------------------------------------------------------------

    def prior_value(self, key_bytes: bytes) -> tuple[bool, Any]:
        """Return ``(True, prior)`` for a buffered key, else ``(False, None)``.

        ``prior`` is the value downstream last saw for the key (possibly ``None``); a
        suppressed table's lookups (joins) read it for buffered keys.
        """
        entry = self._index.get(key_bytes)
        if entry is None:
            return False, None
        return True, entry.prior

    def get(self, key_bytes: bytes) -> BufferedEntry | None:
        """The buffered entry of ``key_bytes``, or ``None``."""
        return self._index.get(key_bytes)

    def __contains__(self, key_bytes: object) -> bool:
        return key_bytes in self._index

    def __len__(self) -> int:
        return len(self._index)

    def __iter__(self) -> Iterator[BufferedEntry]:
        """Entries in eviction order. Runtime complexity: O(n log n)."""
        for time in sorted(self._buckets):
            bucket = self._buckets[time]
            for key_bytes in sorted(bucket):
                yield bucket[key_bytes]

    @property
    def num_records(self) -> int:
        """Number of distinct buffered keys."""
        return len(self._index)

    @property
    def size_bytes(self) -> int:
        """Sum of the buffered entries' sizes in bytes (0 when bytes are not tracked)."""
        return self._bytes

    @property
    def min_time(self) -> int:
        """Smallest buffer time (ms), or ``2**63 - 1`` when the buffer is empty."""
        return self._times[0] if self._times else LONG_MAX

    @property
    def tracks_bytes(self) -> bool:
        """Whether entry sizes are computed."""
        return self._track_bytes

    # -- invariants --------------------------------------------------------------------------

    def _check(self) -> None:
        """Assert every internal invariant (used by tests after each operation)."""
        bucketed = [e for b in self._buckets.values() for e in b.values()]
        assert len(bucketed) == len(self._index), "index and buckets disagree"
        for time, bucket in self._buckets.items():
            assert bucket, f"empty bucket at {time}"
            for key_bytes, entry in bucket.items():
                assert entry.time == time and entry.key_bytes == key_bytes
                assert self._index[key_bytes] is entry, "index points to a stale entry"
        assert sorted(self._times) == sorted(self._buckets), "heap and buckets disagree"
        assert not self._times or self._times[0] == min(self._times), "heap order broken"
        assert self._bytes == sum(e.size for e in bucketed), "byte total drifted"
        if self._track_bytes:
            for e in bucketed:
                assert e.size == entry_size(e.key_bytes, e.prior_bytes, e.old_bytes,
                                            e.new_bytes, e.context), "stale entry size"
        if self._head_keys is not None:
            assert self._times, "head cache without entries"
            assert self._head_keys == sorted(self._buckets[self._times[0]], reverse=True)
