"""SIGKILL the Spark driver during micro-batches; its state lives on a ``file:`` URI.

Each child (:mod:`tests.spark.runner_child`) streams the same Parquet files, one per micro-batch,
through a ``ForeachBatchRunner`` whose ``state_dir`` is a ``file:`` URI, and is SIGKILLed (with
its JVM) at a chosen point of a chosen batch (in the sink before the commit, between the local
commit and the upload, after the upload before Spark's commit ...) or at a random moment while
batches run. Before every restart the runner's local copy is deleted, as when the driver comes
back on another node, so each restart restores the state from the URI. A last child runs the
query to its end. Then the sink's files (one per batch id, overwritten by a replay) must hold
exactly what one ``TopologyTestDriver`` per partition produces for the same records: nothing
lost, nothing doubled.
"""

from __future__ import annotations

import json
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from .helpers import KAFKA_SOURCE
from .runner_child import as_tuple, topology
from .test_partitions import Record, driver_records

pytestmark = pytest.mark.spark  # each child process starts its own SparkSession

ROOT = Path(__file__).resolve().parent.parent.parent
CHILD_TIMEOUT_S = 180.0
"""Longest a child may run (Spark starts in seconds; six small batches take a few more)."""

Kill = tuple[str, int] | float | None
"""A kill point and batch id, a random delay (s) after the first batch began, or none."""


def make_input(folder: Path, files: int, per_file: int, partitions: int,
               seed: int) -> list[list[Record]]:
    """Write ``files`` Parquet files in Spark's Kafka source schema; return their records.

    Each partition's timestamps rise by 20 ms a record and move back by up to 400 ms (out of
    order within the partition); partitions are interleaved at random within a file. Each
    file's modification time is a second after the previous one, so Spark's file source
    (``maxFilesPerTrigger=1``) makes them batches 0, 1, ... in this order.
    """
    rng = random.Random(seed)
    folder.mkdir(parents=True)
    index: Counter[int] = Counter()
    out = []
    first = time.time() - files - 10
    for f in range(files):
        records: list[Record] = []
        for _ in range(per_file):
            p = rng.randrange(partitions)
            i = index[p]
            index[p] += 1
            records.append((p, f"p{p}-user{rng.randrange(4)}", f"v{i}",
                            max(0, i * 20 - rng.randrange(401))))
        offsets = [index[p] for p in range(partitions)]
        offset_of = []
        for p, *_ in reversed(records):  # each partition's offsets, in order within the file
            offsets[p] -= 1
            offset_of.append(offsets[p])
        offset_of.reverse()
        table = pa.table({
            "key": pa.array([r[1].encode() for r in records], pa.binary()),
            "value": pa.array([r[2].encode() for r in records], pa.binary()),
            "topic": pa.array(["clicks"] * len(records), pa.string()),
            "partition": pa.array([r[0] for r in records], pa.int32()),
            "offset": pa.array(offset_of, pa.int64()),
            "timestamp": pa.array([r[3] * 1000 for r in records], pa.int64()).cast(
                pa.timestamp("us", tz="UTC")),
            "timestampType": pa.array([0] * len(records), pa.int32()),
        }, schema=KAFKA_SOURCE)
        path = folder / f"part-{f:03d}.parquet"
        pq.write_table(table, path)
        stamp = int((first + f) * 1e9)
        os.utime(path, ns=(stamp, stamp))
        out.append(records)
    return out


@dataclass
class Run:
    returncode: int
    lines: list[str]
    stderr: str

    def failure(self, what: str) -> str:
        return (f"{what}; return code {self.returncode}; stdout:\n" + "\n".join(self.lines)
                + "\nstderr (end):\n" + self.stderr[-4000:])


def run_child(work: Path, kill: Kill) -> Run:
    """Run the child until it ends or is killed; SIGKILL it (and its group) on a hang."""
    command = [sys.executable, "-m", "tests.spark.runner_child", str(work)]
    if isinstance(kill, tuple):
        command += [kill[0], str(kill[1])]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("RUNNER_CHILD_KILL", None)
    stderr_path = work / "child-stderr.txt"
    with open(stderr_path, "wb") as stderr:
        child = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                 stderr=stderr, start_new_session=True)
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert child.stdout is not None
        for raw in child.stdout:
            lines.put(raw.decode().rstrip("\n"))
        lines.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    seen: list[str] = []
    hung = False
    try:
        if isinstance(kill, float):  # a random moment once the first batch began
            while True:
                try:
                    line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    hung = True
                    break
                if line is None:
                    break
                seen.append(line)
                if line.startswith("batch "):
                    time.sleep(kill)
                    _kill_group(child)
                    break
        try:
            child.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            hung = True
    finally:
        _kill_group(child)  # the JVM and Python workers too, should any outlive the child
        child.wait()
        reader.join(timeout=10)
    while (line := _next(lines)) is not None:
        seen.append(line)
    run = Run(child.returncode, seen, stderr_path.read_text("utf-8", "replace"))
    if hung:
        pytest.fail(run.failure(f"the child ran past {CHILD_TIMEOUT_S} s and was killed"))
    return run


def _next(lines: queue.Queue[str | None]) -> str | None:
    try:
        return lines.get_nowait()
    except queue.Empty:
        return None


def _kill_group(child: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)  # the child leads its own session and group
    except ProcessLookupError:
        pass


def batch_lines(run: Run, word: str) -> list[list[str]]:
    """The ``batch <id> <word> ...`` lines, split."""
    return [line.split() for line in run.lines
            if line.startswith("batch ") and line.split()[2] == word]


def kill_and_restart(tmp_path: Path, kills: list[Kill], seed: int, files: int = 6,
                     per_file: int = 300, partitions: int = 3) -> None:
    """Write the input, run a child per kill (deleting the local copy after each), then a
    last one to the end; check the sink's files against one driver per partition."""
    work = tmp_path / "work"
    batches = make_input(work / "input", files, per_file, partitions, seed)
    killed_in: list[int | None] = []
    previous: Kill = None
    for kill in kills:
        run = run_child(work, kill)
        assert run.returncode == -signal.SIGKILL, run.failure(f"no kill at {kill}")
        assert not any(line.startswith("finished") for line in run.lines), run.failure(
            f"the query finished before the kill at {kill}")
        if isinstance(kill, tuple):
            point, batch_id = kill
            assert run.lines[-1] == f"kill {point} {batch_id}", run.failure(
                f"not killed at {kill}")
        started = [int(words[1]) for words in batch_lines(run, "start")]
        killed_in.append(started[-1] if started else None)
        check_restart(run, previous)
        previous = kill
        shutil.rmtree(work / "local", ignore_errors=True)  # the driver moves to another node
    final = run_child(work, None)
    assert final.returncode == 0, final.failure("the last run failed")
    check_restart(final, previous)
    assert final.lines[-1] == f"finished batches={files} records_in={files * per_file}", (
        final.failure("the committed totals count a batch twice or miss one"))

    out = sorted((work / "out").glob("batch-*.json"), key=lambda p: int(p.stem[6:]))
    assert [int(p.stem[6:]) for p in out] == list(range(files)), "a batch id without output"
    got = [tuple(r) for path in out for r in json.loads(path.read_text("utf-8"))]
    records = [r for batch in batches for r in batch]
    expected_total = 0
    for p in range(partitions):
        expected = [as_tuple(r) for r in driver_records(
            topology(), [r for r in records if r[0] == p], "counts")]
        expected_total += len(expected)
        assert [r for r in got if r[0].startswith(f"p{p}-")] == expected, (
            f"partition {p}: the sink's records after kills at {kills} (in batches "
            f"{killed_in}) differ from one driver's")
    assert len(got) == expected_total > 50
    latest = sorted((work / "remote" / "state" / "latest").iterdir())
    assert int(latest[-1].name) == files - 1, "the URI's latest commit is not the last batch"


def check_restart(run: Run, previous: Kill) -> None:
    """After a planned kill, Spark runs the killed batch again first, and the runner skips it
    exactly when the URI had its commit (restored, since the local copy was deleted)."""
    if not isinstance(previous, tuple):
        return
    point, batch_id = previous
    started = batch_lines(run, "start")
    if not started:  # killed at random before the first batch
        assert run.returncode == -signal.SIGKILL, run.failure("no batch ran")
        return
    assert started[0][1] == str(batch_id), run.failure(
        f"the first batch after the kill at {previous} is not a replay of it")
    done = [words for words in batch_lines(run, "done") if words[1] == str(batch_id)]
    if not done:  # killed again within the batch
        assert run.returncode == -signal.SIGKILL, run.failure(f"batch {batch_id} never ended")
        return
    skipped = point in ("after-upload", "after-runner")  # the URI has the batch
    assert done[0][3:] == [f"skipped={int(skipped)}", f"committed={batch_id}"], run.failure(
        f"batch {batch_id} after the kill at {previous}: "
        + ("uploaded but processed again" if skipped else "not uploaded but skipped"))


def test_sigkill_during_batches_with_state_on_a_uri_loses_and_doubles_nothing(
        tmp_path: Path) -> None:
    """Three child starts: killed between the local commit and the upload (batch 1), then
    between the upload and Spark's commit (batch 2), then run to the end (random moments:
    the slow test)."""
    kill_and_restart(tmp_path, [("before-upload", 1), ("after-upload", 2)], seed=1)


@pytest.mark.slow
def test_sigkill_at_every_point_and_at_random_moments(tmp_path: Path) -> None:
    """Ten child starts over twelve batches: every kill point, and random moments."""
    rng = random.Random(7)
    kills: list[Kill] = [
        ("batch-start", 1), ("after-sink", 1), rng.uniform(0.0, 0.6),
        ("before-upload", 4), ("after-upload", 5), rng.uniform(0.0, 0.6),
        ("after-runner", 8), rng.uniform(0.0, 0.6), ("after-sink", 11)]
    kill_and_restart(tmp_path, kills, seed=7, files=12)
