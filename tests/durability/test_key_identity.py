"""One key identity: keys are the same key exactly when their bytes are, in every mode.

Python finds ``1 == True == 1.0`` and ``0.0 == -0.0`` while their bytes differ, and finds
``"a" != b"a"`` while their bytes are the same. A run in memory, a durable run and a durable
run restarted part way must give the same records, key types included (``1`` and ``True``
compare equal, so records are compared by the key's type and repr).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from suppress import BufferConfig, Suppressed
from topology import (
    Consumed,
    Serdes,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    TimeWindows,
    Topology,
    TopologyTestDriver,
)

# keys whose Python equality and bytes disagree (no serde: the fallback encoding)
KEYS = [1, True, 1.0, 0, False, 0.0, -0.0, "a", b"a", "\x00" * 7 + "\x01"]


def windowed(kind: str) -> Topology:
    b = StreamsBuilder()
    grouped = b.stream("in").group_by_key()
    windows: Any = {"tumbling": TimeWindows.of_size_and_grace(10, 2),
                    "sliding": SlidingWindows.of_time_difference_and_grace(5, 2),
                    "session": SessionWindows.of_inactivity_gap_and_grace(4, 2)}[kind]
    (grouped.windowed_by(windows).count()
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream().to("final"))
    grouped.count().to_stream().to("totals")
    return b.build()


def limited() -> Topology:
    b = StreamsBuilder()
    (b.stream("in").group_by_key().count()
     .suppress(Suppressed.until_time_limit(5, BufferConfig.max_records(3).emit_early_when_full()))
     .to_stream().to("limited"))
    return b.build()


def doubles() -> Topology:
    b = StreamsBuilder()
    (b.stream("in", Consumed(key_serde=Serdes.double())).group_by_key()
     .windowed_by(TimeWindows.of_size_with_no_grace(10)).count()
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream().to("final"))
    return b.build()


BUILDS: dict[str, Callable[[], Topology]] = {
    "tumbling": lambda: windowed("tumbling"), "sliding": lambda: windowed("sliding"),
    "session": lambda: windowed("session"), "time limit": limited}


def tag(key: Any) -> Any:
    """A key as compared here: its type and repr (``1`` and ``True`` are equal in Python)."""
    if hasattr(key, "window"):
        return ("windowed", tag(key.key), key.window.start, key.window.end)
    return type(key).__name__, repr(key)


def outputs(driver: TopologyTestDriver, topics: list[str]) -> dict[str, list[Any]]:
    return {t: [(tag(r.key), r.value, r.timestamp)
                for r in driver.create_output_topic(t).read_records_to_list()]
            for t in topics}


def run(build: Callable[[], Topology], records: list[tuple[Any, int]], state: Path | None,
        restart_at: int | None = None) -> dict[str, list[Any]]:
    topics = [t for t in ("final", "totals", "limited") if t in build().describe()]
    got: dict[str, list[Any]] = {t: [] for t in topics}
    splits = [records] if restart_at is None else [records[:restart_at], records[restart_at:]]
    for part in splits:
        with TopologyTestDriver(build(), state_dir=state) as driver:
            driver.create_input_topic("in").pipe_records([(k, "v", ts) for k, ts in part])
            for topic, found in outputs(driver, topics).items():
                got[topic] += found
    return got


RECORDS = st.lists(st.tuples(st.sampled_from(KEYS), st.integers(0, 40)), max_size=25)


@pytest.mark.parametrize("name", BUILDS)
@settings(max_examples=examples(25), deadline=None)
@given(records=RECORDS, split=st.integers(0, 25))
def test_memory_durable_and_restarted_runs_agree(name: str, records: list[tuple[Any, int]],
                                                 split: int, tmp_path_factory: Any) -> None:
    build = BUILDS[name]
    memory = run(build, records, None)
    assert run(build, records, tmp_path_factory.mktemp("durable")) == memory
    restarted = run(build, records, tmp_path_factory.mktemp("restart"),
                    restart_at=min(split, len(records)))
    assert restarted == memory


@pytest.mark.parametrize("state", [False, True], ids=["memory", "durable"])
def test_python_equal_keys_with_other_bytes_are_distinct(state: bool, tmp_path: Path) -> None:
    got = run(BUILDS["tumbling"], [(1, 1), (True, 2), (1.0, 3), ("late", 30)],
              tmp_path if state else None)
    assert [(key[1], count) for key, count, _ in got["final"]] == [
        (("int", "1"), 1), (("bool", "True"), 1), (("float", "1.0"), 1)]
    assert [count for _, count, _ in got["totals"]] == [1, 1, 1, 1]


@pytest.mark.parametrize("state", [False, True], ids=["memory", "durable"])
def test_keys_with_the_same_bytes_are_one_key(state: bool, tmp_path: Path) -> None:
    got = run(BUILDS["tumbling"], [("a", 1), (b"a", 2), ("late", 30)],
              tmp_path if state else None)
    assert [(key[1], count) for key, count, _ in got["final"]] == [(("str", "'a'"), 2)]
    assert [count for _, count, _ in got["totals"]] == [1, 2, 1]


@pytest.mark.parametrize("state", [False, True], ids=["memory", "durable"])
def test_zero_and_negative_zero_are_two_keys_of_a_double_serde(state: bool,
                                                                tmp_path: Path) -> None:
    with TopologyTestDriver(doubles(), state_dir=tmp_path if state else None) as driver:
        driver.create_input_topic("in").pipe_records(
            [(0.0, "v", 1), (-0.0, "v", 2), (0.0, "v", 3), (5.0, "v", 20)])
        got = outputs(driver, ["final"])["final"]
    assert [(key[1], count) for key, count, _ in got] == [
        (("float", "0.0"), 2), (("float", "-0.0"), 1)]
