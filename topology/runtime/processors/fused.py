"""Fused final results: a time-windowed aggregation and its ``until_window_closes``.

When a windowed aggregation's only child is a final-results suppression (strict buffer:
unbounded or shut down when full; DEBUG metrics off), the task runs both in one step. The
suppression buffer is then implicit: for final results, every window updated and not yet
closed is buffered, and nothing else is. So the fused path keeps, next to each window's value
in the window store, what the buffer would hold (the latest old value, the latest record
context and the prior value), and at close emits each window's latest change in
(window end, key bytes) order.

Output, metrics, drops and store contents are those of the two separate processors; a
property test (tests/topology/test_fusion.py) runs random streams both ways and compares.

Entry layout in a store bucket: ``[value, timestamp, old, context, prior]``, plus
``[size, base size, prior bytes, value bytes]`` when a ``max_bytes`` limit needs byte accounting
(kept up to date on every update, as the separate buffer does; the base size is the part that
never changes: 8 + key bytes + prior bytes). A ``None`` value
is a window whose aggregate was deleted (the aggregator returned ``None``): absent for store
readers, a pending tombstone for the suppression, dropped at emission as final results do.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

from suppress.config import BufferFullStrategy
from suppress.entry import RecordContext, context_size, entry_size
from suppress.errors import BufferFullError

from ...record import Change
from ...windows import Window, Windowed
from .aggregate import WindowedAggregateProcessor
from .suppress import SuppressNodeProcessor
from .table import log_null_key

__all__ = ("FusedFinalResults", "can_fuse")

_VALUE, _TS, _OLD, _CTX, _PRIOR, _SIZE, _BASE, _PRIOR_BYTES, _VALUE_BYTES = range(9)
_new_tuple = tuple.__new__


def can_fuse(aggregate: Any, child: Any, debug_metrics: bool) -> bool:
    """Whether ``aggregate`` -> ``child`` can run fused (see the module docstring)."""
    if not isinstance(aggregate, WindowedAggregateProcessor) or debug_metrics:
        return False
    if not isinstance(child, SuppressNodeProcessor):
        return False
    cfg = child.suppressed.buffer_config
    return child.suppressed.final_results and cfg.strategy is BufferFullStrategy.SHUT_DOWN


class FusedFinalResults:
    """The combined step; installed as the aggregation's ``process``.

    Also serves as the suppression's buffer view for metrics (``num_records``,
    ``size_bytes``), computed on demand.
    """

    def __init__(self, aggregate: WindowedAggregateProcessor,
                 suppress: SuppressNodeProcessor) -> None:
        self._agg = aggregate
        self._task = aggregate._task
        self._store = aggregate._store
        windows = aggregate._windows
        self._windows = windows
        self._size = windows.size_ms
        self._grace = windows.grace_ms
        self._tumbling = windows.advance_ms == windows.size_ms
        self._initializer = aggregate._initializer
        self._aggregator = aggregate._aggregator
        self._suppress = suppress
        self._metrics = suppress.engine.metrics
        self._key_bytes = suppress.key_serializer
        self._value_bytes = suppress.value_serializer
        self._pending: list[int] = []  # heap of window starts with buffered entries
        self._pending_set: set[int] = set()
        self._count = 0  # buffered entries
        self._bytes = 0  # their size, when tracked
        cfg = suppress.suppressed.buffer_config
        self._records_limit = cfg.records_limit
        self._bytes_limit = cfg.bytes_limit
        self._bounded = cfg.is_bounded
        self._track_bytes = cfg.bytes_limit is not None
        self._closed_up_to = aggregate.stream_time - self._grace
        self._windows_cache: dict[int, Window] = {}
        self._topic_sizes: dict[str, int] = {}
        self._metrics._buffer = self  # type: ignore[assignment]

    # -- the step ----------------------------------------------------------------------------

    def process(self, key: Any, value: Any, ctx: RecordContext) -> None:
        """Aggregate the record into its open windows; emit the windows that closed."""
        if key is None:
            log_null_key(self._task, ctx)
            return
        agg = self._agg
        ts = ctx[0]
        if ts > agg.stream_time:
            agg.stream_time = ts
            # suppress.time's close rule: closed iff end <= expiry(T, grace) = T - grace
            closed = self._closed_up_to = ts - self._grace
            pending = self._pending
            if pending and pending[0] + self._size <= closed:
                self._emit_closed(closed)
        size = self._size
        for start in self._windows.window_starts(ts):
            self._update(key, value, ctx, ts, start, size)

    def step(self) -> Callable[[Any, Any, RecordContext], None]:
        """The function to run as the aggregation's ``process``."""
        if self._tumbling:
            return self._tumbling_step()
        return self.process

    def _tumbling_step(self) -> Callable[[Any, Any, RecordContext], None]:
        """:meth:`process` for tumbling windows, as a closure.

        The hot path of final results: an update to a live entry of the window last written
        touches only local names and the entry. Anything else goes through :meth:`_update`.
        """
        agg, store, task, pending = self._agg, self._store, self._task, self._pending
        size, grace, aggregator = self._size, self._grace, self._aggregator
        update, emit_closed = self._update, self._emit_closed
        buckets = store._by_start
        last_start, last_bucket, last_version = -1, {}, -1
        track, check = self._track_bytes, self._bounded
        value_bytes, context_size_of = self._value_bytes, self._context_size
        check_capacity = self._check_capacity

        def step(key: Any, value: Any, ctx: RecordContext) -> None:
            nonlocal last_start, last_bucket, last_version
            if key is None:
                log_null_key(task, ctx)
                return
            ts = ctx[0]
            if ts > agg.stream_time:
                agg.stream_time = ts
                # suppress.time's close rule: closed iff end <= expiry(T, grace) = T - grace
                closed = self._closed_up_to = ts - grace
                if pending and pending[0] + size <= closed:
                    emit_closed(closed)
            start = ts - ts % size
            if start == last_start and store.layout_version == last_version \
                    and start + size > self._closed_up_to:
                entry = last_bucket.get(key)
                if entry is not None and entry[0] is not None:
                    old = entry[0]
                    new = entry[0] = aggregator(key, value, old)
                    if ts > entry[1]:
                        entry[1] = ts
                    entry[2] = old
                    entry[3] = ctx
                    if track:  # the size arithmetic of _resize, inline
                        old_bytes = entry[8]
                        new_bytes = entry[8] = None if new is None else value_bytes(new)
                        grown = entry[6] + context_size_of(ctx) - entry[5]
                        if old_bytes is not None and old_bytes != entry[7]:
                            grown += len(old_bytes)
                        if new_bytes is not None:
                            grown += len(new_bytes)
                        entry[5] += grown
                        self._bytes += grown
                    if check:
                        check_capacity()
                    return
            update(key, value, ctx, ts, start, size)
            if start + size > self._closed_up_to:
                last_start, last_bucket = start, buckets[start]
                last_version = store.layout_version

        return step

    def _update(self, key: Any, value: Any, ctx: RecordContext, ts: int, start: int,
                size: int) -> None:
        if start + size <= self._closed_up_to:
            self._agg._drop_expired(ctx, start, start + size)
            return
        bucket = self._store.bucket(start)
        assert bucket is not None  # an open window is always within retention
        entry = bucket.get(key)
        if entry is None:
            old = None if self._initializer is None else self._initializer()
            new = value if self._initializer is None else self._aggregator(key, value, old)
            entry = bucket[key] = [new, ts, old, ctx, old]
            self._count += 1
            if start not in self._pending_set:
                self._pending_set.add(start)
                heapq.heappush(self._pending, start)
            if self._track_bytes:
                kb = self._key_bytes(_new_tuple(Windowed, (key, self._window(start)))) or b""
                pb = None if old is None else self._value_bytes(old)
                entry += [0, 8 + len(kb) + (0 if pb is None else len(pb)), pb, None]
                self._resize(entry, pb)
        else:
            old = entry[_VALUE]
            if old is None:  # deleted earlier in this window: start again, prior kept
                old = None if self._initializer is None else self._initializer()
                entry[_VALUE] = value if self._initializer is None else self._aggregator(
                    key, value, old)
                entry[_TS] = ts
                old_bytes = None if old is None else self._value_bytes(old)
            else:
                entry[_VALUE] = self._aggregator(key, value, old)
                if ts > entry[_TS]:
                    entry[_TS] = ts
                old_bytes = entry[_VALUE_BYTES] if self._track_bytes else None
            entry[_OLD] = old
            entry[_CTX] = ctx
            if self._track_bytes:
                self._resize(entry, old_bytes)
        if self._bounded:
            self._check_capacity()

    def _window(self, start: int) -> Window:
        window = self._windows_cache.get(start)
        if window is None:
            if len(self._windows_cache) > 1024:
                self._windows_cache.clear()
            window = self._windows_cache[start] = Window(start, start + self._size)
        return window

    def _resize(self, entry: list[Any], old_bytes: bytes | None) -> None:
        """Recompute an entry's size after an update; ``old_bytes`` are its old value's."""
        new = entry[_VALUE]
        new_bytes = None if new is None else self._value_bytes(new)
        size = entry[_BASE] + self._context_size(entry[_CTX])
        if old_bytes is not None and old_bytes != entry[_PRIOR_BYTES]:
            size += len(old_bytes)
        if new_bytes is not None:
            size += len(new_bytes)
        entry[_VALUE_BYTES] = new_bytes
        self._bytes += size - entry[_SIZE]
        entry[_SIZE] = size

    def _context_size(self, ctx: RecordContext) -> int:
        """``context_size(ctx)``, memoized per topic for contexts without headers."""
        if ctx[4]:
            return context_size(ctx)
        size = self._topic_sizes.get(ctx[2])
        if size is None:
            size = self._topic_sizes[ctx[2]] = context_size(ctx)
        return size

    def _check_capacity(self) -> None:
        records_limit = self._records_limit
        bytes_limit = self._bytes_limit
        if (records_limit is not None and self._count > records_limit) or (
                bytes_limit is not None and self._bytes > bytes_limit):
            raise BufferFullError(self._suppress.name, self._count, records_limit,
                                  self.size_bytes, bytes_limit)

    def _emit_closed(self, closed_up_to: int) -> None:
        """Emit every pending window with ``end <= closed_up_to``, by (end, key bytes)."""
        pending = self._pending
        size = self._size
        buckets = self._store._by_start
        forward = self._suppress.forward
        metrics = self._metrics
        key_bytes = self._key_bytes
        while pending and pending[0] + size <= closed_up_to:
            start = pending[0]
            window = Window(start, start + size)
            bucket = buckets.get(start, {})
            ordered = sorted((key_bytes(_new_tuple(Windowed, (k, window))), k, e)
                             for k, e in bucket.items())
            for _, key, entry in ordered:
                new = entry[_VALUE]
                if new is None:
                    continue  # a window that ended deleted has no final result
                ctx = entry[_CTX]
                if ctx[0] != entry[_TS]:
                    ctx = ctx._replace(timestamp=entry[_TS])
                metrics.emit_total += 1
                forward(_new_tuple(Windowed, (key, window)), Change(new, entry[_OLD]), ctx)
            heapq.heappop(pending)
            self._pending_set.discard(start)
            self._count -= len(bucket)
            if self._track_bytes:
                self._bytes -= sum(e[_SIZE] for e in bucket.values())

    # -- the suppression's buffer, for metrics -----------------------------------------------

    def _buffered(self) -> list[tuple[Windowed, list[Any]]]:
        buckets = self._store._by_start
        out = []
        for start in self._pending:
            window = Window(start, start + self._size)
            out += [(Windowed(k, window), e) for k, e in buckets.get(start, {}).items()]
        return out

    @property
    def num_records(self) -> int:
        """Buffered (key, window) entries: those of windows not yet emitted."""
        return self._count

    @property
    def size_bytes(self) -> int:
        """Kafka's size estimate of the implicit buffer (kept, or computed on demand)."""
        if self._track_bytes:
            return self._bytes
        ser = self._value_bytes
        total = 0
        for key, e in self._buffered():
            prior = None if e[_PRIOR] is None else ser(e[_PRIOR])
            old = None if e[_OLD] is None else ser(e[_OLD])
            new = None if e[_VALUE] is None else ser(e[_VALUE])
            ctx = e[_CTX]
            total += entry_size(self._key_bytes(key) or b"", prior, old, new, ctx)
        return total
