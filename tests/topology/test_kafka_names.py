"""Names and descriptions against Kafka 3.9's own expectations.

``tests/data/kafka_describe.json`` holds the ``describe()`` text that Kafka's tests expect,
keyed by test; each builder here makes the same topology with this DSL.
"""

import json
import pathlib
from collections.abc import Callable

import pytest

from suppress import BufferConfig, Suppressed
from topology import (
    Grouped,
    Materialized,
    Produced,
    Serdes,
    StreamsBuilder,
    TimeWindows,
    TopologyTestDriver,
)
from topology.errors import TopologyError

DATA = json.loads((pathlib.Path(__file__).parent.parent / "data" / "kafka_describe.json")
                  .read_text())
CASES = {case["kafka_test"]: case for case in DATA["cases"]}


def _suppress_topology(final: bool, name: str | None) -> StreamsBuilder:
    b = StreamsBuilder()
    s = Serdes.string()
    if final:
        suppressed = Suppressed.until_window_closes(BufferConfig.unbounded())
        table = (b.stream("input").group_by(lambda k, v: k, Grouped(s, s))
                 .windowed_by(TimeWindows.of_size_and_grace(5, 5)).count(Materialized("counts")))
    else:
        suppressed = Suppressed.until_time_limit(1000, BufferConfig.unbounded())
        table = b.stream("input").group_by_key().count()
    if name is not None:
        suppressed = suppressed.with_name(name)
    stream = table.suppress(suppressed).to_stream()
    if final:
        stream.map(lambda k, v: (str(k), v)).to("output-suppressed", Produced(s, Serdes.long()))
    else:
        stream.to("output", Produced(s, Serdes.long()))
    return b


def _stream_count(windowed: bool, materialized: Materialized | None) -> StreamsBuilder:
    b = StreamsBuilder()
    grouped = b.stream("input-topic").group_by_key()
    target = grouped.windowed_by(TimeWindows.of_size_with_no_grace(1)) if windowed else grouped
    if materialized is None:
        target.count()
    else:
        target.count(materialized)
    return b


def _table_count(materialized: Materialized | None) -> StreamsBuilder:
    b = StreamsBuilder()
    grouped = b.table("input-topic").group_by(lambda k, v: (k, v))
    if materialized is None:
        grouped.count()
    else:
        grouped.count(materialized)
    return b


def _table_op(op: str) -> StreamsBuilder:
    b = StreamsBuilder()
    table = b.table("input-topic")
    if op == "map_values":
        table.map_values(lambda v: None)
    else:
        table.filter(lambda k, v: False)
    return b


def _merges() -> StreamsBuilder:
    b = StreamsBuilder()
    parent = b.stream("input_topic").select_key(lambda k, v: k + v)
    one = parent.map_values(lambda v: v + 1)
    two = parent.map_values(lambda v: v + 2)
    three = parent.map_values(lambda v: v + 3)
    one.merge(two).merge(three).to("output_topic")
    return b


BUILDERS: dict[str, Callable[[], StreamsBuilder]] = {
    "SuppressTopologyTest.shouldUseNumberingForAnonymousSuppressionNode":
        lambda: _suppress_topology(False, None),
    "SuppressTopologyTest.shouldApplyNameToSuppressionNode":
        lambda: _suppress_topology(False, "asdf"),
    "SuppressTopologyTest.shouldUseNumberingForAnonymousFinalSuppressionNode":
        lambda: _suppress_topology(True, None),
    "SuppressTopologyTest.shouldApplyNameToFinalSuppressionNode":
        lambda: _suppress_topology(True, "myname"),
    "TopologyTest.kGroupedStreamZeroArgCountShouldPreserveTopologyStructure":
        lambda: _stream_count(False, None),
    "TopologyTest.kGroupedStreamNamedMaterializedCountShouldPreserveTopologyStructure":
        lambda: _stream_count(False, Materialized("count-store")),
    "TopologyTest.kGroupedStreamAnonymousMaterializedCountShouldPreserveTopologyStructure":
        lambda: _stream_count(False, Materialized(value_serde=Serdes.long())),
    "TopologyTest.timeWindowZeroArgCountShouldPreserveTopologyStructure":
        lambda: _stream_count(True, None),
    "TopologyTest.timeWindowNamedMaterializedCountShouldPreserveTopologyStructure":
        lambda: _stream_count(True, Materialized("count-store")),
    "TopologyTest.timeWindowAnonymousMaterializedCountShouldPreserveTopologyStructure":
        lambda: _stream_count(True, Materialized(value_serde=Serdes.long())),
    "TopologyTest.tableZeroArgCountShouldPreserveTopologyStructure":
        lambda: _table_count(None),
    "TopologyTest.tableNamedMaterializedCountShouldPreserveTopologyStructure":
        lambda: _table_count(Materialized("count-store")),
    "TopologyTest.tableAnonymousMaterializedCountShouldPreserveTopologyStructure":
        lambda: _table_count(Materialized(value_serde=Serdes.long())),
    "TopologyTest.kTableNonMaterializedMapValuesShouldPreserveTopologyStructure":
        lambda: _table_op("map_values"),
    "TopologyTest.kTableNonMaterializedFilterShouldPreserveTopologyStructure":
        lambda: _table_op("filter"),
    "StreamsGraphTest.shouldOptimizeSeveralMergeNodesWithCommonKeyChangingParent": _merges,
}


def test_every_case_has_a_builder() -> None:
    assert set(BUILDERS) == set(CASES)


@pytest.mark.parametrize("kafka_test", sorted(CASES))
def test_describe_equals_kafka(kafka_test: str) -> None:
    assert BUILDERS[kafka_test]().build().describe() == CASES[kafka_test]["expected"]


def _repartition_sinks(b: StreamsBuilder) -> list[str]:
    return [line for line in b.build().describe().splitlines()
            if line.strip().startswith("Sink:") and "-repartition)" in line]


def test_named_grouping_reuses_its_repartition_topic() -> None:
    # RepartitionTopicNamingTest.shouldNotFailWithSameRepartitionTopicNameUsingSameKGroupedStream
    b = StreamsBuilder()
    grouped = b.stream("topic").select_key(lambda k, v: k).group_by_key(Grouped(name="grouping"))
    grouped.windowed_by(TimeWindows.of_size_with_no_grace(10)).count().to_stream().to("one")
    grouped.windowed_by(TimeWindows.of_size_with_no_grace(30)).count().to_stream().to("two")
    sinks = _repartition_sinks(b)
    assert len(sinks) == 1 and "(topic: grouping-repartition)" in sinks[0]
    # the second count spent the numbers of the sink, filter and source it did not make
    assert "KSTREAM-AGGREGATE-0000000010 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000009])" \
        in b.build().describe()


def test_named_table_grouping_reuses_its_repartition_topic() -> None:
    # RepartitionTopicNamingTest.shouldNotFailWithSameRepartitionTopicNameUsingSameKGroupedTable
    b = StreamsBuilder()
    grouped = b.table("topic").group_by(lambda k, v: (k, v), Grouped(name="grouping"))
    grouped.count().to_stream().to("output-count")
    grouped.reduce(lambda a, v: v, lambda a, v: v).to_stream().to("output-reduce")
    sinks = _repartition_sinks(b)
    assert len(sinks) == 1 and "(topic: grouping-repartition)" in sinks[0]


@pytest.mark.parametrize("table", [False, True])
def test_unnamed_groupings_repartition_per_aggregation(table: bool) -> None:
    # RepartitionTopicNamingTest.shouldNotReuseRepartitionNodeWithUnnamedRepartitionTopics
    # (and ...KGroupedTable)
    b = StreamsBuilder()
    if table:
        grouped = b.table("topic").group_by(lambda k, v: (k, v))
        grouped.count().to_stream().to("output-count")
        grouped.reduce(lambda a, v: v, lambda a, v: v).to_stream().to("output-reduce")
    else:
        g = b.stream("topic").select_key(lambda k, v: k).group_by_key()
        g.windowed_by(TimeWindows.of_size_with_no_grace(10)).count().to_stream().to("one")
        g.windowed_by(TimeWindows.of_size_with_no_grace(30)).count().to_stream().to("two")
    assert len(_repartition_sinks(b)) == 2


def test_grouped_name_names_the_selecting_node() -> None:
    # KStreamImpl.groupBy / KTableImpl.groupBy: NamedInternal(grouped name)
    b = StreamsBuilder()
    b.stream("s").group_by(lambda k, v: v, Grouped(name="by-v")).count()
    b.table("t").group_by(lambda k, v: (v, k), Grouped(name="t-by-v")).count()
    text = b.build().describe()
    assert "Processor: by-v (stores: [])" in text
    assert "Processor: by-v-repartition-filter (stores: [])" in text
    assert "Processor: t-by-v (stores: [])" in text
    assert "Sink: KSTREAM-SINK-0000000012 (topic: t-by-v-repartition)" in text


def test_table_reduce_store_is_named_like_aggregate() -> None:
    # KGroupedTableImpl.reduce generates its store name with the KTABLE-AGGREGATE- prefix
    b = StreamsBuilder()
    b.table("t").group_by(lambda k, v: (v, k)).reduce(lambda a, v: a + v, lambda a, v: a - v)
    text = b.build().describe()
    store = "KTABLE-AGGREGATE-STATE-STORE-0000000004"
    assert f"Processor: KTABLE-REDUCE-0000000007 (stores: [{store}])" in text


def test_suppression_store_names_are_unique() -> None:
    b = StreamsBuilder()
    table = b.stream("s").group_by_key().count(Materialized("x-store"))
    with pytest.raises(TopologyError, match="x-store"):
        table.suppress(Suppressed.until_time_limit(0, BufferConfig.unbounded()).with_name("x"))


def test_shared_store_joins_sub_topologies() -> None:
    from topology.runtime.api import Processor

    class Keep(Processor):
        def init(self, context) -> None:
            self.store = context.get_state_store("shared")

        def process(self, record) -> None:
            self.store.put(record.key, record.value)

    b = StreamsBuilder()
    b.add_state_store(Materialized("shared"))
    b.stream("a").process(Keep, "shared")
    b.stream("b").process(Keep, "shared")
    text = b.build().describe()
    assert "Sub-topology: 1" not in text
    assert text.count("(stores: [shared])") == 2


def test_unmaterialized_table_source_has_no_store() -> None:
    b = StreamsBuilder()
    b.table("in").to_stream().to("out")
    topo = b.build()
    assert topo.stores == ()
    with TopologyTestDriver(topo) as d:
        d.create_input_topic("in").pipe_input("k", "v", 0)
        assert d.create_output_topic("out").read_key_value() == ("k", "v")
        assert d.get_key_value_store("in-STATE-STORE-0000000000") is None


def test_table_source_materialized_by_a_later_group_by() -> None:
    b = StreamsBuilder()
    table = b.table("in")
    first = b.build()
    table.group_by(lambda k, v: (v, k)).count()
    text = b.build().describe()
    assert "KTABLE-SOURCE-0000000002 (stores: [in-STATE-STORE-0000000000])" in text
    assert first.stores == ()
