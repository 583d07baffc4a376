"""Each DSL call records what its node does as data; readers of the graph use only that.

The Spark compiler, ``describe()`` and the sinks' serde lookup must work on a topology whose
processors cannot even be created: they read node definitions, never processors.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from suppress import BufferConfig, Suppressed
from topology import (
    Consumed,
    Materialized,
    Produced,
    Serdes,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    TimeWindows,
    Topology,
)
from topology.runtime.definitions import (
    Aggregation,
    Sink,
    Source,
    StreamStep,
    StreamTableJoin,
    Suppression,
    TableRegroup,
    TableSource,
    ToStream,
)
from topology.runtime.processors.aggregate import count_adder, count_initializer
from topology.spark._compile import UnsupportedTopologyError, compile_topology
from topology.spark.sinks import _produced_serdes


def _final_counts(windows: Any) -> Topology:
    b = StreamsBuilder()
    (b.stream("in", Consumed(key_serde=Serdes.string()))
     .filter(lambda k, v: v is not None)
     .group_by_key()
     .windowed_by(windows)
     .count()
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream()
     .to("out", Produced(value_serde=Serdes.long())))
    return b.build()


def _join_then_windows() -> Topology:
    b = StreamsBuilder()
    rates = b.table("rates", materialized=Materialized.versioned("rates", 60_000))
    (b.stream("orders")
     .join(rates, lambda order, rate: order * rate, grace=1_000)
     .group_by_key()
     .windowed_by(TimeWindows.of_size_and_grace(10_000, 0))
     .reduce(lambda a, b: a + b)
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream()
     .to("totals"))
    return b.build()


def _table_regrouped() -> Topology:
    b = StreamsBuilder()
    (b.table("users", materialized=Materialized.in_memory("users"))
     .group_by(lambda k, v: (v, k))
     .count()
     .to_stream()
     .to("per-region"))
    return b.build()


def _time_limited() -> Topology:
    b = StreamsBuilder()
    (b.table("prices")
     .suppress(Suppressed.until_time_limit(1_000, BufferConfig.max_records(10)))
     .to_stream()
     .to("slow-prices"))
    return b.build()


def _user_processor() -> Topology:
    b = StreamsBuilder()
    b.stream("in").process(lambda: None).to("out")  # type: ignore[arg-type, return-value]
    return b.build()


def _definitions(topology: Topology) -> list[Any]:
    return [node.definition for node in topology.nodes]


def _without_processors(topology: Topology) -> Topology:
    """``topology`` with every node's ``create`` raising: nothing may build a processor."""
    def refuse() -> Any:
        raise AssertionError("a processor was created to find out what a node is")

    for node in topology.nodes:
        node.definition = replace(node.definition, create=refuse)
    return topology


def test_a_windowed_final_count_is_recorded_as_data() -> None:
    windows = TimeWindows.of_size_with_no_grace(60_000)
    kinds = [type(d) for d in _definitions(_final_counts(windows))]
    assert kinds == [Source, StreamStep, Aggregation, Suppression, ToStream, Sink]
    _, step, aggregation, suppression, _, sink = _definitions(
        _final_counts(TimeWindows.of_size_and_grace(60_000, 2_000)))
    assert step.operation == "filter"
    assert aggregation.grouped == "stream" and aggregation.windows.grace_ms == 2_000
    assert aggregation.initializer is count_initializer
    assert aggregation.aggregator is count_adder
    assert suppression.suppressed.final_results and suppression.delay_ms == 2_000
    assert suppression.buffer_time is not None
    assert (sink.topic, sink.key_serde, sink.value_serde) == ("out", None, Serdes.long())


def test_joins_tables_and_limits_are_recorded_as_data() -> None:
    join = next(d for d in _definitions(_join_then_windows()) if isinstance(d, StreamTableJoin))
    assert (join.stores, join.left, join.grace_ms) == (("rates",), False, 1_000)
    table = next(d for d in _definitions(_join_then_windows()) if isinstance(d, TableSource))
    assert (table.store, table.versioned) == ("rates", True)
    regrouped = _definitions(_table_regrouped())
    assert any(isinstance(d, TableRegroup) for d in regrouped)
    count = next(d for d in regrouped if isinstance(d, Aggregation))
    assert count.grouped == "table" and count.subtractor is not None
    limit = next(d for d in _definitions(_time_limited()) if isinstance(d, Suppression))
    assert not limit.suppressed.final_results and limit.delay_ms == 1_000


@pytest.mark.parametrize("make", [
    lambda: _final_counts(TimeWindows.of_size_and_grace(60_000, 2_000)),
    lambda: _final_counts(SessionWindows.of_inactivity_gap_and_grace(5_000, 1_000)),
    lambda: _final_counts(SlidingWindows.of_time_difference_and_grace(5_000, 1_000)),
    _join_then_windows, _table_regrouped, _time_limited,
], ids=["time windows", "sessions", "sliding", "join then windows", "table regrouped",
        "time limit"])
def test_the_compiler_and_describe_read_definitions_only(make: Any) -> None:
    plain = compile_topology(make())
    topology = _without_processors(make())
    plan = compile_topology(topology)
    assert (plan.batched is None, plan.join is None, plan.limit is None,
            plan.regroup is None) == (plain.batched is None, plain.join is None,
                                      plain.limit is None, plain.regroup is None)
    assert str(topology.describe()) == str(make().describe())
    assert set(_produced_serdes(topology)) == set(_produced_serdes(make()))


def test_refusals_name_the_node_from_its_definition() -> None:
    with pytest.raises(UnsupportedTopologyError, match=r"KSTREAM-PROCESSOR-0000000001 \(a "
                       r"user processor \(process\)\): a user processor's stores"):
        compile_topology(_without_processors(_user_processor()))
