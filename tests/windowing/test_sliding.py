"""Sliding-window aggregations: Kafka's windows, our close rule, stores in memory and on disk."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from topology import (
    SlidingWindows,
    StreamsBuilder,
    TopologyTestDriver,
    Window,
    Windowed,
)
from topology.runtime.processors.sliding import SlidingWindowAggregateProcessor

from .models import (
    FLUSH_KEY,
    final_across_restarts,
    final_counts_topology,
    no_update_after_final,
    rows,
    run,
    sliding_model,
)

PERSISTENCE = [pytest.param(False, id="memory"), pytest.param(True, id="rocksdb")]


@pytest.mark.parametrize("persistent", PERSISTENCE)
def test_windows_of_one_key_and_their_final_results(persistent: bool, tmp_path: Path) -> None:
    d = 10
    data = [("a", 0), ("a", 5), ("a", 12), ("a", 30)]
    topo = final_counts_topology(SlidingWindows.of_time_difference_with_no_grace(d),
                                 persistent=persistent)
    _, final, driver = run(topo, data, flush_at=100,
                           state_dir=tmp_path if persistent else None)
    with driver:
        assert rows(final) == sliding_model(data, d) == [
            ("a", 0, 10, 2, 5),   # the early window [0, d]
            ("a", 1, 11, 1, 5),   # right window of 0
            ("a", 2, 12, 2, 12),  # left window of 12
            ("a", 6, 16, 1, 12),  # right window of 5
            ("a", 20, 30, 1, 30),
        ]
        store = driver.get_window_store("counts")
        assert store.fetch(FLUSH_KEY, 90) == 1  # older windows are past the retention, 2d
        assert store.fetch("a", 20) is None


def test_sliding_reduce_and_aggregate() -> None:
    b = StreamsBuilder()
    grouped = b.stream("in").group_by_key()
    w = SlidingWindows.of_time_difference_and_grace(5, 0)
    grouped.windowed_by(w).reduce(lambda agg, v: agg + v).to_stream().to("reduced")
    grouped.windowed_by(w).aggregate(lambda: "", lambda k, v, agg: agg + str(v)).to_stream() \
        .to("aggregated")
    with TopologyTestDriver(b.build()) as driver:
        source = driver.create_input_topic("in")
        source.pipe_input("k", 1, 10)
        source.pipe_input("k", 2, 12)
        reduced = driver.create_output_topic("reduced").read_key_values_to_list()
        aggregated = driver.create_output_topic("aggregated").read_key_values_to_list()
    w5_10, w7_12, w11_16 = Window(5, 10), Window(7, 12), Window(11, 16)
    # record 12: the previous record's right window first, then its own left window
    assert reduced == [(Windowed("k", w5_10), 1), (Windowed("k", w11_16), 2),
                       (Windowed("k", w7_12), 3)]
    assert aggregated == [(Windowed("k", w5_10), "1"), (Windowed("k", w11_16), "2"),
                          (Windowed("k", w7_12), "12")]


def test_null_keys_and_values_are_dropped_and_counted() -> None:
    b = StreamsBuilder()
    b.stream("in").group_by_key().windowed_by(
        SlidingWindows.of_time_difference_with_no_grace(5)).count().to_stream().to("out")
    with TopologyTestDriver(b.build()) as driver:
        source = driver.create_input_topic("in")
        source.pipe_input(None, "v", 1)
        source.pipe_input("k", None, 1)
        assert driver.create_output_topic("out").is_empty()
        metrics = driver.metrics()
    assert metrics["dropped-records-total"] == 2.0
    assert metrics["dropped-records-total{reason=null-key}"] == 1.0
    assert metrics["dropped-records-total{reason=null-value}"] == 1.0


def test_close_rule_at_the_boundary_emits_once() -> None:
    """Kafka emits [0,10] at T = 10 + grace and accepts an update at that time (twice)."""
    grace = 5
    topo = final_counts_topology(SlidingWindows.of_time_difference_and_grace(10, grace))
    with TopologyTestDriver(topo) as driver:
        source = driver.create_input_topic("in")
        out = driver.create_output_topic("all")
        source.pipe_input("a", "v", 10)     # window [0, 10]
        source.pipe_input("b", "v", 15)     # T = end + grace: still open here
        assert [r.value[0] for r in out.read_records_to_list()] == ["raw", "raw"]
        source.pipe_input("a", "v", 10)     # accepted: [0, 10] is open
        source.pipe_input("b", "v", 16)     # T = end + 1 + grace: closed and emitted once
        records = out.read_records_to_list()
        source.pipe_input("a", "v", 10)     # late now: dropped, never emitted again
        records += out.read_records_to_list()
        assert driver.metrics()["dropped-records-total"] == 1.0
    finals = [(r.key, r.value[1]) for r in records if r.value[0] == "final"]
    assert finals == [(Windowed("a", Window(0, 10)), 2)]
    no_update_after_final(records)


@pytest.mark.parametrize("persistent", PERSISTENCE)
def test_zero_time_difference(persistent: bool, tmp_path: Path) -> None:
    data = [("a", 3), ("a", 3), ("a", 4), ("b", 4), ("a", 9)]
    _, final, driver = run(final_counts_topology(
        SlidingWindows.of_time_difference_with_no_grace(0), persistent=persistent), data,
        flush_at=50, state_dir=tmp_path if persistent else None)
    with driver:
        assert rows(final) == sliding_model(data, 0) == [
            ("a", 3, 3, 2, 3), ("a", 4, 4, 1, 4), ("a", 9, 9, 1, 9), ("b", 4, 4, 1, 4)]


@pytest.mark.parametrize(("d", "grace", "data"), [
    (10, 3, [("a", 1), ("b", 3), ("a", 12), ("b", 20), ("a", 25), ("a", 27), ("b", 31)]),
    (0, 5, [("a", 3), ("b", 4), ("a", 3), ("a", 6), ("b", 4), ("a", 7)]),  # windows [t, t]
])
def test_restart_restores_windows(d: int, grace: int, data: list[tuple[str, int]],
                                  tmp_path: Path) -> None:
    """A durable driver closed mid-stream continues with the windows it had committed."""
    expected, got = final_across_restarts(SlidingWindows.of_time_difference_and_grace(
        d, grace), [data[:3], data[3:]], 200, tmp_path)
    assert expected == sliding_model(data, d)
    assert got == expected


keys = st.sampled_from(["a", "b", "c"])


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.lists(st.tuples(keys, st.integers(0, 60)), max_size=25),
       d=st.integers(0, 12))
def test_in_order_and_within_grace_equals_the_model(data: list[tuple[str, int]], d: int) -> None:
    """Out-of-order records that are never late give exactly the model's windows."""
    w = SlidingWindows.of_time_difference_and_grace(d, 1_000)
    everything, final, driver = run(final_counts_topology(w), data, flush_at=5_000)
    with driver:
        (aggregation,) = [p for p in driver._task.processors.values()
                          if isinstance(p, SlidingWindowAggregateProcessor)]
        aggregation._check()
    assert rows(final) == sliding_model(data, d)
    no_update_after_final(everything)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.lists(st.tuples(keys, st.integers(0, 80)), max_size=30),
       d=st.integers(0, 10), grace=st.integers(0, 8))
def test_late_records_never_emit_a_window_twice(data: list[tuple[str, int]], d: int,
                                                grace: int) -> None:
    """With records late beyond grace: no window is updated or emitted after its final result,
    and each emitted count is that of the model over the records that were not dropped."""
    w = SlidingWindows.of_time_difference_and_grace(d, grace)
    everything, final, driver = run(final_counts_topology(w, late_records_to="late"), data,
                                    flush_at=None)
    with driver:
        (aggregation,) = [p for p in driver._task.processors.values()
                          if isinstance(p, SlidingWindowAggregateProcessor)]
        aggregation._check()
        late = driver.create_output_topic("late").read_records_to_list()
        dropped = driver.metrics()["dropped-records-total"]
    no_update_after_final(everything)
    assert len(late) == dropped
    for record in late:
        headers = dict(record.headers)
        assert headers["late.reason"] == b"expired-window"
        end, stream_time = int(headers["late.window.end"]), int(headers["late.stream.time"])
        assert stream_time >= end + 1 + grace  # the close rule


def test_sliding_keys_serialize_as_kafka_time_windowed_keys() -> None:
    """Kafka writes a sliding window's key as inner key + start; the end is start + d."""
    from topology import Serdes

    b = StreamsBuilder()
    (b.stream("in").group_by_key().windowed_by(SlidingWindows.of_time_difference_with_no_grace(5))
     .count().to_stream().to("out"))
    with TopologyTestDriver(b.build()) as driver:
        driver.create_input_topic("in").pipe_input("k", "v", 12)
        out = driver.create_output_topic("out", Serdes.time_windowed(Serdes.string(), 5),
                                         Serdes.long())
        assert out.read_key_value() == (Windowed("k", Window(7, 12)), 1)


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.lists(st.tuples(keys, st.integers(0, 40)), max_size=20),
       d=st.integers(0, 6), grace=st.integers(0, 4))
def test_rocksdb_equals_memory(data: list[tuple[str, int]], d: int, grace: int) -> None:
    """The same records through the persistent window store and the in-memory one (a zero
    time difference included): the same updates, final results and late drops."""
    w = SlidingWindows.of_time_difference_and_grace(d, grace)
    outputs = []
    for persistent in (False, True):
        with tempfile.TemporaryDirectory() as state_dir:
            everything, final, driver = run(
                final_counts_topology(w, persistent=persistent, late_records_to="late"), data,
                flush_at=200, state_dir=state_dir if persistent else None)
            with driver:
                late = driver.create_output_topic("late").read_records_to_list()
                outputs.append((everything, final, late, driver.metrics()["dropped-records-total"]))
    assert outputs[0] == outputs[1]
