"""Fused final results: a time-windowed aggregation and its ``until_window_closes``.

When a windowed aggregation's only child is a final-results suppression that shuts down when
full (unbounded included; one that spills to disk runs on its own, its buffer partly on disk),
the task runs both as one step (``fuse=True``, the default; the driver's
``fuse_final_results`` config turns it off). The step is an implementation of the
two processors, not a second semantics: per window update, in the same order as the separate
path,

1. the aggregation's stream time, its close rule (:func:`suppress.time.is_window_closed`),
   its drop of records for closed windows, and its store read and write;
2. the suppression's own stream time ``T = max(T, update timestamp)`` (kept on the
   suppression's engine, so observers see one value whichever path runs);
3. the buffer put: a new entry keeps the old value as its prior; an update keeps the prior and
   replaces value, timestamp, old value and context;
4. emission, in (window end, key bytes) order, of every buffered window the close rule says
   is closed at ``T``, each entry removed only after its record went downstream; windows that
   ended deleted (aggregate ``None``) are dropped;
5. the capacity check (:class:`~suppress.errors.BufferFullError`).

What it saves is the objects the two processors pass between them (a ``Windowed`` key and a
change per update) and the general buffer: entries live in a dict per window start (a
window's end is its buffer time), and each is a tuple replaced on update, so the tens of
thousands of live windows are tuples of plain values that the garbage collector stops
tracking. On the tumbling fast path the entry is also the store's item (the window store's
bucket keeps ``(value, timestamp)`` first, and its readers use only those): an update
builds one tuple instead of two and looks up one dict instead of two. Measured on the
final-results benchmark at 1 M records: about 10 % less time (median ratio to the tight loop
0.24 -> 0.25-0.27 in paired runs).

A property test (``tests/topology/test_fusion.py``) runs random streams both ways,
user code that raises included, and compares outputs, errors, drops, metrics, store contents
and the suppression's stream time after every record.

Entry fields: ``(value, timestamp, old, context, prior, topic, key bytes)``, plus ``(size,
prior bytes, value bytes, fixed size)`` when bytes are tracked (a ``max_bytes`` limit or DEBUG
metrics); the fixed size is the part of :func:`~suppress.entry.entry_size` that an update
does not change (8 + key bytes + prior bytes).
Records piped in bulk without headers arrive through :meth:`FusedFinalResults.raw_entry` as
``(key, value, timestamp, offset, topic)``; their entry keeps the offset in place of the
context and the topic beside it (``None`` otherwise), and the context is built only when the
window is emitted. Measured: that saves a context object per record, about 12 % of the bulk
pipeline's time.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from suppress.config import BufferFullStrategy
from suppress.entry import RecordContext, change_size, context_size, entry_size
from suppress.errors import BufferFullError
from suppress.processor import SuppressMetrics
from suppress.time import is_window_closed, window_close_time

from ...serde import long_packer_of, runs_no_user_code
from ...windows import Window, Windowed, time_window_end
from ..processor import Forward
from .aggregate import WindowedAggregateProcessor, count_adder, count_initializer
from .suppress import SuppressNodeProcessor
from .table import log_null_key

if TYPE_CHECKING:
    from ..processor import InternalProcessor

__all__ = ("FusedFinalResults", "can_fuse")

_VALUE, _TS, _OLD, _CTX, _PRIOR, _TOPIC, _KEY_BYTES = range(7)  # entry fields (docstring)
_SIZE, _PRIOR_BYTES, _VALUE_BYTES, _FIXED = 7, 8, 9, 10  # and with byte tracking
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)
_new_tuple = tuple.__new__  # a named tuple of values known to be valid, without its __new__


def can_fuse(aggregate: InternalProcessor, child: InternalProcessor) -> bool:
    """Whether ``aggregate`` -> ``child`` can run fused (see the module docstring).

    Not for ``spill_to_disk_when_full()``: the fused buffer is a dict of tuples in memory;
    not for idle close, which moves the suppression's time between records.
    """
    if not isinstance(aggregate, WindowedAggregateProcessor):
        return False
    if not isinstance(child, SuppressNodeProcessor) or child.suppressed.idle_close_ms is not None:
        return False
    return (child.suppressed.final_results
            and child.suppressed.buffer_config.strategy is BufferFullStrategy.SHUT_DOWN)


def _context(timestamp: int, offset: int, topic: str) -> RecordContext:
    """The context of a record piped without headers."""
    return _new_tuple(RecordContext, (timestamp, offset, topic, 0, ()))


def _emitted_context(entry: tuple[Any, ...]) -> RecordContext:
    """The context of an entry's latest update, with the aggregate's timestamp."""
    if entry[_TOPIC] is not None:
        return _context(entry[_TS], entry[_CTX], entry[_TOPIC])
    ctx: RecordContext = entry[_CTX]
    return ctx if ctx[0] == entry[_TS] else ctx._replace(timestamp=entry[_TS])


def _by_key_bytes(item: tuple[Any, tuple[Any, ...]]) -> bytes:
    key_bytes: bytes = item[1][_KEY_BYTES]
    return key_bytes


class FusedFinalResults:
    """The combined step: the aggregation's record entry, and the suppression's buffer.

    ``name`` is the aggregation's (records enter there); the suppression's stream time is
    its engine's ``stream_time``. Also a :class:`~suppress.processor.SuppressionView` and the
    buffer the suppression's metrics read.
    """

    def __init__(self, aggregate: WindowedAggregateProcessor,
                 suppress: SuppressNodeProcessor, debug_metrics: bool) -> None:
        self.name = aggregate.name
        self._agg = aggregate
        self._task = aggregate._task
        self._store = aggregate._store
        windows = aggregate._windows
        self._windows = windows
        self._size = windows.size_ms
        self._grace = windows.grace_ms
        self._initializer = aggregate._initializer
        self._aggregator = aggregate._aggregator
        self._node = suppress
        self._engine = suppress.engine  # its stream time is the suppression's
        self._buffer: dict[int, dict[Any, tuple[Any, ...]]] = {}  # start -> identity -> entry
        self._originals: dict[int, dict[Any, Any]] = {}  # start -> identity -> key, for the
        # keys that are not their own identity (the buffer outlives the store's window)
        self._starts: list[int] = []  # heap of the buffer's window starts
        self._next_close = LONG_MAX  # window_close_time of the oldest buffered window
        self._count = 0
        self._bytes = 0  # kept only when tracking bytes
        cfg = suppress.suppressed.buffer_config
        self._records_limit = cfg.records_limit
        self._bytes_limit = cfg.bytes_limit
        self._debug = debug_metrics
        self._track_bytes = cfg.bytes_limit is not None or debug_metrics
        self._windows_cache: dict[int, Window] = {}
        self._topic_sizes: dict[str, int] = {}
        self.metrics = SuppressMetrics(self, debug_metrics)

    # -- entries -------------------------------------------------------------------------------

    def record_entry(self) -> Forward:
        """Where records arrive: :meth:`process` (``(key, value, context)``)."""
        return self.process

    def raw_entry(self) -> Callable[[Any, Any, int, int, str], None]:
        """Where records piped without headers arrive: ``(key, value, ts, offset, topic)``.

        For tumbling windows a closure over local names, with a fast path for an update to a
        key already buffered in the window last written; otherwise :meth:`process` after
        building the context.
        """
        if self._windows.advance_ms == self._size and not self._debug:
            return self._tumbling_step()  # (sampling needs _after_put after every put)
        process = self.process

        def with_context(key: Any, value: Any, ts: int, offset: int, topic: str) -> None:
            process(key, value, _context(ts, offset, topic))

        return with_context

    def process(self, key: Any, value: Any, ctx: RecordContext) -> None:
        """Aggregate the record into each of its windows, as the separate processors do."""
        if key is None:
            log_null_key(self._task, ctx, self.name)
            return
        ts = ctx[0]
        agg = self._agg
        if ts > agg.stream_time:
            agg.stream_time = ts
        for start in self._windows.window_starts(ts):
            self._update(key, value, ctx, None, ts, start)

    def _tumbling_step(self) -> Callable[[Any, Any, int, int, str], None]:
        """The raw entry for tumbling windows, as a closure over local names.

        The hot path of final results: a record for the window last written, while that
        window is open, either updates a key whose store item is this step's entry (so the
        store and the buffer agree) or adds a key new to it (absent from both the store
        bucket and the buffer); it touches that bucket and the buffer's dict of the window
        only, and runs :meth:`_after_put` only when the suppression's time reached the
        oldest buffered window's close (or a limit or sampling needs it). A key whose item
        another writer replaced (a store put between records), or that a delete removed,
        goes the general way until the window closes.
        Everything else goes through :meth:`_update`, the general form of the same steps in
        the same order.
        """
        agg, store, task, engine = self._agg, self._store, self._task, self._engine
        size, grace = self._size, self._grace
        aggregator, initializer = self._aggregator, self._initializer
        update, after_put = self._update, self._after_put
        track = self._track_bytes
        value_bytes = self._node.value_bytes
        last_topic: str | None = None
        last_context_bytes = 0
        # a built-in value serializer is called directly; its error, if any, is raised again
        # through the node (value_bytes), so that it is located there as on the other path
        value_ser = self._node.value_serializer
        pure_value_ser = value_ser if runs_no_user_code(value_ser) else None
        long_pack = long_packer_of(value_ser)

        def sized_value(value: Any) -> bytes | None:
            """``value_bytes(value)``, a built-in serializer called directly (see above)."""
            if pure_value_ser is None or value is None:
                return value_bytes(value)
            try:
                return pure_value_ser(value)
            except Exception:  # noqa: BLE001 - raised again at the node
                return value_bytes(value)

        # count(): its aggregator adds 1, its initializer gives 0 (same results, no calls)
        counting = aggregator is count_adder and initializer is count_initializer
        last_start, last_version, last_close = -1, -1, -1
        # a key that is its own identity (always one of type ``own``) takes the fast path;
        # others go the general way (:meth:`_update`), which finds them by identity
        own, identity_of = store.own_identity, store.key_identity
        last_bucket: dict[Any, Any] = {}
        last_entries: dict[Any, tuple[Any, ...]] = {}
        last_key_bytes = self._window_key_bytes(-1)
        # _after_put has work only when the oldest window closed or a limit is exceeded
        # (limits as numbers no count or size reaches when unset: one comparison each)
        max_count = LONG_MAX if self._records_limit is None else self._records_limit
        max_bytes = LONG_MAX if self._bytes_limit is None else self._bytes_limit
        limited = self._records_limit is not None or self._bytes_limit is not None

        def step(key: Any, value: Any, ts: int, offset: int, topic: str) -> None:
            nonlocal last_start, last_version, last_close, last_bucket, last_entries
            nonlocal last_key_bytes, last_topic, last_context_bytes
            if key is None:
                log_null_key(task, _context(ts, offset, topic))
                return
            now = agg.stream_time
            if ts > now:
                agg.stream_time = now = ts
            start = ts - ts % size
            if start == last_start and now < last_close and (
                    key.__class__ is own or identity_of(key) is key) \
                    and store.layout_version == last_version:  # the window is still open
                item = last_bucket.get(key)
                if item is not None and len(item) > 2:  # this step's entry: an update
                    entry = item
                    old = entry[_VALUE]
                    new = old + 1 if counting else aggregator(key, value, old)
                    out_ts = entry[_TS]
                    if ts > out_ts:
                        out_ts = ts
                    if new is None:
                        store.put_with_timestamp(key, None, start, out_ts)  # a delete
                    if track:  # _tracked of an update, inline: the same calls, in order
                        try:
                            prior_bytes = entry[_PRIOR_BYTES]
                            new_bytes: bytes | None
                            old_bytes = (entry[_VALUE_BYTES] if old is entry[_VALUE]
                                         else value_bytes(old))
                            if long_pack is not None and type(new) is int \
                                    and LONG_MIN <= new <= LONG_MAX:  # as Serdes.long() does
                                new_bytes = long_pack(new)
                            elif pure_value_ser is None or new is None:
                                new_bytes = value_bytes(new)
                            else:
                                try:
                                    new_bytes = pure_value_ser(new)
                                except Exception:  # noqa: BLE001 - raised again at the node
                                    new_bytes = value_bytes(new)
                            if topic is not last_topic:  # the context's size, per topic
                                last_topic = topic
                                last_context_bytes = self._context_size(offset, topic)
                        except BaseException:
                            if new is not None:  # the store was written first, as apart
                                last_bucket[key] = (new, out_ts)
                            raise
                        # entry_size: its fixed part kept (see _tracked), the rest per update
                        sized = (entry[_FIXED] + last_context_bytes
                                 + change_size(prior_bytes, old_bytes, new_bytes))
                        self._bytes += sized - entry[_SIZE]
                        entry = (new, out_ts, old, offset, entry[_PRIOR], topic,
                                 entry[_KEY_BYTES], sized, prior_bytes, new_bytes,
                                 entry[_FIXED])
                    else:
                        entry = (new, out_ts, old, offset, entry[_PRIOR], topic,
                                 entry[_KEY_BYTES])
                    if new is not None:
                        last_bucket[key] = entry
                    last_entries[key] = entry
                    # nothing is newly due unless the suppression's time moves: after every
                    # step, no buffered window is closed at it (see _after_put)
                    if out_ts > engine.stream_time:
                        engine.stream_time = out_ts
                        if out_ts >= self._next_close:
                            after_put(size)
                            return
                    if limited and (self._count > max_count or self._bytes > max_bytes):
                        after_put(size)
                    return
                if item is None and key not in last_entries:  # a key new to the window
                    if counting:
                        old, new = 0, 1
                    elif initializer is None:  # reduce: the first value starts it
                        old, new = None, value
                    else:
                        old = initializer()
                        new = aggregator(key, value, old)
                    if new is None:
                        store.put_with_timestamp(key, None, start, ts)  # a delete
                    due = False
                    if ts > engine.stream_time:
                        engine.stream_time = ts
                        due = ts >= self._next_close
                    try:  # the key's bytes and sizes: the store was written first, as apart
                        key_bytes = last_key_bytes(key)
                        if track:
                            prior_bytes = sized_value(old)
                            new_bytes = sized_value(new)
                            if topic is not last_topic:
                                last_topic = topic
                                last_context_bytes = self._context_size(offset, topic)
                    except BaseException:
                        if new is not None:
                            last_bucket[key] = (new, ts)
                        raise
                    if track:  # _tracked of a new entry, inline: the same calls, in order
                        fixed = entry_size(key_bytes, prior_bytes, None, None, 0)
                        sized = entry_size(key_bytes, prior_bytes, prior_bytes, new_bytes,
                                           last_context_bytes)
                        self._bytes += sized
                        entry = (new, ts, old, offset, old, topic, key_bytes, sized,
                                 prior_bytes, new_bytes, fixed)
                    else:
                        entry = (new, ts, old, offset, old, topic, key_bytes)
                    if new is not None:
                        last_bucket[key] = entry
                    last_entries[key] = entry
                    self._count += 1
                    if due or limited and (self._count > max_count or self._bytes > max_bytes):
                        after_put(size)
                    return
            update(key, value, None, (offset, topic), ts, start)
            if start != last_start or store.layout_version != last_version:
                entries = self._buffer.get(start)
                bucket = store.bucket(start) if entries is not None else None
                if bucket is not None and entries is not None:
                    if start != last_start:
                        last_key_bytes = self._window_key_bytes(start)
                    last_start, last_bucket, last_entries = start, bucket, entries
                    last_version = store.layout_version
                    last_close = window_close_time(time_window_end(start, size), grace)

        return step

    def _update(self, key: Any, value: Any, ctx: RecordContext | None,
                raw: tuple[int, str] | None, ts: int, start: int) -> None:
        """One window update through both processors (steps 1-5 of the module docstring).

        ``ctx`` is the record's context, or ``None`` with ``raw = (offset, topic)``.
        """
        size = self._size
        agg = self._agg
        if is_window_closed(time_window_end(start, size), self._grace, agg.stream_time):
            agg._drop_expired(key, value,
                              ctx if ctx is not None else _context(ts, *raw),  # type: ignore[misc]
                              start, time_window_end(start, size))
            return
        old, new, out_ts = agg.aggregate_into(key, value, ts, start)
        engine = self._engine
        if out_ts > engine.stream_time:
            engine.stream_time = out_ts
        entries = self._buffer.get(start)
        if entries is None:
            entries = self._buffer[start] = {}
            heapq.heappush(self._starts, start)
            self._next_close = window_close_time(time_window_end(self._starts[0], size),
                                                 self._grace)
        store = self._store
        identity = key if key.__class__ is store.own_identity else store.key_identity(key)
        entry = entries.get(identity)
        if entry is None and identity is not key:  # the key that creates the entry stays
            originals = self._originals.get(start)
            if originals is None:
                originals = self._originals[start] = {}
            originals[identity] = key
        stored, topic = (ctx, None) if raw is None else raw
        if self._track_bytes:
            entries[identity] = self._tracked(entry, key, start, new, out_ts, old, stored, topic)
        elif entry is None:
            key_bytes = self._window_key_bytes(start)(key)
            entries[identity] = (new, out_ts, old, stored, old, topic, key_bytes)
        else:
            entries[identity] = (new, out_ts, old, stored, entry[_PRIOR], topic,
                                 entry[_KEY_BYTES])
        if entry is None:
            self._count += 1
        self._after_put(size)

    def _after_put(self, size: int) -> None:
        """Sample (DEBUG), emit what closed at the suppression's time, check the capacity."""
        if self._debug:
            self.metrics.sample()
        starts = self._starts
        if starts and is_window_closed(time_window_end(starts[0], size), self._grace,
                                       self._engine.stream_time):
            self._emit_closed()
            if self._debug:
                self.metrics.sample()
        records_limit, bytes_limit = self._records_limit, self._bytes_limit
        if (records_limit is not None and self._count > records_limit) or (
                bytes_limit is not None and self._bytes > bytes_limit):
            raise BufferFullError(self._node.name, self._count, records_limit,
                                  self.size_bytes, bytes_limit)

    def _window(self, start: int) -> Window:
        window = self._windows_cache.get(start)
        if window is None:
            if len(self._windows_cache) > 1024:
                self._windows_cache.clear()
            window = self._windows_cache[start] = Window(start, start + self._size)
        return window

    def _key_of(self, start: int, identity: Any) -> Any:
        """The key buffered with ``identity`` in window ``start``."""
        originals = self._originals.get(start)
        return identity if originals is None else originals.get(identity, identity)

    def _window_key_bytes(self, start: int) -> Callable[[Any], bytes]:
        """``key`` -> the suppression's bytes of ``Windowed(key, window at start)``."""
        return self._node.window_key_bytes(self._window(start))

    def _tracked(self, entry: tuple[Any, ...] | None, key: Any, start: int, new: Any,
                 out_ts: int, old: Any, stored: Any, topic: str | None,
                 window_key_bytes: Callable[[Any], bytes] | None = None) -> tuple[Any, ...]:
        """The entry after an update (``entry`` None: a new one), sized; the total adjusted.

        ``stored``/``topic``: the context, or a raw record's offset and topic.
        ``window_key_bytes``: :meth:`_window_key_bytes` of ``start``, if at hand.
        """
        node = self._node
        if entry is None:
            if window_key_bytes is None:
                window_key_bytes = self._window_key_bytes(start)
            key_bytes = window_key_bytes(key)
            prior, prior_bytes = old, node.value_bytes(old)
            old_bytes, previous = prior_bytes, 0
        else:
            value, prior, key_bytes = entry[_VALUE], entry[_PRIOR], entry[_KEY_BYTES]
            previous, prior_bytes = entry[_SIZE], entry[_PRIOR_BYTES]
            # the old value is usually the entry's previous value, whose bytes are known
            old_bytes = entry[_VALUE_BYTES] if old is value else node.value_bytes(old)
        new_bytes = node.value_bytes(new)
        context_bytes = None if topic is None else self._topic_sizes.get(topic)
        if context_bytes is None:
            context_bytes = self._context_size(stored, topic)
        size = entry_size(key_bytes, prior_bytes, old_bytes, new_bytes, context_bytes)
        self._bytes += size - previous
        fixed = entry_size(key_bytes, prior_bytes, None, None, 0)  # the part updates keep
        return (new, out_ts, old, stored, prior, topic, key_bytes, size, prior_bytes, new_bytes,
                fixed)

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

    def _emit_closed(self) -> None:
        """Emit every buffered window that is closed, by (window end, key bytes).

        Each entry leaves the buffer only after its record went downstream, so an error
        there leaves it and the rest buffered, as the separate buffer does.
        """
        starts = self._starts
        size, grace, engine = self._size, self._grace, self._engine
        forward = self._node.forward_change
        metrics = self.metrics
        while starts and is_window_closed(time_window_end(starts[0], size), grace,
                                          engine.stream_time):
            start = starts[0]
            window = self._window(start)
            entries = self._buffer[start]
            items = list(entries.items())
            key_bytes = [entry[_KEY_BYTES] for entry in entries.values()]
            # by key bytes; equal bytes keep their buffering order (a stable sort)
            for i in sorted(range(len(items)), key=key_bytes.__getitem__):
                identity, entry = items[i]
                new = entry[_VALUE]
                if new is not None:  # a window that ended deleted has no final result
                    metrics.emit_total += 1
                    topic = entry[_TOPIC]
                    key = self._key_of(start, identity)
                    forward(_new_tuple(Windowed, (key, window)), new, entry[_OLD],
                            _emitted_context(entry) if topic is None else
                            _new_tuple(RecordContext, (entry[_TS], entry[_CTX], topic, 0, ())))
                del entries[identity]
                self._count -= 1
                if self._track_bytes:
                    self._bytes -= entry[_SIZE]
            heapq.heappop(starts)
            del self._buffer[start]
            self._originals.pop(start, None)
            self._next_close = (window_close_time(time_window_end(starts[0], size), grace) if starts
                                else LONG_MAX)

    # -- the suppression as observers see it ---------------------------------------------------

    @property
    def stream_time(self) -> int:
        """The suppression's stream time (ms)."""
        return self._engine.stream_time

    @property
    def num_records(self) -> int:
        """Buffered (key, window) entries."""
        return self._count

    @property
    def size_bytes(self) -> int:
        """Kafka's size estimate of the buffer (kept, or computed on demand)."""
        if self._track_bytes:
            return self._bytes
        node = self._node
        total = 0
        for entries in self._buffer.values():
            for entry in entries.values():
                prior, old, new = entry[_PRIOR], entry[_OLD], entry[_VALUE]
                prior_bytes = node.value_bytes(prior)
                old_bytes = prior_bytes if old is prior else node.value_bytes(old)
                total += entry_size(entry[_KEY_BYTES], prior_bytes, old_bytes,
                                    node.value_bytes(new),
                                    context_size(_emitted_context(entry)))
        return total

    def buffered(self) -> list[tuple[Any, Any, int]]:
        """``(key, value, timestamp)`` of every buffered entry, in eviction order."""
        out = []
        for start in sorted(self._buffer):
            window = self._window(start)
            for identity, entry in sorted(self._buffer[start].items(), key=_by_key_bytes):
                key = self._key_of(start, identity)
                out.append((Windowed(key, window), entry[_VALUE], entry[_TS]))
        return out
