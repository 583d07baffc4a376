"""Versioned store benchmark: each backend against the plainest fast code doing the same lookups.

In-memory backend. Target: ``get(key, as_of)`` at >= 0.5x the rate of a ``dict`` of ``key ->
(timestamps, values)`` searched with ``bisect.bisect_right``. Workload: ``--keys`` keys (100 k)
with ``--versions`` versions each (10) at random timestamps, and ``--queries`` random
``(key, as_of)`` lookups (1 M), all inside history retention. The target loop uses each
result at once, as a stream-table join does. The store builds the returned record on read
(it keeps plain values, so writes allocate nothing for the collector to track); keeping a
million fresh records alive instead makes the collector's full passes dominate, which the
second row shows. Also printed, without a target: latest-value ``get(key)`` against a dict
lookup, and building the data with ``put`` in random arrival order against bisect
insertion into the reference. Each figure is the median CPU time (``time.process_time``) of
``--repeat`` paired runs, store and reference back to back; results are compared once
before timing.

RocksDB backend (``--rocksdb-keys`` keys, 100 k, same versions and arrival order), against
raw rocksdict on a database opened with the options ``StateDB`` uses, in a temporary
directory. Targets >= 0.5x for:

- ``put`` in random arrival order into a store on a ``StateDB`` keyspace, ``db.commit()``
  every 10 k puts (as a task commits; the store's writes are pending until then), against
  one raw ``get`` of the key's bytes and one raw ``put`` of ``key bytes + timestamp`` per
  write (each its own write-ahead-log write);
- ``get(key, as_of)`` for ``--rocksdb-queries`` random lookups (200 k), each result used at
  once, against one raw ``get`` per lookup of the version that answers it (``key bytes +
  timestamp``, in the raw database the put runs built).

Keys and values are encoded inside both timed loops (the store with the state codec, the
reference with ``str.encode``). Each figure is the median wall time (``time.perf_counter``;
RocksDB works in background threads too) of ``--rocksdb-repeat`` paired runs, each on fresh
databases; the reads run on the databases the put runs just built, the store's read first
on odd runs and second on even ones, then again after closing and reopening both databases
(as after a restart; RocksDB then moves what its memory tables held to files). Also printed,
without a target: latest-value ``get(key)`` against the same raw reads.

Usage: ``python benchmarks/versioned.py [--keys N] [--versions V] [--queries Q]
[--rocksdb-keys N] [--rocksdb-queries Q] [--skip-memory] [--skip-rocksdb]``.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import struct
import sys
import tempfile
import time
from bisect import bisect_right
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's packages

from rocksdict import Rdict  # noqa: E402

from topology.state.memory import InMemoryVersionedKeyValueStore  # noqa: E402
from topology.state.rocksdb import RocksDBVersionedKeyValueStore, StateDB  # noqa: E402
from topology.state.rocksdb.statedb import _DEFAULT_OPTIONS  # noqa: E402

statedb_options = _DEFAULT_OPTIONS.factory()
"""The options of every StateDB column family (``StateDB.open`` without options)."""

HORIZON = 10_000_000
COMMIT_EVERY = 10_000
_pack_timestamp = struct.Struct(">Q").pack


def cpu_time(fn: Callable[[], Any]) -> float:
    """The CPU time ``fn()`` took in this process."""
    gc.collect()
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def workload(keys: int, versions: int, queries: int, seed: int
             ) -> tuple[list[tuple[str, str, int]], list[tuple[str, int]]]:
    """Writes ``(key, value, timestamp)`` in random order, and random ``(key, as_of)``."""
    rng = random.Random(seed)
    names = [f"key-{i:07d}" for i in range(keys)]
    writes = [(k, f"{k}@{t}", t) for k in names for t in rng.sample(range(HORIZON), versions)]
    rng.shuffle(writes)
    lookups = [(rng.choice(names), rng.randrange(HORIZON)) for _ in range(queries)]
    return writes, lookups


def build_reference(writes: list[tuple[str, str, int]]) -> dict[str, tuple[list, list]]:
    """The reference data: ``key -> (sorted timestamps, values)``, by ``insort``."""
    ref: dict[str, tuple[list, list]] = {}
    for key, value, ts in writes:
        entry = ref.get(key)
        if entry is None:
            ref[key] = ([ts], [value])
            continue
        timestamps, values = entry
        i = bisect_right(timestamps, ts)
        timestamps.insert(i, ts)
        values.insert(i, value)
    return ref


def build_store(writes: list[tuple[str, str, int]]) -> InMemoryVersionedKeyValueStore:
    """The store under test, filled with ``put`` (retention covers every timestamp)."""
    store = InMemoryVersionedKeyValueStore("bench", str.encode, history_retention_ms=HORIZON)
    put = store.put
    for key, value, ts in writes:
        put(key, value, ts)
    return store


def reference_as_of(ref: dict[str, tuple[list, list]],
                    lookups: list[tuple[str, int]]) -> list[Any]:
    """``bisect`` lookups in the reference: the value valid at ``as_of`` or ``None`` each."""
    get = ref.get
    out = []
    append = out.append
    for key, as_of in lookups:
        entry = get(key)
        if entry is None:
            append(None)
            continue
        i = bisect_right(entry[0], as_of)
        append(entry[1][i - 1] if i else None)
    return out


def store_as_of(store: InMemoryVersionedKeyValueStore,
                lookups: list[tuple[str, int]]) -> list[Any]:
    """``store.get(key, as_of)`` for each lookup: the records returned (or ``None``)."""
    get = store.get
    out = []
    append = out.append
    for key, as_of in lookups:
        append(get(key, as_of))
    return out


def reference_as_of_consumed(ref: dict[str, tuple[list, list]],
                             lookups: list[tuple[str, int]]) -> int:
    """As :func:`reference_as_of`, each value used at once (a join); returns the hit count."""
    get = ref.get
    hits = 0
    for key, as_of in lookups:
        entry = get(key)
        if entry is None:
            continue
        i = bisect_right(entry[0], as_of)
        if i and entry[1][i - 1] is not None:
            hits += 1
    return hits


def store_as_of_consumed(store: InMemoryVersionedKeyValueStore,
                         lookups: list[tuple[str, int]]) -> int:
    """As :func:`store_as_of`, each record used at once (a join); returns the hit count."""
    get = store.get
    hits = 0
    for key, as_of in lookups:
        record = get(key, as_of)
        if record is not None and record.value is not None:
            hits += 1
    return hits


def reference_latest(ref: dict[str, tuple[list, list]], lookups: list[tuple[str, int]]) -> int:
    """Latest value per lookup key in the reference, used at once; returns the hit count."""
    get = ref.get
    hits = 0
    for key, _ in lookups:
        entry = get(key)
        if entry is not None and entry[1][-1] is not None:
            hits += 1
    return hits


def store_latest(store: InMemoryVersionedKeyValueStore, lookups: list[tuple[str, int]]) -> int:
    """``store.get(key)`` per lookup key, used at once; returns the hit count."""
    get = store.get
    hits = 0
    for key, _ in lookups:
        record = get(key)
        if record is not None and record.value is not None:
            hits += 1
    return hits


def paired(repeat: int, fn: Callable[[], Any], ref: Callable[[], Any]) -> tuple[float, float]:
    """Median CPU seconds of ``fn`` and ``ref``, timed back to back ``repeat`` times."""
    ours, theirs = [], []
    for _ in range(repeat):
        ours.append(cpu_time(fn))
        theirs.append(cpu_time(ref))
    return statistics.median(ours), statistics.median(theirs)


def open_rocksdb_store(directory: Path) -> tuple[StateDB, RocksDBVersionedKeyValueStore]:
    """The benchmark's store on the StateDB in ``directory`` (created if missing)."""
    db = StateDB.open(directory / "state")
    return db, RocksDBVersionedKeyValueStore("bench", str.encode, db.keyspace("bench"),
                                             history_retention_ms=HORIZON)


def rocksdb_store_puts(directory: Path, writes: list[tuple[str, str, int]]
                       ) -> tuple[float, StateDB, RocksDBVersionedKeyValueStore]:
    """Seconds to ``put`` every write into a new store, committing every 10 k puts."""
    db, store = open_rocksdb_store(directory)
    put = store.put
    commit = db.commit
    start = time.perf_counter()
    for first in range(0, len(writes), COMMIT_EVERY):
        for key, value, ts in writes[first:first + COMMIT_EVERY]:
            put(key, value, ts)
        commit()
    return time.perf_counter() - start, db, store


def raw_puts(directory: Path, writes: list[tuple[str, str, int]]) -> tuple[float, Rdict]:
    """Seconds for a raw ``get`` of the key and a raw ``put`` of the version, per write."""
    raw = Rdict(str(directory / "raw"), statedb_options(create=True))
    get = raw.get
    put = raw.put
    pack = _pack_timestamp
    start = time.perf_counter()
    for key, value, ts in writes:
        key_bytes = key.encode()
        get(key_bytes)
        put(key_bytes + pack(ts), value.encode())
    return time.perf_counter() - start, raw


def rocksdb_as_of(store: RocksDBVersionedKeyValueStore, lookups: list[tuple[str, int]]) -> int:
    """``store.get(key, as_of)`` per lookup, used at once; returns the hit count."""
    get = store.get
    hits = 0
    for key, as_of in lookups:
        record = get(key, as_of)
        if record is not None and record.value is not None:
            hits += 1
    return hits


def raw_as_of(raw: Rdict, versions: list[tuple[str, int]]) -> int:
    """A raw ``get`` of the answering version per lookup, used at once; returns the hits."""
    get = raw.get
    pack = _pack_timestamp
    hits = 0
    for key, ts in versions:
        if get(key.encode() + pack(ts)) is not None:
            hits += 1
    return hits


def rocksdb_latest(store: RocksDBVersionedKeyValueStore, lookups: list[tuple[str, int]]) -> int:
    """``store.get(key)`` per lookup key, used at once; returns the hit count."""
    get = store.get
    hits = 0
    for key, _ in lookups:
        record = get(key)
        if record is not None and record.value is not None:
            hits += 1
    return hits


def answering_versions(ref: dict[str, tuple[list, list]], lookups: list[tuple[str, int]]
                       ) -> list[tuple[str, int]]:
    """The ``(key, timestamp)`` of the version answering each lookup (the oldest if none)."""
    out = []
    for key, as_of in lookups:
        timestamps = ref[key][0]
        i = bisect_right(timestamps, as_of)
        out.append((key, timestamps[i - 1] if i else timestamps[0]))
    return out


def timed(fn: Callable[[], Any]) -> float:
    """Wall seconds ``fn()`` took."""
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def read_figures(run: int, store: RocksDBVersionedKeyValueStore, raw: Rdict,
                 lookups: list[tuple[str, int]], versions: list[tuple[str, int]]
                 ) -> list[float]:
    """Seconds of the store's as-of reads, the raw reads, its latest reads, the raw reads.

    Results are checked on the first run; the store reads first on odd runs.
    """
    expected = len(versions)
    if not run and (raw_as_of(raw, versions) != expected
                    or rocksdb_latest(store, lookups) != expected):
        raise SystemExit("the RocksDB store or the raw database lost data")
    raw_reads = partial(raw_as_of, raw, versions)
    figures: list[float] = []
    for ours in (partial(rocksdb_as_of, store, lookups), partial(rocksdb_latest, store, lookups)):
        if run % 2:
            figures += [timed(ours), timed(raw_reads)]
        else:
            theirs = timed(raw_reads)
            figures += [timed(ours), theirs]
    return figures


def rocksdb_rows(args: argparse.Namespace) -> list[tuple[str, int, tuple[float, float]]]:
    """Measure the RocksDB backend against raw rocksdict; median of paired runs.

    Reads are timed twice: on the databases as the writes left them, and after closing and
    reopening both (RocksDB then flushes what its memory tables held to files), as after a
    restart.
    """
    writes, lookups = workload(args.rocksdb_keys, args.versions, args.rocksdb_queries,
                               args.seed)
    ref = build_reference(writes)
    versions = answering_versions(ref, lookups)
    expected_hits = reference_as_of_consumed(ref, lookups)
    runs: list[list[float]] = []
    for run in range(args.rocksdb_repeat):
        with tempfile.TemporaryDirectory(prefix="versioned-bench-") as tmp:
            directory = Path(tmp)
            ours_put, db, store = rocksdb_store_puts(directory, writes)
            raw_put, raw = raw_puts(directory, writes)
            if not run and rocksdb_as_of(store, lookups) != expected_hits:
                raise SystemExit("the RocksDB store disagrees with the reference")
            figures = [ours_put, raw_put, *read_figures(run, store, raw, lookups, versions)]
            store.close()
            db.close()
            raw.close()
            db, store = open_rocksdb_store(directory)
            raw = Rdict(str(directory / "raw"), statedb_options(create=False))
            figures += read_figures(run, store, raw, lookups, versions)
            runs.append(figures)
            store.close()
            db.close()
            raw.close()

    def median(i: int) -> float:
        return statistics.median(run[i] for run in runs)

    return [
        ("put, random order, commit every 10 k (raw: get + put) [target >= 0.5x]",
         len(writes), (median(0), median(1))),
        ("get(key, as_of), each used at once (raw: get) [target >= 0.5x]", len(lookups),
         (median(2), median(3))),
        ("get(key) latest, each used at once (raw: get)", len(lookups),
         (median(4), median(5))),
        ("after reopening both: get(key, as_of) (raw: get)", len(lookups),
         (median(6), median(7))),
        ("after reopening both: get(key) latest (raw: get)", len(lookups),
         (median(8), median(9))),
    ]


def memory_rows(args: argparse.Namespace) -> list[tuple[str, int, tuple[float, float]]]:
    """Measure the in-memory backend against a dict of sorted lists."""
    writes, lookups = workload(args.keys, args.versions, args.queries, args.seed)
    ref = build_reference(writes)
    store = build_store(writes)

    expected = reference_as_of(ref, lookups)
    if [None if r is None else r.value for r in store_as_of(store, lookups)] != expected:
        raise SystemExit("store and reference disagree on get(key, as_of)")
    if store_as_of_consumed(store, lookups) != reference_as_of_consumed(ref, lookups):
        raise SystemExit("store and reference disagree on the consumed get(key, as_of)")
    if store_latest(store, lookups) != reference_latest(ref, lookups):
        raise SystemExit("store and reference disagree on get(key)")
    return [
        ("get(key, as_of), each used at once [target >= 0.5x]", len(lookups),
         paired(args.repeat, lambda: store_as_of_consumed(store, lookups),
                lambda: reference_as_of_consumed(ref, lookups))),
        ("get(key, as_of), all results kept", len(lookups),
         paired(args.repeat, lambda: store_as_of(store, lookups),
                lambda: reference_as_of(ref, lookups))),
        ("get(key) latest, each used at once", len(lookups),
         paired(args.repeat, lambda: store_latest(store, lookups),
                lambda: reference_latest(ref, lookups))),
        ("put, random order (reference: insort)", len(writes),
         paired(max(1, args.repeat // 2), lambda: build_store(writes),
                lambda: build_reference(writes))),
    ]


def report(rows: list[tuple[str, int, tuple[float, float]]]) -> None:
    """Print each row's rates and the ratio (reference time / store time)."""
    for label, n, (ours, theirs) in rows:
        print(f"  {label:72s} store {n / ours / 1e3:7.1f} k/s  reference "
              f"{n / theirs / 1e3:7.1f} k/s  ratio {theirs / ours:4.2f}x")


def main() -> None:
    """Run the measurements and print rates and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--versions", type=int, default=10)
    parser.add_argument("--queries", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rocksdb-keys", type=int, default=100_000)
    parser.add_argument("--rocksdb-queries", type=int, default=200_000)
    parser.add_argument("--rocksdb-repeat", type=int, default=3)
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--skip-rocksdb", action="store_true")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    if not args.skip_memory:
        print(f"in-memory: {args.keys:,} keys x {args.versions} versions, {args.queries:,} "
              f"lookups, median CPU time of {args.repeat} paired runs")
        report(memory_rows(args))
    if not args.skip_rocksdb:
        print(f"RocksDB: {args.rocksdb_keys:,} keys x {args.versions} versions, "
              f"{args.rocksdb_queries:,} lookups, median wall time of {args.rocksdb_repeat} "
              f"paired runs")
        report(rocksdb_rows(args))


if __name__ == "__main__":
    main()
