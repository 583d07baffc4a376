"""Aggregations of grouped streams as a batched ``transformWithStateInPandas`` processor.

Every aggregation of a grouped stream runs here (also one after an as-of join): without
windows, in time, session or sliding windows, with final results, rate-limited
(``until_time_limit``) or emitting every update. The keys of each input partition are
grouped into buckets by a hash of their bytes (:func:`buckets`: :data:`BUCKETS`, or one for a
bounded buffer, whose bound is the whole task's as in Kafka; a null key goes to bucket 0,
where the aggregation drops and counts it); a key group is a bucket of one partition
(:func:`~topology.spark._stages.group`). One call handles every record of a group in a
micro-batch, and the group keeps one state value (the state codec's bytes, never pickle),
read once and written once: its partition's stream time, the windows its keys may still
update, and the suppression's buffer. Without windows an aggregate never expires, so the
keys' aggregates are not in that value: each is a row of Spark's state store of its own, in
the group's map state under the key's bytes (:class:`~topology.spark._stages.FiledRows`).
A call reads and writes only the aggregates of the keys its records name, so its cost
follows its records, not the keys the group holds.

Inside a call the library's own parts do the work, as in a task: the topology's aggregation
on the topology's in-memory store (the state restored into it), feeding the topology's
suppression node (windowed final results by window, as a task's aggregation hands them; or,
without one, ``to_stream()`` with every update), whose results go through the post chain.
Records go in arrival order, and the stream time is the task's: before each record, the
largest timestamp its partition routed to the aggregation before it (earlier micro-batches,
earlier chunks, earlier records of its chunk: see
:func:`~topology.spark._stages.unpacked`), and at the end of the call the largest of the
micro-batch, which the group learns from its partition's ticks even without a record of its
own. The aggregation drops a record whose windows are closed for that time and counts it
(``dropped-records-total``, in the call's ``AggregationBucket.host.metrics``, and logged on
the executor), as a task does; a call sends its drops on as
:data:`~topology.spark._compile.DROPS` rows, which the runner counts in its metrics. A full
shut-down buffer raises :class:`~suppress.BufferFullError` in the call, which fails the
query, as it stops a task. The processor runs without a time mode: no timers, and Spark's
watermark drops none of its input.

The records reach the processor packed, one row per group and input batch of the
``mapInArrow`` stage before it (:func:`~topology.spark._stages.packed_frame`, which also
drops and counts null keys), followed by the stage's ticks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pandas as pd  # type: ignore[import-untyped]
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BinaryType, StructField, StructType

from suppress.entry import RecordContext
from suppress.processor import SuppressProcessor
from suppress.time import is_window_closed

from ..runtime.processors.suppress import SuppressNodeProcessor
from ..windows import Window, Windowed, time_window_end
from ._compile import BatchedAggregationSpec, ChainSpec
from ._stages import (
    BUCKETS,
    ROW_KEY,
    ROW_VALUE,
    BucketHost,
    Chain,
    FiledRows,
    Out,
    buffered,
    changes_only,
    drop_counts,
    drop_frame,
    load_state,
    longs,
    outputs_frame,
    rebuffer,
    save_state,
    time_and_state,
    timed_state,
    unlongs,
    unpacked,
)

__all__ = ("BUCKETS", "AggregationBucket", "BatchedAggregationProcessor", "buckets")

_STATE = StructType([StructField("windows", BinaryType())])


def buckets(spec: BatchedAggregationSpec) -> int:
    """How many key buckets the aggregation runs in: one for a bounded buffer.

    A bound (which key it emits early, or whether it shuts down) is the whole buffer's, as
    in a task, so a bounded buffer is not split.
    """
    return 1 if spec.bounded else BUCKETS


class AggregationBucket:
    """One call's work on one key group: its state restored, records in, results and state out.

    :param state: the group's state value as :meth:`state` wrote it, or ``None``.
    :param rows: the group's map state of aggregates by key (see
        :class:`~topology.spark._stages.FiledRows`); unused with windows.
    :raises IllegalStateError: for a state value of an earlier release (see
        :func:`~topology.spark._stages.time_and_state`).
    """

    def __init__(self, spec: BatchedAggregationSpec, post: ChainSpec, state: bytes | None,
                 rows: Any) -> None:
        self._spec = spec
        self.chain = chain = Chain(post)
        self.host = host = BucketHost(spec.store, spec.store_factory)

        def to_post(key: Any, new: Any, old: Any, ctx: RecordContext) -> None:
            chain.feed_change(key, new, ctx)

        post_entry = changes_only(to_post)
        self._store = host.stores[spec.store]
        aggregate: Any = spec.factory()
        aggregate.name = spec.name
        aggregate.init(host)
        self.aggregate = aggregate
        self.engine: SuppressProcessor | None = None
        if spec.suppressed is None:
            aggregate.connect([post_entry])
        else:
            suppression = _suppression(spec)
            suppression.init(host)  # type: ignore[arg-type]  # what it reads of a task
            suppression.connect([post_entry])
            change = suppression.change_entry()
            aggregate.connect([changes_only(change)])
            suppression.take_changes_from(aggregate)
            self.engine = suppression.engine
        self._windowed = spec.kind != "none"
        self.stream_time, kept = time_and_state(state, spec.name)
        held, kept_entries = (None, None) if kept is None else kept
        self._rows = None if self._windowed else FiledRows(self._store, spec.key_serializer,
                                                          rows)
        """Without windows: each key's aggregate, a row of its own (see the module docstring)."""
        if self._windowed and held is not None:
            self._restore(held)
        if self._windowed:
            aggregate.stream_time = self.stream_time
        if self.engine is not None:
            rebuffer(self.engine.buffer, kept_entries)
            self.engine.advance_stream_time(self.stream_time)
        raw_entry = getattr(aggregate, "raw_entry", None) if self._windowed else None
        self.raw: Callable[[Any, Any, int, int, str], None] | None = (
            None if raw_entry is None else raw_entry())
        """Where a record without headers may go instead of :meth:`process`, as ``(key,
        value, timestamp, offset, topic)``: the aggregation's entry for records a task
        takes without headers (its windows hand their changes to final results), which
        builds a context only where one is kept; ``None``: none."""

    def _restore(self, held: Any) -> None:
        """Put the kept windows back into the fresh store.

        ``held`` is :meth:`_windows`' columns, or a list of rows (the previous state form).
        """
        store, kind = self._store, self._spec.kind
        if isinstance(held, list):
            rows: Iterable[tuple[Any, ...]] = held
        else:
            keys, starts, third, fourth = held
            rows = (zip(keys, unlongs(starts), unlongs(third), fourth, strict=True)
                    if kind == "session" else
                    zip(keys, unlongs(starts), third, unlongs(fourth), strict=True))
        if kind == "session":
            for key, start, end, value in rows:
                store.put(Windowed(key, Window(start, end)), value)
        else:
            for key, start, value, ts in rows:
                store.put_with_timestamp(key, value, start, ts)
            if kind == "sliding":
                self.aggregate.reindex()

    def advance(self, stream_time: int) -> None:
        """Move the stream time to ``stream_time`` (ms) if later; emit what is due."""
        if stream_time <= self.stream_time:
            return
        self.stream_time = stream_time
        if self._windowed and stream_time > self.aggregate.stream_time:
            self.aggregate.stream_time = stream_time
        if self.engine is not None:
            self.engine.advance_stream_time(stream_time)

    def process(self, key: Any, value: Any, ctx: RecordContext) -> None:
        """One record, into the aggregation (and its changes on).

        Without windows, the first record of a key in the call brings the key's aggregate
        from its row into the store first.
        """
        if self._rows is not None:
            self._rows.open(key)
        self.aggregate.process(key, value, ctx)

    def state(self) -> bytes:
        """The group's state value: stream time, windows that may still change, buffer.

        Without windows, the aggregates the call changed are written to their rows instead
        (see the module docstring).
        """
        held = None
        if self._rows is None:
            held = self._windows()
        else:
            self._rows.save()
        entries = None if self.engine is None else buffered(self.engine.buffer)
        return timed_state(self.stream_time,
                           None if held is None and entries is None else (held, entries))

    def _windows(self) -> tuple[Any, ...] | None:
        """The windows a record may still update, by column; ``None`` for none.

        The columns, as :meth:`_restore` takes them back: keys, starts (an int64 array,
        :func:`~topology.spark._stages.longs`), then ends (int64) and values for sessions,
        values and timestamps (int64) for the other windows.
        """
        spec, store = self._spec, self._store
        keeps = _keeps(spec, self.aggregate.stream_time)
        keys: list[Any] = []
        starts: list[int] = []
        if spec.kind == "session":
            ends, values = [], []
            for windowed, value in store.all():
                window = windowed.window
                if keeps(window):
                    keys.append(windowed.key)
                    starts.append(window.start)
                    ends.append(window.end)
                    values.append(value)
            return (tuple(keys), longs(starts), longs(ends), tuple(values)) if keys else None
        values, stamps = [], []
        size = store.window_size_ms
        for start, items in store.items_by_start():
            if not keeps(Window(start, time_window_end(start, size))):
                continue
            for key, value, ts in items:
                keys.append(key)
                starts.append(start)
                values.append(value)
                stamps.append(ts)
        return (tuple(keys), longs(starts), tuple(values), longs(stamps)) if keys else None

    def take(self) -> list[Out]:
        """The records that left the post chain since the last call."""
        return self.chain.take()


def _suppression(spec: BatchedAggregationSpec) -> SuppressNodeProcessor:
    """The aggregation's suppression node, as the topology builds it, with the spec's config.

    Final results of windows whose keys have a built-in windowed layout keep them by parts,
    so the aggregation hands it each change by window (as in a task; with a windowed serde of
    the user's, windowed keys); a spilling buffer is the unbounded one here (see
    :class:`~topology.spark._compile.BatchedAggregationSpec`), given before the node is
    initialised, which builds its buffer from it.
    """
    assert spec.suppressed is not None and spec.suppression is not None \
        and spec.suppression_factory is not None
    node = spec.suppression_factory()
    assert isinstance(node, SuppressNodeProcessor)
    node.suppressed = spec.suppressed
    node.name = spec.suppression
    return node


def _keeps(spec: BatchedAggregationSpec, stream_time: int) -> Callable[[Window], bool]:
    """Whether a window may still take a record at ``stream_time`` or later (ms).

    Time windows and sessions: those not closed (a session's end is inclusive). Sliding
    windows: those starting at ``T - grace - 3d - 1`` or later (an accepted record has
    ``t > T - grace - d - 1`` and looks back to ``t - 2d``).
    """
    if spec.kind == "time":
        return lambda window: not is_window_closed(window.end, spec.grace_ms, stream_time)
    if spec.kind == "session":
        delay = spec.span_ms + spec.grace_ms
        return lambda window: not is_window_closed(window.end + 1, delay, stream_time)
    oldest = stream_time - spec.grace_ms - 3 * spec.span_ms - 1
    return lambda window: window.start >= oldest


class BatchedAggregationProcessor(StatefulProcessor):
    """The aggregation of one key group; emits the post chain's records as a frame."""

    def __init__(self, spec: BatchedAggregationSpec, post: ChainSpec) -> None:
        self._spec = spec
        self._post = post

    def init(self, handle: StatefulProcessorHandle) -> None:
        """Open the group's state: stream time, windows, buffer (and aggregates by key)."""
        self._state = handle.getValueState("windows", _STATE)
        self._rows = None if self._spec.kind != "none" else handle.getMapState(
            "aggregates", ROW_KEY, ROW_VALUE)

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame],  # noqa: N802
                        timerValues: Any) -> Iterator[pd.DataFrame]:  # noqa: N803
        """Aggregate the group's records of the micro-batch, in arrival order.

        Each row is a pack of records or a tick (see
        :func:`~topology.spark._stages.packed_frame`): the stream time moves to each
        record's partition time before it, and to the micro-batch's at the end.
        """
        records, time, _ = unpacked(rows)
        bucket = AggregationBucket(self._spec, self._post, load_state(self._state), self._rows)
        advance, process, raw = bucket.advance, bucket.process, bucket.raw
        for k, v, ts, h, _, st, topic in records:
            advance(st)
            if raw is not None and not h:
                raw(k, v, ts, -1, topic)
            else:
                process(k, v, RecordContext(ts, -1, topic, 0, h))
        advance(time)
        save_state(self._state, bucket.state())
        yield _pandas(bucket)
        drops = drop_counts(bucket.host.metrics.as_dict(), {})
        if drops:  # sent on as drop rows, which the runner counts in its metrics
            yield drop_frame(drops).to_pandas()

    def close(self) -> None:
        """Nothing to release."""


def _pandas(bucket: AggregationBucket) -> pd.DataFrame:
    """The records that left the post chain, packed, as a pandas frame."""
    return outputs_frame(bucket.take()).to_pandas()
