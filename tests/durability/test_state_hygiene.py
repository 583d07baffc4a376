"""State hygiene (issue 20, item 8): library directories are owner-only, symbolic links in
their place are refused, an unclosed driver leaves no temporary state behind, and a store
whose layout changed under the same name is not read with the new one.

Real RocksDB in temporary directories, through ``TopologyTestDriver`` where the runtime is
what is checked.
"""

from __future__ import annotations

import gc
import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from suppress import BufferConfig, Suppressed
from topology import StreamsBuilder, TimeWindows, TopologyTestDriver
from topology.runtime.graph import StoreSpec
from topology.runtime.state_dir import TaskStateDir
from topology.runtime.store_specs import (
    STORES_META,
    check_store_signatures,
    key_value_store_spec,
    session_store_spec,
    store_signatures,
    versioned_store_spec,
    window_store_spec,
)
from topology.state.rocksdb import StateDB, StateDirectoryError

ROOT = Path(__file__).resolve().parents[2]
APP = "app"
NOBODY = 65534


def spilling():
    """A topology that opens both task databases: a table (0_0) and a spilling buffer."""
    b = StreamsBuilder()
    cfg = BufferConfig.max_records(0).spill_to_disk_when_full()
    (b.table("in").suppress(Suppressed.until_time_limit(10, cfg).with_name("rate"))
     .to_stream().to("out"))
    return b.build()


def windowed(size: int, grace: int):
    b = StreamsBuilder()
    (b.stream("in").group_by_key().windowed_by(TimeWindows.of_size_and_grace(size, grace))
     .count().to_stream().to("out"))
    return b.build()


def run(state_dir: Path | None, topology=None) -> None:
    with TopologyTestDriver(topology or spilling(), {"application_id": APP}, state_dir) as d:
        d.create_input_topic("in").pipe_input("a", 1, 0)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def tree(path: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every entry under ``path`` (links not followed): mode, owner and content."""
    return {str(entry.relative_to(path)): (
        os.lstat(entry).st_mode, os.lstat(entry).st_uid,
        entry.read_bytes() if entry.is_file() and not entry.is_symlink() else b"")
        for entry in sorted(path.rglob("*"))}


# -- owner-only modes ------------------------------------------------------------------------


def test_created_directories_are_0700_and_files_0600_even_with_a_permissive_umask(tmp_path):
    old = os.umask(0)
    try:
        run(tmp_path / "state")
    finally:
        os.umask(old)
    app = tmp_path / "state" / APP
    for directory in (tmp_path / "state", app, app / "0_0", app / "0_0" / "db"):
        assert mode(directory) == 0o700, directory
    assert not (app / "0_0.spill").exists()  # a durable task's disk tier is in its state
    for name in ("STATEDB", "STATEDB.lock", "STATEDB.commit"):
        assert mode(app / "0_0" / name) == 0o600, name


def test_loose_existing_app_and_task_directories_are_made_owner_only(tmp_path):
    app = tmp_path / APP
    for directory in (app, app / "0_0"):
        directory.mkdir()
        directory.chmod(0o777)
    run(tmp_path)
    for directory in (app, app / "0_0"):
        assert mode(directory) == 0o700, directory


def test_the_users_state_dir_keeps_its_mode(tmp_path):
    tmp_path.chmod(0o755)
    run(tmp_path)
    assert mode(tmp_path) == 0o755
    assert mode(tmp_path / APP) == 0o700


def test_a_reused_state_directory_with_loose_modes_is_made_owner_only(tmp_path):
    run(tmp_path)
    task = tmp_path / APP / "0_0"
    task.chmod(0o777)
    (task / "db").chmod(0o755)
    for name in ("STATEDB", "STATEDB.lock", "STATEDB.commit"):
        (task / name).chmod(0o666)
    run(tmp_path)
    assert mode(task) == mode(task / "db") == 0o700
    for name in ("STATEDB", "STATEDB.lock", "STATEDB.commit"):
        assert mode(task / name) == 0o600, name


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a directory of another user")
@pytest.mark.parametrize("where", [APP, f"{APP}/0_0", f"{APP}/0_0/db"])
def test_a_loose_directory_of_another_user_is_refused_untouched(tmp_path, where):
    run(tmp_path)
    loose = tmp_path / where
    os.chown(loose, NOBODY, NOBODY)
    loose.chmod(0o777)
    before = tree(tmp_path)
    with pytest.raises(StateDirectoryError, match=(
            f"{loose}: open failed: its mode 0o777 lets group or others in, and it belongs "
            f"to uid {NOBODY}, not to this process \\(uid 0\\), so it cannot be made owner-only")):
        run(tmp_path)
    after = tree(tmp_path)
    if where.endswith("db"):  # refused under the lock: the lock file may have been rewritten
        after.pop(f"{APP}/0_0/STATEDB.lock"), before.pop(f"{APP}/0_0/STATEDB.lock")
    assert after == before


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a directory of another user")
def test_an_owner_only_directory_of_another_user_is_used_as_it_is(tmp_path):
    run(tmp_path)
    os.chown(tmp_path / APP, NOBODY, NOBODY)  # 0o700: nobody else can get in but its owner
    run(tmp_path)
    assert mode(tmp_path / APP) == 0o700


# -- symbolic links ------------------------------------------------------------------------


@pytest.mark.parametrize("link", [APP, f"{APP}/0_0"])
def test_a_symlinked_app_or_task_directory_is_refused_and_its_target_untouched(tmp_path, link):
    state_dir, target = tmp_path / "state", tmp_path / "target"
    target.mkdir()
    target.chmod(0o755)
    (target / "mine.txt").write_text("keep")
    (state_dir / link).parent.mkdir(parents=True)
    (state_dir / link).symlink_to(target)
    before = tree(target)
    with pytest.raises(StateDirectoryError, match=(
            f"{state_dir / link}: open failed: it is a symbolic link to '{target}'")):
        run(state_dir)
    assert tree(target) == before and mode(target) == 0o755
    assert (state_dir / link).is_symlink()


def test_a_symlinked_spill_directory_is_refused(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    (tmp_path / APP).mkdir(mode=0o700)
    (tmp_path / APP / "0_0.spill").symlink_to(target)
    state = TaskStateDir(tmp_path, APP, "0_0.spill")
    with pytest.raises(StateDirectoryError, match="0_0.spill: open failed: it is a symbolic link"):
        state.keyspace("spill.x")
    state.close()
    assert list(target.iterdir()) == []


def test_a_dangling_symlink_is_refused_not_created_through(tmp_path):
    (tmp_path / APP).symlink_to(tmp_path / "nowhere")
    with pytest.raises(StateDirectoryError, match="symbolic link to"):
        run(tmp_path)
    assert not (tmp_path / "nowhere").exists()


def test_the_state_dir_itself_may_be_a_symlink(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    run(tmp_path / "link")
    run(tmp_path / "link")  # and reopened
    assert mode(tmp_path / "real" / APP / "0_0") == 0o700


# -- temporary state -----------------------------------------------------------------------


def test_an_unclosed_driver_removes_its_temporary_state_when_collected():
    d = TopologyTestDriver(spilling())
    d.create_input_topic("in").pipe_input("a", 1, 0)
    path = d._task.spill_state.path
    assert path is not None and path.parent.name.startswith("topology-state-")
    assert path.is_dir()
    del d
    gc.collect()
    assert not path.parent.exists()


def test_closing_removes_the_temporary_state_once():
    state = TaskStateDir(None, APP)
    state.keyspace("kv").put(b"k", b"v")
    assert state.path is not None
    temporary = state.path.parent
    state.close()
    assert not temporary.exists()
    state.close()  # idempotent


UNCLOSED = textwrap.dedent("""
    import os, sys
    from suppress import BufferConfig, Suppressed
    from topology import StreamsBuilder, TopologyTestDriver
    b = StreamsBuilder()
    cfg = BufferConfig.max_records(0).spill_to_disk_when_full()
    b.table("in").suppress(Suppressed.until_time_limit(10, cfg)).to_stream().to("out")
    d = TopologyTestDriver(b.build())
    d.create_input_topic("in").pipe_input("a", 1, 0)
    print(d._task.spill_state.path, flush=True)
    if sys.argv[1] == "kill":
        os.kill(os.getpid(), 9)
    # exits without close()
""")


def unclosed(tmp_path: Path, how: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    done = subprocess.run([sys.executable, "-c", UNCLOSED, how], cwd=ROOT, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(scratch)),
                          capture_output=True, timeout=120, check=False)
    assert done.stdout.startswith(str(scratch)), done.stderr  # TMPDIR was used
    return done, sorted(p.name for p in scratch.glob("topology-state-*"))


def test_a_driver_never_closed_leaves_no_temporary_state_at_exit(tmp_path):
    done, left = unclosed(tmp_path, "exit")
    assert done.returncode == 0, done.stderr
    assert left == []


def test_a_killed_driver_leaves_its_temporary_state_named_topology_state(tmp_path):
    done, left = unclosed(tmp_path, "kill")  # nothing runs at SIGKILL: documented, findable
    assert done.returncode == -signal.SIGKILL
    assert len(left) == 1 and done.stdout.strip().startswith(str(tmp_path / "tmp" / left[0]))


# -- store layouts -------------------------------------------------------------------------


def test_signatures_name_the_kind_and_what_lays_the_store_out():
    specs = {spec.name: spec.signature for spec in windowed(60_000, 5_000).stores}
    assert list(specs.values()) == ["window retention_ms=65000 window_size_ms=60000"]
    assert window_store_spec("w", None, 10, 15).signature == "window retention_ms=15 " \
        "window_size_ms=10"
    assert session_store_spec("s", None, 15).signature == \
        "session retention_ms=15 segment_interval_ms=60000"
    assert StoreSpec("kv", "key-value", dict).signature == "key-value"
    assert versioned_store_spec("v", None, 100, 9).signature == \
        "versioned history_retention_ms=100 segment_interval_ms=9"


@pytest.mark.parametrize("make", [
    lambda: window_store_spec("w", None, 10, 15),
    lambda: session_store_spec("s", None, 15),
    lambda: session_store_spec("s", None, 15, segment_interval_ms=7),
    lambda: versioned_store_spec("v", None, 100),
    lambda: versioned_store_spec("v", None, 100, segment_interval_ms=9),
    lambda: key_value_store_spec("kv", None),
])
def test_given_parameters_agree_with_the_store_they_make(make):
    spec = make()
    read = StoreSpec(spec.name, spec.kind, spec.factory)  # read back from a fresh store
    assert read.signature == spec.signature


def test_a_changed_window_size_or_grace_is_refused():
    written = windowed(60_000, 5_000).stores
    committed = store_signatures(written)
    check_store_signatures("/s", committed, written)
    check_store_signatures("/s", None, windowed(30_000, 0).stores)  # nothing recorded
    for changed in (windowed(30_000, 5_000), windowed(60_000, 0)):
        with pytest.raises(StateDirectoryError, match=(
                "/s: restore failed: store 'KSTREAM-AGGREGATE-STATE-STORE-0000000001' was "
                "written as 'window retention_ms=65000 window_size_ms=60000' and this topology "
                "has it as 'window .*new application_id or state_dir")):
            check_store_signatures("/s", committed, changed.stores)
    other = [StoreSpec("new", "key-value", dict)]  # a new store, an old one gone: fine
    check_store_signatures("/s", committed, other)
    with pytest.raises(StateDirectoryError, match="store signatures .* are damaged"):
        check_store_signatures("/s", b"\xff{", written)


def test_a_changed_window_size_under_the_same_store_name_is_refused_on_open(tmp_path):
    run(tmp_path, windowed(60_000, 5_000))
    with StateDB.open(tmp_path / APP / "0_0") as db:
        recorded = db.read_meta(STORES_META)
    assert recorded is not None  # every commit records its stores' signatures
    with pytest.raises(StateDirectoryError, match="was written as 'window retention_ms=65000"):
        run(tmp_path, windowed(30_000, 5_000))
    run(tmp_path, windowed(60_000, 5_000))  # the old parameters still open it
