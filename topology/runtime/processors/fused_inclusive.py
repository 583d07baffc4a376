"""Fused final results for sliding and session windows (inclusive ends).

When a sliding or session aggregation's only child is a final-results suppression that shuts
down when full (unbounded included; not one that spills to disk, nor one with idle close), the
task runs the suppression's half in this step (``fuse=True``, the default; the driver's
``fuse_final_results`` config turns it off). The aggregation itself runs unchanged: its
table updates (``forward_change``) reach :meth:`FusedInclusiveFinalResults.change` instead
of the suppression engine, which does, per update and in the same order, what
:meth:`suppress.processor.SuppressProcessor.process_change` does for final results:

1. the suppression's own stream time ``T = max(T, update timestamp)`` (kept on the
   suppression's engine, so observers see one value whichever path runs);
2. the buffer put at the window's buffer time (the suppression node's rule: the exclusive end
   ``end + 1``): a new entry keeps the old value as its prior and its serialized key as its
   place in the order; an update keeps both and replaces value, old value and context;
3. DEBUG metrics: a sample after the put;
4. emission, in (buffer time, key bytes, buffering order) order, of every buffered window
   that :func:`suppress.time.is_window_closed` says is closed at ``T`` (with the
   suppression's delay), each entry removed only after its record went downstream; windows
   that ended deleted (a tombstone: a merged session) are dropped; a sample after the batch;
5. the capacity check (:class:`~suppress.errors.BufferFullError`).

What it saves: the engine's final-results buffer, which keeps a bucket per buffer time (right
for time windows, where thousands of keys share a window end; here nearly every window has an
end of its own, and a bucket per window costs more than a heap item), and the calls between
the nodes. Here one
heap of ``(buffer time, key bytes, sequence, index key)`` orders the entries, and an entry is
a tuple ``(new, old, context fields, prior, key bytes, size)``, replaced on update, indexed by
the plain tuple ``(key, start, end)`` (hashed and compared in C, where a
:class:`~topology.Windowed` compares in Python). The context's fields are a plain tuple and
the windowed key and context objects are built when an entry goes out: the garbage collector
stops tracking a tuple of plain values, where a named tuple (a ``RecordContext``, a
``Windowed``) stays tracked, and every collection would scan each buffered one. Keys and
values are serialized through the suppression node, so an error is located at the same node
as on the separate path. For sessions, a record that starts a session of its own, or merges
with the sessions near, runs inline (:meth:`FusedInclusiveFinalResults._session_step`). A
property test
(``tests/topology/test_fusion_inclusive.py``) runs random streams both ways, user code that
raises included, and compares outputs, errors, drops, late records, metrics, store contents
and the suppression's stream time after every record.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from suppress.config import BufferFullStrategy
from suppress.entry import RecordContext, context_size, entry_size
from suppress.errors import BufferFullError
from suppress.processor import SuppressMetrics
from suppress.time import is_window_closed, last_closed_end, window_close_time

from ..._key_identity import inner_key_identity
from ...serde import pack_session_bounds, runs_no_user_code, session_windowed_inner
from ...state.memory import InMemorySessionStore
from ...windows import Window, Windowed
from ..processor import Forward
from .aggregate import count_adder, count_initializer
from .session import SessionWindowAggregateProcessor
from .sliding import SlidingWindowAggregateProcessor, WindowWrite
from .suppress import SuppressNodeProcessor

if TYPE_CHECKING:
    from ..processor import InternalProcessor

__all__ = ("FusedInclusiveFinalResults", "can_fuse_inclusive")

_NEW, _OLD, _CTX, _PRIOR, _KEY_BYTES, _SIZE = range(6)  # entry fields
LONG_MAX = 2**63 - 1
_new_tuple = tuple.__new__  # a RecordContext of values known to be valid


def can_fuse_inclusive(aggregate: InternalProcessor, child: InternalProcessor) -> bool:
    """Whether sliding or session ``aggregate`` -> ``child`` can run fused (module docstring)."""
    if not isinstance(aggregate, SessionWindowAggregateProcessor
                      | SlidingWindowAggregateProcessor):
        return False
    if not isinstance(child, SuppressNodeProcessor) or child.suppressed.idle_close_ms is not None:
        return False
    return (child.suppressed.final_results
            and child.suppressed.buffer_config.strategy is BufferFullStrategy.SHUT_DOWN)


class FusedInclusiveFinalResults:
    """The suppression's half of a fused sliding or session final-results step.

    ``name`` is the aggregation's (records enter there); the suppression's stream time is
    its engine's ``stream_time``. Also a :class:`~suppress.processor.SuppressionView` and the
    buffer the suppression's metrics read.
    """

    def __init__(self, aggregate: SessionWindowAggregateProcessor
                 | SlidingWindowAggregateProcessor,
                 suppress: SuppressNodeProcessor, debug_metrics: bool) -> None:
        self.name = aggregate.name
        self._agg = aggregate
        self._node = suppress
        self._engine = suppress.engine  # its stream time is the suppression's
        assert suppress._buffer_time is not None, "final results have a buffer time"
        self._buffer_time: Callable[[Any], int] = suppress._buffer_time
        self._delay = suppress.delay_ms
        cfg = suppress.suppressed.buffer_config
        self._records_limit = cfg.records_limit
        self._bytes_limit = cfg.bytes_limit
        self._bounded = cfg.is_bounded
        self._debug = debug_metrics
        self._track = cfg.bytes_limit is not None or debug_metrics
        self._index: dict[tuple[Any, int, int], tuple[Any, ...]] = {}
        """``(key identity, start, end)`` -> entry (:mod:`topology._key_identity`)."""
        self._originals: dict[tuple[Any, int, int], Any] = {}
        """Index key -> the key that created the entry, for keys not their own identity."""
        self._inner_identity, self._own = inner_key_identity(suppress.key_serializer)
        self._heap: list[tuple[int, bytes, int, tuple[Any, int, int]]] = []
        self._seq = 0  # buffering order: the tie-break between equal key bytes
        self._next_close = LONG_MAX  # window_close_time of the heap's head
        self._bytes = 0  # kept only when tracking bytes
        self.metrics = SuppressMetrics(self, debug_metrics)
        suppress.fused_change = self.change  # the aggregation's updates come here
        if isinstance(aggregate, SlidingWindowAggregateProcessor):
            aggregate.write_window = self._sliding_write(aggregate)

    # -- entries -------------------------------------------------------------------------------

    def record_entry(self) -> Forward:
        """Where records arrive: the aggregation's ``process``, or the inline session step."""
        step = self._session_step()
        if step is None:
            return self._agg.process

        def with_parts(key: Any, value: Any, ctx: RecordContext) -> None:
            step(key, value, ctx[:])

        return with_parts

    def raw_entry(self) -> Callable[[Any, Any, int, int, str], None]:
        """Where records piped without headers arrive: ``(key, value, ts, offset, topic)``."""
        step = self._session_step()
        if step is None:
            process = self._agg.process

            def with_context(key: Any, value: Any, ts: int, offset: int, topic: str) -> None:
                process(key, value, _new_tuple(RecordContext, (ts, offset, topic, 0, ())))

            return with_context

        def with_parts(key: Any, value: Any, ts: int, offset: int, topic: str) -> None:
            step(key, value, (ts, offset, topic, 0, ()))

        return with_parts

    def _session_step(self) -> Callable[[Any, Any, tuple[Any, ...]], None] | None:
        """For sessions in the in-memory store with built-in key serializers: the step.

        It takes a record's context as a plain tuple of its fields (``parts``), and builds a
        :class:`~suppress.entry.RecordContext` only where one leaves it. A record whose key
        has no stored session ending at or after ``ts - gap`` finds no session to merge with:
        the aggregation's steps for it are, in order, its stream time, ``initializer()``, the
        close rule on ``[ts, ts]`` (a drop, through the aggregation's late records),
        ``aggregator(...)``, the store write and the update of ``[ts, ts]``. A record with
        sessions near takes the aggregation's steps in its order (``merge``): the query (read
        as ``(end, start, aggregate)`` by key bytes), ``initializer()``, the merger over the
        open ones, the close rule, each merged session's removal and tombstone, then
        ``aggregator(...)``, the write and the update. Updates of unsized entries run inline
        (``update``, ``tombstone``), the rest through :meth:`change`. A null key goes to the
        aggregation's ``process``. ``None`` when the conditions do not hold.
        Both closures refer to ``self`` (on their rare paths), so that a failure of the user
        code they call is located at the aggregation (the task names the innermost frame
        whose ``self`` is a node).
        """
        agg = self._agg
        if not isinstance(agg, SessionWindowAggregateProcessor):
            return None
        store = agg._store
        if type(store) is not InMemorySessionStore:
            return None
        key_ser: Callable[[Any], bytes | None] = store._key_bytes
        if (not runs_no_user_code(key_ser)
                or session_windowed_inner(self._node.key_serializer) is not key_ser):
            return None
        late = agg.late
        engine, index = self._engine, self._index
        gap, delay = agg._gap, agg._delay
        initializer, aggregator = agg._initializer, agg._aggregator
        counting = initializer is count_initializer and aggregator is count_adder
        latest_end, near, write = store._latest_end, store._near, store._write_bytes
        merger = agg._merger
        change, buffer = self.change, self._buffer
        identity_of = self._inner_identity
        assert identity_of is not None  # a built-in key serializer (checked above)
        new_tuple = _new_tuple
        plain = not self._track  # entries unsized and no DEBUG samples: updates run inline
        emit, enforce = self._emit_closed, self._enforce

        def after_put() -> None:
            """:meth:`change`'s last step: emit what is due (and check the capacity)."""
            if self._bounded:
                enforce()
            elif engine.stream_time >= self._next_close:  # the heap's head is closed
                emit()

        def update(kb: bytes, key: Any, identity: Any, start: int, end: int, new: Any,
                   parts: tuple[Any, ...]) -> None:
            """:meth:`change` of session ``[start, end]`` to ``new`` (``parts`` at ``end``).

            Unsized entries are buffered here: a new one's key bytes are the store's key bytes
            and the packed bounds, as the node's serializer writes them, and its buffer time
            the exclusive end ``end + 1``.
            """
            if not plain:
                change(new_tuple(Windowed, (key, new_tuple(Window, (start, end)))), new, None,
                       new_tuple(RecordContext, parts))
                return
            if end > engine.stream_time:
                engine.stream_time = end
            index_key = (identity, start, end)
            entry = index.get(index_key)
            if entry is not None:
                index[index_key] = (new, None, parts, entry[_PRIOR], entry[_KEY_BYTES], 0)
            else:
                key_bytes = kb + pack_session_bounds(start, end)
                buffer(index_key, end + 1, key_bytes, (new, None, parts, None, key_bytes, 0),
                       key)
            after_put()

        def tombstone(key: Any, identity: Any, start: int, end: int, old: Any,
                      parts: tuple[Any, ...]) -> None:
            """:meth:`change` of session ``[start, end]`` to a tombstone (``parts`` at ``end``).

            An entry buffered for the session (an open one has one) is replaced here.
            """
            index_key = (identity, start, end)
            entry = index.get(index_key) if plain else None
            if entry is None:
                change(new_tuple(Windowed, (key, new_tuple(Window, (start, end)))), None, old,
                       new_tuple(RecordContext, parts))
                return
            if end > engine.stream_time:
                engine.stream_time = end
            index[index_key] = (None, old, parts, entry[_PRIOR], entry[_KEY_BYTES], 0)
            after_put()

        def merge(key: Any, identity: Any, value: Any, parts: tuple[Any, ...], kb: bytes,
                  ts: int) -> None:
            """The aggregation's steps for a record with sessions near, in its order."""
            found = near(kb, ts - gap, ts + gap)
            if ts > agg.stream_time:
                agg.stream_time = ts
            now = agg.stream_time
            closed = last_closed_end(delay, now)  # a session with end + 1 <= closed is closed
            start = end = ts
            merged = []
            acc: Any = 0 if counting else initializer()
            for found_end, found_start, found_agg in found:
                if found_end + 1 <= closed:
                    continue  # its final result is due or out: it takes no more records
                merged.append((found_start, found_end, found_agg))
                acc = merger(key, acc, found_agg)
                if found_start < start:
                    start = found_start
                if found_end > end:
                    end = found_end
            if end + 1 <= closed:
                self._agg.late.drop(key, value, new_tuple(RecordContext, parts), start, end,
                                    now - delay, now)
                return
            rest = parts[1:]
            if start != ts or end != ts:
                send_old = agg._old
                for found_start, found_end, found_agg in merged:
                    write(kb, key, found_start, found_end, None)
                    tombstone(key, identity, found_start, found_end,
                              found_agg if send_old else None,
                              (found_end, *rest))
            acc = acc + 1 if counting else aggregator(key, value, acc)
            write(kb, key, start, end, acc)
            update(kb, key, identity, start, end, acc, parts if end == ts else (end, *rest))

        def step(key: Any, value: Any, parts: tuple[Any, ...]) -> None:
            if key is None:
                self._agg.process(key, value, new_tuple(RecordContext, parts))
                return
            ts = parts[0]
            kb = key_ser(key) or b""
            if latest_end(kb) >= ts - gap:  # a session may be near
                merge(key, identity_of(key), value, parts, kb, ts)
                return
            if ts > agg.stream_time:
                agg.stream_time = ts
            now = agg.stream_time
            if counting:
                new: Any = 0
            else:
                new = initializer()
            if is_window_closed(ts + 1, delay, now):
                late.drop(key, value, new_tuple(RecordContext, parts), ts, ts, now - delay, now)
                return
            new = 1 if counting else aggregator(key, value, new)
            write(kb, key, ts, ts, new)
            update(kb, key, identity_of(key), ts, ts, new, parts)

        return step

    def _sliding_write(self, agg: SlidingWindowAggregateProcessor) -> WindowWrite:
        """The sliding aggregation's window write, its update buffered here (plain values).

        The aggregation's own store write first, then what :meth:`change` does with the
        update, without building the windowed key and the context: the entry is indexed by
        ``(key, start, end)``, its key bytes come from the suppression node
        (:meth:`~topology.runtime.processors.suppress.SuppressNodeProcessor.windowed_key_bytes`,
        so an error is located there) and its buffer time is the exclusive end ``end + 1``.
        Sized entries and DEBUG samples go through :meth:`change`.
        """
        put, d = agg._put, agg._d
        engine, index = self._engine, self._index
        key_bytes = self._node.windowed_key_bytes
        change, enforce, buffer = self.change, self._enforce, self._buffer
        own, index_key_of = self._own, self._index_key
        new_tuple = _new_tuple

        def write(key: Any, start: int, new: Any, old: Any, timestamp: int,
                  ctx: RecordContext) -> None:
            put(key, start, new, timestamp)
            end = start + d
            if self._track:
                change(new_tuple(Windowed, (key, new_tuple(Window, (start, end)))), new, old,
                       ctx.with_timestamp(timestamp))
                return
            if timestamp > engine.stream_time:
                engine.stream_time = timestamp
            index_key = (key, start, end) if key.__class__ is own else index_key_of(key, start,
                                                                                    end)
            entry = index.get(index_key)
            parts = ctx[:] if ctx[0] == timestamp else (timestamp, *ctx[1:])
            if entry is not None:
                index[index_key] = (new, old, parts, entry[_PRIOR], entry[_KEY_BYTES], 0)
            else:
                kb = key_bytes(key, start, end)
                buffer(index_key, end + 1, kb, (new, old, parts, old, kb, 0), key)
            if self._bounded or engine.stream_time >= self._next_close:
                enforce()

        return write

    def _index_key(self, key: Any, start: int, end: int) -> tuple[Any, int, int]:
        """``(identity, start, end)`` of window ``[start, end]`` of ``key``.

        Without an identity of inner keys (a user's windowed serde), the identity is the
        windowed key's bytes.
        """
        if key.__class__ is self._own:
            return key, start, end
        inner = self._inner_identity
        if inner is None:
            return self._node.windowed_key_bytes(key, start, end), start, end
        return inner(key), start, end

    def _key_of(self, index_key: tuple[Any, int, int]) -> Any:
        """The key of the entry at ``index_key``."""
        originals = self._originals
        return index_key[0] if not originals else originals.get(index_key, index_key[0])

    def _buffer(self, index_key: tuple[Any, int, int], time: int, key_bytes: bytes,
                entry: tuple[Any, ...], key: Any) -> None:
        """Buffer ``key``'s new entry: its heap item at buffer ``time`` (ms), in buffering order."""
        if index_key[0] is not key:
            self._originals[index_key] = key
        self._seq += 1
        heap = self._heap
        heapq.heappush(heap, (time, key_bytes, self._seq, index_key))
        self._index[index_key] = entry
        if heap[0][0] == time:
            self._next_close = window_close_time(time, self._delay)

    def change(self, key: Any, new: Any, old: Any, ctx: RecordContext) -> None:
        """Buffer one table update of window ``key``; emit what is due (module docstring)."""
        engine = self._engine
        ts = ctx[0]
        if ts > engine.stream_time:
            engine.stream_time = ts
        inner, (start, end) = key
        index_key = self._index_key(inner, start, end)
        entry = self._index.get(index_key)
        if entry is not None:
            size = 0
            if self._track:  # sized first: a serializer error leaves the entry as it was
                size = self._size_of(entry[_KEY_BYTES], entry[_PRIOR], old, new, ctx)
                self._bytes += size - entry[_SIZE]
            self._index[index_key] = (new, old, ctx[:], entry[_PRIOR], entry[_KEY_BYTES], size)
        else:
            key_bytes = self._node.key_bytes(key)
            size = self._size_of(key_bytes, old, old, new, ctx) if self._track else 0
            self._buffer(index_key, self._buffer_time(key), key_bytes,
                         (new, old, ctx[:], old, key_bytes, size), inner)
            self._bytes += size
        if self._debug:
            self.metrics.sample()
        if self._bounded or engine.stream_time >= self._next_close:
            self._enforce()

    def _enforce(self) -> None:
        """Emit what is closed at the suppression's time, then check the capacity."""
        heap = self._heap
        if heap and is_window_closed(heap[0][0], self._delay, self._engine.stream_time):
            self._emit_closed()
            if self._debug:
                self.metrics.sample()
        records_limit, bytes_limit = self._records_limit, self._bytes_limit
        if (records_limit is not None and len(self._index) > records_limit) or (
                bytes_limit is not None and self._bytes > bytes_limit):
            raise BufferFullError(self._node.name, len(self._index), records_limit,
                                  self.size_bytes, bytes_limit)

    def _emit_closed(self) -> None:
        """Emit every closed window in order; each leaves the buffer after it went out."""
        heap, index, delay = self._heap, self._index, self._delay
        closed = last_closed_end(delay, self._engine.stream_time)
        forward = self._node.forward_change
        metrics = self.metrics
        pop = heapq.heappop
        new_tuple = _new_tuple
        while heap and heap[0][0] <= closed:
            index_key = heap[0][3]
            entry = index[index_key]
            new = entry[_NEW]
            if new is not None:  # a window that ended deleted has no final result
                metrics.emit_total += 1
                _, start, end = index_key
                key = self._key_of(index_key)
                forward(new_tuple(Windowed, (key, new_tuple(Window, (start, end)))), new,
                        entry[_OLD], new_tuple(RecordContext, entry[_CTX]))
            pop(heap)
            del index[index_key]
            if self._originals:
                self._originals.pop(index_key, None)
            self._bytes -= entry[_SIZE]
        self._next_close = window_close_time(heap[0][0], delay) if heap else LONG_MAX

    def _size_of(self, key_bytes: bytes, prior: Any, old: Any, new: Any,
                 ctx: RecordContext) -> int:
        """Kafka's size of an entry holding these values (serialized by the node)."""
        value_bytes = self._node.value_bytes
        prior_bytes = value_bytes(prior)
        old_bytes = prior_bytes if old is prior else value_bytes(old)
        return entry_size(key_bytes, prior_bytes, old_bytes, value_bytes(new),
                          context_size(ctx))

    # -- the suppression as observers see it ---------------------------------------------------

    @property
    def stream_time(self) -> int:
        """The suppression's stream time (ms)."""
        return self._engine.stream_time

    @property
    def num_records(self) -> int:
        """Buffered windows."""
        return len(self._index)

    @property
    def size_bytes(self) -> int:
        """Kafka's size estimate of the buffer (kept, or computed on demand)."""
        if self._track:
            return self._bytes
        return sum(self._size_of(entry[_KEY_BYTES], entry[_PRIOR], entry[_OLD], entry[_NEW],
                                 _new_tuple(RecordContext, entry[_CTX]))
                   for entry in self._index.values())

    def buffered(self) -> list[tuple[Any, Any, int]]:
        """``(key, value, timestamp)`` of every buffered entry, in eviction order."""
        index = self._index
        return [(_windowed(self._key_of(index_key), index_key), index[index_key][_NEW],
                 index[index_key][_CTX][0])
                for index_key in (item[3] for item in sorted(self._heap))]

    def _check(self) -> None:
        """Assert the invariants (tests call it).

        One heap item per buffered window, with its buffer time and key bytes; the head's
        close time is kept; the byte total (when tracked) is the sum of the entries' sizes.
        """
        heap, index = self._heap, self._index
        assert len(heap) == len(index), "heap and index disagree"
        for time, key_bytes, _, index_key in heap:
            entry = index[index_key]
            assert entry[_KEY_BYTES] == key_bytes, f"{index_key}: key bytes"
            assert self._buffer_time(_windowed(self._key_of(index_key), index_key)) == time, \
                f"{index_key}: buffer time"
            assert type(entry[_CTX]) is tuple, f"{index_key}: a context's fields, plainly"
        for i in range(1, len(heap)):
            assert heap[(i - 1) // 2] < heap[i], "heap order broken"
        expected = window_close_time(heap[0][0], self._delay) if heap else LONG_MAX
        assert self._next_close == expected, "stale close time"
        if self._track:
            assert self._bytes == sum(entry[_SIZE] for entry in index.values()), "byte total"


def _windowed(key: Any, index_key: tuple[Any, int, int]) -> Windowed:
    """The windowed key of ``key``'s entry indexed as ``(identity, start, end)``."""
    _, start, end = index_key
    return Windowed(key, Window(start, end))
