"""Dropped records: one DEBUG line each, and a WARNING summary at most once a minute."""

from __future__ import annotations

import logging

import pytest

from topology import StreamsBuilder, TimeWindows, TopologyTestDriver
from topology.runtime.metrics import SUMMARY_INTERVAL_S, TaskMetrics


def test_the_summary_comes_at_the_first_drop_then_at_most_once_per_interval(
        caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    metrics = TaskMetrics(clock=lambda: now[0])
    caplog.set_level(logging.DEBUG, logger="topology")
    metrics.drop("null-key", node="AGG")
    for _ in range(5):
        metrics.drop("expired-window", node="AGG")
    now[0] += SUMMARY_INTERVAL_S
    metrics.drop("expired-window", node="AGG")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "dropped 1 record since the last summary: 1 null-key at AGG (dropped-records-total "
        "counts them; each one is logged at DEBUG)",
        "dropped 6 records since the last summary: 6 expired-window at AGG "
        "(dropped-records-total counts them; each one is logged at DEBUG)"]
    assert metrics.as_dict()["dropped-records-total"] == 7


def test_late_records_are_logged_at_debug_with_one_warning_naming_the_node(
        caplog: pytest.LogCaptureFixture) -> None:
    b = StreamsBuilder()
    b.stream("in").group_by_key().windowed_by(TimeWindows.of_size_and_grace(10, 0)).count()
    caplog.set_level(logging.DEBUG, logger="topology")
    with TopologyTestDriver(b.build()) as driver:
        source = driver.create_input_topic("in")
        source.pipe_input("k", "v", 100)
        for ts in (1, 2, 3):
            source.pipe_input("k", "v", ts)
    late = [r for r in caplog.records if r.getMessage().startswith("Skipping record for expired")]
    assert len(late) == 3 and {r.levelno for r in late} == {logging.DEBUG}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1  # the first drop; the next two wait for the next summary
    assert "1 expired-window at KSTREAM-AGGREGATE-000000000" in warnings[0]
