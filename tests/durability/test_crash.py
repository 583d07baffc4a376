"""SIGKILL a process piping into a durable driver at random moments; restart it each time.

Each child pipes the records from the committed offsets on (one call, one commit each) and is
killed at a random moment: during startup, while RocksDB recovers the previous run, or among
its commits. After the last kill a child runs to the end; then one driver reads every output
topic. Each output record must exist exactly once: the outputs equal one uninterrupted run's.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from topology import TopologyTestDriver

from .pipeline import pipe_from_committed, read_all, records, topology

ROOT = Path(__file__).resolve().parent.parent.parent


def _child(state_dir: Path, data_file: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.durability.pipeline", str(state_dir), str(data_file)],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)


def kill_and_restart(tmp_path: Path, kills: int, seed: int, n: int) -> None:
    data = records(n, seed)
    data_file = tmp_path / "records.json"
    data_file.write_text(json.dumps(data), "utf-8")
    state_dir = tmp_path / "state"
    rng = random.Random(seed)
    starts = []
    for _ in range(kills):
        child = _child(state_dir, data_file)
        lines = []
        if rng.random() < 0.25:  # startup, or RocksDB recovering the previous run
            time.sleep(rng.uniform(0.0, 0.6))
        else:  # among the commits
            assert child.stdout is not None
            lines.append(child.stdout.readline())
            time.sleep(rng.uniform(0.0, 0.25))
        child.send_signal(signal.SIGKILL)
        out, err = child.communicate()
        lines += out.splitlines(keepends=True)
        if child.returncode == 0:  # it finished before the kill
            assert lines[-1] == b"done\n", err.decode()
            break
        assert child.returncode == -signal.SIGKILL, err.decode()
        starts += [int(line.split()[1]) for line in lines if line.startswith(b"start ")]
    final = _child(state_dir, data_file)
    out, err = final.communicate(timeout=300)
    assert final.returncode == 0 and out.endswith(b"done\n"), err.decode()
    with TopologyTestDriver(topology()) as one_run:
        pipe_from_committed(one_run, data)
        expected = read_all(one_run)
    with TopologyTestDriver(topology(), state_dir=state_dir) as driver:
        assert driver.committed_offsets() == {
            t: sum(r[0] == t for r in data) for t in ("clicks", "rates")}
        assert read_all(driver) == expected
    advanced = {s for s in starts if 0 < s < len(data)}
    assert len(advanced) >= kills // 4, f"too few kills fell among the commits: {starts}"


@pytest.mark.kill
def test_sigkill_at_20_random_points_loses_and_doubles_nothing(tmp_path: Path) -> None:
    kill_and_restart(tmp_path, kills=20, seed=20, n=20_000)


@pytest.mark.slow
def test_sigkill_at_200_random_points_loses_and_doubles_nothing(tmp_path: Path) -> None:
    kill_and_restart(tmp_path, kills=200, seed=200, n=200_000)
