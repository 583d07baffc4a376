"""Kafka's own sliding- and session-window aggregation tests, ported as data, run here.

``tests/data/kafka_sliding_aggregate_cases.json`` holds ``KStreamSlidingWindowAggregateTest``
and ``tests/data/kafka_session_aggregate_cases.json`` ``KStreamSessionWindowAggregateProcessorTest``
(inputs and Kafka's expected outputs; each file's ``about`` says how a case is compared). A
case Kafka runs with emit-on-window-close is compared with ``until_window_closes``: Kafka's
aggregation emits a window when ``end < stream_time - grace`` (sessions: ``- gap`` too), the
close rule of this project.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from suppress import BufferConfig, Suppressed
from topology import (
    Consumed,
    Materialized,
    Serdes,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    TopologyTestDriver,
)

DATA = Path(__file__).resolve().parent.parent / "data"
SLIDING = json.loads((DATA / "kafka_sliding_aggregate_cases.json").read_text("utf-8"))
SESSION = json.loads((DATA / "kafka_session_aggregate_cases.json").read_text("utf-8"))

Row = tuple[Any, ...]


def _rows(records: list[Any]) -> list[Row]:
    return [(r.key.key, r.key.window.start, r.key.window.end, r.value, r.timestamp)
            for r in records]


def _log_tails(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [m[m.index("timestamp="):] for m in (r.getMessage() for r in caplog.records)
            if m.startswith("Skipping record for expired window.")]


def test_the_data_files_name_their_kafka_sources() -> None:
    assert "KStreamSlidingWindowAggregateTest.java" in SLIDING["source"]
    assert "KStreamSessionWindowAggregateProcessorTest.java" in SESSION["source"]
    names = [c["name"] for c in SLIDING["cases"] + SESSION["cases"]]
    assert len(names) == len(set(names)) and len(SLIDING["cases"]) >= 20


@pytest.mark.parametrize("case", SLIDING["cases"], ids=lambda c: c["name"])
def test_kafka_sliding_window_case(case: dict[str, Any],
                                   caplog: pytest.LogCaptureFixture) -> None:
    windows = SlidingWindows.of_time_difference_and_grace(case["time_difference"], case["grace"])
    b = StreamsBuilder()
    grouped = b.stream("topic", Consumed(key_serde=Serdes.string(), value_serde=Serdes.string())
                       ).group_by_key().windowed_by(windows)
    if case["operation"] == "reduce":
        table = grouped.reduce(lambda agg, v: f"{agg}+{v}", materialized=Materialized(name="s"))
    else:
        table = grouped.aggregate(lambda: "0", lambda k, v, agg: f"{agg}+{v}",
                                  materialized=Materialized(name="s"))
    if case["emit"] == "final":
        table = table.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
    table.to_stream().to("out")
    caplog.set_level(logging.DEBUG, logger="topology")
    with TopologyTestDriver(b.build()) as driver:
        source = driver.create_input_topic("topic", Serdes.string(), Serdes.string())
        for key, value, ts in case["inputs"]:
            source.pipe_input(key, value, ts)
        got = _rows(driver.create_output_topic("out").read_records_to_list())
        dropped = driver.metrics()["dropped-records-total"]
    expected = [tuple(row) for row in case["expected"]]
    if case["compare"] == "per_window_sets":
        assert set(got) == set(expected)
    elif case["compare"] == "sorted_by_key_then_start":
        assert sorted(got, key=lambda row: (row[0], row[1])) == expected  # a stable sort
    else:
        assert got == expected
    if "dropped_records_total" in case:
        assert dropped == case["dropped_records_total"]
        # Kafka's driver numbers offsets from 0 on partition 0, as ours: whole lines compare.
        offsets = [m for m in (r.getMessage() for r in caplog.records)
                   if m.startswith("Skipping record for expired window.")]
        assert offsets == case["log_lines"]


@pytest.mark.parametrize("case", SESSION["cases"], ids=lambda c: c["name"])
def test_kafka_session_window_case(case: dict[str, Any],
                                   caplog: pytest.LogCaptureFixture) -> None:
    windows = SessionWindows.of_inactivity_gap_and_grace(case["gap"], case["grace"])
    b = StreamsBuilder()
    table = b.stream("topic").group_by_key().windowed_by(windows).count(
        materialized=Materialized(name="session-store"))
    if case["compare"] == "final":
        table = table.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
    table.to_stream().to("out")
    caplog.set_level(logging.DEBUG, logger="topology")
    with TopologyTestDriver(b.build()) as driver:
        source = driver.create_input_topic("topic")
        for key, ts in case["inputs"]:
            source.pipe_input(key, "v", ts)
        got = _rows(driver.create_output_topic("out").read_records_to_list())
        stored = [(w.key, w.window.start, w.window.end, v)
                  for w, v in driver.get_session_store("session-store").all()]
        dropped = driver.metrics()["dropped-records-total"]
    compare = case["compare"]
    expected = None if case["expected"] is None else [tuple(r) for r in case["expected"]]
    if "project_expected" in case:  # a deliberate difference: ours, and Kafka's is not it
        kafka = expected
        expected = [tuple(r) for r in case["project_expected"]]
        assert expected != kafka and case["difference"]
    if compare == "store":
        assert stored == expected
    elif compare == "last_per_window":
        last = {row[:3]: row for row in got}
        assert sorted(r for r in last.values() if r[3] is not None) == sorted(expected or [])
    elif compare in ("in_order", "final"):
        assert got == expected
    else:
        assert compare == "drops"
    if "dropped_records_total" in case:
        assert dropped == case["dropped_records_total"]
        tails = [line[line.index("timestamp="):] for line in case["log_lines"]]
        assert Counter(_log_tails(caplog)) == Counter(tails)
