"""Kafka's ``Named`` on the DSL operations (issue 24, item 6).

Expected names follow Kafka 3.9's sources (``streams/src/main/java/org/apache/kafka/streams/
kstream/``):

* ``internals/NamedInternal.orElseGenerateWithPrefix``: a given name replaces
  ``<PREFIX>-<n>``, but the number ``n`` is still spent ("burn index ... to keep topology
  backward compatibility"), so the other nodes keep their numbers;
* ``internals/NamedInternal.suffixWithOrElseGet``: for operations adding several processors,
  ``<name><suffix>``, again spending a number, and the suffixed name is validated again;
* ``KStreamImpl.process(supplier, Named, ...)``: the name is used as is and **no** number is
  spent (only the unnamed overload calls ``newProcessorName``);
* ``Named.validate``: the rules (and messages) of topic names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from topology import (
    Grouped,
    KStream,
    KTable,
    Materialized,
    Named,
    Processor,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    TimeWindows,
    TopologyTestDriver,
)
from topology.errors import TopologyError

# -- single-processor operations: one template, with and without a name ------------------------

STREAM_OP = """Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> {p}
    Processor: {p} (stores: [])
      --> KSTREAM-SINK-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Sink: KSTREAM-SINK-0000000002 (topic: out)
      <-- {p}

"""
"""``stream("in").<op>(...).to("out")``: the sink is number 2 with or without a name."""

STREAM_OPS: dict[str, tuple[str, Callable[[KStream, Named | None], KStream]]] = {
    # KStreamImpl.filter(Predicate, Named): orElseGenerateWithPrefix(builder, FILTER_NAME)
    "filter": ("KSTREAM-FILTER", lambda s, n: s.filter(lambda k, v: True, named=n)),
    # KStreamImpl.filterNot(Predicate, Named): orElseGenerateWithPrefix(builder, FILTER_NAME)
    "filter_not": ("KSTREAM-FILTER", lambda s, n: s.filter_not(lambda k, v: False, named=n)),
    # KStreamImpl.map(KeyValueMapper, Named): orElseGenerateWithPrefix(builder, MAP_NAME)
    "map": ("KSTREAM-MAP", lambda s, n: s.map(lambda k, v: (k, v), named=n)),
    # KStreamImpl.mapValues(ValueMapper, Named): orElseGenerateWithPrefix(.., MAPVALUES_NAME)
    "map_values": ("KSTREAM-MAPVALUES", lambda s, n: s.map_values(lambda v: v, named=n)),
    # KStreamImpl.flatMap(KeyValueMapper, Named): orElseGenerateWithPrefix(.., FLATMAP_NAME)
    "flat_map": ("KSTREAM-FLATMAP", lambda s, n: s.flat_map(lambda k, v: [(k, v)], named=n)),
    # KStreamImpl.flatMapValues(ValueMapper, Named): orElseGenerateWithPrefix(..)
    "flat_map_values": ("KSTREAM-FLATMAPVALUES",
                        lambda s, n: s.flat_map_values(lambda v: [v], named=n)),
    # KStreamImpl.selectKey -> internalSelectKey: orElseGenerateWithPrefix(.., KEY_SELECT_NAME)
    "select_key": ("KSTREAM-KEY-SELECT", lambda s, n: s.select_key(lambda k, v: k, named=n)),
    # KStreamImpl.peek(ForeachAction, Named): orElseGenerateWithPrefix(builder, PEEK_NAME)
    "peek": ("KSTREAM-PEEK", lambda s, n: s.peek(lambda k, v: None, named=n)),
}


@pytest.mark.parametrize("op", sorted(STREAM_OPS))
@pytest.mark.parametrize("given", [False, True])
def test_stream_operation(op: str, given: bool) -> None:
    prefix, apply = STREAM_OPS[op]
    b = StreamsBuilder()
    apply(b.stream("in"), Named.as_(f"my-{op}") if given else None).to("out")
    name = f"my-{op}" if given else f"{prefix}-0000000001"
    assert b.build().describe() == STREAM_OP.format(p=name)


TABLE_OP = """Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000001 (topics: [in])
      --> KTABLE-SOURCE-0000000002
    Processor: KTABLE-SOURCE-0000000002 (stores: [])
      --> {p}
      <-- KSTREAM-SOURCE-0000000001
    Processor: {p} (stores: [])
      --> KTABLE-TOSTREAM-0000000004
      <-- KTABLE-SOURCE-0000000002
    Processor: KTABLE-TOSTREAM-0000000004 (stores: [])
      --> KSTREAM-SINK-0000000005
      <-- {p}
    Sink: KSTREAM-SINK-0000000005 (topic: out)
      <-- KTABLE-TOSTREAM-0000000004

"""
"""``table("in").<op>(...).to_stream().to("out")``; the store ``in-STATE-STORE-0000000000``
is not materialized (as in Kafka's ``kTableNonMaterializedFilterShouldPreserve...``)."""

TABLE_OPS: dict[str, tuple[str, Callable[[KTable, Named | None], KTable]]] = {
    # KTableImpl.doFilter: orElseGenerateWithPrefix(builder, FILTER_NAME)
    "filter": ("KTABLE-FILTER", lambda t, n: t.filter(lambda k, v: True, named=n)),
    "filter_not": ("KTABLE-FILTER", lambda t, n: t.filter_not(lambda k, v: False, named=n)),
    # KTableImpl.doMapValues: orElseGenerateWithPrefix(builder, MAPVALUES_NAME)
    "map_values": ("KTABLE-MAPVALUES", lambda t, n: t.map_values(lambda v: v, named=n)),
}


@pytest.mark.parametrize("op", sorted(TABLE_OPS))
@pytest.mark.parametrize("given", [False, True])
def test_table_operation(op: str, given: bool) -> None:
    prefix, apply = TABLE_OPS[op]
    b = StreamsBuilder()
    apply(b.table("in"), Named.as_(f"my-{op}") if given else None).to_stream().to("out")
    name = f"my-{op}" if given else f"{prefix}-0000000003"
    assert b.build().describe() == TABLE_OP.format(p=name)


@pytest.mark.parametrize("given", [False, True])
def test_table_to_stream(given: bool) -> None:
    # KTableImpl.toStream(Named): orElseGenerateWithPrefix(builder, TOSTREAM_NAME);
    # StreamsBuilderTest.shouldUseSpecifiedNameForToStream: KSTREAM-SOURCE-1, KTABLE-SOURCE-2
    b = StreamsBuilder()
    b.table("in").to_stream(named=Named.as_("to-stream") if given else None).to("out")
    name = "to-stream" if given else "KTABLE-TOSTREAM-0000000003"
    assert b.build().describe() == f"""Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000001 (topics: [in])
      --> KTABLE-SOURCE-0000000002
    Processor: KTABLE-SOURCE-0000000002 (stores: [])
      --> {name}
      <-- KSTREAM-SOURCE-0000000001
    Processor: {name} (stores: [])
      --> KSTREAM-SINK-0000000004
      <-- KTABLE-SOURCE-0000000002
    Sink: KSTREAM-SINK-0000000004 (topic: out)
      <-- {name}

"""


@pytest.mark.parametrize("given", [False, True])
def test_sink(given: bool) -> None:
    # KStreamImpl.to: NamedInternal(produced.name()).orElseGenerateWithPrefix(.., SINK_NAME);
    # StreamsBuilderTest.shouldUseSpecifiedNameForSinkProcessor: the next sink is number 2
    b = StreamsBuilder()
    stream = b.stream("in")
    stream.to("one", named=Named.as_("my-sink") if given else None)
    stream.to("two")
    first = "my-sink" if given else "KSTREAM-SINK-0000000001"
    text = b.build().describe()
    assert f"Sink: {first} (topic: one)" in text
    assert "Sink: KSTREAM-SINK-0000000002 (topic: two)" in text


@pytest.mark.parametrize("given", [False, True])
def test_merge(given: bool) -> None:
    # KStreamImpl.merge(KStream, Named): orElseGenerateWithPrefix(builder, MERGE_NAME);
    # StreamsBuilderTest.shouldUseSpecifiedNameForMergeOperation
    b = StreamsBuilder()
    b.stream("a").merge(b.stream("b"), named=Named.as_("merge-processor") if given
                        else None).to("out")
    name = "merge-processor" if given else "KSTREAM-MERGE-0000000002"
    assert b.build().describe() == f"""Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [a])
      --> {name}
    Source: KSTREAM-SOURCE-0000000001 (topics: [b])
      --> {name}
    Processor: {name} (stores: [])
      --> KSTREAM-SINK-0000000003
      <-- KSTREAM-SOURCE-0000000000, KSTREAM-SOURCE-0000000001
    Sink: KSTREAM-SINK-0000000003 (topic: out)
      <-- {name}

"""


class _Forward(Processor):
    def process(self, record: Any) -> None:
        self.context.forward(record)


@pytest.mark.parametrize("given", [False, True])
def test_process_spends_no_number_for_a_name(given: bool) -> None:
    # KStreamImpl.process(supplier, Named, ...) uses NamedInternal(named).name() directly;
    # only process(supplier, ...) calls builder.newProcessorName(PROCESSOR_NAME)
    b = StreamsBuilder()
    b.stream("in").process(_Forward, named=Named.as_("test-processor") if given
                           else None).to("out")
    name, sink = (("test-processor", "KSTREAM-SINK-0000000001") if given
                  else ("KSTREAM-PROCESSOR-0000000001", "KSTREAM-SINK-0000000002"))
    assert b.build().describe() == f"""Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> {name}
    Processor: {name} (stores: [])
      --> {sink}
      <-- KSTREAM-SOURCE-0000000000
    Sink: {sink} (topic: out)
      <-- {name}

"""


# -- operations with several processors ---------------------------------------------------------

def _headers(text: str) -> set[str]:
    """The node lines of a description (names, stores, topics), whatever their order."""
    return {line.strip() for line in text.splitlines()
            if line.strip().startswith(("Source:", "Processor:", "Sink:"))}


@pytest.mark.parametrize("left", [False, True])
@pytest.mark.parametrize("given", [False, True])
def test_stream_table_join(left: bool, given: bool) -> None:
    # KStreamImpl.join/leftJoin(KTable, joiner, Joined): doStreamTableJoin names the processor
    # NamedInternal(joined.name()).orElseGenerateWithPrefix(.., JOIN_NAME / LEFTJOIN_NAME);
    # StreamsBuilderTest.shouldUseSpecifiedNameForJoinOperationBetweenKStreamAndKTable
    b = StreamsBuilder()
    stream, table = b.stream("s"), b.table("t")
    join = stream.left_join if left else stream.join
    join(table, lambda v, t: v, named=Named.as_("my-join") if given else None).to("out")
    name = "my-join" if given else f"KSTREAM-{'LEFTJOIN' if left else 'JOIN'}-0000000004"
    assert _headers(b.build().describe()) == {
        "Source: KSTREAM-SOURCE-0000000000 (topics: [s])",
        "Source: KSTREAM-SOURCE-0000000002 (topics: [t])",
        "Processor: KTABLE-SOURCE-0000000003 (stores: [t-STATE-STORE-0000000001])",
        f"Processor: {name} (stores: [t-STATE-STORE-0000000001])",
        "Sink: KSTREAM-SINK-0000000005 (topic: out)",
    }


@pytest.mark.parametrize("given", [False, True])
def test_stream_table_join_repartition_takes_the_name(given: bool) -> None:
    # KStreamImpl.join(KTable, .., Joined): repartitionForJoin(name != null ? name : this.name)
    # -> createRepartitionedSource: three numbers spent; a prefix that is not a generated
    # KSTREAM-...-<10 digits> name gives <topic>-sink, <topic>-filter and <topic>-source
    b = StreamsBuilder()
    stream = b.stream("s").select_key(lambda k, v: v)
    stream.join(b.table("t"), lambda v, t: v,
                named=Named.as_("j") if given else None).to("out")
    if given:
        topic, sink, filt, source, join = ("j-repartition", "j-repartition-sink",
                                           "j-repartition-filter", "j-repartition-source", "j")
    else:
        topic = "KSTREAM-KEY-SELECT-0000000001-repartition"
        sink, filt, source, join = ("KSTREAM-SINK-0000000005", "KSTREAM-FILTER-0000000006",
                                    "KSTREAM-SOURCE-0000000007", "KSTREAM-JOIN-0000000008")
    assert _headers(b.build().describe()) == {
        "Source: KSTREAM-SOURCE-0000000000 (topics: [s])",
        "Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])",
        f"Processor: {filt} (stores: [])",
        f"Sink: {sink} (topic: {topic})",
        f"Source: {source} (topics: [{topic}])",
        f"Processor: {join} (stores: [t-STATE-STORE-0000000002])",
        "Source: KSTREAM-SOURCE-0000000003 (topics: [t])",
        "Processor: KTABLE-SOURCE-0000000004 (stores: [t-STATE-STORE-0000000002])",
        "Sink: KSTREAM-SINK-0000000009 (topic: out)",
    }


TABLE_JOIN = """Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000001 (topics: [a])
      --> KTABLE-SOURCE-0000000002
    Source: KSTREAM-SOURCE-0000000004 (topics: [b])
      --> KTABLE-SOURCE-0000000005
    Processor: KTABLE-SOURCE-0000000002 (stores: [a-STATE-STORE-0000000000])
      --> {this}
      <-- KSTREAM-SOURCE-0000000001
    Processor: KTABLE-SOURCE-0000000005 (stores: [b-STATE-STORE-0000000003])
      --> {other}
      <-- KSTREAM-SOURCE-0000000004
    Processor: {other} (stores: [a-STATE-STORE-0000000000])
      --> {merge}
      <-- KTABLE-SOURCE-0000000005
    Processor: {this} (stores: [b-STATE-STORE-0000000003])
      --> {merge}
      <-- KTABLE-SOURCE-0000000002
    Processor: {merge} (stores: [])
      --> KTABLE-TOSTREAM-0000000009
      <-- {this}, {other}
    Processor: KTABLE-TOSTREAM-0000000009 (stores: [])
      --> KSTREAM-SINK-0000000010
      <-- {merge}
    Sink: KSTREAM-SINK-0000000010 (topic: out)
      <-- KTABLE-TOSTREAM-0000000009

"""
"""A table-table join: KTableImpl.doJoin names the merge first (orElseGenerateWithPrefix(..,
MERGE_NAME)), then ``suffixWithOrElseGet("-join-this", .., JOINTHIS_NAME)`` and
``("-join-other", .., JOINOTHER_NAME)``, for every kind of join; the unnamed layout is
KStreamImplTest.shouldSupportTableTableJoinWithKStreamToKTable's (MERGE-6, JOINTHIS-7,
JOINOTHER-8)."""


@pytest.mark.parametrize("kind", ["join", "left_join", "outer_join"])
@pytest.mark.parametrize("given", [False, True])
def test_table_table_join(kind: str, given: bool) -> None:
    b = StreamsBuilder()
    this, other = b.table("a"), b.table("b")
    getattr(this, kind)(other, lambda x, y: x,
                        named=Named.as_("tj") if given else None).to_stream().to("out")
    names = ({"merge": "tj", "this": "tj-join-this", "other": "tj-join-other"} if given else
             {"merge": "KTABLE-MERGE-0000000006", "this": "KTABLE-JOINTHIS-0000000007",
              "other": "KTABLE-JOINOTHER-0000000008"})
    assert b.build().describe() == TABLE_JOIN.format(**names)


def test_table_table_join_with_unnamed_materialized_store() -> None:
    # KTableImpl.join(other, joiner, Named, Materialized): new MaterializedInternal(..,
    # builder, MERGE_NAME) names the store KTABLE-MERGE-STATE-STORE-<n> before doJoin names
    # the processors, and the merge keeps the result in it
    b = StreamsBuilder()
    b.table("a").join(b.table("b"), lambda x, y: x, Materialized(),
                      named=Named.as_("tj")).to_stream().to("out")
    headers = _headers(b.build().describe())
    assert "Processor: tj (stores: [KTABLE-MERGE-STATE-STORE-0000000006])" in headers
    assert "Sink: KSTREAM-SINK-0000000011 (topic: out)" in headers


@pytest.mark.parametrize("given", [False, True])
def test_table_aggregation_names_its_repartition_nodes(given: bool) -> None:
    # KGroupedTableImpl.doAggregate: sink suffixWithOrElseGet("-sink", .., SINK_NAME), source
    # ("-source", .., SOURCE_NAME), then orElseGenerateWithPrefix(.., AGGREGATE_NAME);
    # StreamsBuilderTest.shouldUseSpecifiedNameForAggregateOperationGivenTable
    b = StreamsBuilder()
    (b.table("topic").group_by(lambda k, v: (k, v), Grouped(name="group-operation"))
     .count(named=Named.as_("op") if given else None))
    sink, source, agg = (("op-sink", "op-source", "op") if given else
                         ("KSTREAM-SINK-0000000005", "KSTREAM-SOURCE-0000000006",
                          "KTABLE-AGGREGATE-0000000007"))
    assert b.build().describe() == f"""Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000001 (topics: [topic])
      --> KTABLE-SOURCE-0000000002
    Processor: KTABLE-SOURCE-0000000002 (stores: [topic-STATE-STORE-0000000000])
      --> group-operation
      <-- KSTREAM-SOURCE-0000000001
    Processor: group-operation (stores: [])
      --> {sink}
      <-- KTABLE-SOURCE-0000000002
    Sink: {sink} (topic: group-operation-repartition)
      <-- group-operation

  Sub-topology: 1
    Source: {source} (topics: [group-operation-repartition])
      --> {agg}
    Processor: {agg} (stores: [KTABLE-AGGREGATE-STATE-STORE-0000000004])
      --> none
      <-- {source}

"""


@pytest.mark.parametrize("op", ["reduce", "aggregate"])
def test_table_reduce_and_aggregate_take_a_name(op: str) -> None:
    # KGroupedTableImpl.reduce/aggregate(.., Named, Materialized) -> doAggregate, as count
    b = StreamsBuilder()
    grouped = b.table("t").group_by(lambda k, v: (v, k))
    named = Named.as_("agg")
    if op == "reduce":
        grouped.reduce(lambda a, v: v, lambda a, v: a, named=named)
    else:
        grouped.aggregate(lambda: 0, lambda k, v, a: a, lambda k, v, a: a, named=named)
    headers = _headers(b.build().describe())
    assert "Sink: agg-sink (topic: KTABLE-AGGREGATE-STATE-STORE-0000000004-repartition)" \
        in headers
    assert "Processor: agg (stores: [KTABLE-AGGREGATE-STATE-STORE-0000000004])" in headers


STREAM_AGGREGATIONS: dict[str, Callable[[Any, Named | None], KTable]] = {
    # KGroupedStreamImpl.count/reduce/aggregate(.., Named, ..): orElseGenerateWithPrefix(..)
    "count": lambda g, n: g.count(named=n),
    "reduce": lambda g, n: g.reduce(lambda a, v: v, named=n),
    "aggregate": lambda g, n: g.aggregate(lambda: 0, lambda k, v, a: a, named=n),
}
WINDOWS: dict[str, Callable[[Any], Any]] = {
    "grouped": lambda g: g,
    # TimeWindowedKStreamImpl / SlidingWindowedKStreamImpl / SessionWindowedKStreamImpl:
    # the same orElseGenerateWithPrefix(builder, AGGREGATE_NAME / REDUCE_NAME)
    "time": lambda g: g.windowed_by(TimeWindows.of_size_with_no_grace(10)),
    "sliding": lambda g: g.windowed_by(SlidingWindows.of_time_difference_with_no_grace(10)),
    "session": lambda g: g.windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(10)),
}


@pytest.mark.parametrize("windows", sorted(WINDOWS))
@pytest.mark.parametrize("op", sorted(STREAM_AGGREGATIONS))
@pytest.mark.parametrize("given", [False, True])
def test_stream_aggregation(windows: str, op: str, given: bool) -> None:
    # the repartition topic is named after the store (GroupedStreamAggregateBuilder.build),
    # never after the Named; the processor takes the Named's name and its number stays spent
    b = StreamsBuilder()
    grouped = b.stream("in").select_key(lambda k, v: v).group_by_key()
    target = WINDOWS[windows](grouped)
    prefix = "KSTREAM-REDUCE" if op == "reduce" else "KSTREAM-AGGREGATE"
    if op == "aggregate" and windows == "session":
        target.aggregate(lambda: 0, lambda k, v, a: a, lambda k, a, b2: a,
                         named=Named.as_("agg") if given else None).to_stream().to("out")
    else:
        STREAM_AGGREGATIONS[op](target, Named.as_("agg") if given else None) \
            .to_stream().to("out")
    store = f"{prefix}-STATE-STORE-0000000002"
    name = "agg" if given else f"{prefix}-0000000003"
    assert _headers(b.build().describe()) == {
        "Source: KSTREAM-SOURCE-0000000000 (topics: [in])",
        "Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])",
        "Processor: KSTREAM-FILTER-0000000005 (stores: [])",
        f"Sink: KSTREAM-SINK-0000000004 (topic: {store}-repartition)",
        f"Source: KSTREAM-SOURCE-0000000006 (topics: [{store}-repartition])",
        f"Processor: {name} (stores: [{store}])",
        "Processor: KTABLE-TOSTREAM-0000000007 (stores: [])",
        "Sink: KSTREAM-SINK-0000000008 (topic: out)",
    }


@pytest.mark.parametrize("windows", ["time", "sliding", "session"])
def test_windowed_count_with_unnamed_materialized(windows: str) -> None:
    # TimeWindowedKStreamImpl and SessionWindowedKStreamImpl.count(Named, Materialized) spend
    # one number for an unnamed store ("we used to burn a topology name here");
    # SlidingWindowedKStreamImpl.count(Named, Materialized) does not
    b = StreamsBuilder()
    target = WINDOWS[windows](b.stream("in").group_by_key())
    target.count(Materialized(), named=Named.as_("c"))
    n = 1 if windows == "sliding" else 2
    assert f"Processor: c (stores: [KSTREAM-AGGREGATE-STATE-STORE-000000000{n}])" \
        in _headers(b.build().describe())


# -- pictures and running --------------------------------------------------------------------

def _named_pipeline() -> StreamsBuilder:
    b = StreamsBuilder()
    (b.stream("in").filter(lambda k, v: v is not None, named=Named.as_("drop-nulls"))
     .map_values(lambda v: v * 2, named=Named.as_("double"))
     .to("out", named=Named.as_("write-out")))
    return b


def test_mermaid_and_dot_show_the_given_names() -> None:
    topology = _named_pipeline().build()
    mermaid = topology.to_mermaid()
    assert 'n_drop_nulls["Processor: drop-nulls<br/>stores: []"]' in mermaid
    assert "n_drop_nulls --> n_double" in mermaid
    assert 'n_write_out(["Sink: write-out<br/>topic: out"])' in mermaid
    assert "drop-nulls" in topology.to_dot()


def test_a_named_topology_runs() -> None:
    with TopologyTestDriver(_named_pipeline().build()) as driver:
        driver.create_input_topic("in").pipe_input("k", 21, timestamp=0)
        assert driver.create_output_topic("out").read_value() == 42


# -- validation ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "message"), [
    # Named.validate's messages
    ("", "Name is illegal, it can't be empty"),
    (".", 'Name cannot be "." or ".."'),
    ("..", 'Name cannot be "." or ".."'),
    ("a" * 250, "Name is illegal, it can't be longer than 249 characters, name: aaa"),
    ("a b", "Name \"a b\" is illegal, it contains a character other than ASCII "
            "alphanumerics, '.', '_' and '-'"),
    ("caf\u00e9", "contains a character other than ASCII alphanumerics"),
    ("x/y", "contains a character other than ASCII alphanumerics"),
])
def test_illegal_names_are_refused(name: str, message: str) -> None:
    with pytest.raises(TopologyError) as info:
        Named.as_(name)
    assert message in str(info.value)


def test_legal_names() -> None:
    for name in ("a" * 249, "A.z_0-9", "...", "-"):
        assert Named.as_(name).name == name
    assert Named.as_("a").with_name("b") == Named.as_("b")


def test_not_a_str_or_not_a_named() -> None:
    with pytest.raises(TypeError, match="str name"):
        Named.as_(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"Named\.as_"):
        StreamsBuilder().stream("in").filter(lambda k, v: True,
                                             named="plain")  # type: ignore[arg-type]


def test_a_suffixed_name_is_checked_again() -> None:
    # NamedInternal.suffixWithOrElseGet: "Re-validate generated name as suffixed string
    # could be too large"
    b = StreamsBuilder()
    with pytest.raises(TopologyError, match="longer than 249"):
        b.table("a").join(b.table("b"), lambda x, y: x, named=Named.as_("n" * 245))


def test_a_name_used_twice_is_refused() -> None:
    b = StreamsBuilder()
    stream = b.stream("in")
    stream.filter(lambda k, v: True, named=Named.as_("same"))
    with pytest.raises(TopologyError, match="'same' already exists"):
        stream.map_values(lambda v: v, named=Named.as_("same"))
