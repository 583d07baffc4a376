"""A sliding-window record dropped outright names the window Kafka names: ``[ts, ts + d]``.

Kafka's ``KStreamSlidingWindowAggregate.process`` skips a record whose window ``[ts, ts + d]``
(the latest that could hold it) is closed and logs that window; the log line (DEBUG here,
WARN in Kafka) and the late-records topic's headers name the same window, never one with a
negative start.
"""

from __future__ import annotations

import logging

import pytest

from topology import SlidingWindows, StreamsBuilder, TopologyTestDriver


def _late_driver(d: int, grace: int) -> TopologyTestDriver:
    b = StreamsBuilder()
    (b.stream("in").group_by_key()
     .windowed_by(SlidingWindows.of_time_difference_and_grace(d, grace))
     .count(late_records_to="late").to_stream().to("out"))
    return TopologyTestDriver(b.build())


@pytest.mark.parametrize(("ts", "start", "end"), [
    (5, 5, 15),     # an early record (ts < d): [ts - d, ts] would start at -5
    (50, 50, 60),   # a later one
    (0, 0, 10),
])
def test_record_dropped_outright_names_ts_to_ts_plus_d(ts: int, start: int, end: int,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="topology")
    with _late_driver(10, 3) as driver:
        source = driver.create_input_topic("in")
        source.pipe_input("k", "on time", 100)
        source.pipe_input("k", "late", ts, headers=[("trace", b"1")])
        (late,) = driver.create_output_topic("late").read_records_to_list()
        assert driver.metrics()["dropped-records-total{reason=expired-window}"] == 1.0
    assert (late.key, late.value, late.timestamp) == ("k", "late", ts)
    assert late.headers == (("trace", b"1"), ("late.reason", b"expired-window"),
                            ("late.window.start", str(start).encode()),
                            ("late.window.end", str(end).encode()),
                            ("late.stream.time", b"100"))
    lines = [r for r in caplog.records if r.getMessage().startswith("Skipping record for expired")]
    assert [r.levelno for r in lines] == [logging.DEBUG]
    assert lines[0].getMessage() == (
        "Skipping record for expired window. topic=[in] partition=[0] offset=[1] "
        f"timestamp=[{ts}] window=[{start},{end}] expiration=[97] streamTime=[100]")


def test_a_closed_window_of_an_accepted_record_keeps_its_own_name(
        caplog: pytest.LogCaptureFixture) -> None:
    """Not dropped outright: the closed left window is named, as Kafka's
    ``updateWindowAndForward`` names it, and the open windows are updated."""
    caplog.set_level(logging.DEBUG, logger="topology")
    with _late_driver(10, 0) as driver:
        source = driver.create_input_topic("in")
        source.pipe_input("k", "a", 20)
        source.pipe_input("k", "b", 15)  # left window [5,15] closed at 20; [15,25] is open
        late = driver.create_output_topic("late").read_records_to_list()
        out = driver.create_output_topic("out").read_key_values_to_list()
    assert [dict(r.headers)["late.window.start"] for r in late] == [b"5"]
    assert [dict(r.headers)["late.window.end"] for r in late] == [b"15"]
    assert any("window=[5,15] expiration=[20] streamTime=[20]" in r.getMessage()
               for r in caplog.records)
    assert [(w.window.start, w.window.end, n) for w, n in out] == [
        (10, 20, 1), (10, 20, 2), (16, 26, 1)]
