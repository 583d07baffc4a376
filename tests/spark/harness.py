"""The DistributedRunner's batched stages in this process, called as Spark calls them.

:func:`distributed_run` runs a topology's pre stage (the ``mapInArrow`` function the runner
builds) on each chunk of a micro-batch (a Spark partition of the source DataFrame, given as
a table in Spark's Kafka source schema), groups the rows for the stateful node by key group
as Spark's ``groupBy`` does, and calls the runner's own ``transformWithStateInPandas``
processors (``handleInputRows``) group by group, their value states kept here between
micro-batches. No Spark: the code under test is the runner's, only the shuffle and the
state store are this module's. The Spark tests keep one end-to-end run per operator family.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pandas as pd  # type: ignore[import-untyped]
import pyarrow as pa

from topology import Topology
from topology.spark._compile import AGGREGATION, DROPS, OUTPUTS, compile_topology
from topology.spark._stages import records_of_frame
from topology.spark.columns import plan as column_plan
from topology.spark.distributed import plan_stage

from .runner_child import kafka_schema

KAFKA_SCHEMA = kafka_schema()
"""Spark's Kafka source schema (the chunks' tables are in its Arrow form)."""

KAFKA_SCHEMA_WITH_HEADERS = kafka_schema(headers=True)
"""The same with ``includeHeaders=true``: a ``headers`` column."""

_HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))

Headers = tuple[tuple[str, bytes | None], ...]


class ValueState:
    """One key group's value state, as ``StatefulProcessorHandle.getValueState`` gives it."""

    def __init__(self) -> None:
        self.value: tuple[Any, ...] | None = None

    def get(self) -> tuple[Any, ...] | None:
        return self.value

    def exists(self) -> bool:
        return self.value is not None

    def update(self, value: tuple[Any, ...]) -> None:
        self.value = tuple(value)

    def clear(self) -> None:
        self.value = None


class MapState:
    """One key group's map state, as ``StatefulProcessorHandle.getMapState`` gives it.

    ``writes`` counts the entries written or removed, as rows of Spark's state store. A value
    read back is a new tuple of ``bytearray``, as Spark's state client decodes it.
    """

    def __init__(self) -> None:
        self.entries: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self.writes = 0

    def getValue(self, key: tuple[Any, ...]) -> tuple[Any, ...] | None:  # noqa: N802
        held = self.entries.get(tuple(key))
        return None if held is None else tuple(
            bytearray(v) if isinstance(v, bytes) else v for v in held)

    def updateValue(self, key: tuple[Any, ...], value: tuple[Any, ...]) -> None:  # noqa: N802
        self.entries[tuple(key)] = tuple(value)
        self.writes += 1

    def removeKey(self, key: tuple[Any, ...]) -> None:  # noqa: N802
        del self.entries[tuple(key)]
        self.writes += 1


class Handle:
    """A key group's processor handle: its states by name."""

    def __init__(self, states: dict[str, Any]) -> None:
        self._states = states

    def getValueState(self, name: str, schema: Any) -> ValueState:  # noqa: N802
        state = self._states.setdefault(name, ValueState())
        assert isinstance(state, ValueState), f"{name} is not a value state"
        return state

    def getMapState(self, name: str, key_schema: Any, value_schema: Any  # noqa: N802
                    ) -> MapState:
        state = self._states.setdefault(name, MapState())
        assert isinstance(state, MapState), f"{name} is not a map state"
        return state


class Operator:
    """One ``transformWithStateInPandas`` operator: a processor per call, states kept."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self._factory = factory
        self.states: dict[int, dict[str, Any]] = {}

    def run(self, rows: pd.DataFrame, order: random.Random) -> list[pd.DataFrame]:
        """Call the processor on each key group of ``rows`` (the packed rows), in any order."""
        groups = sorted(set(rows["seq"].tolist()))
        order.shuffle(groups)
        out: list[pd.DataFrame] = []
        for group in groups:
            mine = rows[rows["seq"] == group][["k"]].reset_index(drop=True)
            processor = self._factory()
            processor.init(Handle(self.states.setdefault(group, {})))
            out += list(processor.handleInputRows((group,), iter([mine]), None))
            processor.close()
        return out


def chunk_table(rows: Sequence[tuple[str, bytes | None, bytes | None, int]], partition: int,
                headers: Sequence[Headers] | None = None) -> pa.Table:
    """Rows ``(topic, key, value, timestamp ms)`` of one input partition, in Kafka's schema.

    ``headers``: each row's (a ``headers`` column, as ``includeHeaders=true`` gives it).
    """
    n = len(rows)
    table = pa.table({
        "key": pa.array([r[1] for r in rows], pa.binary()),
        "value": pa.array([r[2] for r in rows], pa.binary()),
        "topic": pa.array([r[0] for r in rows], pa.string()),
        "partition": pa.array([partition] * n, pa.int32()),
        "offset": pa.array(range(n), pa.int64()),
        "timestamp": pa.array([r[3] * 1000 for r in rows], pa.int64()).cast(
            pa.timestamp("us", tz="UTC")),
        "timestampType": pa.array([0] * n, pa.int32()),
    })
    if headers is None:
        return table
    return table.append_column("headers", pa.array(
        [[{"key": k, "value": v} for k, v in pairs] for pairs in headers], _HEADERS))


def distributed_run(topology: Topology, micro_batches: Iterable[Sequence[pa.Table]],
                    seed: int = 0,
                    between: Callable[[dict[int, dict[str, Any]]], None] | None = None,
                    headers: bool = False) -> tuple[list[tuple[Any, ...]], Counter[str]]:
    """The records the runner's sinks would get, and its drops by reason.

    Each micro-batch is a list of chunks (Spark partitions of the one source DataFrame,
    in partition order). Records come as ``(topic, key, value, timestamp)``, in no
    particular order. ``seed`` shuffles the order key groups are called in. ``between``,
    if given, gets each operator's states (by key group, then state name) after each
    micro-batch, to change them in place as a restart from another release would find them.
    ``headers``: the chunks have a ``headers`` column (:func:`chunk_table`), and each record
    comes with its headers last.
    """
    plan = compile_topology(topology)
    topics = plan.topics
    batch_plan = column_plan(None, KAFKA_SCHEMA_WITH_HEADERS if headers else KAFKA_SCHEMA,
                             plan.sources)
    stage = plan_stage(plan, batch_plan, plan.sources)
    operators = _operators(plan)
    order = random.Random(seed)
    out: list[tuple[Any, ...]] = []
    drops: Counter[str] = Counter()

    def take(frames: list[pd.DataFrame]) -> pd.DataFrame:
        table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
            {"route": [], "k": [], "seq": [], "ts": []})
        for reason, n in zip(table[table["route"] == DROPS]["k"].tolist(),
                             table[table["route"] == DROPS]["ts"].tolist(), strict=True):
            drops[reason.decode()] += int(n)
        kept = table[(table["route"] >= 0) | (table["route"] == OUTPUTS)]
        if len(kept):
            records = records_of_frame(pa.Table.from_pandas(kept, preserve_index=False))
            out.extend((topics[r[0]], r[1], r[2], r[3], *((r[4],) if headers else ()))
                       for r in records)
        return table[table["route"] == AGGREGATION]

    for chunks in micro_batches:
        frames = [batch.to_pandas() for partition_id, chunk in enumerate(chunks)
                  for batch in stage(iter(chunk.select(list(batch_plan.selected)).to_batches()),
                                     partition_id=partition_id)]
        rows = take(frames)
        for operator in operators:
            rows = take(operator.run(rows, order))
            if between is not None:
                between(operator.states)
    return out, drops


def _operators(plan: Any) -> list[Operator]:
    """The batched processors of ``plan``, in the order the query runs them."""
    operators = []
    if plan.join is not None:
        from topology.spark._join import AsOfJoinProcessor

        operators.append(Operator(lambda: AsOfJoinProcessor(
            plan.join, plan.joined, plan.batched, plan.aggregation_rekeyed)))
        if plan.batched is None:
            return operators
    if plan.limit is not None:
        from topology.spark._time_limit import TimeLimitProcessor

        return [Operator(lambda: TimeLimitProcessor(plan.limit, plan.post))]
    assert plan.batched is not None, "the harness runs joins, time limits and batched " \
        "aggregations"
    from topology.spark._aggregations import BatchedAggregationProcessor, buckets

    aggregate = Operator(lambda: BatchedAggregationProcessor(plan.batched, plan.post))
    if plan.regroup is None:
        return [*operators, aggregate]
    from topology.spark._regroup import RegroupProcessor

    regroup = Operator(lambda: RegroupProcessor(plan.regroup, plan.batched.key_serializer,
                                                buckets(plan.batched)))
    return [regroup, aggregate]
