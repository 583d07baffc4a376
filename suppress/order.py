"""Eviction order of a time-limit suppression buffer: one heap of ``(buffer time, key bytes)``.

Kafka orders buffered entries by buffer time, then by serialized key bytes (unsigned,
lexicographic, a shorter prefix first: Python's ``bytes`` order). Entries leave only through
the head, so the order needs no arbitrary deletions. For time limits nearly every key has its
own time (its first record's timestamp): one heap of ``(time, key bytes, sequence, entry)``,
push and pop O(log n) with the comparisons done in C. (Final results, where thousands of keys
share a time, are bucketed per time instead: :mod:`suppress.final`.)

Ties between distinct keys with equal bytes (a lossy serializer) are broken by buffering
order; entries themselves are never compared.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator

from .entry import BufferedEntry
from .errors import LONG_MAX

__all__ = ("HeapOrder",)


class HeapOrder:
    """One heap of ``(time, key bytes, sequence, entry)``: O(log n) push and pop."""

    __slots__ = ("_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[int, bytes, int, BufferedEntry]] = []
        self._seq = 0  # buffering order: the tie-break before the entry

    @property
    def items(self) -> list[tuple[int, bytes, int, BufferedEntry]]:
        """The heap itself, live: ``items[0]`` is the head (for a reader that pops it)."""
        return self._heap

    def push(self, entry: BufferedEntry) -> None:
        """Add ``entry``. Runtime complexity: O(log n)."""
        self._seq += 1
        heapq.heappush(self._heap, (entry.time, entry.key_bytes, self._seq, entry))

    def head(self) -> BufferedEntry:
        """The first entry. Runtime complexity: O(1)."""
        return self._heap[0][3]

    def pop_head(self) -> None:
        """Remove the first entry. Runtime complexity: O(log n)."""
        heapq.heappop(self._heap)

    def evict_head(self, callback: Callable[[BufferedEntry], object]) -> BufferedEntry:
        """:meth:`head`, ``callback(entry)``, :meth:`pop_head`. Runtime complexity: O(log n)."""
        heap = self._heap
        entry = heap[0][3]
        callback(entry)
        heapq.heappop(heap)
        return entry

    def min_time(self) -> int:
        """The smallest buffer time, or ``2**63 - 1`` when empty."""
        heap = self._heap
        return heap[0][0] if heap else LONG_MAX

    def __len__(self) -> int:
        return len(self._heap)

    def __iter__(self) -> Iterator[BufferedEntry]:
        for item in sorted(self._heap):
            yield item[3]

    def _check(self) -> None:
        heap = self._heap
        for time, key_bytes, seq, entry in heap:
            assert entry.time == time and entry.key_bytes == key_bytes
            assert 0 < seq <= self._seq
        for i in range(1, len(heap)):
            assert heap[(i - 1) // 2] < heap[i], "heap order broken"
