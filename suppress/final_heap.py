"""The final-results buffer for windows with ends of their own: one heap of entries.

Sliding and session windows nearly all end at a time of their own, so a bucket per buffer time
(:class:`~suppress.final.FinalResultsBuffer`, right for time windows, where thousands of keys
share an end) would cost a dict and a heap item per window. Here one dict holds the entries by
identity and one heap of ``(buffer time, key bytes, sequence, identity)`` orders them: Kafka's
order ``(buffer time, key bytes)``, equal bytes in buffering order. The entries are the same
plain tuples as in :mod:`suppress.final`, replaced on update.

**Keys.** An entry holds a *part* of its key (:class:`PartKeys`): for windows, the tuple
``(inner key, start, end)``, so that an aggregation can hand over an update
(:meth:`FinalResultsHeap.write`) without building a windowed key; the key that leaves is built
when it leaves. Without :class:`PartKeys` the part is the key. The identity of a part names
its window too, so one identity has one buffer time.

The suppression engine's hot path
(:meth:`~suppress.processor.SuppressProcessor.window_entry`) replaces entries in place and
reads the dict, the heap and the byte total in place; every other write goes through
:meth:`FinalResultsHeap.write`.

Runtime complexity: an update O(1); a new entry O(log n); emitting an entry O(log n).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterator
from heapq import heappop
from typing import Any, NamedTuple

from .entry import BufferedEntry, RecordContext
from .errors import LONG_MAX
from .final import (
    _CTX,
    _NEW,
    _OLD,
    _PART,
    _SIZE,
    _TOPIC,
    _TS,
    KEY_BYTES,
    BucketKeys,
    EmitChange,
    FinalEntries,
    _context,
)

__all__ = ("FinalResultsHeap", "PartKeys")

_new_tuple = tuple.__new__


class PartKeys(NamedTuple):
    """How keys are split into parts, and built, serialized and identified from them."""

    part_of: Callable[[Any], Any]
    """``key -> part``."""
    keys: BucketKeys
    """``part ->`` key, key bytes, identity (the identity names the part's window too)."""


class FinalResultsHeap(FinalEntries):
    """In-memory buffer of the latest change per windowed key, in one heap (module docstring).

    A :class:`~suppress.buffer.SuppressionBuffer`, with :meth:`emit_closed` as
    :class:`~suppress.final.FinalResultsBuffer` has it.

    :param key_serializer: gives a key's bytes (its place in the order, and its size).
    :param value_serializer: gives a value's bytes, for byte accounting.
    :param track_bytes: keep every entry's size up to date on each write (needed for
        ``max_bytes``); when false, :attr:`size_bytes` is computed on demand, O(n).
    :param key_identity: ``key -> identity`` of whole keys (see
        :class:`~suppress.buffer.TimeOrderedBuffer`); ``None``: the key's bytes.
    :param part_keys: how keys are split into parts; ``None``: keys are kept whole.
    :param time_of: ``key -> buffer time``, for a view's time (:meth:`get`); ``None``: the
        heap is searched.

    With change tracking, :attr:`changed` is keyed by identity.

    >>> buf = FinalResultsHeap(str.encode, str.encode)
    >>> buf.put(11, "b", 2, None, RecordContext(5, 0, "t"))
    >>> buf.put(10, "c", 3, None, RecordContext(9, 2, "t"))
    >>> buf.put(11, "a", 1, None, RecordContext(4, 1, "t"))
    >>> buf.emit_closed(11, lambda key, new, old, ctx: print(key, new, ctx.timestamp))
    c 3 9
    a 1 4
    b 2 5
    3
    """

    def __init__(
        self,
        key_serializer: Callable[[Any], bytes],
        value_serializer: Callable[[Any], bytes | None],
        track_bytes: bool = False,
        key_identity: Callable[[Any], Hashable] | None = None,
        part_keys: PartKeys | None = None,
        time_of: Callable[[Any], int] | None = None,
    ) -> None:
        super().__init__(key_serializer, value_serializer, track_bytes, key_identity)
        self._part_of: Callable[[Any], Any] | None = None
        self._keys = self._whole_keys
        if part_keys is not None:
            self._part_of, self._keys = part_keys
        self._key_of = self._keys.key_of
        self._time_of = time_of
        self._index: dict[Hashable, tuple[Any, ...]] = {}
        self._heap: list[tuple[int, bytes, int, Hashable]] = []
        self._seq = 0  # buffering order: the tie-break between equal key bytes

    # -- adding ------------------------------------------------------------------------------

    def put(self, time: int, key: Any, new: Any, old: Any, context: RecordContext) -> None:
        """Buffer ``Change(new, old)`` for ``key`` at buffer time ``time`` (ms).

        A key already buffered keeps its buffer time and prior value (what downstream last
        saw); its latest change and context are replaced. A new key is buffered with
        ``prior = old``.

        :raises TypeError: if the key serializer gives anything but bytes for a new key;
            nothing is buffered then.
        """
        part = key if self._part_of is None else self._part_of(key)
        self.write(time, None, part, self._keys.identity(part), new, old, context[0], context,
                   None)

    def write(self, time: int, window: Any, part: Any, identity: Hashable, new: Any, old: Any,
              timestamp: int, context: Any, topic: str | None) -> None:
        """:meth:`put` of a key given as its part, with the part's identity.

        The arguments are :meth:`~suppress.final.FinalResultsBuffer.write`'s; ``window`` is
        not used (a part names its window).

        :raises TypeError: as :meth:`put`.
        """
        index = self._index
        entry = index.get(identity)
        if entry is not None:
            index[identity] = self.updated(entry, new, timestamp, old, context, topic)
        else:
            entry = self._new_entry(self._keys, part, new, timestamp, old, context, topic)
            self._seq += 1
            heapq.heappush(self._heap, (time, entry[KEY_BYTES], self._seq, identity))
            index[identity] = entry
            self._count += 1
        if self.changed is not None:
            self.changed[identity] = self._keys.key_of(part)

    # -- removing ----------------------------------------------------------------------------

    def emit_closed(self, last_end: int, emit: EmitChange) -> int:
        """Hand every entry with buffer time <= ``last_end`` (ms) to ``emit``, in order.

        ``emit(key, new, old, context)`` runs before the entry is removed: if it raises, that
        entry and the rest stay buffered.

        :return: the number of entries removed.
        """
        heap, index = self._heap, self._index
        evicted = 0
        while heap and heap[0][0] <= last_end:
            identity = heap[0][3]
            entry = index[identity]
            key = self._key_of(entry[_PART])
            topic = entry[_TOPIC]
            emit(key, entry[_NEW], entry[_OLD], _context(entry) if topic is None else
                 _new_tuple(RecordContext, (entry[_TS], entry[_CTX], topic, 0, ())))
            heappop(heap)
            del index[identity]
            self._count -= 1
            if self._track_bytes:
                self._bytes -= entry[_SIZE]
            if self.changed is not None:
                self.changed[identity] = key
            evicted += 1
        return evicted

    def _evict_head(self, callback: Callable[[BufferedEntry], object]) -> None:
        time, _, _, identity = self._heap[0]
        entry = self._index[identity]
        key = self._keys.key_of(entry[_PART])
        callback(self._view(time, key, entry))
        heappop(self._heap)
        del self._index[identity]
        self._count -= 1
        if self._track_bytes:
            self._bytes -= entry[_SIZE]
        if self.changed is not None:
            self.changed[identity] = key

    # -- looking up --------------------------------------------------------------------------

    def _find(self, key: Any) -> tuple[int, Any, tuple[Any, ...]] | None:
        """``(time, key, entry)`` of a buffered key, or ``None``.

        Runtime complexity: O(1) with ``time_of``, else O(n).
        """
        part = key if self._part_of is None else self._part_of(key)
        identity = self._keys.identity(part)
        entry = self._index.get(identity)
        if entry is None:
            return None
        if self._time_of is not None:
            time = self._time_of(key)
        else:
            time = next(item[0] for item in self._heap if item[3] == identity)
        return time, self._keys.key_of(entry[_PART]), entry

    def _entries(self) -> Iterator[tuple[Any, ...]]:
        return iter(self._index.values())

    def __iter__(self) -> Iterator[BufferedEntry]:
        """Views of the entries in eviction order. Runtime complexity: O(n log n)."""
        index, key_of = self._index, self._keys.key_of
        for time, _, _, identity in sorted(self._heap):
            entry = index[identity]
            yield self._view(time, key_of(entry[_PART]), entry)

    def _min_time(self) -> int:
        heap = self._heap
        return heap[0][0] if heap else LONG_MAX

    # -- invariants --------------------------------------------------------------------------

    def _check(self) -> None:
        """Assert every internal invariant (used by tests after each operation)."""
        heap, index, keys = self._heap, self._index, self._keys
        assert len(heap) == len(index) == self._count, "heap, index and count disagree"
        assert {item[3] for item in heap} == set(index), "heap and index disagree"
        total = 0
        for time, key_bytes, seq, identity in heap:
            entry = index[identity]
            assert 0 < seq <= self._seq
            assert entry[KEY_BYTES] == key_bytes, f"{identity}: heap key bytes"
            part = entry[_PART]
            assert keys.identity(part) == identity, "entry under another identity"
            assert self._time_of is None or self._time_of(keys.key_of(part)) == time, \
                "entry under another buffer time"
            total += self._check_entry(entry, keys.key_bytes)
        for i in range(1, len(heap)):
            assert heap[(i - 1) // 2] < heap[i], "heap order broken"
        assert not self._track_bytes or self._bytes == total, "byte total drifted"
