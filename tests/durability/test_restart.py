"""Restart without loss or duplicates: a durable driver continues from its last commit."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from topology import Materialized, StreamsBuilder, TopologyTestDriver
from topology.errors import TopologyError
from topology.state.rocksdb import StateDirectoryError, StateFormatError, StateLockedError

from .pipeline import pipe_from_committed, read_all, records, topology

DATA = Path(__file__).resolve().parent.parent / "data" / "suppress_scenarios.json"


def uninterrupted(data: list[Any]) -> dict[str, list[Any]]:
    with TopologyTestDriver(topology()) as driver:
        pipe_from_committed(driver, data)
        return read_all(driver)


def crash(driver: TopologyTestDriver) -> None:
    """Lose the driver as a killed process would: nothing after the last commit is kept."""
    driver._task.state.close()  # drops pending writes, releases the directory
    driver._closed = True


def test_public_scenario_restart_restores_buffer(tmp_path: Path) -> None:
    from suppress import BufferConfig, Suppressed

    scenario = next(s for s in json.loads(DATA.read_text("utf-8"))["scenarios"]
                    if s["name"] == "durability_restart_restores_buffer")

    def build() -> Any:
        b = StreamsBuilder()
        (b.stream("input").group_by_key().count(Materialized(name="counts"))
         .suppress(Suppressed.until_time_limit(2**63 - 1, BufferConfig.max_records(3)
                                               .emit_early_when_full()))
         .to_stream().to("output-suppressed"))
        return b.build()

    emitted: list[Any] = []
    checkpoints = {c["after_input_index"]: c["suppressed_so_far"]
                   for c in scenario["checkpoints"]}
    driver = TopologyTestDriver(build(), state_dir=tmp_path)
    index = 0
    for item in scenario["inputs"]:
        if isinstance(item, dict):
            assert item["restart_application"]
            driver.close()
            driver = TopologyTestDriver(build(), state_dir=tmp_path)
            continue
        key, value, ts = item
        driver.create_input_topic("input").pipe_input(key, value, timestamp=ts)
        emitted += [[r.key, r.value, r.timestamp] for r in
                    driver.create_output_topic("output-suppressed").read_records_to_list()]
        if index in checkpoints:
            assert emitted == checkpoints[index]
        index += 1
    driver.close()
    assert emitted == scenario["expected_outputs"]


@settings(max_examples=examples(25), deadline=None)
@given(seed=st.integers(0, 10_000), cuts=st.lists(st.integers(1, 119), max_size=4),
       crashes=st.lists(st.booleans(), min_size=4, max_size=4))
def test_run_restart_continue_equals_one_run(tmp_path_factory: Any, seed: int,
                                             cuts: list[int], crashes: list[bool]) -> None:
    """Close cleanly or crash after each cut; restarting from the committed offsets gives
    every output record exactly once, as one uninterrupted run does."""
    data = records(120, seed)
    state_dir = tmp_path_factory.mktemp("state")
    outputs: dict[str, list[Any]] = {}
    stops = [*sorted(set(cuts)), len(data)]
    for cut, crashed in zip(stops, [*crashes[:len(stops) - 1], False], strict=True):
        driver = TopologyTestDriver(topology(), state_dir=state_dir)
        pipe_from_committed(driver, data[:cut])
        got = read_all(driver)
        if crashed:  # the reads came after the last commit: the next driver returns them
            crash(driver)
            continue
        driver.close()  # commits the read positions
        for name, records_read in got.items():
            outputs.setdefault(name, []).extend(records_read)
    assert outputs == uninterrupted(data)


def test_crash_between_commits_loses_nothing_committed(tmp_path: Path) -> None:
    data = records(60, 3)
    driver = TopologyTestDriver(topology(), {"commit_interval_records": 7},
                                state_dir=tmp_path)
    clicks = driver.create_input_topic("clicks")
    clicks.pipe_records([(k, v, ts) for t, k, v, ts in data[:40] if t == "clicks"])
    driver._task.stores["rates"].put("k9", "uncommitted", 10**6)  # never committed
    crash(driver)
    with TopologyTestDriver(topology(), state_dir=tmp_path) as again:
        assert again.committed_offsets() == {"clicks": sum(t == "clicks" for t, *_ in data[:40])}
        assert again.get_versioned_key_value_store("rates").get("k9") is None


def test_unread_outputs_survive_and_read_ones_do_not_come_back(tmp_path: Path) -> None:
    data = records(50, 5)
    with TopologyTestDriver(topology(), state_dir=tmp_path) as driver:
        pipe_from_committed(driver, data)
        first = driver.create_output_topic("limited").read_records_to_list()
    assert first
    with TopologyTestDriver(topology(), state_dir=tmp_path) as driver:
        assert driver.create_output_topic("limited").read_records_to_list() == []
        final = [(r.key, r.value, r.timestamp)
                 for r in driver.create_output_topic("final").read_records_to_list()]
    assert final == uninterrupted(data)["final"] and final


def test_a_crash_returns_records_read_since_the_last_commit(tmp_path: Path) -> None:
    data = records(50, 6)
    driver = TopologyTestDriver(topology(), state_dir=tmp_path)
    pipe_from_committed(driver, data)
    read = driver.create_output_topic("limited").read_records_to_list()
    crash(driver)
    with TopologyTestDriver(topology(), state_dir=tmp_path) as again:
        assert again.create_output_topic("limited").read_records_to_list() == read


def test_commit_meta_is_atomic_with_the_state(tmp_path: Path) -> None:
    with TopologyTestDriver(topology(), state_dir=tmp_path) as driver:
        driver.create_input_topic("clicks").pipe_input("k", "v", timestamp=1)
        driver.commit({"batch": b"7"})
        assert driver.committed_meta("batch") == b"7"
    with TopologyTestDriver(topology(), state_dir=tmp_path) as driver:
        assert driver.committed_meta("batch") == b"7"
        assert driver.committed_meta("other") is None
    with TopologyTestDriver(topology()) as plain:
        plain.commit({"batch": b"1"})
        assert plain.committed_meta("batch") == b"1"
        with pytest.raises(ValueError, match="bytes"):
            plain.commit({"batch": "1"})  # type: ignore[dict-item]


def test_state_directory_is_owner_only_and_stores_are_persistent(tmp_path: Path) -> None:
    with TopologyTestDriver(topology(), state_dir=tmp_path / "s") as driver:
        driver.create_input_topic("clicks").pipe_input("k", "v", timestamp=1)
        assert type(driver.get_versioned_key_value_store("rates")).__name__.startswith("RocksDB")
    assert (tmp_path / "s").stat().st_mode & 0o777 == 0o700
    app = next((tmp_path / "s").iterdir())
    assert app.stat().st_mode & 0o777 == 0o700


def test_in_memory_store_with_a_state_dir_is_refused(tmp_path: Path) -> None:
    b = StreamsBuilder()
    b.table("t", materialized=Materialized.in_memory("t")).to_stream().to("o")
    with pytest.raises(TopologyError, match="persistent=False"):
        TopologyTestDriver(b.build(), state_dir=tmp_path)


def test_a_directory_in_use_future_or_foreign_is_refused_untouched(tmp_path: Path) -> None:
    with TopologyTestDriver(topology(), state_dir=tmp_path / "a") as driver:
        driver.create_input_topic("clicks").pipe_input("k", "v", timestamp=1)
        with pytest.raises(StateLockedError):
            TopologyTestDriver(topology(), state_dir=tmp_path / "a")
    db_dir = next((tmp_path / "a").iterdir()) / "0_0"
    marker = db_dir / "STATEDB"
    marker.write_text(json.dumps({"format": "topology-statedb", "version": 99}))
    before = sorted(os.listdir(db_dir))
    with pytest.raises(StateFormatError):
        TopologyTestDriver(topology(), state_dir=tmp_path / "a")
    assert sorted(os.listdir(db_dir)) == before
    foreign = tmp_path / "b" / "topology-test-driver-app" / "0_0"
    foreign.mkdir(parents=True)
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(StateDirectoryError):
        TopologyTestDriver(topology(), state_dir=tmp_path / "b")
    assert (foreign / "notes.txt").read_text() == "mine"


def test_a_spilling_buffer_restarts_with_both_tiers(tmp_path: Path) -> None:
    from suppress import BufferConfig, Suppressed

    def build() -> Any:
        b = StreamsBuilder()
        (b.stream("clicks").group_by_key().count()
         .suppress(Suppressed.until_time_limit(
             30, BufferConfig.max_records(2).spill_to_disk_when_full()))
         .to_stream().to("out"))
        return b.build()

    data = [(f"k{i % 7}", "v", i) for i in range(80)]

    def run(cuts: list[int]) -> list[Any]:
        got: list[Any] = []
        state = tmp_path / "-".join(map(str, ["s", *cuts]))
        for lo, hi in zip([0, *cuts], [*cuts, len(data)], strict=True):
            with TopologyTestDriver(build(), state_dir=state) as driver:
                assert sum(driver.committed_offsets().values()) == lo
                topic = driver.create_input_topic("clicks")
                for key, value, ts in data[lo:hi]:
                    topic.pipe_input(key, value, timestamp=ts)
                got += [(r.key, r.value, r.timestamp) for r in
                         driver.create_output_topic("out").read_records_to_list()]
        return got

    once = run([])
    assert once and run([13, 40, 41]) == once
