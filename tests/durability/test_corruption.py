"""Damage to a durable state directory: exact output after restart, or a clear error.

A driver pipes half the records (committing as it goes) and closes; one file of its state
directory is then flipped, truncated or deleted; a new driver on the directory pipes the
rest from its committed offsets and every output is read. The outcome must be the output
of one uninterrupted run, or a library error that says the state is damaged
(:class:`~topology.errors.StateCorruptedError`, or a :class:`StateDirectoryError` refusing
the directory): never fewer or more results, never a raw ``TypeError``. A clean close leaves
the write-ahead log empty, so the log is damaged after a crash instead (the tests at the end).
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest

from topology import TopologyTestDriver
from topology.errors import StateCorruptedError
from topology.state.rocksdb.errors import StateDirectoryError

from .pipeline import OUTPUTS, pipe_from_committed, read_all, records, topology

N = 1_000
CLEAR = (StateCorruptedError, StateDirectoryError)


def run(state_dir: Path, data: list[Any], upto: int | None = None) -> dict[str, list[Any]]:
    with TopologyTestDriver(topology(), state_dir=state_dir,
                            config={"commit_interval_records": 97}) as driver:
        pipe_from_committed(driver, data if upto is None else data[:upto])
        out = read_all(driver) if upto is None else {name: [] for name in OUTPUTS}
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Any]]:
    data = records(N, seed=4)
    with TopologyTestDriver(topology()) as driver:
        pipe_from_committed(driver, data)
        out = read_all(driver)
    assert all(out.values()), "every output holds records for the damage to lose or double"
    return out


def damaged_run(tmp_path: Path, damage: Any, pick: Any) -> dict[str, list[Any]] | Exception:
    data = records(N, seed=4)
    state = tmp_path / "state"
    with TopologyTestDriver(topology(), state_dir=state,
                            config={"commit_interval_records": 97}) as driver:
        pipe_from_committed(driver, data[:N // 2])
        first = read_all(driver)
    database = next(state.iterdir()) / "0_0"
    files = sorted(p for p in database.rglob("*") if p.is_file() and pick(p.name))
    assert files, "the state directory holds a file of this kind"
    damage(random.Random(7), files[-1])
    try:
        with TopologyTestDriver(topology(), state_dir=state,
                                config={"commit_interval_records": 97}) as driver:
            pipe_from_committed(driver, data)
            rest = read_all(driver)
    except CLEAR as exc:
        return exc
    return {name: first[name] + rest[name] for name in OUTPUTS}


def flip(rng: random.Random, path: Path) -> None:
    data = bytearray(path.read_bytes())
    assert data, f"{path.name} is empty: nothing to damage"
    at = rng.randrange(len(data))
    data[at] ^= 0x40
    path.write_bytes(bytes(data))


def truncate_last_byte(_: random.Random, path: Path) -> None:
    size = path.stat().st_size
    assert size, f"{path.name} is empty: nothing to damage"
    os.truncate(path, size - 1)


def truncate_half(_: random.Random, path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def delete(_: random.Random, path: Path) -> None:
    path.unlink()


KINDS = {
    "table": lambda name: name.endswith(".sst"),
    "manifest": lambda name: name.startswith("MANIFEST"),
    "current": lambda name: name == "CURRENT",
    "options": lambda name: name.startswith("OPTIONS"),
}
DAMAGE = {"flip": flip, "truncate-1": truncate_last_byte, "truncate-half": truncate_half,
          "delete": delete}


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("how", sorted(DAMAGE))
def test_damage_gives_exact_output_or_a_clear_error(tmp_path: Path, kind: str, how: str,
                                                     reference: dict[str, list[Any]]) -> None:
    outcome = damaged_run(tmp_path, DAMAGE[how], KINDS[kind])
    if isinstance(outcome, Exception):
        assert str(outcome)
        return
    assert outcome == reference


CHILD = """
import os, sys
from topology.state.rocksdb import StateDB
db = StateDB.open(sys.argv[1])
for i in range(5):
    db.keyspace("kv").put(str(i).encode(), b"v" * 100)
    db.commit({b"offset": str(i).encode()})
os._exit(0)  # a crash: RocksDB never flushes, the commits live in the write-ahead log
"""


@pytest.mark.parametrize("how", ["truncate-half", "delete"])
def test_a_write_ahead_log_that_lost_commits_is_refused(tmp_path: Path, how: str) -> None:
    import subprocess
    import sys

    from topology.state.rocksdb import StateDB

    state = tmp_path / "state"
    subprocess.run([sys.executable, "-c", CHILD, str(state)], check=True)
    (log,) = [p for p in (state / "db").iterdir() if p.suffix == ".log" and p.stat().st_size]
    DAMAGE[how](random.Random(1), log)
    with pytest.raises(StateCorruptedError, match="commit 5 was made, but the database holds"):
        StateDB.open(state)


def test_a_keyspace_lost_from_the_manifest_is_refused_not_recreated(tmp_path: Path) -> None:
    from topology.state.rocksdb import StateDB

    state = tmp_path / "state"
    with StateDB.open(state) as db:
        db.keyspace("kept").put(b"k", b"v")
        db.keyspace("lost").put(b"k", b"v")
        db.commit()
    with StateDB.open(state) as db:  # the record of the last commit, without "lost"
        record = db.read_meta(b"statedb.commit")
    assert record is not None and record.split(b"\n")[1:] == [b"kept", b"lost"]
    import rocksdict

    raw_mode = rocksdict.Options(raw_mode=True)
    raw = rocksdict.Rdict(str(state / "db"), raw_mode, column_families={
        name: rocksdict.Options(raw_mode=True)
        for name in rocksdict.Rdict.list_cf(str(state / "db"), raw_mode) if name != "default"})
    raw.drop_column_family("ks:lost")  # what a damaged manifest does to a keyspace
    raw.close()
    with pytest.raises(StateCorruptedError, match=r"keyspaces \['lost'\].*manifest"):
        StateDB.open(state)
