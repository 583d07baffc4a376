"""Opening state directories: permissions, locks, format versions, foreign and corrupt content.

Every refused directory must be left exactly as it was: same entries, sizes, modification
times and bytes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from topology.state.rocksdb import (
    FORMAT_VERSION,
    StateDB,
    StateDirectoryError,
    StateFormatError,
    StateLockedError,
)

ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534


def snapshot(path: Path) -> dict[str, tuple[int, int, int, str]]:
    """Every entry under ``path``: mode, size, modification time and content digest."""
    found = {}
    for entry in sorted(path.rglob("*")):
        info = entry.lstat()
        digest = hashlib.sha256(entry.read_bytes()).hexdigest() if entry.is_file() else ""
        found[str(entry.relative_to(path))] = (info.st_mode, info.st_size, info.st_mtime_ns,
                                               digest)
    return found


def refused(path: Path, error: type[Exception], match: str) -> Exception:
    """Open ``path``, expect ``error``; check the directory was not changed at all."""
    before = snapshot(path)
    with pytest.raises(error, match=match) as caught:
        StateDB.open(path)
    assert snapshot(path) == before
    assert str(path) in str(caught.value)
    return caught.value


def make_state(path: Path) -> None:
    with StateDB.open(path) as db:
        db.keyspace("kv").put(b"k", b"v")
        db.commit({b"offset": b"7"})


@contextlib.contextmanager
def unprivileged() -> Iterator[None]:
    """Check file permissions as an ordinary user: as root, act as ``nobody`` meanwhile.

    chmod does not bind root, so as root the effective ids switch to nobody (and back).
    """
    if os.geteuid() != 0:
        yield
        return
    gid = os.getegid()
    os.setegid(NOBODY)
    os.seteuid(NOBODY)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(gid)


@pytest.fixture
def reachable(tmp_path: Path) -> Iterator[Path]:
    """A directory that ``unprivileged()`` code can reach (pytest's are root's own, 0o700)."""
    if os.geteuid() != 0:
        yield tmp_path
        return
    base = Path(tempfile.mkdtemp(prefix="statedb-perm-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        for inner in base.rglob("*"):
            if inner.is_dir() and not inner.is_symlink():
                inner.chmod(0o700)
        shutil.rmtree(base)


# -- creation ------------------------------------------------------------------------------


def test_created_owner_only_even_with_a_permissive_umask(tmp_path):
    path = tmp_path / "parent" / "state"
    old = os.umask(0)
    try:
        make_state(path)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert stat.S_IMODE((path / "db").stat().st_mode) == 0o700
    assert stat.S_IMODE((path / "STATEDB").stat().st_mode) == 0o600
    assert stat.S_IMODE((path / "STATEDB.lock").stat().st_mode) == 0o600
    assert stat.S_IMODE((path / "STATEDB.commit").stat().st_mode) == 0o600
    assert sorted(os.listdir(path)) == ["STATEDB", "STATEDB.commit", "STATEDB.lock", "db"]
    marker = json.loads((path / "STATEDB").read_text())
    assert marker == {"format": "topology-statedb", "version": FORMAT_VERSION}


def test_a_reused_directory_with_loose_modes_is_made_owner_only(tmp_path):
    path = tmp_path / "state"
    make_state(path)
    path.chmod(0o777)
    (path / "db").chmod(0o775)
    for name in ("STATEDB", "STATEDB.lock", "STATEDB.commit"):
        (path / name).chmod(0o644)
    with StateDB.open(path) as db:
        assert db.read_meta(b"offset") == b"7"
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert stat.S_IMODE((path / "db").stat().st_mode) == 0o700
    for name in ("STATEDB", "STATEDB.lock", "STATEDB.commit"):
        assert stat.S_IMODE((path / name).stat().st_mode) == 0o600, name


def test_permission_bits_are_only_removed(tmp_path):
    path = tmp_path / "state"
    make_state(path)
    path.chmod(0o750)
    (path / "STATEDB").chmod(0o440)
    with StateDB.open(path):
        pass
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert stat.S_IMODE((path / "STATEDB").stat().st_mode) == 0o400  # no bit is added


def test_a_refused_directory_keeps_its_mode(tmp_path):
    path = tmp_path / "photos"
    path.mkdir()
    path.chmod(0o755)
    (path / "a.jpg").write_bytes(b"jpeg")
    refused(path, StateDirectoryError, "not empty and is not a state directory")
    assert stat.S_IMODE(path.stat().st_mode) == 0o755


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a directory of another user")
def test_a_loose_directory_of_another_user_is_refused_untouched(tmp_path):
    path = tmp_path / "state"
    make_state(path)
    os.chown(path, NOBODY, NOBODY)
    path.chmod(0o770)
    refused(path, StateDirectoryError,
            f"its mode 0o770 lets group or others in, and it belongs to uid {NOBODY}, not to "
            "this process \\(uid 0\\), so it cannot be made owner-only: have its owner run "
            "'chmod go= ")
    assert stat.S_IMODE(path.stat().st_mode) == 0o770


def test_an_existing_empty_directory_becomes_a_state_directory(tmp_path):
    make_state(tmp_path)
    with StateDB.open(tmp_path) as db:
        assert db.read_meta(b"offset") == b"7"


# -- locks ---------------------------------------------------------------------------------

HOLDER = r'''
import sys
from topology.state.rocksdb import StateDB
with StateDB.open(sys.argv[1]):
    print("holding", flush=True)
    sys.stdin.read()
'''


def test_locked_by_another_live_process(tmp_path):
    path = tmp_path / "state"
    make_state(path)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)], cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"holding\n"
        error = refused(path, StateLockedError, f"in use by another runtime \\(pid {holder.pid}\\)")
        assert isinstance(error, StateLockedError) and error.holder_pid == holder.pid
    finally:
        holder.communicate(b"")
    assert holder.returncode == 0
    with StateDB.open(path) as db:  # released when the holder closed
        assert db.read_meta(b"offset") == b"7"


def test_a_killed_holder_does_not_keep_the_lock(tmp_path):
    path = tmp_path / "state"
    make_state(path)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)], cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert holder.stdout is not None and holder.stdout.readline() == b"holding\n"
    holder.kill()
    holder.communicate()
    with StateDB.open(path) as db:
        assert db.read_meta(b"offset") == b"7"


def test_locked_by_another_statedb_in_this_process(tmp_path):
    path = tmp_path / "state"
    make_state(path)
    with StateDB.open(path):
        refused(path, StateLockedError, f"pid {os.getpid()}, this process")


# -- format versions, foreign and corrupt directories ----------------------------------------


def test_future_format_version_is_refused(tmp_path):
    path = tmp_path / "state"
    make_state(path)
    (path / "STATEDB").write_text(json.dumps({"format": "topology-statedb", "version": 99}))
    refused(path, StateFormatError, "state format version 99, and this library reads version 1")


@pytest.mark.parametrize(
    "marker",
    [
        b'{"format": "topology-statedb", "vers',  # truncated
        b"",
        b"\xff\xfe garbage",
        b'{"format": "something-else", "version": 1}',
        b'{"format": "topology-statedb", "version": "1"}',
        b'{"format": "topology-statedb", "version": 0}',
        b"[1, 2]",
        b'{"format": "topology-statedb", "version": 1, "pad": "' + b"x" * 5000 + b'"}',
    ],
)
def test_corrupt_marker_is_refused(tmp_path, marker):
    path = tmp_path / "state"
    make_state(path)
    (path / "STATEDB").write_bytes(marker)
    refused(path, StateDirectoryError, "format marker STATEDB is corrupt")


def test_foreign_directory_is_refused(tmp_path):
    path = tmp_path / "photos"
    path.mkdir()
    (path / "a.jpg").write_bytes(os.urandom(100))
    (path / "notes").mkdir()
    (path / "notes" / "x.txt").write_text("hello")
    refused(path, StateDirectoryError, "not empty and is not a state directory.*'a.jpg'")


def test_state_directory_with_foreign_entries_is_refused(tmp_path):
    path = tmp_path / "state"
    make_state(path)
    (path / "README").write_text("mine")
    refused(path, StateDirectoryError, "entries that are not part of a state directory: 'README'")


def test_database_without_marker_is_refused(tmp_path):
    path = tmp_path / "state"
    make_state(path)
    (path / "STATEDB").unlink()
    refused(path, StateDirectoryError, "holds a database \\(db/\\) but no STATEDB format marker")


def test_marker_without_database_is_refused(tmp_path):
    path = tmp_path / "state"
    make_state(path)
    shutil.rmtree(path / "db")
    refused(path, StateDirectoryError, "database directory db/ is missing")


def test_symbolic_link_in_place_of_the_database_is_refused(tmp_path):
    path = tmp_path / "state"
    make_state(path)
    (path / "db").rename(tmp_path / "elsewhere")
    (path / "db").symlink_to(tmp_path / "elsewhere")
    refused(path, StateDirectoryError, "db should be a directory, found a link")


@pytest.mark.parametrize("damage", ["current", "manifest", "empty"])
def test_database_that_rocksdb_cannot_read_is_refused(tmp_path, damage):
    path = tmp_path / "state"
    make_state(path)
    database = path / "db"
    if damage == "current":
        (database / "CURRENT").write_text("garbage\n")
    elif damage == "manifest":
        for manifest in database.glob("MANIFEST-*"):
            manifest.write_bytes(b"\x00" * 7)
    else:
        for entry in database.iterdir():
            entry.unlink()
    refused(path, StateDirectoryError, "its database (cannot be read|is not a state database)")


# -- unwritable paths ------------------------------------------------------------------------


def test_unwritable_parent_is_a_clear_error(reachable):
    parent = reachable / "read-only"
    parent.mkdir()
    parent.chmod(0o555)
    with unprivileged(), pytest.raises(StateDirectoryError,
                                       match="cannot reach or create the directory: Permission"):
        StateDB.open(parent / "state")
    assert os.listdir(parent) == []


def test_unwritable_database_is_a_clear_error(reachable):
    path = reachable / "state"
    make_state(path)
    if os.geteuid() == 0:  # the unprivileged user must own the directory, all but db/ writable
        for inner in [path, *path.rglob("*")]:
            os.chown(inner, NOBODY, NOBODY)
    (path / "db").chmod(0o555)
    with unprivileged(), pytest.raises(
        StateDirectoryError, match="RocksDB cannot open its database: .*Permission denied"
    ):
        StateDB.open(path)
    (path / "db").chmod(0o700)
    with unprivileged(), StateDB.open(path) as db:  # and nothing was lost
        assert db.read_meta(b"offset") == b"7"


def test_unwritable_lock_file_is_a_clear_error(reachable):
    path = reachable / "state"
    make_state(path)
    path.chmod(0o755)
    if os.geteuid() == 0:  # a loose directory of another user would be refused before this
        os.chown(path, NOBODY, NOBODY)
    (path / "STATEDB").chmod(0o644)
    (path / "STATEDB.lock").chmod(0o444)
    with unprivileged(), pytest.raises(
        StateDirectoryError, match="cannot open the lock file STATEDB.lock: Permission denied"
    ):
        StateDB.open(path)


def test_a_file_where_the_directory_should_be(tmp_path):
    afile = tmp_path / "file"
    afile.write_text("x")
    with pytest.raises(StateDirectoryError, match="exists and is not a directory"):
        StateDB.open(afile)
    with pytest.raises(StateDirectoryError, match="cannot reach or create the directory: Not a"):
        StateDB.open(afile / "state")
    assert afile.read_text() == "x"


# -- creation interrupted by a crash -------------------------------------------------------


def test_leftovers_of_an_interrupted_creation_are_replaced(tmp_path):
    path = tmp_path / "state"
    path.mkdir()
    (path / "STATEDB.lock").write_text("12345\n")
    (path / "STATEDB.tmp").write_text('{"format": "topo')
    (path / "db.creating").mkdir()
    (path / "db.creating" / "000001.log").write_bytes(b"half")
    make_state(path)
    assert sorted(os.listdir(path)) == ["STATEDB", "STATEDB.commit", "STATEDB.lock", "db"]


def test_creation_interrupted_after_the_marker_is_finished(tmp_path):
    path = tmp_path / "state"
    make_state(path)
    (path / "db").rename(path / "db.creating")
    with StateDB.open(path) as db:
        assert db.keyspace("kv").get(b"k") == b"v"
    assert sorted(os.listdir(path)) == ["STATEDB", "STATEDB.commit", "STATEDB.lock", "db"]
