"""The suppress processor: stream time, time eviction, then the buffer-full strategy.

It knows nothing of topologies: the runtime hands it a key (and its bytes), a change
``(new, old)``, a :class:`~suppress.entry.RecordContext` and, for final results, the buffer
time (the window's exclusive end). It emits through an injected callback.

Per record, in this order (Kafka's ``KTableSuppressProcessor``):

1. ``T = max(T, ts)`` (this node's observed stream time, starting at -1);
2. put the change into the buffer;
3. evict, in (buffer time, key bytes) order, every entry that is due: for final results a
   window that :func:`~suppress.time.is_window_closed`, for a time limit a key whose limit
   :func:`~suppress.time.is_time_limit_reached`;
4. if still over a limit: emit early from the head, or raise :class:`BufferFullError`.

Final results are buffered in a :class:`~suppress.final.FinalResultsBuffer` (a bucket per
window end: time windows, and keys kept whole) or, for windows with ends of their own (sliding,
sessions), a :class:`~suppress.final_heap.FinalResultsHeap` (one heap); time limits in a
:class:`~suppress.buffer.TimeOrderedBuffer`. With
``spill_to_disk_when_full()`` the buffer is a :class:`~suppress.spill.SpillingBuffer`, which is
never over a limit (its memory tier moves the overflow to disk), so step 4 never applies to it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable
from typing import Any, Protocol

from .buffer import TimeOrderedBuffer
from .config import BufferFullStrategy, Suppressed
from .entry import BufferedEntry, RecordContext
from .errors import LONG_MAX, BufferFullError, InvalidSuppressionError
from .final import KEY_BYTES, PART, PRIOR, FinalEntries, FinalResultsBuffer, WindowKeys
from .final_heap import FinalResultsHeap, PartKeys
from .order import HeapOrder
from .spill import SpillBackend, SpillingBuffer
from .time import (
    NO_TIMESTAMP,
    is_time_limit_reached,
    is_window_closed,
    last_closed_end,
    window_close_time,
)

__all__ = ("BufferGauges", "SuppressMetrics", "SuppressProcessor", "SuppressionView")

EmitCallback = Callable[[Any, Any, Any, RecordContext], None]
"""``emit(key, new, old, context)``: receives each record the suppression lets through."""

WindowUpdate = Callable[[int, Any, Any, Any, Any, Any, int, Any, "str | None"], None]
"""``update(time, window, part, identity, new, old, timestamp, context, topic)``: a change
of the key ``part`` of ``window`` (see :meth:`SuppressProcessor.window_entry`)."""


class BufferGauges(Protocol):
    """What suppression metrics read from a buffer: its record count and size in bytes."""

    @property
    def num_records(self) -> int:
        """Number of buffered entries."""
        ...

    @property
    def size_bytes(self) -> int:
        """Kafka's size estimate of the buffered entries (bytes)."""
        ...


class SuppressionView(BufferGauges, Protocol):
    """A suppression as observers see it, whichever path runs it.

    Its own stream time (ms, -1 before any record reached it) and its buffer's contents.
    """

    @property
    def stream_time(self) -> int:
        """The largest timestamp that reached this suppression (ms), -1 before any."""
        ...

    def buffered(self) -> list[tuple[Any, Any, int]]:
        """``(key, value, timestamp)`` of every buffered entry, in eviction order."""
        ...


class SuppressMetrics:
    """Kafka's suppression metrics for one node.

    ``emit_total`` counts emitted records; the current buffer size (bytes) and count are read
    from the buffer. With ``debug`` (Kafka's DEBUG recording level) the size and count are also
    sampled at start, after every put and after every eviction batch that evicted something,
    giving ``-avg`` and ``-max`` over those samples.
    """

    __slots__ = ("emit_total", "debug", "_buffer", "_samples", "_size_sum", "_size_max",
                 "_count_sum", "_count_max")

    def __init__(self, buffer: BufferGauges, debug: bool) -> None:
        self.emit_total = 0
        self.debug = debug
        self._buffer = buffer
        self._samples = 0
        self._size_sum = 0
        self._size_max = 0
        self._count_sum = 0
        self._count_max = 0
        if debug:
            self.sample()

    def sample(self) -> None:
        """Record one sample of the buffer's size (bytes) and count."""
        size = self._buffer.size_bytes
        count = self._buffer.num_records
        self._samples += 1
        self._size_sum += size
        self._count_sum += count
        if size > self._size_max:
            self._size_max = size
        if count > self._count_max:
            self._count_max = count

    def as_dict(self) -> dict[str, float]:
        """The metrics under Kafka's names (floats, as Kafka reports them)."""
        out = {
            "suppression-emit-total": float(self.emit_total),
            "suppression-buffer-size": float(self._buffer.size_bytes),
            "suppression-buffer-count": float(self._buffer.num_records),
        }
        if self.debug:
            n = self._samples
            out.update({
                "suppression-buffer-size-avg": self._size_sum / n,
                "suppression-buffer-size-max": float(self._size_max),
                "suppression-buffer-count-avg": self._count_sum / n,
                "suppression-buffer-count-max": float(self._count_max),
            })
        return out


class SuppressProcessor:
    """Suppresses updates per :class:`~suppress.config.Suppressed`, emitting via ``emit``.

    :param name: processor node name, used in :class:`BufferFullError` messages.
    :param suppressed: the suppression config.
    :param delay_ms: ``D``: the time limit, or for final results the grace period found
        upstream (sessions: grace + gap).
    :param emit: called as ``emit(key, new, old, context)`` for every record let through.
    :param key_serializer: gives a key's bytes (eviction order and byte size), called once
        per buffered entry.
    :param value_serializer: serializes values for byte accounting (only computed when a
        ``max_bytes`` limit is set, with ``debug_metrics``, or when the size is read).
    :param debug_metrics: sample buffer size and count for ``-avg``/``-max`` metrics.
    :param buffer_time_of: for :meth:`process_change`: maps a key to its buffer time (final
        results: the window's exclusive end); ``None`` uses the record timestamp.
    :param spill: the disk tier's store and codec, for ``spill_to_disk_when_full()``.
    :param key_identity: ``key -> identity``, equal exactly for keys with equal bytes (see
        :class:`~suppress.buffer.TimeOrderedBuffer`); ``None``: the key's bytes.
    :param window_keys: for final results of time windows, how a key splits into its window
        and the key inside it (see :mod:`suppress.final`); enables :meth:`window_entry`.
    :param part_keys: for final results of windows with ends of their own (sliding,
        sessions), how a key splits into parts (see :mod:`suppress.final_heap`); enables
        :meth:`window_entry`.
    :raises InvalidSuppressionError: for ``spill_to_disk_when_full()`` without ``spill``.
    """

    def __init__(
        self,
        name: str,
        suppressed: Suppressed,
        delay_ms: int,
        emit: EmitCallback,
        key_serializer: Callable[[Any], bytes],
        value_serializer: Callable[[Any], bytes | None],
        debug_metrics: bool = False,
        buffer_time_of: Callable[[Any], int] | None = None,
        spill: SpillBackend | None = None,
        key_identity: Callable[[Any], Hashable] | None = None,
        window_keys: WindowKeys | None = None,
        part_keys: PartKeys | None = None,
    ) -> None:
        cfg = suppressed.buffer_config
        self.name = name
        self.delay_ms = delay_ms
        self._final = suppressed.final_results
        self._records_limit = cfg.records_limit
        self._bytes_limit = cfg.bytes_limit
        self._emit_early = cfg.strategy is BufferFullStrategy.EMIT
        self.emit = emit
        """The callback records are let through to (replaceable before processing starts)."""
        track_bytes = cfg.bytes_limit is not None or debug_metrics
        self.buffer: TimeOrderedBuffer | SpillingBuffer | FinalResultsBuffer | FinalResultsHeap
        self._changed: dict[Hashable, Any] | None = None
        """The buffer's change tracking (see :meth:`track_changes`), noted by the fast path."""
        if cfg.strategy is BufferFullStrategy.SPILL_TO_DISK:
            if spill is None:
                raise InvalidSuppressionError(
                    f"{name}: spill_to_disk_when_full() needs a disk tier, and none was given "
                    "(a runtime gives one; the engine alone cannot)")
            self.buffer = SpillingBuffer(
                key_serializer, value_serializer, cfg.records_limit, cfg.bytes_limit, spill,
                track_bytes=track_bytes,
                time_of=buffer_time_of if self._final else None)  # a window's end
            self._bounded = False  # never over a limit: the overflow is on disk
            self._index: dict[Any, BufferedEntry] = {}  # the fast path below does not run
            self._fast_update = False
        elif self._final and part_keys is not None:
            self.buffer = FinalResultsHeap(
                key_serializer, value_serializer, track_bytes=track_bytes,
                key_identity=key_identity, part_keys=part_keys, time_of=buffer_time_of)
            self._bounded = cfg.is_bounded
            self._index = {}  # the fast path below does not run
            self._fast_update = False
        elif self._final:
            self.buffer = FinalResultsBuffer(
                key_serializer, value_serializer, track_bytes=track_bytes,
                key_identity=key_identity, window_keys=window_keys, time_of=buffer_time_of)
            self._bounded = cfg.is_bounded
            self._index = {}  # the fast path below does not run
            self._fast_update = False
        else:
            self.buffer = TimeOrderedBuffer(
                key_serializer, value_serializer, track_bytes=track_bytes,
                key_identity=key_identity)
            self._bounded = cfg.is_bounded
            self._index = self.buffer._index  # identity -> entry (a live reference)
            self._fast_update = not track_bytes
            self._add = self.buffer.add
            self._identity = self.buffer.key_identity
        self.metrics = SuppressMetrics(self.buffer, debug_metrics)
        self._debug = debug_metrics
        self._buffer_time_of = buffer_time_of
        self.is_due: Callable[[int, int, int], bool] = (
            is_window_closed if self._final else is_time_limit_reached)
        """``is_due(buffer_time, D, T)``: this suppression's rule (:mod:`suppress.time`)."""
        self._min_time = self.buffer._min_time  # the buffer's smallest time, bound
        self.stream_time = NO_TIMESTAMP

    def process(self, key: Any, new: Any, old: Any, context: RecordContext,
                buffer_time: int) -> None:
        """Buffer one change and emit whatever is due.

        :param buffer_time: ``context.timestamp`` for time limits; the window's exclusive end
            for final results.
        :raises BufferFullError: for a shut-down config over a limit after time eviction; the
            record stays buffered and everything emitted before the check has been emitted.
        """
        ts = context.timestamp
        if ts > self.stream_time:
            self.stream_time = ts
        self.buffer.put(buffer_time, key, new, old, context)
        if self._debug:
            self.metrics.sample()
        self._enforce()

    def track_changes(self) -> dict[Hashable, Any]:
        """Track the keys whose buffered entry changes; return the live dict of them.

        For an owner that writes the buffer's image at each commit: every put, update and
        removal from now on notes its key there (as the value, under a key of the buffer's
        choosing); the owner reads the values and clears the dict. In-memory buffers only.

        :raises TypeError: for a spilling buffer (it keeps its own image).
        """
        buffer = self.buffer
        if isinstance(buffer, SpillingBuffer):
            raise TypeError("a spilling buffer keeps its own image; it tracks no changes")
        changed: dict[Hashable, Any] = {}
        buffer.changed = self._changed = changed
        return changed

    def change_entry(self) -> Callable[[Any, Any, Any, RecordContext], None]:
        """Where a runtime sends changes: :meth:`process_change`, or the same steps inlined.

        For an emit-early buffer in memory with a records limit only, without byte tracking,
        sampling or change tracking (rate limiting), a closure that does what
        :meth:`process_change` and :meth:`_enforce` do, reading the heap's head in place: the
        put, time eviction, then the oldest entries while more keys than the limit are
        buffered, each emitted before it is removed.
        """
        buffer = self.buffer
        order = buffer._order if isinstance(buffer, TimeOrderedBuffer) else None
        limit = self._records_limit
        if not (self._emit_early and self._fast_update and not self._debug and limit is not None
                and self._bytes_limit is None and isinstance(order, HeapOrder)
                and self._changed is None):
            return self.process_change
        assert isinstance(buffer, TimeOrderedBuffer) and isinstance(order, HeapOrder)
        heap, index, add, evict_due = order.items, self._index, self._add, buffer.evict_due
        identity = self._identity
        is_due, delay, time_of = self.is_due, self.delay_ms, self._buffer_time_of
        metrics, final = self.metrics, self._final
        pop = heapq.heappop

        def process_change(key: Any, new: Any, old: Any, context: RecordContext) -> None:
            ts = context[0]
            if ts > self.stream_time:
                self.stream_time = ts
            entry = index.get(identity(key))
            if entry is not None:
                entry.new = new
                entry.old = old
                entry.context = context
            else:
                add(ts if time_of is None else time_of(key), key, new, old, context)
            now = self.stream_time
            if heap and is_due(heap[0][0], delay, now):
                evict_due(lambda head: is_due(head, delay, now), self._emit_entry)
            while len(index) > limit:  # the head, emitted (as _emit_entry), then removed
                entry = heap[0][3]
                if not (final and entry.new is None):
                    metrics.emit_total += 1
                    self.emit(entry.key, entry.new, entry.old, entry.context)
                pop(heap)
                del index[identity(entry.key)]  # sizes are not tracked: nothing to subtract

        return process_change

    def window_entry(self) -> WindowUpdate:
        """Where a windowed aggregation hands its changes, without building windowed keys.

        ``update(time, window, part, identity, new, old, timestamp, context, topic)`` does what
        :meth:`process_change` does for the key of ``part`` in ``window`` (buffer time
        ``time``), with ``identity`` the part's (see :class:`~suppress.final.BucketKeys`), and
        the context as :meth:`~suppress.final.FinalResultsBuffer.write` takes it. With
        ``part_keys`` (windows with ends of their own), ``part`` names its window and
        ``window`` is not used.

        :raises TypeError: unless this suppression buffers final results in memory with
            ``window_keys`` or ``part_keys``.
        """
        buffer = self.buffer
        if isinstance(buffer, FinalResultsHeap):
            return self._part_entry(buffer)
        if not isinstance(buffer, FinalResultsBuffer) or not buffer.splits_keys:
            raise TypeError(f"{self.name}: only final results of windows, buffered in memory "
                            "with their keys' parts, take changes by window")
        write, times, delay = buffer.write, buffer._times, self.delay_ms
        buckets = buffer._buckets  # read in place (see suppress.final)
        sized, resized = buffer.tracks_bytes, buffer.resized
        metrics = self.metrics if self._debug else None
        enforce = self._enforce
        # the capacity, as numbers no count or size reaches when unset (one comparison each)
        max_count = LONG_MAX if self._records_limit is None else self._records_limit
        max_bytes = LONG_MAX if self._bytes_limit is None else self._bytes_limit
        head = close = LONG_MAX  # the head's buffer time and when its window closes
        # the entries of the time last written (a bucket's dict is empty once it left)
        last_time = LONG_MAX
        last_entries: dict[Hashable, tuple[Any, ...]] = {}

        def update(time: int, window: Any, part: Any, identity: Any, new: Any, old: Any,
                   timestamp: int, context: Any, topic: str | None) -> None:
            nonlocal head, close, last_time, last_entries
            if timestamp > self.stream_time:
                self.stream_time = timestamp
            entry = last_entries.get(identity) if time == last_time else None
            if entry is None or buffer.changed is not None:
                write(time, window, part, identity, new, old, timestamp, context, topic)
                last_time, last_entries = time, buckets[time].entries
            elif sized:  # an update, as write() does it
                last_entries[identity] = resized(entry, new, timestamp, old, context, topic)
            else:
                last_entries[identity] = (new, timestamp, old, context, entry[PRIOR], topic,
                                          entry[KEY_BYTES], entry[PART])
            if metrics is not None:
                metrics.sample()
            if times[0] != head:  # not empty: an entry was just written
                head = times[0]
                close = window_close_time(head, delay)
            if (self.stream_time >= close or buffer._count > max_count
                    or buffer._bytes > max_bytes):
                enforce()

        return update

    def _part_entry(self, buffer: FinalResultsHeap) -> WindowUpdate:
        """:meth:`window_entry` of a buffer of parts in one heap (:mod:`suppress.final_heap`)."""
        write, index, heap, delay = buffer.write, buffer._index, buffer._heap, self.delay_ms
        sized, resized = buffer.tracks_bytes, buffer.resized
        metrics = self.metrics if self._debug else None
        enforce = self._enforce
        # unbounded, without samples: what _enforce does is emit what is closed
        emit_closed = (buffer.emit_closed if not self._bounded and metrics is None else None)
        emit_change = self._emit_change
        max_count = LONG_MAX if self._records_limit is None else self._records_limit
        max_bytes = LONG_MAX if self._bytes_limit is None else self._bytes_limit
        head = close = LONG_MAX  # the head's buffer time and when its window closes

        def update(time: int, window: Any, part: Any, identity: Any, new: Any, old: Any,
                   timestamp: int, context: Any, topic: str | None) -> None:
            nonlocal head, close
            if timestamp > self.stream_time:
                self.stream_time = timestamp
            entry = index.get(identity)
            if entry is None or buffer.changed is not None:
                write(time, window, part, identity, new, old, timestamp, context, topic)
            elif sized:  # an update, as write() does it
                index[identity] = resized(entry, new, timestamp, old, context, topic)
            else:
                index[identity] = (new, timestamp, old, context, entry[PRIOR], topic,
                                   entry[KEY_BYTES], entry[PART])
            if metrics is not None:
                metrics.sample()
            if heap[0][0] != head:  # not empty: an entry was just written
                head = heap[0][0]
                close = window_close_time(head, delay)
            if self.stream_time >= close and emit_closed is not None:
                emit_closed(last_closed_end(delay, self.stream_time), emit_change)
            elif (self.stream_time >= close or buffer._count > max_count
                    or buffer._bytes > max_bytes):
                enforce()

        return update

    def process_change(self, key: Any, new: Any, old: Any, context: RecordContext) -> None:
        """:meth:`process` with the buffer time from ``buffer_time_of``.

        The hot path of a suppression in a topology: an update to a key that is already
        buffered (without byte accounting) only replaces the entry's change and context.
        """
        ts = context[0]
        if ts > self.stream_time:
            self.stream_time = ts
        if self._fast_update:
            identity = self._identity(key)
            entry = self._index.get(identity)
            if entry is not None:
                entry.new = new
                entry.old = old
                entry.context = context
                changed = self._changed
                if changed is not None:
                    changed[identity] = key
                if self._bounded or self.is_due(self._min_time(), self.delay_ms,
                                                self.stream_time):
                    self._enforce()
                return
            time_of = self._buffer_time_of
            self._add(ts if time_of is None else time_of(key), key, new, old, context)
            self._enforce()
            return
        time_of = self._buffer_time_of
        self.buffer.put(ts if time_of is None else time_of(key), key, new, old, context)
        if self._debug:
            self.metrics.sample()
        if self._bounded or self.is_due(self._min_time(), self.delay_ms, self.stream_time):
            self._enforce()

    def advance_stream_time(self, stream_time: int) -> None:
        """Move stream time forward to ``stream_time`` (ms) without a record; emit what is due.

        For a clock that also moves without records reaching this processor: idle close
        (``Suppressed.with_idle_close``) and Spark's watermark in the distributed runner.
        An earlier time changes nothing.
        """
        if stream_time > self.stream_time:
            self.stream_time = stream_time
            if self._bounded or self.is_due(self._min_time(), self.delay_ms, stream_time):
                self._enforce()

    def _enforce(self) -> None:
        """Evict what is due by time, then apply the buffer-full strategy."""
        buffer = self.buffer
        is_due, delay, now = self.is_due, self.delay_ms, self.stream_time
        if is_due(self._min_time(), delay, now):  # an empty buffer's min time: 2**63 - 1
            if isinstance(buffer, FinalEntries):
                buffer.emit_closed(last_closed_end(delay, now), self._emit_change)
            else:
                buffer.evict_due(lambda head: is_due(head, delay, now), self._emit_entry)
            if self._debug:
                self.metrics.sample()
        records_limit = self._records_limit
        bytes_limit = self._bytes_limit
        if self._bounded and (
                (records_limit is not None and buffer.num_records > records_limit)
                or (bytes_limit is not None and buffer.size_bytes > bytes_limit)):
            if self._emit_early:
                buffer.evict_over(records_limit, bytes_limit, self._emit_entry)
                if self._debug:
                    self.metrics.sample()
            else:
                raise BufferFullError(self.name, buffer.num_records, records_limit,
                                      buffer.size_bytes, bytes_limit)

    def _emit_entry(self, entry: BufferedEntry) -> None:
        self._emit_change(entry.key, entry.new, entry.old, entry.context)

    def _emit_change(self, key: Any, new: Any, old: Any, context: RecordContext) -> None:
        if self._final and new is None:
            return  # a window that ended as a tombstone has no final result
        self.metrics.emit_total += 1
        self.emit(key, new, old, context)

    def prior_value(self, key: Any) -> tuple[bool, Any]:
        """``(True, value downstream last saw)`` for a buffered key, else ``(False, None)``."""
        return self.buffer.prior_value(key)

    @property
    def num_records(self) -> int:
        """Number of buffered keys."""
        return self.buffer.num_records

    @property
    def size_bytes(self) -> int:
        """Kafka's size estimate of the buffer (bytes)."""
        return self.buffer.size_bytes

    def buffered(self) -> list[tuple[Any, Any, int]]:
        """``(key, value, timestamp)`` of every buffered entry, in eviction order."""
        return [(e.key, e.new, e.context.timestamp) for e in self.buffer]
