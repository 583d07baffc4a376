"""Sliding windows with final results as a batched ``transformWithStateInPandas`` processor.

Spark's windows start at fixed multiples of the slide; a sliding window starts at each
record, so no Spark operator computes them. As for the time limit
(:mod:`topology.spark._time_limit`), keys are grouped into :data:`BUCKETS` buckets by a hash
of their bytes (a null key: bucket 0, where the aggregation drops and counts it): one call
handles every record of a bucket in a micro-batch, and the bucket's whole state is one state
value (a pickle written and read only by this processor), read once and written once: the
windows its keys may still update, and the suppression's buffer.

Inside a call the library's own parts do the work, as in a task: the topology's
:class:`~topology.runtime.processors.sliding.SlidingWindowAggregateProcessor` on the
topology's in-memory window store (the windows restored into it), feeding the suppression
engine with ``until_window_closes``, whose final results go through the post chain. Records
go in arrival order. The stream time is the time limit's: at the start of a micro-batch,
Spark's watermark (the largest timestamp of the earlier micro-batches), and before each
record also the largest timestamp that reached the aggregation earlier in the same
partition of the micro-batch (the ``st`` column). The aggregation drops a record whose
windows are closed for that time and counts it (``dropped-records-total``, in the call's
``SlidingBucket.host.metrics``, and logged on the executor), as a task does; a call sends its
drops on as :data:`~topology.spark._compile.DROPS` rows, which the runner counts in its
metrics.
Windows that become due without another record of their bucket leave through an
event-time timer at their close time, which Spark fires once the watermark reaches it (at
the latest in its last micro-batch without data).

The records reach the processor without an event-time column (it is dropped after the
watermark is taken from it), so Spark drops none of them as late: the aggregation decides,
and counts, as in a task.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

import pandas as pd  # type: ignore[import-untyped]
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BinaryType, StructField, StructType

from suppress import BufferConfig, Suppressed
from suppress.entry import RecordContext
from suppress.processor import SuppressProcessor

from ..runtime.metrics import TaskMetrics
from ..runtime.processor import Entry
from ._compile import ChainSpec, SlidingSpec
from ._stages import Chain, Out, drop_counts, drop_frame, frame, save_bucket

__all__ = ("BUCKETS", "SlidingBucket", "SlidingWindowsProcessor")

BUCKETS = 8
"""Key buckets: groups of ``transformWithState``; each call handles a bucket's records."""

_STATE = StructType([StructField("windows", BinaryType())])


class _BucketHost:
    """What the aggregation reads of its task: its window store and the drop counters.

    Drops (null keys or values, records for closed windows) are counted here and logged on
    the executor, as a task logs them.
    """

    def __init__(self, spec: SlidingSpec) -> None:
        self.stores = {spec.store: spec.store_factory()}
        self.metrics = TaskMetrics()


class SlidingBucket:
    """One call's work on one bucket: its state restored, records in, results and state out.

    :param state: the bucket's state value as :meth:`state` wrote it, or ``None``.
    :param stream_time: the stream time when the call starts (Spark's watermark), in ms.
    """

    def __init__(self, spec: SlidingSpec, post: ChainSpec, state: bytes | None,
                 stream_time: int) -> None:
        self._spec = spec
        self.chain = chain = Chain(post)
        self.host = host = _BucketHost(spec)
        self.engine = engine = SuppressProcessor(
            spec.suppression, Suppressed.until_window_closes(BufferConfig.unbounded()),
            spec.grace_ms, lambda key, new, old, ctx: chain.feed_change(key, new, ctx),
            spec.suppression_key_serializer, spec.value_serializer,  # type: ignore[arg-type]
            buffer_time_of=spec.buffer_time)
        self._store = store = host.stores[spec.store]
        aggregate: Any = spec.factory()
        aggregate.name = spec.name
        aggregate.init(host)
        aggregate.connect([Entry(_no_record, engine.process_change, engine.process_change)])
        self.aggregate = aggregate
        if state is not None:
            windows, buffered = pickle.loads(state)
            for key, start, value, ts in windows:
                store.put_with_timestamp(key, value, start, ts)
            aggregate.reindex()
            buffer = engine.buffer
            for time, key, new, old, prior, ctx in buffered:
                context = RecordContext(*ctx)
                buffer.put(time, key, new, prior, context)  # a new entry: its prior
                buffer.put(time, key, new, old, context)  # then its latest change
        self.advance(stream_time)

    def advance(self, stream_time: int) -> None:
        """Move the stream time to ``stream_time`` (ms) if later; emit what is due."""
        if stream_time > self.aggregate.stream_time:
            self.aggregate.stream_time = stream_time
        self.engine.advance_stream_time(stream_time)

    def process(self, key: Any, value: Any, ctx: RecordContext) -> None:
        """One record, into the aggregation (and its changes into the suppression)."""
        self.aggregate.process(key, value, ctx)

    def state(self) -> bytes | None:
        """The bucket's state value: the windows a record may still update, and the buffer.

        A window starting before ``T - grace - 3d - 1`` is never read again (an accepted
        record has ``t > T - grace - d - 1`` and looks back to ``t - 2d``): left out.
        ``None`` when nothing is kept.
        """
        spec = self._spec
        aggregate = self.aggregate
        oldest = aggregate.stream_time - spec.grace_ms - 3 * spec.time_difference_ms - 1
        store = self._store
        windows = []
        for windowed, _ in store.all():
            start = windowed.window.start
            if start >= oldest:
                value, ts = store.get_with_timestamp(windowed.key, start)
                windows.append((windowed.key, start, value, ts))
        buffered = [(e.time, e.key, e.new, e.old, e.prior, tuple(e.context))
                    for e in self.engine.buffer]
        if not windows and not buffered:
            return None
        return pickle.dumps((windows, buffered), protocol=pickle.HIGHEST_PROTOCOL)

    def due(self) -> int | None:
        """When the first buffered window closes (ms of stream time), or ``None``."""
        times = [e.time for e in self.engine.buffer]
        return min(times) + self._spec.grace_ms if times else None

    def take(self) -> list[Out]:
        """The records that left the post chain since the last call."""
        return self.chain.take()


def _no_record(key: Any, value: Any, ctx: RecordContext) -> None:
    raise TypeError("the sliding aggregation forwards changes, not records")


class SlidingWindowsProcessor(StatefulProcessor):
    """The sliding windows of one bucket of keys; emits the post chain's records as a frame."""

    def __init__(self, spec: SlidingSpec, post: ChainSpec) -> None:
        self._spec = spec
        self._post = post

    def init(self, handle: StatefulProcessorHandle) -> None:
        """Open the bucket's state: windows and buffer."""
        self._handle = handle
        self._state = handle.getValueState("windows", _STATE)

    def _restore(self, stream_time: int) -> SlidingBucket:
        held = self._state.get() if self._state.exists() else None
        return SlidingBucket(self._spec, self._post, None if held is None else held[0],
                             stream_time)

    def _save(self, bucket: SlidingBucket) -> None:
        save_bucket(self._handle, self._state, bucket.state(), bucket.due())

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame],  # noqa: N802
                        timerValues: Any) -> Iterator[pd.DataFrame]:  # noqa: N803
        """Aggregate the bucket's records of the micro-batch, in arrival order."""
        data = pd.concat(list(rows), ignore_index=True).sort_values("seq", kind="stable")
        bucket = self._restore(timerValues.getCurrentWatermarkInMs())
        loads = pickle.loads
        advance, process = bucket.advance, bucket.process
        for k, v, ts, h, st in zip(data["k"], data["v"], data["ts"].tolist(), data["h"],
                                   data["st"].tolist(), strict=True):
            advance(st)
            process(loads(k), loads(v),
                    RecordContext(ts, -1, "", 0, () if h is None else loads(h)))
        self._save(bucket)
        yield _pandas(bucket)
        drops = drop_counts(bucket.host.metrics.as_dict(), {})
        if drops:  # sent on as drop rows, which the runner counts in its metrics
            yield drop_frame(drops).to_pandas()

    def handleExpiredTimer(self, key: Any, timerValues: Any,  # noqa: N802 N803
                           expiredTimerInfo: Any) -> Iterator[pd.DataFrame]:  # noqa: N803
        """Emit the windows the watermark closed."""
        bucket = self._restore(timerValues.getCurrentWatermarkInMs())
        self._save(bucket)
        yield _pandas(bucket)

    def close(self) -> None:
        """Nothing to release."""


def _pandas(bucket: SlidingBucket) -> pd.DataFrame:
    """The records that left the post chain, as a pandas frame in the record layout."""
    batch, _ = frame(bucket.take(), None, 0)
    return batch.to_pandas()
