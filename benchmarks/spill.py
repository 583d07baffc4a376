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
  ``TopologyTestDriver`` (``pipe_records``, input generated as it is read). In the unbounded
  run the aggregation hands each change to the buffer by window (the default); a spilling
  buffer takes windowed keys, so the unbounded run taking windowed keys
  (``fuse_final_results=False``, ``unbounded-separate``) is shown as well.
  The runs use a state directory, so the aggregation's window store is in RocksDB in all
  three, and RSS here measures the store as much as the buffer.
* ``engine``: the same keys and windows, each update ``(windowed key, i, i - 1)`` fed straight
  to the suppression engine, with no store upstream: peak RSS of the spilling run against the
  unbounded one and against ``base``, an unbounded run over only ``--bound`` keys (the
  interpreter, the imports and a full memory tier, the target's reference).

Targets: spilling throughput >= 0.3x the unbounded run; spilling peak RSS <= 1.2x base, while
the unbounded run's RSS grows with the key count.

A third level, ``reopen`` (not part of ``both``), measures what reopening a spilled buffer
costs (issue 20): a child fills a buffer bounded to ``--bound-mb`` MB (``max_bytes``, Kafka's
estimate) in a task's durable state database until ``--spill-mb`` MB are buffered,
checkpointing and committing every 10 k puts as a durable task does, and reports the
database's size on disk; then, each in a fresh child, ``empty`` restores a buffer from an empty
database (the interpreter, the imports and an open database: the reference), ``lazy``
restores the spilled one (:meth:`~suppress.spill.SpillingBuffer.restore`) and evicts its first
``--evict`` entries (committing every 10 k), ``traced`` restores it under ``tracemalloc``, and
``eager`` reads every entry back into a sorted list as the node image restore of
``topology/runtime/processors/suppress.py`` does. Each reports its RSS once the database is
open and once restored, and its peak RSS (``traced`` also tracemalloc's peak, whose own
records inflate its RSS). ``--options``: the database's RocksDB options, ``spill``
(``spill_options()``, as the spill tier has them; the default) or RocksDB's defaults. Target:
``lazy`` - ``empty`` < 60 MB at 150 MB spilled under a 5 MB bound.

Usage: ``python benchmarks/spill.py [--updates N] [--keys K] [--bound B] [--windows W]
[--level driver|engine|both|reopen] [--spill-mb S] [--bound-mb M] [--evict E]
[--options spill|default]``.
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
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's packages

from suppress import BufferConfig, Suppressed  # noqa: E402
from suppress.entry import RecordContext  # noqa: E402
from suppress.processor import SuppressProcessor  # noqa: E402
from suppress.spill import SpillBackend, SpillingBuffer  # noqa: E402
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


REOPEN_COMMIT_EVERY = 10_000  # puts between two commits, as a durable task's default


def reopen_buffer(state: TaskStateDir, bound_bytes: int) -> SpillingBuffer:
    """A spilling buffer kept across restarts, its disk tier a keyspace of ``state``.

    Time limits' layout (two disk areas, buffer times per put): the larger of the two.
    """
    backend = SpillBackend(lambda: state.keyspace("spill.bench"), lambda: None, codec.encode,
                           codec.decode)
    return SpillingBuffer(bytes, bytes, None, bound_bytes, backend)


def reopen_state(state_dir: str, options: str) -> TaskStateDir:
    """The task's state database: ``spill`` options (as the spill tier's), or RocksDB's."""
    return TaskStateDir(state_dir, "bench", "0_0", spill_options if options == "spill" else None)


def rss_mb() -> float:
    """This process's resident set now, in MB."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def reopen_fill(state_dir: str, spill_mb: float, bound_mb: float,
                options: str) -> dict[str, Any]:
    """Fill a durable buffer up to ``spill_mb`` MB, checkpointing and committing as a task."""
    state = reopen_state(state_dir, options)
    buffer = reopen_buffer(state, int(bound_mb * 1e6))
    rng = random.Random(7)
    target, i = int(spill_mb * 1e6), 0
    try:
        while buffer.size_bytes < target:
            # random keys, times rising with noise: entries land in both tiers
            key = b"user-%012d" % rng.randrange(10**12)
            value = b"v" * rng.randrange(40, 120)
            buffer.put(i // 4 + rng.randrange(1000), key, value, None,
                       RecordContext(i, i, "in"))
            i += 1
            if i % REOPEN_COMMIT_EVERY == 0:
                buffer.checkpoint()
                state.commit()
        buffer.checkpoint()
        state.commit()
        figures = {"entries": buffer.num_records, "buffered_mb": buffer.size_bytes / 1e6,
                   "memory_records": buffer.memory_records}
    finally:
        state.close()
    db = Path(state_dir) / "bench" / "0_0"
    figures["disk_mb"] = sum(f.stat().st_size for f in db.rglob("*") if f.is_file()) / 1e6
    return figures


def reopen(run: str, state_dir: str, bound_mb: float, evict: int,
           options: str) -> dict[str, Any]:
    """Reopen the buffer ``reopen_fill`` left (``empty``: an empty database) as ``run`` does.

    ``lazy`` and ``empty`` then evict ``evict`` entries, checkpointing and committing every
    10 k, as a task that emits them as records come. ``traced`` restores as ``lazy``, under
    ``tracemalloc`` (whose own records take RSS: the other runs do not trace).
    """
    state = reopen_state(state_dir, options)
    figures: dict[str, Any] = {}
    evicted = 0
    try:
        state.keyspace("spill.bench")  # the database open: part of the reference
        figures["open_rss_mb"] = rss_mb()
        if run == "traced":
            tracemalloc.start()
        buffer = reopen_buffer(state, int(bound_mb * 1e6))
        buffer.restore()
        count = buffer.num_records
        figures["restore_rss_mb"] = rss_mb()
        if run == "traced":
            figures["traced_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
        elif run == "eager":  # as the node image restore: every entry decoded, then sorted
            entries = [(e.time, e.key_bytes, e.key, e.new, e.old, e.prior, tuple(e.context))
                       for e in buffer]
            entries.sort(key=lambda e: (e[0], e[1]))
        else:
            while evicted < evict and buffer.num_records:
                evicted += buffer.evict_over(count - evicted - REOPEN_COMMIT_EVERY, None,
                                             lambda e: None)
                buffer.checkpoint()
                state.commit()
    finally:
        state.close()
    figures.update(entries=count, evicted=evicted)
    return figures


def child(args: argparse.Namespace) -> None:
    """Run one benchmark in this process and print its figures as JSON."""
    if args.level == "reopen":
        start_cpu = time.process_time()
        if args.child == "fill":
            figures = reopen_fill(args.state_dir, args.spill_mb, args.bound_mb, args.options)
        else:
            figures = reopen(args.child, args.state_dir, args.bound_mb, args.evict,
                             args.options)
        figures["cpu"] = time.process_time() - start_cpu
        figures["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps(figures))
        return
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
               "--bound", str(args.bound), "--windows", str(args.windows),
               "--spill-mb", str(args.spill_mb), "--bound-mb", str(args.bound_mb),
               "--evict", str(args.evict), "--options", args.options]
    if args.state_dir:
        command += ["--state-dir", args.state_dir]
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
        print(f"  throughput spill / unbounded, keys forwarded: {separate / spill['cpu']:.2f}x")
    if "base" in results:
        base = results["base"]["rss_mb"]
        print(f"  peak RSS spill / base: {spill['rss_mb'] / base:.2f}x (target <= 1.2x); "
              f"unbounded / base: {unbounded['rss_mb'] / base:.2f}x")


def report_reopen(args: argparse.Namespace) -> None:
    """Fill a durable spilled buffer, then reopen it lazily, eagerly, and an empty one."""
    spilled = tempfile.mkdtemp(prefix="spill-reopen-")
    empty = tempfile.mkdtemp(prefix="spill-reopen-empty-")
    try:
        args.state_dir = spilled
        fill = spawn("reopen", "fill", args)
        print(f"\nreopen: {fill['entries']:,} entries, {fill['buffered_mb']:.0f} MB buffered "
              f"(Kafka's estimate) under a {args.bound_mb:g} MB bound "
              f"({fill['memory_records']:,} in memory); database on disk "
              f"{fill['disk_mb']:.0f} MB; filled in {fill['cpu']:.0f} s cpu")
        runs = {}
        for run in ["empty", "eager", "traced", "lazy"]:  # lazy last: it evicts
            args.state_dir = empty if run == "empty" else spilled
            runs[run] = spawn("reopen", run, args)
        print(f"  RocksDB options: {args.options}; MiB below (traced: tracemalloc's peak)")
        print(f"  {'run':<8} {'RSS open':>9} {'RSS restored':>13} {'peak RSS':>9} "
              f"{'traced':>7} {'cpu s':>7} {'entries':>10} {'evicted':>9}")
        for run, r in runs.items():
            print(f"  {run:<8} {r['open_rss_mb']:>9.1f} {r['restore_rss_mb']:>13.1f} "
                  f"{r['rss_mb']:>9.1f} {r.get('traced_mb', 0):>7.1f} {r['cpu']:>7.2f} "
                  f"{r['entries']:>10,} {r['evicted']:>9,}")
        lazy, base = runs["lazy"], runs["empty"]
        restored = lazy["restore_rss_mb"] - base["restore_rss_mb"]
        peak = lazy["rss_mb"] - base["rss_mb"]
        eager = runs["eager"]["rss_mb"] - base["rss_mb"]
        print(f"  lazy reopen over an empty state: {restored:.1f} MiB RSS once restored, "
              f"{peak:.1f} MiB peak RSS with {lazy['evicted']:,} evictions (target < 60 MB); "
              f"eager: {eager:.1f} MiB peak RSS")
    finally:
        shutil.rmtree(spilled, ignore_errors=True)
        shutil.rmtree(empty, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--updates", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--bound", type=int, default=10_000)
    parser.add_argument("--windows", type=int, default=4)
    parser.add_argument("--level", choices=["driver", "engine", "both", "reopen"],
                        default="both")
    parser.add_argument("--spill-mb", type=float, default=150.0)
    parser.add_argument("--bound-mb", type=float, default=5.0)
    parser.add_argument("--evict", type=int, default=100_000)
    parser.add_argument("--options", choices=["spill", "default"], default="spill")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--state-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    if args.level == "reopen":
        report_reopen(args)
        return
    if args.level in ("engine", "both"):
        report("engine", ["base", "unbounded", "spill"], args)
    if args.level in ("driver", "both"):
        report("driver", ["unbounded", "unbounded-separate", "spill"], args)


if __name__ == "__main__":
    main()
