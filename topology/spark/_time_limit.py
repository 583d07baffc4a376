"""A table's ``until_time_limit`` suppression as a batched ``transformWithStateInPandas`` processor.

Spark has no operator for it, and a processor grouped per key pays a state-store round trip
per key and micro-batch (measured at about 30 times slower than Spark's own aggregation).
So the keys of each input partition are grouped into :data:`BUCKETS` buckets by a hash of
their bytes (one bucket per partition for a bounded buffer, see :func:`buckets`): one call
handles every record of such a key group in a micro-batch, and the group's whole buffer and
its partition's stream time are one state value (the state codec's bytes, never pickle),
read once and written once. The records reach it packed: one row per group and input batch
of the ``mapInArrow`` stage before it (:func:`~topology.spark._stages.packed_frame`),
followed by the stage's ticks, so Spark moves, sorts and converts to pandas a few rows per
micro-batch, not one per record.

Inside a call the library's own :class:`~suppress.processor.SuppressProcessor` does the work,
restored from the state value, on the records in arrival order, with the task's stream time:
before each record, the largest timestamp its partition routed to the suppression before it
(see :func:`~topology.spark._stages.unpacked`), so keys due before a record leave with the
value they had then; at the end of the call, the largest of the micro-batch, which a group
learns from its partition's ticks even without a record of its own, so the keys it made due
leave in that micro-batch. The processor runs without a time mode: no timers, and Spark's
watermark drops none of its input (a record behind its partition's time is buffered as a
task buffers it).

A ``max_bytes`` bound counts each buffered change's old value, the key's previous value in
the table, as a task's buffer does: with such a bound the table's own processor runs ahead
of the suppression, over the table's rows, a row of Spark's state per key (see
:class:`~topology.spark._stages.FiledRows`: a call reads and writes the rows its records
name). Without one the old values change nothing the suppression emits, and no rows are
kept.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd  # type: ignore[import-untyped]
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BinaryType, StructField, StructType

from suppress import BufferConfig, Suppressed
from suppress.entry import RecordContext
from suppress.processor import SuppressProcessor

from .._key_identity import key_identity
from ._compile import ChainSpec, TimeLimitSpec
from ._stages import (
    BUCKETS,
    ROW_KEY,
    ROW_VALUE,
    BucketHost,
    Chain,
    FiledRows,
    buffered,
    changes_only,
    load_state,
    outputs_frame,
    rebuffer,
    save_state,
    time_and_state,
    timed_state,
    unpacked,
)

__all__ = ("BUCKETS", "TimeLimitProcessor", "buckets", "keeps_table")


def buckets(spec: TimeLimitSpec) -> int:
    """How many key buckets the suppression runs in (one for a bounded buffer).

    A bound (which key it evicts, or whether it shuts down) is the whole buffer's, as in a
    task, so a bounded buffer is not split.
    """
    return 1 if spec.buffer_config is not None else BUCKETS


def keeps_table(spec: TimeLimitSpec) -> bool:
    """Whether the suppression needs the table's rows.

    A ``max_bytes`` bound counts each change's old value (see the module docstring).
    """
    return spec.buffer_config is not None and spec.buffer_config.bytes_limit is not None


_STATE = StructType([StructField("buffer", BinaryType())])


class TimeLimitProcessor(StatefulProcessor):
    """The suppression of one key group; emits the post chain's records as a frame."""

    def __init__(self, spec: TimeLimitSpec, post: ChainSpec) -> None:
        self._spec = spec
        self._post = post

    def init(self, handle: StatefulProcessorHandle) -> None:
        """Open the group's state: stream time and buffer (and the table's rows)."""
        self._buffer = handle.getValueState("buffer", _STATE)
        self._rows = handle.getMapState("table", ROW_KEY, ROW_VALUE) \
            if keeps_table(self._spec) else None

    def _restore(self) -> tuple[SuppressProcessor, Chain]:
        chain = Chain(self._post)
        spec = self._spec
        engine = SuppressProcessor(
            spec.name, Suppressed.until_time_limit(spec.delay_ms, spec.buffer_config
                                                   or BufferConfig.unbounded()),
            spec.delay_ms, lambda key, new, old, ctx: chain.feed_change(key, new, ctx),
            spec.key_serializer, spec.value_serializer,  # type: ignore[arg-type]
            key_identity=key_identity(spec.key_serializer))
        stream_time, entries = time_and_state(load_state(self._buffer), spec.name)
        rebuffer(engine.buffer, entries)
        engine.advance_stream_time(stream_time)
        return engine, chain

    def _table(self, engine: SuppressProcessor) -> tuple[Any, FiledRows]:
        """The table's processor, feeding ``engine`` its changes, over the group's rows.

        Its records have keys (the stage before drops null keys and counts them), so the
        table drops nothing here.
        """
        spec = self._spec
        host = BucketHost(spec.store, spec.store_factory)
        rows = FiledRows(host.stores[spec.store], spec.key_serializer, self._rows)
        table: Any = spec.table_factory()
        table.name = spec.table
        table.init(host)
        table.connect([changes_only(engine.process_change)])
        return table, rows

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame],  # noqa: N802
                        timerValues: Any) -> Iterator[pd.DataFrame]:  # noqa: N803
        """Buffer the group's records of the micro-batch, in arrival order.

        Each row is a pack of records or a tick (see
        :func:`~topology.spark._stages.packed_frame`): the stream time moves to each
        record's partition time before it, and to the micro-batch's at the end, emitting
        the keys due by then.
        """
        records, time, _ = unpacked(rows)
        engine, chain = self._restore()
        advance = engine.advance_stream_time
        if self._rows is None:
            process = engine.process_change
            for k, v, ts, h, _, st, topic in records:
                advance(st)
                process(k, v, None, RecordContext(ts, -1, topic, 0, h))
        else:
            table, kept = self._table(engine)
            for k, v, ts, h, _, st, topic in records:
                advance(st)
                kept.open(k)
                table.process(k, v, RecordContext(ts, -1, topic, 0, h))
            kept.save()
        advance(time)
        save_state(self._buffer, timed_state(engine.stream_time, buffered(engine.buffer)))
        yield _pandas(chain)

    def close(self) -> None:
        """Nothing to release."""


def _pandas(chain: Chain) -> pd.DataFrame:
    """The records that left the post chain, packed, as a pandas frame."""
    return outputs_frame(chain.take()).to_pandas()
