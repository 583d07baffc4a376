"""Atomic commits under SIGKILL, and full disks, with real writer processes.

A writer process (``WRITER``, run with ``python -c``) opens a state directory and makes
numbered commits, each a deterministic mix of puts, deletes and range deletes over three
keyspaces plus the meta entry ``commit = k``; it prints ``k`` after each commit returns. The
test kills it with SIGKILL at a random moment, reopens the directory and checks that the state
is exactly the state after commit ``k`` in every keyspace, for the ``k`` the meta says, and that
no acknowledged commit was lost. The next writer continues from there on the same directory,
so later kills also land in RocksDB's recovery, flushes and compactions.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from topology.state.rocksdb import StateDB

ROOT = Path(__file__).resolve().parents[2]

#: The writer's source: ``plan`` (shared with the test, which replays it as the model) and
#: ``write``. Run as ``python -c WRITER + "write(path, seed)"``.
WRITER = r'''
import random
import sys

KEYSPACES = ("ks0", "ks1", "ks2")


def plan(seed, k):
    """Commit k's operations: (keyspace, op, key or range, value), deterministic in (seed, k)."""
    rng = random.Random(f"{seed}-{k}")
    ops = []
    for name in KEYSPACES:
        for i in range(rng.randrange(5, 30)):
            roll = rng.random()
            key = b"k%03d" % rng.randrange(200)
            if roll < 0.7:
                value = b"%d:%s:%d:" % (k, name.encode(), i) + b"x" * rng.randrange(400)
                ops.append((name, "put", key, value))
            elif roll < 0.93:
                ops.append((name, "delete", key, None))
            else:
                hi = b"k%03d" % (int(key[1:]) + rng.randrange(1, 20))
                ops.append((name, "delete_range", (key, hi), None))
    return ops


def write(path, seed):
    from topology.state.rocksdb import StateDB

    db = StateDB.open(path)
    k = int(db.read_meta(b"commit") or b"0")
    print("open", k, flush=True)
    keyspaces = {name: db.keyspace(name) for name in KEYSPACES}
    while True:
        k += 1
        for name, op, key, value in plan(seed, k):
            if op == "put":
                keyspaces[name].put(key, value)
            elif op == "delete":
                keyspaces[name].delete(key)
            else:
                keyspaces[name].delete_range(*key)
        db.commit({b"commit": b"%d" % k})
        print(k, flush=True)
'''

_writer_namespace: dict[str, object] = {}
exec(WRITER, _writer_namespace)  # the test replays the writer's own plan as its model
plan = _writer_namespace["plan"]
KEYSPACES: tuple[str, ...] = _writer_namespace["KEYSPACES"]  # type: ignore[assignment]


class Model:
    """The expected contents after commit k, advanced one commit at a time."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.k = 0
        self.data: dict[str, dict[bytes, bytes]] = {name: {} for name in KEYSPACES}

    def advance_to(self, k: int) -> None:
        assert k >= self.k, f"commit {self.k} was seen, then the state went back to {k}"
        while self.k < k:
            self.k += 1
            for name, op, key, value in plan(self.seed, self.k):  # type: ignore[operator]
                data = self.data[name]
                if op == "put":
                    data[key] = value
                elif op == "delete":
                    data.pop(key, None)
                else:
                    lo, hi = key
                    for stored in [s for s in data if lo <= s < hi]:
                        del data[stored]


def start_writer(path: Path, seed: int) -> subprocess.Popen[bytes]:
    """Start a writer process on ``path``."""
    return subprocess.Popen(
        [sys.executable, "-c", WRITER + f"\nwrite({str(path)!r}, {seed})\n"],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        # Unbuffered: readline() must not take lines out of the pipe that communicate(),
        # which reads the pipe itself, would then never see.
        bufsize=0,
    )


def kill(writer: subprocess.Popen[bytes]) -> list[str]:
    """SIGKILL ``writer``; return the complete lines it printed."""
    writer.send_signal(signal.SIGKILL)
    out, err = writer.communicate()
    assert writer.returncode == -signal.SIGKILL, err.decode()
    return out.decode().split("\n")[:-1]  # the last piece is empty or an unfinished line


def run_writer(path: Path, seed: int, kill_after: float) -> list[str]:
    """Start a writer, SIGKILL it after ``kill_after`` seconds, return its complete lines."""
    writer = start_writer(path, seed)
    time.sleep(kill_after)
    return kill(writer)


def acknowledged(lines: list[str], before: int) -> int:
    """The last commit the writer saw return or found when it opened; ``before`` if none.

    The writer prints "open k" before its first commit and each k after the commit returns, so
    the state is at this commit or, if the kill fell between a commit and its line, one after.
    """
    for line in reversed(lines):
        if line.startswith("open "):
            return int(line.split()[1])
        if line:
            return int(line)
    return before


def check_state(path: Path, model: Model, at_least: int) -> int:
    """Reopen ``path`` and check it holds exactly some whole commit k >= ``at_least``."""
    with StateDB.open(path) as db:
        k = int(db.read_meta(b"commit") or b"0")
        assert k >= at_least, f"commit {at_least} returned, but the state is at commit {k}"
        assert k <= at_least + 1, f"the state is at commit {k}, two past the last acknowledged"
        model.advance_to(k)
        for name in KEYSPACES:
            keyspace = db.keyspace(name)
            assert dict(keyspace.items()) == model.data[name], f"{name} after commit {k}"
            assert list(keyspace.items(reverse=True)) == sorted(model.data[name].items())[::-1]
    return k


def kill_repeatedly(path: Path, kills: int, seed: int) -> list[int]:
    """Kill a writer ``kills`` times at random moments; return the commit seen after each.

    A quarter of the kills fall in the first 0.3 s (startup, RocksDB's recovery of the previous
    run, or the first commits); the others within 80 ms after the writer opened the directory,
    among its commits, however long its startup took.
    """
    rng = random.Random(seed)
    model = Model(seed)
    seen = [0]
    for _ in range(kills):
        writer = start_writer(path, seed)
        opened = []
        if rng.random() < 0.25:
            time.sleep(rng.uniform(0.05, 0.3))
        else:
            assert writer.stdout is not None
            opened.append(writer.stdout.readline().decode().rstrip("\n"))
            time.sleep(rng.uniform(0, 0.08))
        lines = opened + kill(writer)
        seen.append(check_state(path, model, acknowledged(lines, seen[-1])))
    return seen[1:]


def advances(seen: list[int]) -> int:
    """How many kills fell after at least one new commit."""
    return sum(1 for before, after in zip([0, *seen], seen, strict=False) if after > before)


@pytest.mark.kill
def test_sigkill_at_20_random_points_leaves_whole_commits(tmp_path):
    seen = kill_repeatedly(tmp_path / "state", kills=20, seed=20)
    assert advances(seen) >= 5, f"too few kills fell among commits: {seen}"


@pytest.mark.slow
def test_sigkill_at_200_random_points_leaves_whole_commits(tmp_path):
    seen = kill_repeatedly(tmp_path / "state", kills=200, seed=200)
    assert advances(seen) >= 100, f"too few kills fell among commits: {seen}"


@pytest.mark.kill
def test_sigkill_while_creating_leaves_an_openable_directory(tmp_path):
    # time the writer's startup up to "open 0" (imports, then creating the directory), then
    # kill fresh writers in the last 30 % of that span, where creation happens
    writer = start_writer(tmp_path / "calibration", 1)
    start = time.monotonic()
    first = writer.stdout.readline() if writer.stdout else b""
    opened = time.monotonic() - start
    kill(writer)
    assert first == b"open 0\n"
    rng = random.Random(7)
    checked = 0
    for attempt in range(7):  # the last one is killed once the directory surely exists
        path = tmp_path / f"fresh{attempt}"
        after = rng.uniform(0.7 * opened, opened) if attempt < 6 else 1.5 * opened
        lines = run_writer(path, 1, kill_after=after)
        if path.exists():  # a kill before creation began leaves nothing to check
            check_state(path, Model(1), at_least=acknowledged(lines, 0))
            checked += 1
    assert checked, "no kill left a directory behind: nothing was checked"


FULL_DISK = r'''
import os, resource, signal, sys
from topology.state.rocksdb import StateDB, StateStoreError

path = sys.argv[1]
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
db = StateDB.open(path)
ks = db.keyspace("kv")
ks.put(b"a", b"1")
db.commit({b"n": b"1"})
largest = max(os.path.getsize(os.path.join(path, "db", f)) for f in os.listdir(path + "/db"))
resource.setrlimit(resource.RLIMIT_FSIZE, (largest + 65536, resource.RLIM_INFINITY))
for i in range(300):
    ks.put(b"big%03d" % i, b"x" * 10000)
try:
    db.commit({b"n": b"2"})
    print("committed")
except StateStoreError as exc:
    print("commit:", exc)
try:
    ks.get(b"a")
except StateStoreError as exc:
    print("after:", exc)
db.close()
print("closed")
'''


def test_full_disk_fails_the_commit_clearly_and_keeps_the_previous_one(tmp_path):
    path = tmp_path / "state"
    result = subprocess.run(
        [sys.executable, "-c", FULL_DISK, str(path)], cwd=ROOT, capture_output=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60,
    )
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr.decode()
    commit, after, closed = out.splitlines()
    assert commit.startswith(f"commit: state directory {path}: commit failed: IO error")
    assert "File too large" in commit and "previous commit or this one, whole" in commit
    assert after.startswith(f"after: state directory {path}: use of keyspace 'kv' failed: "
                            "a commit failed")
    assert closed == "closed"
    with StateDB.open(path) as db:
        assert db.read_meta(b"n") == b"1"
        assert list(db.keyspace("kv").items()) == [(b"a", b"1")]


def test_full_disk_while_creating_is_a_clear_error_and_recovers(tmp_path):
    path = tmp_path / "state"
    script = (
        "import resource, signal, sys\n"
        "from topology.state.rocksdb import StateDB, StateDirectoryError\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (64, resource.RLIM_INFINITY))\n"
        "try:\n"
        "    StateDB.open(sys.argv[1])\n"
        "except StateDirectoryError as exc:\n"
        "    print(exc)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(path)], cwd=ROOT, capture_output=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60,
    )
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().startswith(f"state directory {path}: open failed: cannot "
                                             "create the database: IO error")
    assert "File too large" in result.stdout.decode()
    with StateDB.open(path) as db:  # the leftovers of the failed creation are replaced
        db.keyspace("kv").put(b"a", b"1")
        db.commit()
    assert sorted(os.listdir(path)) == ["STATEDB", "STATEDB.commit", "STATEDB.lock", "db"]


def test_failed_checkpoint_leaves_no_directory(tmp_path):
    script = (
        "import resource, signal, sys\n"
        "from topology.state.rocksdb import StateDB, StateDirectoryError\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "with StateDB.open(sys.argv[1]) as db:\n"
        "    db.keyspace('kv').put(b'a', b'1' * 1000)\n"
        "    db.commit()\n"
        "    db.checkpoint(sys.argv[1] + '-first')  # flushes: the next one copies files only\n"
        "    resource.setrlimit(resource.RLIMIT_FSIZE, (64, resource.RLIM_INFINITY))\n"
        "    try:\n"
        "        db.checkpoint(sys.argv[2])\n"
        "    except StateDirectoryError as exc:\n"
        "        print(exc)\n"
    )
    copy = tmp_path / "copy"
    result = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "state"), str(copy)], cwd=ROOT,
        capture_output=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60,
    )
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().startswith(f"state directory {copy}: checkpoint failed: ")
    assert not copy.exists()
