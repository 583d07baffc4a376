"""DSL operators, the processor API and punctuation, end to end through the driver."""

from __future__ import annotations

import pytest

from suppress import BufferConfig, InvalidSuppressionError, Suppressed
from topology import (
    Materialized,
    Serdes,
    StreamsBuilder,
    TimeWindows,
    TopologyTestDriver,
    Window,
    Windowed,
)
from topology.errors import TopologyError
from topology.record import Record
from topology.runtime.api import Processor, PunctuationType


def run(builder: StreamsBuilder, rows, topic="in", out="out"):
    with TopologyTestDriver(builder.build(), initial_wall_clock_ms=0) as d:
        t = d.create_input_topic(topic)
        for row in rows:
            t.pipe_input(*row)
        return d.create_output_topic(out).read_records_to_list(), d.metrics()


def kvs(records):
    return [(r.key, r.value, r.timestamp) for r in records]


def test_stateless_operators_chain() -> None:
    b = StreamsBuilder()
    seen = []
    (b.stream("in")
     .filter(lambda k, v: v > 0)
     .filter_not(lambda k, v: v == 5)
     .map(lambda k, v: (k.upper(), v * 10))
     .map_values(lambda v: v + 1)
     .flat_map_values(lambda v: [v, -v])
     .flat_map(lambda k, v: [(k, v)] if v > 0 else [])
     .select_key(lambda k, v: f"{k}!")
     .peek(lambda k, v: seen.append((k, v)))
     .to("out"))
    out, _ = run(b, [("a", 1, 0), ("b", -1, 1), ("c", 5, 2), ("d", 2, 3)])
    assert kvs(out) == [("A!", 11, 0), ("D!", 21, 3)]
    assert seen == [("A!", 11), ("D!", 21)]


def test_merge_interleaves_in_processing_order() -> None:
    b = StreamsBuilder()
    b.stream("a").merge(b.stream("b")).to("out")
    with TopologyTestDriver(b.build()) as d:
        a, bb = d.create_input_topic("a"), d.create_input_topic("b")
        a.pipe_input("x", 1, 5)
        bb.pipe_input("y", 2, 1)
        assert kvs(d.create_output_topic("out").read_records_to_list()) == [
            ("x", 1, 5), ("y", 2, 1)]


def test_stream_count_reduce_aggregate_forward_every_update() -> None:
    b = StreamsBuilder()
    s = b.stream("in").group_by_key()
    s.count(Materialized("counts")).to_stream().to("count")
    s.reduce(lambda agg, v: agg + v).to_stream().to("sum")
    s.aggregate(lambda: "", lambda k, v, agg: f"{agg}+{v}").to_stream().to("agg")
    with TopologyTestDriver(b.build()) as d:
        t = d.create_input_topic("in")
        for row in [("a", 1, 5), ("a", 2, 3), ("b", 3, 4), (None, 4, 9), ("a", None, 9)]:
            t.pipe_input(*row)
        assert kvs(d.create_output_topic("count").read_records_to_list()) == [
            ("a", 1, 5), ("a", 2, 5), ("b", 1, 4)]
        assert kvs(d.create_output_topic("sum").read_records_to_list()) == [
            ("a", 1, 5), ("a", 3, 5), ("b", 3, 4)]
        assert kvs(d.create_output_topic("agg").read_records_to_list()) == [
            ("a", "+1", 5), ("a", "+1+2", 5), ("b", "+3", 4)]
        m = d.metrics()
        assert m["dropped-records-total"] == 6  # 3 aggregations x (null key + null value)
        assert m["dropped-records-total{reason=null-key}"] == 3
        assert d.get_key_value_store("counts").get("a") == 2
        assert list(d.get_key_value_store("counts").reverse_all()) == [("b", 1), ("a", 2)]


def test_stream_group_by_repartitions_with_new_key() -> None:
    b = StreamsBuilder()
    (b.stream("in").group_by(lambda k, v: v).count(Materialized("by-value"))
     .to_stream().to("out"))
    with TopologyTestDriver(b.build(), {"application_id": "app"}) as d:
        t = d.create_input_topic("in")
        t.pipe_input("a", "x", 1)
        t.pipe_input("b", "x", 2)
        assert kvs(d.create_output_topic("out").read_records_to_list()) == [
            ("x", 1, 1), ("x", 2, 2)]
        assert "app-by-value-repartition" in d.produced_topic_names()


def test_table_filter_map_values_and_group_by_reduce() -> None:
    b = StreamsBuilder()
    t = b.table("in", materialized=Materialized("src"))
    t.filter(lambda k, v: v % 2 == 0).to_stream().to("even")
    t.map_values(lambda v: v * 100).to_stream().to("mapped")
    (t.group_by(lambda k, v: ("all", v))
     .reduce(lambda agg, v: agg + v, lambda agg, v: agg - v).to_stream().to("total"))
    with TopologyTestDriver(b.build()) as d:
        inp = d.create_input_topic("in")
        for row in [("a", 2, 0), ("b", 3, 1), ("a", 5, 2), ("a", None, 3)]:
            inp.pipe_input(*row)
        # without a downstream need for old values, filtered-out rows become tombstones
        assert kvs(d.create_output_topic("even").read_records_to_list()) == [
            ("a", 2, 0), ("b", None, 1), ("a", None, 2), ("a", None, 3)]
        assert kvs(d.create_output_topic("mapped").read_records_to_list()) == [
            ("a", 200, 0), ("b", 300, 1), ("a", 500, 2), ("a", None, 3)]
        assert kvs(d.create_output_topic("total").read_records_to_list()) == [
            ("all", 2, 0), ("all", 5, 1), ("all", 8, 2), ("all", 3, 3)]
        assert d.get_key_value_store("src").get("a") is None


def test_table_group_by_aggregate_adder_subtractor() -> None:
    b = StreamsBuilder()
    (b.table("in").group_by(lambda k, v: (v, k))
     .aggregate(lambda: (), lambda k, v, agg: (*agg, v),
                lambda k, v, agg: tuple(x for x in agg if x != v))
     .to_stream().to("out"))
    out, _ = run(b, [("u1", "g", 0), ("u2", "g", 1), ("u1", "h", 2)])
    assert kvs(out) == [("g", ("u1",), 0), ("g", ("u1", "u2"), 1), ("g", ("u2",), 2),
                        ("h", ("u1",), 2)]


def test_hopping_windows_and_window_store() -> None:
    b = StreamsBuilder()
    (b.stream("in").group_by_key()
     .windowed_by(TimeWindows.of_size_and_grace(10, 100).advance_by(5))
     .count(Materialized("w")).to_stream().to("out"))
    with TopologyTestDriver(b.build()) as d:
        t = d.create_input_topic("in")
        t.pipe_input("k", "v", 7)
        out = d.create_output_topic("out").read_key_values_to_list()
        assert out == [(Windowed("k", Window(0, 10)), 1), (Windowed("k", Window(5, 15)), 1)]
        store = d.get_window_store("w")
        assert store.fetch("k", 5) == 1
        assert list(store.fetch("k", 0, 10)) == [(0, 1), (5, 1)]
        assert list(store.backward_fetch("k", 0, 10)) == [(5, 1), (0, 1)]
        assert list(store.backward_all()) == list(reversed(list(store.all())))


def test_definition_time_errors() -> None:
    b = StreamsBuilder()
    table = b.table("in")
    with pytest.raises(TopologyError, match="only defined for windowed computations"):
        table.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
    with pytest.raises(InvalidSuppressionError, match="strict"):
        Suppressed.until_window_closes(BufferConfig.max_records(3).emit_early_when_full())
    with pytest.raises(TopologyError, match="SessionWindows"):
        b.stream("s").group_by_key().windowed_by(5)  # type: ignore[call-overload]
    with pytest.raises(TopologyError, match="already been registered"):
        b.stream("in")
    with pytest.raises(TypeError):
        TimeWindows.of_size_and_grace(10, 1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        TimeWindows.of_size_and_grace(10, -1)
    with pytest.raises(TypeError):
        b.stream("x").filter("not callable")  # type: ignore[arg-type]


class _Counter(Processor):
    def __init__(self, fired: list) -> None:
        self.fired = fired

    def init(self, context) -> None:
        super().init(context)
        self.store = context.get_state_store("seen")
        context.schedule(10, PunctuationType.STREAM_TIME, lambda t: self.fired.append(("s", t)))
        context.schedule(10, PunctuationType.WALL_CLOCK_TIME,
                         lambda t: self.fired.append(("w", t)))

    def process(self, record: Record) -> None:
        self.store.put(record.key, (self.store.get(record.key) or 0) + 1)
        self.context.forward(record.with_value(self.store.get(record.key)))


def test_processor_api_stores_and_punctuation() -> None:
    fired: list = []
    b = StreamsBuilder()
    b.add_state_store(Materialized("seen"))
    b.stream("in").process(lambda: _Counter(fired), "seen").to("out")
    with TopologyTestDriver(b.build(), initial_wall_clock_ms=0) as d:
        t = d.create_input_topic("in")
        for ts in (42, 42, 51, 52, 61, 65, 71, 72, 95, 101, 102):
            t.pipe_input("k", "v", ts)
        assert [x for _, x in fired if _ == "s"] == [42, 51, 61, 71, 95, 101]
        for step in (5, 9, 1, 20, 5):
            d.advance_wall_clock_time(step)
        assert [x for _, x in fired if _ == "w"] == [14, 35, 40]
        assert d.create_output_topic("out").read_values_to_list()[-1] == 11


def test_describe_lists_stores_and_subtopologies() -> None:
    b = StreamsBuilder()
    b.stream("in").group_by(lambda k, v: v).count(Materialized("c")).to_stream().to("out")
    text = b.build().describe()
    assert "Sub-topology: 0" in text and "Sub-topology: 1" in text
    assert "(stores: [c])" in text and "c-repartition" in text


def test_serde_round_trips_through_sinks() -> None:
    from topology import Consumed, Produced

    b = StreamsBuilder()
    (b.stream("in", Consumed(key_serde=Serdes.string(), value_serde=Serdes.long()))
     .map_values(lambda v: v * 2).to("out", Produced(Serdes.string(), Serdes.long())))
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in", Serdes.string(), Serdes.long()).pipe_input("a", 21, 0)
        out = d.create_output_topic("out", Serdes.string(), Serdes.long())
        assert out.read_key_value() == ("a", 42)


def _final_counts(rows, bulk: bool):
    b = StreamsBuilder()
    (b.stream("in").group_by_key().windowed_by(TimeWindows.of_size_and_grace(10, 3)).count()
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream().to("out"))
    with TopologyTestDriver(b.build(), initial_wall_clock_ms=0) as d:
        t = d.create_input_topic("in")
        if bulk:
            from topology import TestRecord

            # every third row as a TestRecord: the bulk path hands those over in their turn
            t.pipe_records([TestRecord(*r) if i % 3 == 0 else r for i, r in enumerate(rows)])
        else:
            for row in rows:
                t.pipe_input(*row)
        return kvs(d.create_output_topic("out").read_records_to_list()), d.metrics()


def test_bulk_path_equals_per_record_path() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st
    from hypothesis_profiles import examples

    rows = st.lists(st.tuples(st.sampled_from(["a", "b", None]), st.just("v"),
                              st.integers(0, 100)), max_size=40)

    @settings(max_examples=examples(100), deadline=None)
    @given(rows)
    def check(rs) -> None:
        assert _final_counts(rs, True) == _final_counts(rs, False)

    check()


def test_windowed_count_counts_none_values_and_drops_none_keys() -> None:
    b = StreamsBuilder()
    (b.stream("in").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10)).count()
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream().to("out"))
    out, metrics = run(b, [("a", "x", 1), ("a", None, 5), (None, "x", 20), ("b", None, 10)])
    assert kvs(out) == [(Windowed("a", Window(0, 10)), 2, 5)]
    assert metrics["dropped-records-total"] == 1
    assert metrics["dropped-records-total{reason=null-key}"] == 1


def test_table_group_by_same_key_sends_one_change() -> None:
    b = StreamsBuilder()
    (b.table("in").group_by(lambda k, v: (v, k)).count()
     .suppress(Suppressed.until_time_limit(0, BufferConfig.unbounded())).to_stream().to("out"))
    out, _ = run(b, [("k1", "x", 0), ("k1", "x", 5), ("k1", "y", 6)])
    assert kvs(out) == [("x", 1, 0), ("x", 1, 5), ("x", 0, 6), ("y", 1, 6)]


def test_generated_names_follow_kafka_numbering() -> None:
    b = StreamsBuilder()
    (b.stream("in").group_by(lambda k, v: v).windowed_by(TimeWindows.of_size_with_no_grace(10))
     .count().suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream().to("out"))
    text = b.build().describe()
    for name in ("KSTREAM-KEY-SELECT-0000000001", "KSTREAM-AGGREGATE-0000000003",
                 "KSTREAM-SINK-0000000004", "KSTREAM-SOURCE-0000000006",
                 "KTABLE-SUPPRESS-0000000007"):
        assert name in text
    b2 = StreamsBuilder()
    b2.table("in")
    # the store name spends number 0, but nothing materializes the table (Kafka's
    # TopologyTest.kTableNonMaterializedFilterShouldPreserveTopologyStructure)
    assert "KTABLE-SOURCE-0000000002 (stores: [])" in b2.build().describe()


@pytest.mark.parametrize(("serde", "good", "bad"), [
    (Serdes.long(), (0, 1, -1, 2**63 - 1, -(2**63), None), (2**63, True, "1", 1.5)),
    (Serdes.string(), ("", "a", "é€", None), (b"a", 1, 1.5)),
])
def test_fast_serializers_match_the_serde(serde, good, bad) -> None:
    from topology.errors import TopologyError
    from topology.serde import serializer_of

    fast = serializer_of(serde)
    assert fast is not serde.serialize
    for value in good:
        assert fast(value) == serde.serialize(value)
    for value in bad:
        with pytest.raises(TopologyError):
            fast(value)


class _Ticker(Processor):
    """Logs its init and stream-time punctuations (every 10 ms) under its name."""

    def __init__(self, name: str, log: list) -> None:
        self.name = name
        self.log = log

    def init(self, context) -> None:
        super().init(context)
        self.log.append(("init", self.name))
        context.schedule(10, PunctuationType.STREAM_TIME,
                         lambda t: self.log.append((self.name, t)))

    def process(self, record: Record) -> None:
        self.context.forward(record)


def test_processors_init_and_punctuate_parents_first_then_siblings_in_order() -> None:
    """Kafka's order: topology order for init, and punctuations in the order scheduled."""
    log: list = []
    b = StreamsBuilder()
    source = b.stream("in")
    parent = source.process(lambda: _Ticker("parent", log))
    parent.process(lambda: _Ticker("child", log)).to("out")
    source.process(lambda: _Ticker("sibling", log)).to("out")
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in").pipe_records([("k", "v", 10), ("k", "v", 20)])
        assert len(d.create_output_topic("out").read_records_to_list()) == 4
    assert log == [("init", "parent"), ("init", "child"), ("init", "sibling"),
                   ("parent", 10), ("child", 10), ("sibling", 10),
                   ("parent", 20), ("child", 20), ("sibling", 20)]


@pytest.mark.parametrize("grace", [None, 5], ids=["no-grace", "grace"])
def test_a_left_join_takes_a_none_key_as_kafka_3_7_does(grace) -> None:
    """KIP-962: a left stream-table join joins a None-key record with no table value; an
    inner join still drops it and counts it; a None value is dropped by both."""
    from topology import Materialized, StreamsBuilder, TopologyTestDriver

    def build(left: bool):
        b = StreamsBuilder()
        table = b.table("t", materialized=Materialized.versioned("t", 100)
                        if grace else None)
        stream = b.stream("s")
        join = stream.left_join if left else stream.join
        kwargs = {} if grace is None else {"grace": grace}
        join(table, lambda v, t: (v, t), **kwargs).to("out")
        return b.build()

    for left in (True, False):
        with TopologyTestDriver(build(left)) as driver:
            driver.create_input_topic("t").pipe_input("k", "T", timestamp=0)
            s = driver.create_input_topic("s")
            s.pipe_input(None, "a", timestamp=1)
            s.pipe_input("k", "b", timestamp=2)
            s.pipe_input("k", None, timestamp=3)
            s.pipe_input("k", "c", timestamp=20)  # moves the grace buffer past the others
            out = driver.create_output_topic("out").read_key_values_to_list()
            metrics = driver.metrics()
        if left:
            assert out[:2] == [(None, ("a", None)), ("k", ("b", "T"))]
            assert metrics["dropped-records-total{reason=null-value}"] == 1
            assert "dropped-records-total{reason=null-key}" not in metrics
        else:
            assert out[:1] == [("k", ("b", "T"))]
            assert metrics["dropped-records-total{reason=null-key}"] == 1
