"""Late records routed to a side topic, and idle close of final results."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from suppress import BufferConfig, Suppressed
from topology import (
    Serdes,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    TimeWindows,
    TopologyTestDriver,
    Window,
    Windowed,
)
from topology.errors import TopologyError

from .models import final_counts_topology, no_update_after_final

FINAL = Suppressed.until_window_closes(BufferConfig.unbounded())


# -- late records ------------------------------------------------------------------------------


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "separate"])
def test_hopping_late_record_is_routed_once_per_closed_window(fuse: bool) -> None:
    """A record late for one of its two hopping windows: one drop, one routed copy."""
    w = TimeWindows.of_size_and_grace(10, 0).advance_by(5)
    with TopologyTestDriver(final_counts_topology(w, late_records_to="late", raw=False),
                            {"fuse_final_results": fuse}) as driver:
        assert bool(driver._task.handing) is fuse
        source = driver.create_input_topic("in")
        source.pipe_input("a", "x", 12, headers=[("trace", b"1")])
        source.pipe_input("a", "y", 7)  # windows [0,10) (closed at T=12) and [5,15) (open)
        late = driver.create_output_topic("late").read_records_to_list()
        metrics = driver.metrics()
    assert metrics["dropped-records-total"] == 1.0
    assert metrics["dropped-records-total{reason=expired-window}"] == 1.0
    assert [(r.key, r.value, r.timestamp) for r in late] == [("a", "y", 7)]
    assert late[0].headers == (("late.reason", b"expired-window"), ("late.window.start", b"0"),
                               ("late.window.end", b"10"), ("late.stream.time", b"12"))


def test_late_records_are_serialized_with_the_grouping_serdes() -> None:
    b = StreamsBuilder()
    from topology import Consumed

    (b.stream("in", Consumed(key_serde=Serdes.string(), value_serde=Serdes.long()))
     .group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10))
     .count(late_records_to="late").to_stream().to("out"))
    with TopologyTestDriver(b.build()) as driver:
        source = driver.create_input_topic("in", Serdes.string(), Serdes.long())
        source.pipe_input("k", 5, 20)
        source.pipe_input("k", 6, 3)
        late = driver.create_output_topic("late", Serdes.string(), Serdes.long())
        assert late.read_key_values_to_list() == [("k", 6)]


def test_late_records_topic_is_in_describe_and_checked() -> None:
    topo = final_counts_topology(SlidingWindows.of_time_difference_with_no_grace(5),
                                 late_records_to="too-late")
    assert "(topic: too-late)" in topo.describe().__str__()
    b = StreamsBuilder()
    windowed = b.stream("in").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(1))
    with pytest.raises(TopologyError, match="late_records_to"):
        windowed.count(late_records_to="")


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "separate"])
def test_without_a_late_topic_nothing_is_routed(fuse: bool) -> None:
    with TopologyTestDriver(final_counts_topology(TimeWindows.of_size_with_no_grace(10),
                                                  raw=False),
                            {"fuse_final_results": fuse}) as driver:
        source = driver.create_input_topic("in")
        source.pipe_input("a", "x", 12)
        source.pipe_input("a", "y", 7)
        assert driver.metrics()["dropped-records-total"] == 1.0
        assert "late" not in driver.produced_topic_names()


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 60)), max_size=30),
       size=st.integers(1, 10), grace=st.integers(0, 5))
def test_fused_and_separate_agree_with_late_records(data: list[tuple[str, int]], size: int,
                                                    grace: int) -> None:
    w = TimeWindows.of_size_and_grace(size, grace)
    outs = []
    for fuse in (True, False):
        with TopologyTestDriver(final_counts_topology(w, late_records_to="late", raw=False),
                                {"fuse_final_results": fuse}) as driver:
            assert bool(driver._task.handing) is fuse
            source = driver.create_input_topic("in")
            for key, ts in data:
                source.pipe_input(key, "v", ts)
            outs.append(tuple(driver.create_output_topic(t).read_records_to_list()
                              for t in ("all", "late")) + (driver.metrics(),))
    assert outs[0] == outs[1]


# -- idle close --------------------------------------------------------------------------------


def _idle_topology(idle: Any, windows: Any = None) -> Any:
    windows = windows or TimeWindows.of_size_and_grace(10, 5)
    return final_counts_topology(windows, late_records_to="late",
                                 suppressed=FINAL.with_idle_close(idle))


def test_idle_close_fires_after_the_idle_period() -> None:
    with TopologyTestDriver(_idle_topology(3_000)) as driver:
        source = driver.create_input_topic("in")
        final = driver.create_output_topic("final")
        source.pipe_input("a", "x", 3)
        source.pipe_input("a", "x", 9)
        driver.advance_wall_clock_time(2_999)
        assert final.is_empty()  # idle 2999 < 3000
        driver.advance_wall_clock_time(1)  # idle 3000: T = 9 + 3000 >= 10 + 5
        assert final.read_records_to_list()[0].key == Windowed("a", Window(0, 10))
        (suppression,) = driver._task.suppressors.values()
        assert suppression.stream_time == 3_009
        source.pipe_input("a", "y", 5)  # the window closed: late, never emitted again
        assert final.is_empty()
        assert driver.create_output_topic("late").read_values_to_list() == ["y"]


def test_idle_close_does_not_fire_while_records_arrive() -> None:
    with TopologyTestDriver(_idle_topology(dt.timedelta(seconds=1))) as driver:
        source = driver.create_input_topic("in")
        final = driver.create_output_topic("final")
        for i in range(5):
            source.pipe_input("a", "x", i)
            driver.advance_wall_clock_time(600)  # never 1000 ms without a record
        assert final.is_empty()
        driver.advance_wall_clock_time(399)  # 999 ms since the last record (ts 4)
        assert final.is_empty()
        driver.advance_wall_clock_time(1)  # 1000 ms: T = 4 + 1000
        assert final.read_values_to_list() == [5]


def test_idle_close_needs_stream_time_to_reach_the_close() -> None:
    """Stream time follows the wall clock: a window closing later waits for it."""
    with TopologyTestDriver(_idle_topology(100, TimeWindows.of_size_and_grace(1_000, 0))
                            ) as driver:
        source = driver.create_input_topic("in")
        final = driver.create_output_topic("final")
        source.pipe_input("a", "x", 500)
        driver.advance_wall_clock_time(100)  # T = 600 < 1000
        assert final.is_empty()
        driver.advance_wall_clock_time(399)  # T = 999
        assert final.is_empty()
        driver.advance_wall_clock_time(1)  # T = 1000: [0, 1000) closes
        assert final.read_values_to_list() == [1]


def test_no_idle_close_by_default_nor_before_the_first_record() -> None:
    with TopologyTestDriver(final_counts_topology(TimeWindows.of_size_with_no_grace(10))
                            ) as driver:
        driver.create_input_topic("in").pipe_input("a", "x", 1)
        driver.advance_wall_clock_time(10**9)
        assert driver.create_output_topic("final").is_empty()  # Kafka: stream time only
    with TopologyTestDriver(_idle_topology(10)) as driver:
        driver.advance_wall_clock_time(1_000)  # no record yet: stream time unknown
        source = driver.create_input_topic("in")
        source.pipe_input("a", "x", 1)  # not late: the aggregation's time did not move
        assert driver.metrics()["dropped-records-total"] == 0.0
        driver.advance_wall_clock_time(20)
        assert driver.create_output_topic("final").read_values_to_list() == [1]


def test_idle_close_of_a_time_limit() -> None:
    b = StreamsBuilder()
    (b.table("in").suppress(Suppressed.until_time_limit(60_000, BufferConfig.unbounded())
                            .with_idle_close(5_000)).to_stream().to("out"))
    with TopologyTestDriver(b.build()) as driver:
        driver.create_input_topic("in").pipe_input("k", "v1", 100)
        out = driver.create_output_topic("out")
        driver.advance_wall_clock_time(59_999)
        assert out.is_empty()  # T = 100 + 59_999 < 100 + 60_000
        driver.advance_wall_clock_time(1)
        assert out.read_key_values_to_list() == [("k", "v1")]


def test_idle_close_is_validated() -> None:
    with pytest.raises(ValueError, match="idle close period"):
        FINAL.with_idle_close(-1)
    with pytest.raises(TypeError, match="idle close period"):
        FINAL.with_idle_close(1.5)  # type: ignore[arg-type]


def test_idle_close_on_a_durable_driver(tmp_path: Path) -> None:
    """The buffer and both stream times come back; idle close goes on from the restart."""
    topo = _idle_topology(1_000)
    with TopologyTestDriver(topo, state_dir=tmp_path) as driver:
        driver.create_input_topic("in").pipe_input("a", "x", 3)
    with TopologyTestDriver(topo, state_dir=tmp_path) as driver:
        final = driver.create_output_topic("final")
        driver.advance_wall_clock_time(999)
        assert final.is_empty()
        driver.advance_wall_clock_time(1)
        assert final.read_values_to_list() == [1]


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.one_of(
    st.tuples(st.just("record"), st.sampled_from("ab"), st.integers(0, 100)),
    st.tuples(st.just("wall"), st.just(""), st.integers(0, 40))), max_size=30),
    idle=st.integers(0, 30), windows=st.sampled_from([
        SlidingWindows.of_time_difference_and_grace(5, 3),
        SessionWindows.of_inactivity_gap_and_grace(4, 2),
        TimeWindows.of_size_and_grace(10, 2).advance_by(5)]))
def test_idle_close_never_emits_a_window_twice(steps: list[tuple[str, str, int]], idle: int,
                                               windows: Any) -> None:
    with TopologyTestDriver(_idle_topology(idle, windows)) as driver:
        source = driver.create_input_topic("in")
        for kind, key, n in steps:
            if kind == "record":
                source.pipe_input(key, "v", n)
            else:
                driver.advance_wall_clock_time(n)
        no_update_after_final(driver.create_output_topic("all").read_records_to_list())
