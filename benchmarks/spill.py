"""Benchmark: final results through a spilling buffer vs the same run unbounded in memory.

Workload: ``--updates`` window updates over ``--keys`` keys, 1 ms apart, in ``--windows``
tumbling windows (so each window holds most keys at once), then a tick that closes them all.
The spilling runs keep ``--bound`` records in memory (``max_records(bound)
.spill_to_disk_when_full()``); the reference runs use ``BufferConfig.unbounded()``. Each run
is its own child process, which reports its CPU time and its peak RSS
(``getrusage(RUSAGE_SELF).ru_maxrss``), and a digest of everything it emitted: the spilling
and the unbounded run must agree exactly, or the benchmark fails.

Two levels:

* ``driver``: stream -> group_by_key -> windowed count -> suppress -> to, through the
  ``TopologyTestDriver`` (``pipe_records``, input generated as it is read). The unbounded
  run is fused with its aggregation (the default); the spilling run cannot be (see
  ``topology/runtime/processors/fused.py``), so the unfused unbounded run is shown as well.
  The aggregation's window store holds every key in memory in all three runs (persistent
  stores are not available yet), so RSS here measures the store as much as the buffer.
* ``engine``: the same keys and windows, each update ``(windowed key, i, i - 1)`` fed straight
  to the suppression engine, with no store upstream: peak RSS of the spilling run against the
  unbounded one and against ``base``, an unbounded run over only ``--bound`` keys (the
  interpreter, the imports and a full memory tier, the target's reference).

Targets: spilling throughput >= 0.3x the unbounded run; spilling peak RSS <= 1.2x base, while
the unbounded run's RSS grows with the key count.

Usage: ``python benchmarks/spill.py [--updates N] [--keys K] [--bound B] [--windows W]
[--level driver|engine|both]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's packages

from suppress import BufferConfig, Suppressed  # noqa: E402
from suppress.entry import RecordContext  # noqa: E402
from suppress.processor import SuppressProcessor  # noqa: E402
from suppress.spill import SpillBackend  # noqa: E402
from topology import StreamsBuilder, TimeWindows, TopologyTestDriver, Window, Windowed  # noqa: E402
from topology.runtime.state_dir import TaskStateDir, spill_options  # noqa: E402
from topology.serde import fallback_value_bytes, windowed_serializer  # noqa: E402
from topology.state import codec  # noqa: E402
from topology.state.rocksdb import StateDB  # noqa: E402, F401  (every run imports rocksdict)

TICK_TS = 2**40


def records(updates: int, keys: int, seed: int = 7) -> Iterator[tuple[str, str, int]]:
    """``updates`` records over ``keys`` keys at timestamps 0, 1, 2 ...; then a tick."""
    rng = random.Random(seed)
    randrange = rng.randrange
    for i in range(updates):
        yield f"user-{randrange(keys)}", "v", i
    yield "tick", "v", TICK_TS


def config(run: str, bound: int) -> Any:
    """The buffer config of ``run``."""
    if run.startswith("spill"):
        return BufferConfig.max_records(bound).spill_to_disk_when_full()
    return BufferConfig.unbounded()


class Digest:
    """A running digest of emitted ``(key, value, timestamp)`` records, and their count."""

    def __init__(self) -> None:
        self.hash = hashlib.sha256()
        self.count = 0

    def add(self, key: Any, value: Any, timestamp: int) -> None:
        self.hash.update(repr((key, value, timestamp)).encode())
        self.count += 1


def run_driver(run: str, updates: int, keys: int, bound: int, windows: int,
               state_dir: str) -> Digest:
    """One driver run; the output topic is drained every 100 k records to bound its memory."""
    size = max(1, updates // windows)
    b = StreamsBuilder()
    (b.stream("in").group_by_key().windowed_by(TimeWindows.of_size_and_grace(size, 0)).count()
      .suppress(Suppressed.until_window_closes(config(run, bound))).to_stream().to("out"))
    digest = Digest()
    fuse = run != "unbounded-separate"
    with TopologyTestDriver(b.build(), {"fuse_final_results": fuse}, state_dir=state_dir) as d:
        inp, out = d.create_input_topic("in"), d.create_output_topic("out")
        source = records(updates, keys)
        while True:
            chunk = [r for _, r in zip(range(100_000), source, strict=False)]
            if not chunk:
                break
            inp.pipe_records(chunk)
            for record in out.read_records_to_list():
                digest.add(record.key, record.value, record.timestamp)
    return digest


def run_engine(run: str, updates: int, keys: int, bound: int, windows: int,
               state_dir: str) -> Digest:
    """One engine run: update ``i`` as ``(windowed key, i, i - 1)`` straight into the engine.

    No state upstream: the values are the update numbers, not counts, so that nothing but
    the buffer grows with the key count.
    """
    size = max(1, updates // windows)
    digest = Digest()
    state = TaskStateDir(state_dir, "bench", "0_0.spill", spill_options)  # as the task's

    def emit(key: Any, new: Any, old: Any, ctx: RecordContext) -> None:
        digest.add(key, new, ctx.timestamp)

    spill = SpillBackend(lambda: state.keyspace("spill"), state.commit, codec.encode,
                         codec.decode)
    engine = SuppressProcessor(
        "bench", Suppressed.until_window_closes(config(run, bound)), 0, emit,
        windowed_serializer(None, False), fallback_value_bytes,
        buffer_time_of=lambda key: key.window.end, spill=spill)
    process = engine.process_change
    n_keys = bound if run == "base" else keys
    window = Window(0, size)
    try:
        for key, _, ts in records(updates, n_keys):
            if ts == TICK_TS:
                break
            start = ts - ts % size
            if start != window.start:
                window = Window(start, start + size)
            process(Windowed(key, window), ts, ts - 1, RecordContext(ts, ts, "in"))
        process(Windowed("tick", Window(TICK_TS, TICK_TS + size)), 1, 0,
                RecordContext(TICK_TS, TICK_TS, "in"))
        state.commit()
    finally:
        state.close()
    return digest


def child(args: argparse.Namespace) -> None:
    """Run one benchmark in this process and print its figures as JSON."""
    state_dir = tempfile.mkdtemp(prefix="spill-bench-")
    try:
        fn = run_driver if args.level == "driver" else run_engine
        start_cpu, start_wall = time.process_time(), time.perf_counter()
        digest = fn(args.child, args.updates, args.keys, args.bound, args.windows, state_dir)
        cpu, wall = time.process_time() - start_cpu, time.perf_counter() - start_wall
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)
    print(json.dumps({
        "cpu": cpu, "wall": wall, "emitted": digest.count, "digest": digest.hash.hexdigest(),
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }))


def spawn(level: str, run: str, args: argparse.Namespace) -> dict[str, Any]:
    """Run ``run`` at ``level`` in a child process; its figures."""
    command = [sys.executable, __file__, "--child", run, "--level", level,
               "--updates", str(args.updates), "--keys", str(args.keys),
               "--bound", str(args.bound), "--windows", str(args.windows)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(command, check=True, capture_output=True, text=True, env=env)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def report(level: str, runs: list[str], args: argparse.Namespace) -> None:
    """Run and print one level's runs; fail if the spilling run's output differs."""
    results = {run: spawn(level, run, args) for run in runs}
    print(f"\n{level}: {args.updates:,} updates over {args.keys:,} keys, {args.windows} "
          f"windows, bound {args.bound:,} records")
    print(f"  {'run':<20} {'cpu s':>8} {'wall s':>8} {'k upd/s':>8} {'peak RSS MB':>12} "
          f"{'emitted':>9}")
    for run, r in results.items():
        rate = args.updates / r["cpu"] / 1000
        print(f"  {run:<20} {r['cpu']:>8.2f} {r['wall']:>8.2f} {rate:>8.0f} "
              f"{r['rss_mb']:>12.0f} {r['emitted']:>9,}")
    spill, unbounded = results["spill"], results["unbounded"]
    if (spill["digest"], spill["emitted"]) != (unbounded["digest"], unbounded["emitted"]):
        raise SystemExit(f"{level}: the spilling run's output differs from the unbounded run's")
    print(f"  output identical: {spill['emitted']:,} records")
    print(f"  throughput spill / unbounded: {unbounded['cpu'] / spill['cpu']:.2f}x "
          f"(target >= 0.3x)")
    if "unbounded-separate" in results:
        separate = results["unbounded-separate"]["cpu"]
        print(f"  throughput spill / unbounded, not fused: {separate / spill['cpu']:.2f}x")
    if "base" in results:
        base = results["base"]["rss_mb"]
        print(f"  peak RSS spill / base: {spill['rss_mb'] / base:.2f}x (target <= 1.2x); "
              f"unbounded / base: {unbounded['rss_mb'] / base:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--updates", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--bound", type=int, default=10_000)
    parser.add_argument("--windows", type=int, default=4)
    parser.add_argument("--level", choices=["driver", "engine", "both"], default="both")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    if args.level in ("engine", "both"):
        report("engine", ["base", "unbounded", "spill"], args)
    if args.level in ("driver", "both"):
        report("driver", ["unbounded", "unbounded-separate", "spill"], args)


if __name__ == "__main__":
    main()
