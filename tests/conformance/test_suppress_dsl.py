"""Data-driven conformance tests: the DSL-level suppress scenarios of the shared suite.

The scenarios live in ``tests/data/suppress_scenarios.json`` (a verbatim copy of the shared
conformance file). Their topologies are written in Java; ``BUILDERS`` maps each in-scope
scenario name to a function building the equivalent topology with the Python DSL. Inputs,
expected outputs, checkpoints, errors, metrics and log lines all come from the JSON data.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from suppress import BufferConfig, BufferFullError, Suppressed
from topology import (
    Consumed,
    Materialized,
    Serdes,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    TimeWindows,
    Topology,
    TopologyTestDriver,
    Window,
    Windowed,
)

DATA_FILE = Path(__file__).resolve().parent.parent / "data" / "suppress_scenarios.json"

LONG_MAX = 2**63 - 1

#: The dsl-level scenarios this module covers (one generated test each).
IN_SCOPE = (
    "time_limit_zero_emits_immediately",
    "time_limit_2ms_non_resetting_timer",
    "max_records_1_emit_early",
    "max_bytes_200_emit_early",
    "final_results_tumbling_size2_grace1",
    "final_results_tumbling_large_jump",
    "suppress_before_groupBy",
    "shutdown_when_record_constraint_violated",
    "window_agg_hopping_late_drop_and_metrics",
    "window_agg_tumbling_late_by_grace",
    "final_results_sliding_diff5_grace15",
    "final_results_session_gap5_nograce",
)

#: dsl-level scenarios NOT covered here (no skipped placeholders are generated for them):
#: - restart: durability_restart_restores_buffer runs in tests/durability/test_restart.py
EXCLUDED_LATER_ISSUES = (
    "durability_restart_restores_buffer",
)

#: dsl-level scenarios with several input topics (table-table joins of a suppressed table).
JOIN_SCENARIOS = ("suppress_before_join_left", "suppress_before_join_right")

RAW_TOPIC = "output-raw"
SUPPRESSED_TOPIC = "output-suppressed"


def _load_scenarios() -> dict[str, dict[str, Any]]:
    with DATA_FILE.open(encoding="utf-8") as fh:
        data = json.load(fh)
    return {s["name"]: s for s in data["scenarios"]}


SCENARIOS = _load_scenarios()


def _strings() -> Consumed:
    return Consumed(key_serde=Serdes.string(), value_serde=Serdes.string())


# --------------------------------------------------------------------------------------------
# Topology families
# --------------------------------------------------------------------------------------------


def _table_group_by_count(suppressed: Suppressed) -> Topology:
    """Java: table('input').groupBy((k,v)->(v,k)).count(); raw branch + suppressed branch."""
    b = StreamsBuilder()
    counts = b.table("input", _strings()).group_by(lambda k, v: (v, k)).count()
    counts.to_stream().to(RAW_TOPIC)
    counts.suppress(suppressed).to_stream().to(SUPPRESSED_TOPIC)
    return b.build()


def _final_results_time_windows(windows: TimeWindows | SlidingWindows | SessionWindows
                                ) -> Topology:
    """Java: stream('input').groupBy((k,v)->k).windowedBy(W).count(as 'counts'); two branches."""
    b = StreamsBuilder()
    counts = (
        b.stream("input", _strings())
        .group_by(lambda k, v: k)
        .windowed_by(windows)
        .count(materialized=Materialized(name="counts"))
    )
    counts.to_stream().to(RAW_TOPIC)
    (
        counts.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream()
        .to(SUPPRESSED_TOPIC)
    )
    return b.build()


def _suppress_before_group_by() -> Topology:
    """Java: table('topic').suppress(untilTimeLimit(10ms)).groupBy(KeyValue::pair).count()."""
    b = StreamsBuilder()
    (
        b.table("topic", _strings())
        .suppress(Suppressed.until_time_limit(10, BufferConfig.unbounded()))
        .group_by(lambda k, v: (k, v))
        .count()
        .to_stream()
        .to("output")
    )
    return b.build()


def _window_aggregate(windows: TimeWindows) -> Topology:
    """Java: stream('topic').groupByKey().windowedBy(W).aggregate("", agg+"+"+v) -> 'output'."""
    b = StreamsBuilder()
    (
        b.stream("topic", _strings())
        .group_by_key()
        .windowed_by(windows)
        .aggregate(lambda: "", lambda k, v, agg: agg + "+" + v)
        .to_stream()
        .to("output")
    )
    return b.build()


class Case:
    """How one scenario is wired: its topology and the topic names the JSON refers to."""

    def __init__(
        self,
        build: Callable[[], Topology],
        input_topic: str = "input",
        output_topic: str = SUPPRESSED_TOPIC,
        raw_topic: str | None = RAW_TOPIC,
    ) -> None:
        self.build = build
        self.input_topic = input_topic
        self.output_topic = output_topic
        self.raw_topic = raw_topic


BUILDERS: dict[str, Case] = {
    "time_limit_zero_emits_immediately": Case(
        lambda: _table_group_by_count(Suppressed.until_time_limit(0, BufferConfig.unbounded()))
    ),
    "time_limit_2ms_non_resetting_timer": Case(
        lambda: _table_group_by_count(Suppressed.until_time_limit(2, BufferConfig.unbounded()))
    ),
    "max_records_1_emit_early": Case(
        lambda: _table_group_by_count(
            Suppressed.until_time_limit(
                LONG_MAX, BufferConfig.max_records(1).emit_early_when_full()
            )
        )
    ),
    "max_bytes_200_emit_early": Case(
        lambda: _table_group_by_count(
            Suppressed.until_time_limit(
                LONG_MAX, BufferConfig.max_bytes(200).emit_early_when_full()
            )
        )
    ),
    "shutdown_when_record_constraint_violated": Case(
        lambda: _table_group_by_count(
            Suppressed.until_time_limit(LONG_MAX, BufferConfig.max_records(1).shut_down_when_full())
        )
    ),
    "final_results_tumbling_size2_grace1": Case(
        lambda: _final_results_time_windows(TimeWindows.of_size_and_grace(2, 1))
    ),
    "final_results_tumbling_large_jump": Case(
        lambda: _final_results_time_windows(TimeWindows.of_size_and_grace(2, 2))
    ),
    "final_results_sliding_diff5_grace15": Case(
        lambda: _final_results_time_windows(SlidingWindows.of_time_difference_and_grace(5, 15))
    ),
    "final_results_session_gap5_nograce": Case(
        lambda: _final_results_time_windows(SessionWindows.of_inactivity_gap_with_no_grace(5))
    ),
    "suppress_before_groupBy": Case(
        _suppress_before_group_by, input_topic="topic", output_topic="output", raw_topic=None
    ),
    "window_agg_hopping_late_drop_and_metrics": Case(
        lambda: _window_aggregate(TimeWindows.of_size_and_grace(10, 90).advance_by(5)),
        input_topic="topic",
        output_topic="output",
        raw_topic=None,
    ),
    "window_agg_tumbling_late_by_grace": Case(
        lambda: _window_aggregate(TimeWindows.of_size_and_grace(10, 90).advance_by(10)),
        input_topic="topic",
        output_topic="output",
        raw_topic=None,
    ),
}


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def _expected_key(key: Any) -> Any:
    """JSON windowed keys are {key,start,end}; plain keys are used as they are."""
    if isinstance(key, dict):
        return Windowed(key["key"], Window(key["start"], key["end"]))
    return key


def _normalise_key(key: Any) -> Any:
    """Compare windowed keys field by field (robust to Windowed's own __eq__)."""
    if isinstance(key, Windowed):
        return ("windowed", key.key, key.window.start, key.window.end)
    return key


def _expected(rows: list[list[Any]]) -> list[tuple[Any, Any, int]]:
    return [(_normalise_key(_expected_key(k)), v, ts) for k, v, ts in rows]


def _actual(records: list[Any]) -> list[tuple[Any, Any, int]]:
    return [(_normalise_key(r.key), r.value, r.timestamp) for r in records]


def _by_key_string_then_ts(row: tuple[Any, Any, int]) -> tuple[str, int, Any]:
    """Kafka's test sorts raw updates by ``Windowed.toString()``, then timestamp (then value)."""
    _, key, start, end = row[0]
    return f"[{key}@{start}/{end}]", row[2], row[1]


def _buffer_full_error(exc: BaseException) -> BufferFullError | None:
    """The BufferFullError itself, or the one a wrapping exception carries as __cause__."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, BufferFullError):
            return current
        seen.add(id(current))
        current = current.__cause__
    return None


# --------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------


def test_every_in_scope_scenario_is_in_the_data_file() -> None:
    missing = [name for name in IN_SCOPE if name not in SCENARIOS]
    assert not missing, f"scenarios missing from {DATA_FILE}: {missing}"
    for name in IN_SCOPE:
        assert SCENARIOS[name]["level"] == "dsl", name
    assert set(BUILDERS) == set(IN_SCOPE)


def test_every_dsl_scenario_is_either_in_scope_or_owned_by_a_later_issue() -> None:
    dsl = {name for name, s in SCENARIOS.items() if s["level"] == "dsl"}
    assert dsl == set(IN_SCOPE) | set(EXCLUDED_LATER_ISSUES) | set(JOIN_SCENARIOS)
    assert not set(IN_SCOPE) & set(EXCLUDED_LATER_ISSUES)


def _suppressed_outer_join(suppressed_side: str) -> Topology:
    """Java: one table suppressed untilTimeLimit(10ms); left.outerJoin(right, "(l,r)")."""
    b = StreamsBuilder()
    left = b.table("left", _strings())
    right = b.table("right", _strings())
    limit = Suppressed.until_time_limit(10, BufferConfig.unbounded())
    if suppressed_side == "left":
        left = left.suppress(limit)
    else:
        right = right.suppress(limit)
    left.outer_join(right, lambda lv, rv: f"({lv},{rv})".replace("None", "null")) \
        .to_stream().to("output")
    return b.build()


@pytest.mark.parametrize("name", JOIN_SCENARIOS, ids=JOIN_SCENARIOS)
def test_join_scenario(name: str) -> None:
    scenario = SCENARIOS[name]
    side = "left" if name.endswith("left") else "right"
    checkpoints = {c["after_input_index"]: c["output_so_far_len"]
                   for c in scenario.get("checkpoints", [])}
    with TopologyTestDriver(_suppressed_outer_join(side)) as driver:
        topics = {t: driver.create_input_topic(t, Serdes.string(), Serdes.string())
                  for t in ("left", "right")}
        out = driver.create_output_topic("output")
        emitted: list[Any] = []
        for index, item in enumerate(scenario["inputs"]):
            key, value, ts = item["record"]
            topics[item["topic"]].pipe_input(key, value, timestamp=ts)
            emitted.extend(out.read_records_to_list())
            if index in checkpoints:
                assert len(emitted) == checkpoints[index], f"output after input #{index}"
        assert _actual(emitted) == _expected(scenario["expected_outputs"])


@pytest.mark.parametrize("name", IN_SCOPE, ids=IN_SCOPE)
def test_dsl_scenario(name: str, caplog: pytest.LogCaptureFixture) -> None:
    scenario = SCENARIOS[name]
    assert scenario["level"] == "dsl"
    case = BUILDERS[name]
    caplog.set_level(logging.DEBUG, logger="topology")

    inputs = scenario["inputs"]
    checkpoints = {
        c["after_input_index"]: c["suppressed_so_far"] for c in scenario.get("checkpoints", [])
    }
    error_spec = scenario.get("expected_error")
    error_index = error_spec["raised_on_input_index"] if error_spec else None

    topo = case.build()
    with TopologyTestDriver(topo) as driver:
        source = driver.create_input_topic(case.input_topic, Serdes.string(), Serdes.string())
        out = driver.create_output_topic(case.output_topic)
        raw = driver.create_output_topic(case.raw_topic) if case.raw_topic else None

        emitted: list[Any] = []
        raw_emitted: list[Any] = []
        for index, (key, value, ts) in enumerate(inputs):
            if index == error_index:
                assert _actual(emitted) == [], "nothing is emitted before the buffer overflows"
                try:
                    source.pipe_input(key, value, timestamp=ts)
                except Exception as exc:  # the BufferFullError may be wrapped
                    _check_buffer_full_error(exc)
                else:
                    pytest.fail(f"pipe_input of input #{index} did not raise")
                # Everything forwarded before the error is readable afterwards.
                emitted.extend(out.read_records_to_list())
                if raw is not None:
                    raw_emitted.extend(raw.read_records_to_list())
                break
            source.pipe_input(key, value, timestamp=ts)
            emitted.extend(out.read_records_to_list())
            if raw is not None:
                raw_emitted.extend(raw.read_records_to_list())
            if index in checkpoints:
                assert _actual(emitted) == _expected(checkpoints[index]), (
                    f"suppressed output after input #{index}"
                )
        else:
            assert error_index is None, "expected an error that was never raised"

        assert _actual(emitted) == _expected(scenario["expected_outputs"])

        if scenario.get("check_raw"):
            assert raw is not None
            if "expected_raw_outputs_sorted_by_keystring_then_ts" in scenario:
                # the order of one record's window updates is the store iterator's
                assert sorted(_actual(raw_emitted), key=_by_key_string_then_ts) == _expected(
                    scenario["expected_raw_outputs_sorted_by_keystring_then_ts"])
            else:
                assert _actual(raw_emitted) == _expected(scenario["expected_raw_outputs"])

        if error_spec is not None and name == "shutdown_when_record_constraint_violated":
            # The raw branch is upstream of / beside the suppress node: the count updates of
            # input #0 (v1=1) and of the subtractor of input #1 (v1=0) were forwarded before
            # the adder's update (v2=1) overflowed the buffer.
            assert _actual(raw_emitted)[:2] == [("v1", 1, 0), ("v1", 0, 200)]
            assert _actual(raw_emitted) in (
                [("v1", 1, 0), ("v1", 0, 200)],
                [("v1", 1, 0), ("v1", 0, 200), ("v2", 1, 200)],
            )

        if "expected_metrics" in scenario:
            metrics = driver.metrics()
            for metric, expected in scenario["expected_metrics"].items():
                assert metric in metrics, f"metric {metric!r} missing from driver.metrics()"
                assert float(metrics[metric]) == pytest.approx(expected), metric

    if "expected_logs" in scenario:
        messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.DEBUG]
        complete = [line for line in scenario["expected_logs"] if line.startswith("Skipping")]
        assert complete, "scenario lists no complete log line"
        for line in complete:
            assert line in messages, f"missing log line: {line}"
        expired = [m for m in messages if m.startswith("Skipping record for expired window.")]
        dropped = scenario.get("expected_metrics", {}).get("dropped-records-total")
        if dropped is not None:
            # One log line per (record, expired window), like the dropped-records count.
            assert len(expired) == int(dropped)


def _check_buffer_full_error(exc: BaseException) -> None:
    error = _buffer_full_error(exc)
    assert error is not None, (
        f"expected BufferFullError (or an error caused by one), got {type(exc).__name__}: {exc}"
    )
    message = str(error)
    assert "buffer exceeded its max capacity. Currently [2/1] records and [" in message
    assert message.endswith("/9223372036854775807] bytes.")
