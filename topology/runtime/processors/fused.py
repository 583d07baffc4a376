"""Fused final results: a time-windowed aggregation and its ``until_window_closes``.

When a windowed aggregation's only child is a final-results suppression (strict buffer:
unbounded or shut down when full; DEBUG metrics off), the task runs both in one step. It does
what the two separate processors do, in the same order, without the objects they pass
between them (a ``Windowed`` key and a ``Change`` per update) and with a buffer shaped for
final results: entries grouped by window start, since a window's end is its buffer time.

Per accepted window update, as the separate path: the aggregate is read from and written to
the window store; the change is buffered (a new entry keeps the old value as its prior; an
update keeps the prior and replaces value, timestamp, old value and context); every buffered
window with ``end <= T - grace`` is emitted in (window end, key bytes) order, each entry
removed only after its record went downstream; then the capacity is checked.
Windows that ended deleted (the aggregator returned ``None``) are dropped at emission.

A property test (tests/topology/test_fusion.py) runs random streams both ways (DEBUG metrics
turn fusion off) and compares outputs, errors, drops, metrics and store contents.

Buffer entries are tuples ``(value, timestamp, old, context, prior, topic)``, plus ``(size,
base size, prior bytes, value bytes, key bytes)`` when a ``max_bytes`` limit needs byte
accounting (kept up to date on every update as the separate buffer does; the base size is the
part that never changes: 8 + key bytes + prior bytes). An update replaces the tuple. Records
piped in bulk reach the step without a context object (see :meth:`FusedFinalResults.step`):
their entry keeps the offset in place of the context and the topic beside it (``None``
otherwise), and the context is built only when the window is emitted. An entry of plain
values is a tuple the garbage collector stops tracking, so the tens of thousands of live
windows are not rescanned by every full collection, as mutable entries were.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

from suppress.config import BufferFullStrategy
from suppress.entry import RecordContext, context_size, entry_size
from suppress.errors import LONG_MAX, BufferFullError

from ...windows import Window, Windowed
from .aggregate import WindowedAggregateProcessor
from .suppress import SuppressNodeProcessor
from .table import log_null_key

__all__ = ("FusedFinalResults", "can_fuse")

_VALUE, _TS, _OLD, _CTX, _PRIOR, _TOPIC, _SIZE = range(7)  # entry fields (module docstring)
_KEY_BYTES = 10  # (size, base size, prior bytes, value bytes, key bytes) follow _TOPIC
_new_tuple = tuple.__new__
Step = Callable[..., None]


def can_fuse(aggregate: Any, child: Any, debug_metrics: bool) -> bool:
    """Whether ``aggregate`` -> ``child`` can run fused (see the module docstring)."""
    if not isinstance(aggregate, WindowedAggregateProcessor) or debug_metrics:
        return False
    if not isinstance(child, SuppressNodeProcessor):
        return False
    cfg = child.suppressed.buffer_config
    return child.suppressed.final_results and cfg.strategy is BufferFullStrategy.SHUT_DOWN


def _key_bytes_of(item: tuple[bytes, Any, tuple[Any, ...]]) -> bytes:
    return item[0]


def _context(timestamp: int, offset: int, topic: str) -> RecordContext:
    """The context of a record piped without headers."""
    return _new_tuple(RecordContext, (timestamp, offset, topic, 0, ()))


def _emitted_context(entry: tuple[Any, ...]) -> RecordContext:
    """The context of an entry's latest update, with the aggregate's timestamp."""
    if entry[_TOPIC] is not None:
        return _context(entry[_TS], entry[_CTX], entry[_TOPIC])
    ctx = entry[_CTX]
    return ctx if ctx[0] == entry[_TS] else ctx._replace(timestamp=entry[_TS])


class FusedFinalResults:
    """The combined step, installed as the aggregation's ``process`` (see :meth:`step`).

    Also the suppression's buffer as its metrics see it (``num_records``, ``size_bytes``).
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
        self._buffer: dict[int, dict[Any, tuple[Any, ...]]] = {}  # window start -> key -> entry
        self._starts: list[int] = []  # heap of the buffer's window starts
        self._count = 0
        self._bytes = 0  # kept only with a bytes limit
        cfg = suppress.suppressed.buffer_config
        self._records_limit = cfg.records_limit
        self._bytes_limit = cfg.bytes_limit
        # limits as numbers no count or size reaches when unset: one comparison each
        self._max_count = LONG_MAX if cfg.records_limit is None else cfg.records_limit
        self._max_bytes = LONG_MAX if cfg.bytes_limit is None else cfg.bytes_limit
        self._track_bytes = cfg.bytes_limit is not None
        self._closed_up_to = aggregate.stream_time - self._grace
        self._windows_cache: dict[int, Window] = {}
        self._topic_sizes: dict[str, int] = {}
        self._metrics._buffer = self  # type: ignore[assignment]

    # -- the step ----------------------------------------------------------------------------

    def step(self) -> Step:
        """The function to run as the aggregation's ``process``.

        For tumbling windows it also takes ``(key, value, timestamp, offset, topic)`` for a
        record without headers (flagged by its ``accepts_raw`` attribute), which spares the
        bulk path one context object per record.
        """
        return self._tumbling_step() if self._tumbling else self.process

    def process(self, key: Any, value: Any, ctx: RecordContext) -> None:
        """Aggregate the record into each of its windows, as the separate processors do."""
        if key is None:
            log_null_key(self._task, ctx)
            return
        ts = ctx[0]
        agg = self._agg
        if ts > agg.stream_time:
            agg.stream_time = ts
            # suppress.time's close rule: closed iff end <= expiry(T, grace) = T - grace
            self._closed_up_to = ts - self._grace
        size = self._size
        for start in self._windows.window_starts(ts):
            self._update(key, value, ctx, ts, start, size)

    def _tumbling_step(self) -> Step:
        """:meth:`process` for tumbling windows, as a closure over local names.

        The hot path of final results: an update to a key already buffered in the window
        last written only touches the store bucket and the buffer entry. Anything else goes
        through :meth:`_update`.
        """
        agg, store, task = self._agg, self._store, self._task
        size, grace = self._size, self._grace
        aggregator, initializer = self._aggregator, self._initializer
        update, emit_closed = self._update, self._emit_closed
        starts = self._starts
        track, max_count, max_bytes = self._track_bytes, self._max_count, self._max_bytes
        tracked = self._tracked
        last_start, last_version = -1, -1
        last_bucket: dict[Any, Any] = {}
        last_entries: dict[Any, tuple[Any, ...]] = {}

        def step(key: Any, value: Any, ctx: Any, offset: int = -1,
                 topic: str | None = None) -> None:
            nonlocal last_start, last_version, last_bucket, last_entries
            if topic is None:
                ts = ctx[0]
                stored = ctx
            else:  # a raw record: ctx is its timestamp
                ts = ctx
                stored = offset
            if key is None:
                log_null_key(task, _context(ts, offset, topic) if topic is not None else ctx)
                return
            if ts > agg.stream_time:
                agg.stream_time = ts
                # suppress.time's close rule: closed iff end <= expiry(T, grace) = T - grace
                self._closed_up_to = ts - grace
            start = ts - ts % size
            closed = self._closed_up_to
            if start == last_start and store.layout_version == last_version \
                    and start + size > closed:
                item = last_bucket.get(key)
                entry = last_entries.get(key)
                if item is not None and entry is not None:
                    old = item[0]
                    new = aggregator(key, value, old)
                    out_ts = item[1] if item[1] > ts else ts
                    if new is None:
                        store.put_with_timestamp(key, None, start, out_ts)  # a delete
                    else:
                        last_bucket[key] = (new, out_ts)
                    if track:
                        last_entries[key] = tracked(entry, key, start, new, out_ts, old, stored,
                                                    topic)
                    else:
                        last_entries[key] = (new, out_ts, old, stored, entry[4], topic)
                    if starts[0] + size <= closed:
                        emit_closed(closed)
                    if self._count > max_count or self._bytes > max_bytes:
                        self._check_capacity()
                    return
                if item is None and entry is None and initializer is not None:
                    # a key new to the window last written
                    old = initializer()
                    new = aggregator(key, value, old)
                    if new is not None:
                        last_bucket[key] = (new, ts)
                        if track:
                            last_entries[key] = tracked(None, key, start, new, ts, old, stored,
                                                        topic)
                        else:
                            last_entries[key] = (new, ts, old, stored, old, topic)
                        self._count += 1
                        if starts[0] + size <= closed:
                            emit_closed(closed)
                        if self._count > max_count or self._bytes > max_bytes:
                            self._check_capacity()
                        return
                    # a None aggregate deletes: the general path below handles it
                    if topic is not None:
                        ctx = _context(ts, offset, topic)
                    update(key, value, ctx, ts, start, size, (old, new))
                    return
            if topic is not None:
                ctx = _context(ts, offset, topic)
            update(key, value, ctx, ts, start, size)
            if (start != last_start or store.layout_version != last_version) \
                    and start + size > self._closed_up_to:
                bucket = store.bucket(start)
                if bucket is not None:
                    last_start, last_bucket = start, bucket
                    last_entries = self._buffer[start]
                    last_version = store.layout_version

        step.accepts_raw = True  # type: ignore[attr-defined]
        return step

    def _update(self, key: Any, value: Any, ctx: RecordContext, ts: int, start: int,
                size: int, fresh: tuple[Any, Any] | None = None) -> None:
        """One window update: aggregate, store, buffer, emission, capacity check.

        ``fresh``: ``(old, new)`` already computed for a key new to the window.
        """
        if start + size <= self._closed_up_to:
            self._agg._drop_expired(ctx, start, start + size)
            return
        old, new, out_ts = self._agg.aggregate_into(key, value, ts, start, fresh)
        self._buffer_change(key, start, new, out_ts, old, ctx)
        if self._starts[0] + size <= self._closed_up_to:  # time eviction, then capacity
            self._emit_closed(self._closed_up_to)
        if self._count > self._max_count or self._bytes > self._max_bytes:
            self._check_capacity()

    def _buffer_change(self, key: Any, start: int, new: Any, out_ts: int, old: Any,
                       ctx: RecordContext) -> None:
        entries = self._buffer.get(start)
        if entries is None:
            entries = self._buffer[start] = {}
            heapq.heappush(self._starts, start)
        entry = entries.get(key)
        if entry is None:
            self._count += 1
        if self._track_bytes:
            entries[key] = self._tracked(entry, key, start, new, out_ts, old, ctx, None)
        else:
            entries[key] = (new, out_ts, old, ctx, old if entry is None else entry[_PRIOR], None)

    def _window(self, start: int) -> Window:
        window = self._windows_cache.get(start)
        if window is None:
            if len(self._windows_cache) > 1024:
                self._windows_cache.clear()
            window = self._windows_cache[start] = Window(start, start + self._size)
        return window

    def _tracked(self, entry: tuple[Any, ...] | None, key: Any, start: int, new: Any,
                 out_ts: int, old: Any, stored: Any, topic: str | None) -> tuple[Any, ...]:
        """The entry after an update (``entry`` None: a new one), sized; the total adjusted.

        ``stored``/``topic``: the context, or a raw record's offset and topic.
        """
        ser = self._value_bytes
        if entry is None:
            kb = self._key_bytes(_new_tuple(Windowed, (key, self._window(start)))) or b""
            prior, prior_bytes = old, None if old is None else ser(old)
            old_bytes, base, previous = prior_bytes, 8 + len(kb), 0
            if prior_bytes is not None:
                base += len(prior_bytes)
        else:
            value, _, _, _, prior, _, previous, base, prior_bytes, value_bytes, kb = entry
            # the old value is usually the entry's previous value, whose bytes are known
            old_bytes = value_bytes if old is value else (None if old is None else ser(old))
        new_bytes = None if new is None else ser(new)
        context_bytes = None if topic is None else self._topic_sizes.get(topic)
        if context_bytes is None:
            context_bytes = self._context_size(stored, topic)
        size = base + context_bytes
        if old_bytes is not None and old_bytes != prior_bytes:
            size += len(old_bytes)
        if new_bytes is not None:
            size += len(new_bytes)
        self._bytes += size - previous
        return (new, out_ts, old, stored, prior, topic, size, base, prior_bytes, new_bytes, kb)

    def _context_size(self, stored: Any, topic: str | None) -> int:
        """``context_size`` of an entry's context, memoized per topic without headers."""
        if topic is None:
            if stored[4]:
                return context_size(stored)
            topic = stored[2]
        size = self._topic_sizes.get(topic)
        if size is None:
            size = self._topic_sizes[topic] = context_size(_context(0, 0, topic))
        return size

    def _check_capacity(self) -> None:
        """Raise :class:`BufferFullError` if over a limit (strict buffers shut down)."""
        records_limit = self._records_limit
        bytes_limit = self._bytes_limit
        if (records_limit is not None and self._count > records_limit) or (
                bytes_limit is not None and self._bytes > bytes_limit):
            raise BufferFullError(self._suppress.name, self._count, records_limit,
                                  self.size_bytes, bytes_limit)

    def _emit_closed(self, closed_up_to: int) -> None:
        """Emit every buffered window with ``end <= closed_up_to``, by (end, key bytes).

        Each entry leaves the buffer only after its record went downstream, so an error
        there leaves the rest buffered for the next record, as the separate buffer does.
        """
        starts = self._starts
        size = self._size
        forward = self._suppress.forward_change
        metrics = self._metrics
        key_bytes = self._key_bytes
        while starts and starts[0] + size <= closed_up_to:
            start = starts[0]
            window = self._window(start)
            entries = self._buffer[start]
            if self._track_bytes:
                ordered = sorted(((e[_KEY_BYTES], k, e) for k, e in entries.items()),
                                 key=_key_bytes_of)
            else:
                ordered = sorted(((key_bytes(_new_tuple(Windowed, (k, window))), k, e)
                                  for k, e in entries.items()), key=_key_bytes_of)
            for _, key, entry in ordered:
                new = entry[_VALUE]
                if new is not None:  # a window that ended deleted has no final result
                    ctx = _emitted_context(entry)
                    metrics.emit_total += 1
                    forward(_new_tuple(Windowed, (key, window)), new, entry[_OLD], ctx)
                del entries[key]
                self._count -= 1
                if self._track_bytes:
                    self._bytes -= entry[_SIZE]
            heapq.heappop(starts)
            del self._buffer[start]

    # -- the suppression's buffer, for metrics -----------------------------------------------

    @property
    def num_records(self) -> int:
        """Buffered (key, window) entries."""
        return self._count

    @property
    def size_bytes(self) -> int:
        """Kafka's size estimate of the buffer (kept, or computed on demand)."""
        if self._track_bytes:
            return self._bytes
        ser = self._value_bytes
        total = 0
        for start, entries in self._buffer.items():
            window = self._window(start)
            for key, e in entries.items():
                prior = None if e[_PRIOR] is None else ser(e[_PRIOR])
                old = None if e[_OLD] is None else ser(e[_OLD])
                new = None if e[_VALUE] is None else ser(e[_VALUE])
                kb = self._key_bytes(_new_tuple(Windowed, (key, window))) or b""
                total += entry_size(kb, prior, old, new, _emitted_context(e))
        return total
