"""A stream's as-of join with a versioned table in a batched ``transformWithStateInPandas``.

Table updates and stream records reach one ``transformWithStateInPandas`` packed per key
group, as the aggregations' do (:func:`~topology.spark._stages.packed_frame`): a group is a
hash bucket of the table's key bytes within an input partition (:data:`BUCKETS` buckets;
one with a grace period or an aggregation after the join, see below; after a re-key, the
one repartition partition's), and
one call handles every record of a group in a micro-batch. A ``None`` key goes to bucket 0:
a left join joins it, the table source and an inner join drop and count it. Each key's
table history is a row of Spark's state store of its own, in the group's map state under
the key's bytes (the state codec's bytes, never pickle).

Inside a call the library's own parts do the work, as in a task: the topology's versioned
table source writes each update into the topology's own in-memory versioned store (history
retention and rejected writes are the store's), and the topology's join processor looks each
stream record up in it as of the record's timestamp (with its grace buffer, if any), then the
joined chain (the stateless steps after the join) runs on the joined records, up to output
topics or an aggregation after the join, whose batched processor gets them packed from here.
Its drops (null keys or values, out-of-order or expired table updates) leave as
:data:`~topology.spark._stages.DROPS` rows, which the runner counts in its metrics.
A call takes its records in the task's order (:func:`~topology.spark._stages.unpacked`):
each topic's in arrival order, the table's and the stream's merged lowest head timestamp
first, as a task's ``PartitionGroup`` merges them; a record is a table update when it was
read from the table's topic. The records leaving for an aggregation after the join are
packed for its key groups in the order the call emits them, with their running time and
ticks (:meth:`AsOfJoinProcessor._outputs`).

A key group keeps, besides those rows, one state value: the store's observed stream time,
the keys whose newest version is a delete (with its timestamp), and the join's grace buffer
(its own checkpoint). A call reads and restores only the histories of the keys its records
name and of the stream records its grace buffer holds (the store's :meth:`restore` of those
keys, then the observed stream time), and writes again only those that changed: a table
update named the key, or retention took versions. A history whose newest version is a
delete older than the retention's cutoff is removed without reading it, so deleted keys do
not pile up. The other keys' rows are not touched, so a call's cost follows its records,
not the table; a key not named since may keep versions that fell out of retention (at most
the versions it had when it was last named) until it is named again. The observed stream
time, which decides what retention hides, is the group's: the newest table update among
the group's keys, where a task's counts every key of its partition. With a grace period
the join's buffer time is the largest stream timestamp the processor has seen; a task has
one processor for all its keys, so the runner then uses one bucket per input partition,
which keeps that time (and so which records are still held) the task's.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import repeat
from typing import Any

import pandas as pd  # type: ignore[import-untyped]
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BinaryType, StructField, StructType

from suppress.entry import RecordContext

from ..runtime.processor import InternalProcessor
from ..state.codec import decode, encode
from ._aggregations import buckets as aggregation_buckets
from ._compile import BatchedAggregationSpec, ChainSpec, JoinSpec
from ._stages import (
    BUCKETS,
    CHUNK_BITS,
    ROW_KEY,
    ROW_VALUE,
    BucketHost,
    Chain,
    drop_counts,
    drop_frame,
    frame,
    load_state,
    longs,
    packed_frame,
    save_state,
    tick_rows,
    time_and_state,
    timed_state,
    unlongs,
    unpacked,
)

__all__ = ("BUCKETS", "AsOfJoinProcessor", "buckets")

_STATE = StructType([StructField("history", BinaryType())])


def buckets(spec: JoinSpec) -> int:
    """How many key buckets per input partition the join runs in.

    One with a grace period, or when an aggregation follows: then the time (of the grace
    buffer, of the aggregation) is the task's. See the module docstring.
    """
    return 1 if spec.grace_ms is not None or spec.feeds_aggregation else BUCKETS


def _history(row: tuple[Any, ...]) -> tuple[Any, Sequence[Any], Sequence[int]]:
    """A key's history row: the key, its versions' values and timestamps (ms), oldest first.

    A row is ``(key, values, timestamps)``, the timestamps an int64 array
    (:func:`~topology.spark._stages.longs`); one of the previous state form is ``(key,
    [(value, timestamp), ...])``.
    """
    if len(row) == 2:
        key, versions = row
        return key, [value for value, _ in versions], [ts for _, ts in versions]
    key, values, stamps = row
    return key, values, unlongs(stamps)


def _no_keyspace(name: str) -> Any:
    raise TypeError(f"the join keeps no keyspace state, asked for {name!r}")


class AsOfJoinProcessor(StatefulProcessor):
    """The as-of join of one key group; emits the joined chain's records as a frame.

    ``aggregation`` (the aggregation after the join, if any) gets the records routed on to
    it packed per key group of its own, with ticks, as the pre stage packs its input
    (:func:`~topology.spark._stages.packed_frame`); ``rekeyed``: they reach it through a
    repartition, whose one partition takes every group's.
    """

    def __init__(self, spec: JoinSpec, joined: ChainSpec,
                 aggregation: BatchedAggregationSpec | None = None,
                 rekeyed: bool = False) -> None:
        self._spec = spec
        self._joined = joined
        self._aggregation = aggregation
        self._rekeyed = rekeyed

    def init(self, handle: StatefulProcessorHandle) -> None:
        """Open the bucket's state: its value, and the table histories by key."""
        self._state = handle.getValueState("history", _STATE)
        self._rows = handle.getMapState("histories", ROW_KEY, ROW_VALUE)

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame],  # noqa: N802
                        timerValues: Any) -> Iterator[pd.DataFrame]:  # noqa: N803
        """Apply the group's table updates and join its stream records, in the task's order."""
        spec = self._spec
        (group,) = key
        records, _, _ = unpacked(rows)
        host = BucketHost(spec.store, spec.store_factory)
        host.metrics.versioned_stores = list(host.stores.values())
        store = host.stores[spec.store]
        table: InternalProcessor = spec.table_factory()
        table.name = spec.table
        table.init(host)  # type: ignore[arg-type]
        table.connect([])
        chain = Chain(self._joined)
        join = chain.roots("")[0]
        join.init(host)  # type: ignore[arg-type]
        observed, deleted, buffered = self._load()
        key_bytes = spec.key_serializer
        kbs = [None if record[0] is None else key_bytes(record[0]) for record in records]
        touched = {kb for kb in kbs if kb is not None}
        if buffered is not None:  # held stream records look their keys up when released
            touched.update(kb for *_, key, _, _ in buffered[2]
                           if key is not None and (kb := key_bytes(key)) is not None)
        opened: dict[bytes, tuple[Any, int]] = {}
        replay: list[tuple[Any, Any, int]] = []
        for kb in touched:
            held = self._rows.getValue((kb,))
            if held is not None:
                key, values, stamps = _history(decode(held[0]))
                opened[kb] = (key, len(values))
                replay += zip(repeat(key), values, stamps)
        replay.sort(key=lambda record: record[2])
        store.restore(replay, observed_stream_time=observed)
        if buffered is not None:
            join.restore(buffered, _no_keyspace)
        restored = host.metrics.as_dict()  # writes the restore replayed are not this call's
        update, stream = table.record_entry(), join.record_entry()
        tables = spec.table_topics
        changed: dict[bytes, Any] = {}
        for (record_key, value, ts, headers, _, _, topic), kb in zip(records, kbs, strict=True):
            ctx = RecordContext(ts, -1, topic, 0, headers)
            if topic in tables:
                update(record_key, value, ctx)
                if kb is not None:
                    changed[kb] = record_key
            else:
                stream(record_key, value, ctx)
        self._save(store, deleted, opened, changed, join)
        yield from self._outputs(chain, int(group))
        drops = drop_counts(host.metrics.as_dict(), restored)
        if drops:
            yield drop_frame(drops).to_pandas()

    def _outputs(self, chain: Chain, group: int) -> Iterator[pd.DataFrame]:
        """The call's joined records: to output topics, and packed for the aggregation.

        The group is the join's one of its input partition (see :func:`buckets`), so its
        records are the task's in its order: their times (``st``) are the task's, and
        ticks tell each of the aggregation's groups the partition's time. After a
        repartition the groups are the chunks of its one partition, partition after
        partition.
        """
        outputs, topics = chain.take_with_topics()
        spec = self._aggregation
        if spec is None:
            yield frame(outputs).to_pandas()
            return
        at = 0 if self._rekeyed else group // buckets(self._spec)
        groups = aggregation_buckets(spec)
        tops: dict[str, int] = {}
        batch, _ = packed_frame(outputs, spec.key_serializer, group << CHUNK_BITS, at, -1,
                                groups, group, topics, tops, spec.drops_null_values)
        yield batch.to_pandas()
        if tops:
            yield tick_rows({at: tops}, groups, group).to_pandas()

    def _load(self) -> tuple[int | None, dict[bytes, int], Any]:
        """The group's observed stream time, deleted keys (newest timestamp), grace buffer.

        :raises IllegalStateError: for a state value of an earlier release (see
            :func:`~topology.spark._stages.time_and_state`), whose buckets held every
            input partition's keys, or every key's history in the group's value.
        """
        observed, kept = time_and_state(load_state(self._state), self._spec.name)
        if kept is None:
            return None, {}, None
        deleted, buffered = kept
        return None if observed < 0 else observed, deleted, buffered

    def _save(self, store: Any, deleted: dict[bytes, int],
              opened: dict[bytes, tuple[Any, int]], changed: dict[bytes, Any],
              join: InternalProcessor) -> None:
        """Write again the changed histories, remove the invisible ones, write the state.

        A history changed if a table update of the call named its key, or if it lost
        versions to retention (it was restored with more than the store now shows). A
        key whose newest version is a delete older than the retention's cutoff is removed
        without reading it: none of its history is visible.
        """
        rows = self._rows
        recount = {kb: key for kb, (key, _) in opened.items()}
        recount.update(changed)
        for kb, key in recount.items():
            versions = store.history(key, newest_first=False, include_deletes=True)
            if kb not in changed and len(versions) == opened[kb][1]:
                continue
            deleted.pop(kb, None)
            if versions:
                rows.updateValue((kb,), (encode((key, tuple(e.value for e in versions),
                                                 longs([e.timestamp for e in versions]))),))
                if versions[-1].value is None:
                    deleted[kb] = versions[-1].timestamp
            elif kb in opened:
                rows.removeKey((kb,))
        observed = store.observed_stream_time
        cutoff = observed - store.history_retention_ms
        for kb in [kb for kb, newest in deleted.items() if newest < cutoff]:
            rows.removeKey((kb,))
            del deleted[kb]
        buffered = join.checkpoint(_no_keyspace)
        if observed < 0 and not deleted and buffered is None:
            self._state.clear()  # nothing seen yet
            return
        save_state(self._state, timed_state(observed, (deleted, buffered)))

    def close(self) -> None:
        """Nothing to release."""
