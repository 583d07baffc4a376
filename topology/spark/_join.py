"""A stream's as-of join with a versioned table in a batched ``transformWithStateInPandas``.

Table updates and stream records are unioned into one ``transformWithStateInPandas``, grouped
by a hash bucket of the table's key bytes (:data:`BUCKETS` buckets; one with a grace period,
see below), so that one call handles every record of a bucket in a micro-batch. The bucket's
whole table history is one state value (the state codec's bytes, never pickle):
read once and written once per call.

Inside a call the library's own parts do the work, as in a task: the topology's versioned
table source writes each update into the topology's own in-memory versioned store (history
retention and rejected writes are the store's), and the topology's join processor looks each
stream record up in it as of the record's timestamp (with its grace buffer, if any), then the
joined chain (the stateless steps after the join) runs on the joined records, up to output
topics or a windowed aggregation after the join, which Spark runs on this processor's output.
Its drops (null keys or values, out-of-order or expired table updates) leave as
:data:`~topology.spark._stages.DROPS` rows, which the runner counts in its metrics.
A call processes its records by timestamp, then table updates before stream records, then
arrival; a task processes them in arrival order. A record leaving for the aggregation carries
the position of the stream record it came from, so that the aggregation folds values in
arrival order, across buckets.

The state is the store's visible history, per key (:meth:`history` with deletes), restored
by replaying it in timestamp order (the store's :meth:`restore`), and the join's grace buffer
(its own checkpoint). With a grace period the join's buffer time is the largest stream
timestamp the processor has seen; a task has one processor for all keys, so the runner then
uses one bucket, which keeps that time (and so which records are still held) the task's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pandas as pd  # type: ignore[import-untyped]
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BinaryType, StructField, StructType

from suppress.entry import RecordContext

from ..runtime.processor import InternalProcessor
from ..state.codec import decode, encode
from ._compile import TABLE_UPDATE, ChainSpec, JoinSpec
from ._stages import BUCKETS, BucketHost, Chain, drop_counts, drop_frame, frame

__all__ = ("BUCKETS", "AsOfJoinProcessor", "buckets")

_STATE = StructType([StructField("history", BinaryType())])


def buckets(spec: JoinSpec) -> int:
    """How many key buckets the join runs in: one with a grace period (see the module)."""
    return 1 if spec.grace_ms is not None else BUCKETS


def _no_keyspace(name: str) -> Any:
    raise TypeError(f"the join keeps no keyspace state, asked for {name!r}")


class AsOfJoinProcessor(StatefulProcessor):
    """The as-of join of one bucket of keys; emits the joined chain's records as a frame.

    ``key_bytes`` (the windowed aggregation's key serializer, when one follows the join)
    gives the ``kb`` of the records routed on to it.
    """

    def __init__(self, spec: JoinSpec, joined: ChainSpec,
                 key_bytes: Callable[[Any], bytes | None] | None = None) -> None:
        self._spec = spec
        self._joined = joined
        self._key_bytes = key_bytes

    def init(self, handle: StatefulProcessorHandle) -> None:
        """Open the bucket's state: table history and grace buffer."""
        self._state = handle.getValueState("history", _STATE)

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame],  # noqa: N802
                        timerValues: Any) -> Iterator[pd.DataFrame]:  # noqa: N803
        """Apply the bucket's table updates and join its stream records, by timestamp."""
        spec = self._spec
        data = pd.concat(list(rows), ignore_index=True).sort_values(
            ["ts", "route", "seq"], kind="stable")
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
        known: set[Any] = set()
        if self._state.exists():
            held = self._state.get()
            assert held is not None
            history, buffered = decode(held[0])
            store.restore(history)
            known.update(k for k, _, _ in history)
            join.restore(buffered, _no_keyspace)
        restored = host.metrics.as_dict()  # writes the restore replayed are not this call's
        update, stream = table.record_entry(), join.record_entry()
        loads = decode
        out = chain.out
        seqs: list[int] = []
        index: list[int] = []
        for route, k, v, ts, h, seq, tp in zip(data["route"].tolist(), data["k"], data["v"],
                                               data["ts"].tolist(), data["h"],
                                               data["seq"].tolist(), data["tp"], strict=True):
            record_key = loads(k)
            ctx = RecordContext(ts, -1, tp or "", 0, () if h is None else loads(h))
            if route == TABLE_UPDATE:
                update(record_key, loads(v), ctx)
                if record_key is not None:
                    known.add(record_key)
            else:
                before = len(out)
                stream(record_key, loads(v), ctx)
                seqs += [seq] * (len(out) - before)
                index += range(len(out) - before)
        self._save(store, known, join)
        records, topics = chain.take_with_topics()
        batch, _ = frame(records, self._key_bytes, 0, positions=(seqs, index), topics=topics)
        yield batch.to_pandas()
        drops = drop_counts(host.metrics.as_dict(), restored)
        if drops:
            yield drop_frame(drops).to_pandas()

    def _save(self, store: Any, known: set[Any], join: InternalProcessor) -> None:
        history = []
        for k in known:
            history += [(k, e.value, e.timestamp)
                        for e in store.history(k, newest_first=False, include_deletes=True)]
        history.sort(key=lambda entry: entry[2])
        buffered = join.checkpoint(_no_keyspace)
        if not history and buffered is None:
            self._state.clear()
            return
        self._state.update((encode((history, buffered)),))

    def close(self) -> None:
        """Nothing to release."""
