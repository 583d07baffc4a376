"""Spill to disk in the runtime: the state directory, commits, metrics, views and errors."""

from __future__ import annotations

import os
import stat

import pytest

from suppress import BufferConfig, Suppressed
from suppress.spill import SpillingBuffer
from topology import StreamsBuilder, TimeWindows, TopologyTestDriver, Window, Windowed
from topology.runtime.state_dir import TaskStateDir
from topology.runtime.task import spill_keyspace_name
from topology.state.codec import StateCodecError
from topology.state.rocksdb import StateDB


def rate_limited(records: int = 1, name: str = "rate"):
    b = StreamsBuilder()
    cfg = BufferConfig.max_records(records).spill_to_disk_when_full()
    (b.table("in").suppress(Suppressed.until_time_limit(10, cfg).with_name(name))
     .to_stream().to("out"))
    return b.build()


def final_counts(records: int = 1):
    b = StreamsBuilder()
    cfg = BufferConfig.max_records(records).spill_to_disk_when_full()
    (b.stream("in").group_by_key().windowed_by(TimeWindows.of_size_and_grace(10, 0)).count()
     .suppress(Suppressed.until_window_closes(cfg).with_name("final")).to_stream().to("out"))
    return b.build()


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_spill_config_gives_final_results_through_the_disk_tier() -> None:
    with TopologyTestDriver(final_counts(1)) as d:
        clicks, out = d.create_input_topic("in"), d.create_output_topic("out")
        for key, ts in [("b", 1), ("a", 2), ("c", 3), ("a", 4), ("b", 12)]:
            clicks.pipe_input(key, "x", ts)
        assert out.read_key_values_to_list() == [
            (Windowed("a", Window(0, 10)), 2), (Windowed("b", Window(0, 10)), 1),
            (Windowed("c", Window(0, 10)), 1)]
        # a spilling buffer takes no changes by window: the aggregation forwards its keys
        assert not d._task.handing
        assert d._task.processors["final"].window_entry() is None


def test_nothing_is_opened_until_something_spills_and_a_temporary_directory_goes_at_close(
        ) -> None:
    with TopologyTestDriver(rate_limited(2)) as d:
        rows = d.create_input_topic("in")
        rows.pipe_input("a", 1, 0)
        rows.pipe_input("b", 1, 1)
        assert d._task.spill_state.path is None
        rows.pipe_input("c", 1, 2)
        path = d._task.spill_state.path
        assert path is not None and path.is_dir() and mode(path) == 0o700
        assert mode(path.parent) == 0o700  # the private temporary directory
    assert not path.exists() and not path.parent.exists()


def test_a_state_dir_holds_the_disk_tier_in_the_tasks_state_owner_only(tmp_path) -> None:
    state_dir = tmp_path / "state" / "nested"
    with TopologyTestDriver(rate_limited(0), {"application_id": "app"}, state_dir) as d:
        d.create_input_topic("in").pipe_input("a", 1, 0)
        assert d._task.spill_state.path is None  # no scratch database: it is the task's state
    for directory in (tmp_path / "state", state_dir, state_dir / "app", state_dir / "app" / "0_0"):
        assert mode(directory) == 0o700, directory
    assert not (state_dir / "app" / "0_0.spill").exists()
    with StateDB.open(state_dir / "app" / "0_0") as db:
        keyspace = db.keyspace(spill_keyspace_name("rate-store"))
        assert list(keyspace.items())  # the buffered key, committed when pipe_input returned


def test_an_existing_state_dir_keeps_its_mode(tmp_path) -> None:
    os.chmod(tmp_path, 0o755)
    with TopologyTestDriver(rate_limited(0), state_dir=tmp_path) as d:
        d.create_input_topic("in").pipe_input("a", 1, 0)
    assert mode(tmp_path) == 0o755
    assert mode(tmp_path / "topology-test-driver-app") == 0o700


def test_a_durable_spilled_buffer_is_restored_and_continues(tmp_path) -> None:
    with TopologyTestDriver(rate_limited(0), state_dir=tmp_path) as d:
        rows, out = d.create_input_topic("in"), d.create_output_topic("out")
        for key, ts in [("x", 0), ("y", 5), ("z", 20)]:
            rows.pipe_input(key, ts, ts)
        assert d.get_state_store("rate-store").num_records == 1  # z, left at close
        assert out.read_key_values_to_list() == [("x", 0), ("y", 5)]
    with TopologyTestDriver(rate_limited(0), state_dir=tmp_path) as d:
        assert d.get_state_store("rate-store").num_records == 1  # z, restored from disk
        d.create_input_topic("in").pipe_input("w", 40, 40)
        assert d.create_output_topic("out").read_key_values_to_list() == [("z", 20)]


def test_an_application_id_that_cannot_name_a_directory_is_refused_with_a_state_dir(
        tmp_path) -> None:
    with pytest.raises(ValueError, match="application id"):
        TopologyTestDriver(rate_limited(), {"application_id": "../up"}, tmp_path)
    TopologyTestDriver(rate_limited(), {"application_id": "../up"}).close()  # no directory


def test_the_task_commits_at_the_end_of_every_pipe_call() -> None:
    with TopologyTestDriver(rate_limited(0)) as d:
        rows = d.create_input_topic("in")
        rows.pipe_input("a", 1, 0)
        keyspace = d._task.spill_state.keyspace(spill_keyspace_name("rate-store"))
        assert not keyspace._dirty
        rows.pipe_records([("b", 1, 1), ("c", 1, 2)])
        assert not keyspace._dirty
        assert d.get_state_store("rate-store").num_records == 3


def test_pending_writes_are_committed_as_they_pile_up(monkeypatch) -> None:
    monkeypatch.setattr(SpillingBuffer, "COMMIT_EVERY", 10)
    monkeypatch.setattr(SpillingBuffer, "STAGE_LIMIT", 4)
    pending: list[int] = []
    commit = TaskStateDir.commit

    def counting(self: TaskStateDir) -> None:
        if self.path is not None:
            pending.append(len(self.keyspace(spill_keyspace_name("rate-store"))._writes))
        commit(self)

    monkeypatch.setattr(TaskStateDir, "commit", counting)
    with TopologyTestDriver(rate_limited(0)) as d:
        d.create_input_topic("in").pipe_records([(f"k{i}", i, 0) for i in range(100)])
        assert d.get_state_store("rate-store").num_records == 100
    assert len(pending) >= 19 and max(pending) <= 11  # a new key writes two at once


def test_metrics_and_the_store_view_count_both_tiers() -> None:
    with TopologyTestDriver(rate_limited(1), {"metrics_recording_level": "DEBUG"}) as d:
        rows = d.create_input_topic("in")
        for key, ts in [("b", 0), ("a", 1), ("c", 2)]:
            rows.pipe_input(key, key * 3, ts)
        buffer = d._task.suppressors["rate"].buffer
        assert (buffer.memory_records, buffer.disk_records) == (1, 2)
        view = d.get_state_store("rate-store")
        assert view.num_records == 3
        assert view.entries() == [("b", "bbb", 0), ("a", "aaa", 1), ("c", "ccc", 2)]
        one = 8 + 1 + 3 + 8 + 8 + 2 + 4  # key, new value, context with topic "in"
        assert view.size_bytes == 3 * one
        m = d.metrics()
        assert (m["suppression-buffer-count"], m["suppression-buffer-size"]) == (3, 3 * one)
        assert m["suppression-buffer-count-max"] == 3


def test_a_value_the_state_codec_cannot_write_fails_the_task_naming_the_suppression() -> None:
    class Opaque:
        pass

    with TopologyTestDriver(rate_limited(0)) as d:
        rows = d.create_input_topic("in")
        with pytest.raises(StateCodecError, match="suppression rate cannot move .* Opaque"):
            rows.pipe_input("a", Opaque(), 0)
        assert d.failure is not None and d.failure.node == "rate"


def test_suppression_names_that_are_not_keyspace_names_are_mapped() -> None:
    assert spill_keyspace_name("a.b-c_d") == "spill.a.b-c_d"
    odd = spill_keyspace_name("my store/1")
    assert odd.startswith("spill-sha256.") and len(odd) == len("spill-sha256.") + 64
    assert spill_keyspace_name("x" * 241) != spill_keyspace_name("x" * 242)
    with TopologyTestDriver(rate_limited(0, name="my rate")) as d:
        d.create_input_topic("in").pipe_input("a", 1, 0)
        assert d.get_state_store("my rate-store").num_records == 1
