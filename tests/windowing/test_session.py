"""Session-window aggregations: Kafka's merges, our close rule, stores in memory and on disk.

The ``session_agg_*`` scenarios of the shared conformance file run here, data-driven
(the DSL-level session scenario runs with the others in ``tests/conformance``).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from topology import (
    Consumed,
    Materialized,
    Serdes,
    SessionWindows,
    StreamsBuilder,
    TopologyTestDriver,
    Window,
    Windowed,
)
from topology.serde import windowed_serializer

from .models import (
    final_across_restarts,
    final_counts_topology,
    no_update_after_final,
    rows,
    run,
    session_model,
)

DATA = Path(__file__).resolve().parent.parent / "data" / "suppress_scenarios.json"
SCENARIOS = {s["name"]: s for s in json.loads(DATA.read_text("utf-8"))["scenarios"]}

#: The aggregation scenarios and their session windows (gap, grace), from their harness text.
AGGREGATION_SCENARIOS = {
    "session_agg_late_zero_grace": (10, 0),
    "session_agg_late_nonzero_grace": (10, 1),
    "session_agg_merge_forwards_tombstone_then_merged": (5 * 60_000, 0),
}

PERSISTENCE = [pytest.param(False, id="memory"), pytest.param(True, id="rocksdb")]


def test_the_aggregation_scenarios_are_in_the_data_file() -> None:
    for name, (gap, grace) in AGGREGATION_SCENARIOS.items():
        harness = SCENARIOS[name]["topology"]["harness"]
        assert "KStreamSessionWindowAggregate" in harness
        assert (f"{gap // 60_000} min" if gap >= 60_000 else f"{gap}ms") in harness
        assert f"{grace}ms" in harness or "no grace" in harness
    named = {n for n in SCENARIOS if n.startswith("session_agg_")}
    assert named == set(AGGREGATION_SCENARIOS)


def _key(item: dict[str, Any]) -> Windowed:
    return Windowed(item["key"], Window(item["start"], item["end"]))


@pytest.mark.parametrize("name", sorted(AGGREGATION_SCENARIOS))
def test_aggregation_scenario(name: str, caplog: pytest.LogCaptureFixture) -> None:
    scenario = SCENARIOS[name]
    gap, grace = AGGREGATION_SCENARIOS[name]
    b = StreamsBuilder()
    (b.stream("topic", Consumed(key_serde=Serdes.string(), value_serde=Serdes.string()))
     .group_by_key().windowed_by(SessionWindows.of_inactivity_gap_and_grace(gap, grace))
     .count().to_stream().to("output"))
    caplog.set_level(logging.DEBUG, logger="topology")
    with TopologyTestDriver(b.build()) as driver:
        source = driver.create_input_topic("topic", Serdes.string(), Serdes.string())
        for key, value, ts in scenario["inputs"]:
            source.pipe_input(key, value, ts)
        out = [(r.key, r.value, r.timestamp)
               for r in driver.create_output_topic("output").read_records_to_list()]
        metrics = driver.metrics()
    expected = scenario["expected_outputs"]
    if isinstance(expected, list):  # forwarded changes (old values are not sent)
        assert out == [(_key(k), change["new"], ts) for k, change, ts in expected]
        assert all(change["old"] is None for _, change, _ in expected)
        return
    assert out == [(_key(k), v, ts) for k, v, ts in scenario["model_raw_outputs"]]
    assert metrics["dropped-records-total"] == expected["dropped-records-total"]
    # Kafka's harness has no partition or offset; the rest of the line is ours too.
    line = expected["log_contains"]
    tail = line[line.index("timestamp="):]
    assert any(r.getMessage().endswith(tail) for r in caplog.records), tail


@pytest.mark.parametrize("persistent", PERSISTENCE)
def test_sessions_merge_and_close(persistent: bool, tmp_path: Path) -> None:
    data = [("a", 0), ("a", 5), ("b", 7), ("a", 20), ("a", 12), ("a", 25)]
    topo = final_counts_topology(SessionWindows.of_inactivity_gap_and_grace(5, 10),
                                 persistent=persistent)
    everything, final, driver = run(topo, data, flush_at=100,
                                    state_dir=tmp_path if persistent else None)
    with driver:
        assert rows(final) == session_model(data, 5) == [
            ("a", 0, 5, 2, 5), ("a", 12, 12, 1, 12), ("a", 20, 25, 2, 25), ("b", 7, 7, 1, 7)]
        store = driver.get_session_store("counts")
        assert store.fetch_session("~flush", 100, 100) == 1
    no_update_after_final(everything)


def test_a_record_bridging_two_sessions_merges_them_with_the_merger() -> None:
    b = StreamsBuilder()
    (b.stream("in").group_by_key()
     .windowed_by(SessionWindows.of_inactivity_gap_and_grace(5, 100))
     .aggregate(lambda: "", lambda k, v, agg: agg + v, lambda k, a1, a2: f"{a1}|{a2}",
                Materialized(name="s"))
     .to_stream().to("out"))
    with TopologyTestDriver(b.build()) as driver:
        source = driver.create_input_topic("in")
        source.pipe_input("k", "a", 0)
        source.pipe_input("k", "b", 10)
        source.pipe_input("k", "c", 5)  # within 5 of both: one session [0, 10]
        out = driver.create_output_topic("out").read_records_to_list()
        stored = list(driver.get_session_store("s").fetch("k"))
    assert [(r.key, r.value, r.timestamp) for r in out[2:]] == [
        (Windowed("k", Window(0, 0)), None, 0),
        (Windowed("k", Window(10, 10)), None, 10),
        (Windowed("k", Window(0, 10)), "|a|bc", 10),
    ]
    assert stored == [(Windowed("k", Window(0, 10)), "|a|bc")]


def test_session_reduce() -> None:
    b = StreamsBuilder()
    (b.stream("in").group_by_key()
     .windowed_by(SessionWindows.of_inactivity_gap_and_grace(5, 100))
     .reduce(lambda agg, v: agg + v).to_stream().to("out"))
    with TopologyTestDriver(b.build()) as driver:
        source = driver.create_input_topic("in")
        for v, ts in ((1, 0), (2, 10), (4, 5)):
            source.pipe_input("k", v, ts)
        assert driver.create_output_topic("out").read_values_to_list()[-1] == 7


def test_a_closed_session_never_grows() -> None:
    """Kafka emits a session at T = end + gap + grace and can still merge into it then."""
    gap, grace = 5, 2
    topo = final_counts_topology(SessionWindows.of_inactivity_gap_and_grace(gap, grace),
                                 late_records_to="late")
    with TopologyTestDriver(topo) as driver:
        source = driver.create_input_topic("in")
        source.pipe_input("a", "v", 0)
        source.pipe_input("b", "v", 7)  # T = end + gap + grace: [0,0] still open
        source.pipe_input("a", "v", 5)  # merges: [0, 5]
        source.pipe_input("b", "v", 13)  # T = 5 + 1 + gap + grace: [0, 5] emitted
        source.pipe_input("a", "v", 10)  # within gap of the closed session: its own [10,10]
        source.pipe_input("a", "v", 1)   # inside the closed session: late
        everything = driver.create_output_topic("all").read_records_to_list()
        late = driver.create_output_topic("late").read_records_to_list()
    finals = [(r.key, r.value[1]) for r in everything if r.value[0] == "final"]
    assert finals == [(Windowed("a", Window(0, 5)), 2)]
    assert [(r.value, r.timestamp) for r in late] == [("v", 1)]
    no_update_after_final(everything)


def test_session_keys_serialize_as_kafka() -> None:
    key = windowed_serializer(Serdes.string(), True)(Windowed("k", Window(3, 9)))
    assert key == b"k" + (9).to_bytes(8, "big") + (3).to_bytes(8, "big")
    b = StreamsBuilder()
    (b.stream("in").group_by_key().windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(5))
     .count().to_stream().to("out"))
    with TopologyTestDriver(b.build()) as driver:
        driver.create_input_topic("in").pipe_input("k", "v", 3)
        out = driver.create_output_topic("out", Serdes.session_windowed(Serdes.string()),
                                         Serdes.long())
        assert out.read_key_value() == (Windowed("k", Window(3, 3)), 1)


def test_restart_restores_sessions(tmp_path: Path) -> None:
    data = [("a", 1), ("b", 3), ("a", 4), ("b", 20), ("a", 9), ("a", 30), ("b", 22), ("a", 2)]
    expected, got = final_across_restarts(SessionWindows.of_inactivity_gap_and_grace(5, 20),
                                          [data[:3], data[3:5], data[5:]], 200, tmp_path)
    assert expected == session_model(data, 5)
    assert got == expected


keys = st.sampled_from(["a", "b", "c"])


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.lists(st.tuples(keys, st.integers(0, 80)), max_size=25),
       gap=st.integers(1, 12))
def test_within_grace_equals_the_model(data: list[tuple[str, int]], gap: int) -> None:
    """Out-of-order records that are never late give exactly the model's sessions."""
    w = SessionWindows.of_inactivity_gap_and_grace(gap, 1_000)
    everything, final, driver = run(final_counts_topology(w), data, flush_at=5_000)
    driver.close()
    assert rows(final) == session_model(data, gap)
    no_update_after_final(everything)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.lists(st.tuples(keys, st.integers(0, 80)), max_size=30),
       gap=st.integers(1, 10), grace=st.integers(0, 8))
def test_late_records_never_grow_a_closed_session(data: list[tuple[str, int]], gap: int,
                                                  grace: int) -> None:
    w = SessionWindows.of_inactivity_gap_and_grace(gap, grace)
    everything, _, driver = run(final_counts_topology(w, late_records_to="late"), data,
                                flush_at=None)
    with driver:
        late = driver.create_output_topic("late").read_records_to_list()
        assert len(late) == driver.metrics()["dropped-records-total"]
    no_update_after_final(everything)
    # a closed session's records are never counted again: a later final session may overlap
    # a closed one (a record touching it and an open session merges with the open one only,
    # as in Kafka: test_a_record_touching_a_closed_and_an_open_session_joins_the_open_one),
    # but the final counts of a key never add up to more than its records that were not late
    finals: Counter[str] = Counter()
    for r in everything:
        if r.value[0] == "final":
            finals[r.key.key] += r.value[1]
    accepted = Counter(key for key, _ in data) - Counter(r.key for r in late)
    for key, total in finals.items():
        assert total <= accepted[key], (key, total, accepted[key])


def test_a_record_touching_a_closed_and_an_open_session_joins_the_open_one() -> None:
    """gap 5, grace 0: [0,3] closes at T = 9; a@2 then touches the closed [0,3] and the
    open [5,8] and merges with [5,8] only (Kafka's store no longer shows [0,3]): the final
    sessions [0,3] = 2 and [2,8] = 3 overlap, and no record is counted twice."""
    w = SessionWindows.of_inactivity_gap_and_grace(5, 0)
    data = [("a", 0), ("a", 3), ("b", 9), ("a", 5), ("a", 8), ("a", 2)]
    everything, final, driver = run(final_counts_topology(w), data, flush_at=40)
    driver.close()
    assert rows(final) == [("a", 0, 3, 2, 3), ("a", 2, 8, 3, 8), ("b", 9, 9, 1, 9)]
    no_update_after_final(everything)
