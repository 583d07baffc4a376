"""Versioned tables in the DSL: the KIP-914/KIP-923 scenarios of the shared suite, data-driven.

Each scenario of ``tests/data/versioned_scenarios.json`` whose kind is not ``store`` runs
through ``TopologyTestDriver``: ``tableUpdate`` ops go to the table topic, ``streamRecord``
ops to the stream topic, and the output after each op must equal ``expectOutput``. Where a
scenario also gives ``unversionedExpectOutput``, the same ops run against a plain
(latest-value) table and must give those outputs instead.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from topology import (
    Materialized,
    StreamsBuilder,
    Topology,
    TopologyTestDriver,
)
from topology.errors import TopologyError

DATA = Path(__file__).resolve().parent.parent / "data" / "versioned_scenarios.json"
SCENARIOS = {s["name"]: s for s in json.loads(DATA.read_text("utf-8"))["scenarios"]
             if s["kind"] != "store"}


def _null(value: Any) -> str:
    return "null" if value is None else str(value)


def _table(b: StreamsBuilder, config: dict[str, Any], versioned: bool | str) -> Any:
    """The scenario's table: plain, versioned in memory, or versioned on RocksDB."""
    if not versioned:
        return b.table("table")
    return b.table("table", materialized=Materialized.versioned(
        "table-store", config["historyRetention"], config["segmentInterval"],
        persistent=versioned == "rocksdb"))


def _stream_table_join(joiner: Callable[[Any, Any], Any], grace: int | None = None
                       ) -> Callable[[dict[str, Any], bool | str], Topology]:
    def build(config: dict[str, Any], versioned: bool | str) -> Topology:
        b = StreamsBuilder()
        table = _table(b, config, versioned)
        b.stream("stream").join(table, joiner, grace=grace).to("output")
        return b.build()

    return build


def _table_aggregate(config: dict[str, Any], versioned: bool | str) -> Topology:
    def select(key: str, value: str) -> Any:
        if key == "NULL":
            return None
        if key == "null":
            return (None, value)
        return (value, value)

    b = StreamsBuilder()
    (_table(b, config, versioned).group_by(select)
     .aggregate(lambda: "0", lambda k, v, agg: agg + "+" + v, lambda k, v, agg: agg + "-" + v)
     .to_stream().to("output"))
    return b.build()


def _filter(config: dict[str, Any], versioned: bool | str) -> Topology:
    b = StreamsBuilder()
    filtered = _table(b, config, versioned).filter(lambda k, v: v.lower() == "accept")
    filtered.to_stream().to("output")
    filtered.group_by(lambda k, v: (k, v)).reduce(lambda agg, v: v, lambda agg, v: v)
    return b.build()


BUILDERS: dict[str, Callable[[dict[str, Any], bool | str], Topology]] = {
    "kip889_motivation_stream_table_join": _stream_table_join(lambda s, t: f"{s}+{t}"),
    "stream_table_inner_join_versioned_out_of_order":
        _stream_table_join(lambda s, t: f"{_null(s)}-{_null(t)}"),
    "stream_table_join_with_grace_period_buffers_stream_side":
        _stream_table_join(lambda s, t: f"{s}+{t}", grace=2),
    "stream_table_join_grace_late_record_joined_immediately":
        _stream_table_join(lambda s, t: f"{s}+{t}", grace=2),
    "table_aggregate_ignores_out_of_order": _table_aggregate,
    "filter_on_versioned_table_forwards_duplicate_tombstones": _filter,
}

CASES = [(name, backend) for name in sorted(SCENARIOS) for backend in ("memory", "rocksdb")] + [
    (name, False) for name in sorted(SCENARIOS)
    if any("unversionedExpectOutput" in op for op in SCENARIOS[name]["ops"])]


def test_every_dsl_scenario_has_a_builder() -> None:
    assert set(BUILDERS) == set(SCENARIOS)


def _expected(op: dict[str, Any], versioned: bool | str) -> list[tuple[Any, Any, int]]:
    rows = op["expectOutput"] if versioned else op.get("unversionedExpectOutput",
                                                       op["expectOutput"])
    out = []
    for row in rows:
        value = row["value"]
        if isinstance(value, dict):  # a filter's Change: its new value reaches to_stream()
            value = value["newValue"]
        out.append((row["key"], value, row["timestamp"]))
    return out


@pytest.mark.parametrize(("name", "versioned"), CASES,
                         ids=[f"{n}-{v or 'latest'}" for n, v in CASES])
def test_dsl_scenario(name: str, versioned: bool | str) -> None:
    scenario = SCENARIOS[name]
    topology = BUILDERS[name](scenario["config"], versioned)
    with TopologyTestDriver(topology) as driver:
        topics = {"tableUpdate": driver.create_input_topic("table")}
        if any(op["op"] == "streamRecord" for op in scenario["ops"]):
            topics["streamRecord"] = driver.create_input_topic("stream")
        output = driver.create_output_topic("output")
        for index, op in enumerate(scenario["ops"]):
            topics[op["op"]].pipe_input(op["key"], op["value"], timestamp=op["ts"])
            got = [(r.key, r.value, r.timestamp) for r in output.read_records_to_list()]
            assert got == _expected(op, versioned), f"op #{index}: {op}"


def test_kip889_example_latest_value_and_as_of_side_by_side() -> None:
    """The motivation of KIP-889: a late transaction joins the rate valid at its time."""
    results = {}
    for versioned in (False, True):
        b = StreamsBuilder()
        rates = (b.table("rates", materialized=Materialized.versioned("rates", 60_000))
                 if versioned else b.table("rates"))
        b.stream("tx").join(rates, lambda t, r: (t, r)).to("out")
        with TopologyTestDriver(b.build()) as driver:
            tx, rate = driver.create_input_topic("tx"), driver.create_input_topic("rates")
            out = driver.create_output_topic("out")
            rate.pipe_input("k", "b0", timestamp=0)
            tx.pipe_input("k", "a1", timestamp=1)
            rate.pipe_input("k", "b3", timestamp=3)
            tx.pipe_input("k", "a4", timestamp=4)
            out.read_values_to_list()
            tx.pipe_input("k", "a2", timestamp=2)
            results[versioned] = out.read_value()
    assert results == {False: ("a2", "b3"), True: ("a2", "b0")}


def test_left_join_versioned_gives_none_before_the_first_version() -> None:
    b = StreamsBuilder()
    rates = b.table("rates", materialized=Materialized.versioned("rates", 100))
    b.stream("tx").left_join(rates, lambda t, r: (t, r)).to("out")
    with TopologyTestDriver(b.build()) as driver:
        tx, rate = driver.create_input_topic("tx"), driver.create_input_topic("rates")
        out = driver.create_output_topic("out")
        rate.pipe_input("k", "r10", timestamp=10)
        tx.pipe_input("k", "t5", timestamp=5)
        tx.pipe_input("k", "t10", timestamp=10)
        tx.pipe_input(None, "t11", timestamp=11)  # a left join takes it (Kafka 3.7+)
        tx.pipe_input("k", None, timestamp=12)
        assert out.read_key_values_to_list() == [("k", ("t5", None)), ("k", ("t10", "r10")),
                                                 (None, ("t11", None))]
        metrics = driver.metrics()
        assert "dropped-records-total{reason=null-key}" not in metrics
        assert metrics["dropped-records-total{reason=null-value}"] == 1


def test_versioned_store_is_reachable_prepopulated_and_counts_expired_writes() -> None:
    b = StreamsBuilder()
    rates = b.table("rates", materialized=Materialized.versioned("rates", 100))
    b.stream("tx").join(rates, lambda t, r: r).to("out")
    with TopologyTestDriver(b.build()) as driver:
        store = driver.get_versioned_key_value_store("rates")
        store.put("eur", 1.10, 0)
        tx, rate = driver.create_input_topic("tx"), driver.create_input_topic("rates")
        out = driver.create_output_topic("out")
        tx.pipe_input("eur", "t", timestamp=5)
        rate.pipe_input("eur", 1.20, timestamp=500)
        rate.pipe_input("eur", 1.15, timestamp=300)  # older than 500 - 100: rejected
        tx.pipe_input("eur", "t", timestamp=450)
        assert out.read_values_to_list() == [1.10, 1.10]
        assert [v.value for v in store.get_versions("eur")] == [1.10, 1.20]
        assert driver.metrics()["dropped-records-total{reason=expired-version}"] == 1


def test_stale_updates_reach_to_stream_but_not_table_joins() -> None:
    b = StreamsBuilder()
    left = b.table("left", materialized=Materialized.versioned("left", 1000))
    right = b.table("right")
    left.to_stream().to("updates")
    left.join(right, lambda lv, rv: lv + rv).to_stream().to("joined")
    with TopologyTestDriver(b.build()) as driver:
        lt, rt = driver.create_input_topic("left"), driver.create_input_topic("right")
        updates, joined = driver.create_output_topic("updates"), driver.create_output_topic(
            "joined")
        rt.pipe_input("k", "R", timestamp=0)
        lt.pipe_input("k", "new", timestamp=10)
        lt.pipe_input("k", "old", timestamp=5)
        assert updates.read_values_to_list() == ["new", "old"]
        assert joined.read_values_to_list() == ["newR"]
        assert driver.metrics()["dropped-records-total{reason=out-of-order-update}"] == 1


@pytest.mark.parametrize("kind", ["join", "left_join", "outer_join"])
def test_table_table_joins_follow_both_sides(kind: str) -> None:
    b = StreamsBuilder()
    left, right = b.table("left"), b.table("right")
    getattr(left, kind)(right, lambda lv, rv: (lv, rv)).to_stream().to("out")
    with TopologyTestDriver(b.build()) as driver:
        lt, rt = driver.create_input_topic("left"), driver.create_input_topic("right")
        out = driver.create_output_topic("out")
        lt.pipe_input("k", "l1", timestamp=1)
        rt.pipe_input("k", "r2", timestamp=2)
        lt.pipe_input("k", None, timestamp=3)
        rt.pipe_input("k", None, timestamp=4)
        got = [(r.value, r.timestamp) for r in out.read_records_to_list()]
    expected = {
        "join": [(("l1", "r2"), 2), (None, 3)],
        "left_join": [(("l1", None), 1), (("l1", "r2"), 2), (None, 3)],
        # The last delete finds neither side nor an old value (nothing downstream asked for
        # old values), so, as in Kafka, it forwards nothing.
        "outer_join": [(("l1", None), 1), (("l1", "r2"), 2), ((None, "r2"), 3)],
    }
    assert got == expected[kind]


def test_joins_chain_through_a_join_result_and_a_mapped_table() -> None:
    b = StreamsBuilder()
    a, c = b.table("a"), b.table("c")
    ac = a.join(c, lambda x, y: x + y).map_values(str.upper)
    b.stream("s").join(ac, lambda s, t: s + ":" + t).to("out")
    with TopologyTestDriver(b.build()) as driver:
        ta, tc, s = (driver.create_input_topic(t) for t in ("a", "c", "s"))
        out = driver.create_output_topic("out")
        ta.pipe_input("k", "x", timestamp=0)
        s.pipe_input("k", "s0", timestamp=1)
        tc.pipe_input("k", "y", timestamp=2)
        s.pipe_input("k", "s1", timestamp=3)
        assert out.read_values_to_list() == ["s1:XY"]


def test_definition_errors() -> None:
    b = StreamsBuilder()
    versioned = b.table("v", materialized=Materialized.versioned("v", 10))
    plain = b.table("p")
    stream = b.stream("s")
    with pytest.raises(TopologyError, match="versioned table"):
        versioned.suppress(__import__("suppress").Suppressed.until_time_limit(
            5, __import__("suppress").BufferConfig.unbounded()))
    with pytest.raises(TopologyError, match="versioned to use a grace"):
        stream.join(plain, lambda s, t: s, grace=1)
    with pytest.raises(TopologyError, match="at least the grace period"):
        stream.join(versioned, lambda s, t: s, grace=11)
    with pytest.raises(TypeError, match="needs a KTable"):
        stream.join(stream, lambda s, t: s)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="callable"):
        stream.join(plain, "joiner")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Materialized.versioned("x", -1)
    with pytest.raises(ValueError):
        Materialized.versioned("x", 10, segment_interval=0)
    with pytest.raises(TypeError):
        Materialized.versioned("", 10)
    with pytest.raises(TopologyError, match="needs a name"):
        b.table("u", materialized=Materialized(history_retention_ms=10))
