"""Benchmark: StateDB keyspace reads and writes against raw rocksdict doing the same calls.

Measured in one process, on fresh databases in a temporary directory, with the same options
(raw mode, RocksDB defaults, write-ahead log on):

* put: ``keyspace.put`` of N keys in random order, ``db.commit()`` every 10 k puts, vs
  ``rdict.put`` of the same keys (each a WAL write);
* get: ``keyspace.get`` of every key in another random order, no pending writes, vs
  ``get`` on the same column family opened with rocksdict directly (the same files, so both
  read the same LSM tree; which side reads first alternates between runs);
* scan: ``list(keyspace.items())`` vs ``list(column.items())``, likewise.

Each figure is the median wall time of ``--repeat`` runs, the two sides run back to back each
time; target (issue: durable state) >= 0.5x raw for put and get.

Usage: ``python benchmarks/statedb.py [--keys N] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's packages

from rocksdict import Options, Rdict  # noqa: E402

from topology.state.rocksdb import StateDB  # noqa: E402

COMMIT_EVERY = 10_000
VALUE = b"v" * 16
KEYSPACE = "bench"


def timed(fn: Callable[[], object]) -> float:
    """Seconds ``fn()`` took (wall clock)."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def raw_puts(directory: Path, writes: list[bytes]) -> float:
    """rocksdict ``put`` of every key into a fresh database (each one a WAL write)."""
    db = Rdict(str(directory / "raw"), Options(raw_mode=True))

    def put_all() -> None:
        put = db.put
        for key in writes:
            put(key, VALUE)

    duration = timed(put_all)
    db.close()
    return duration


def statedb_puts(directory: Path, writes: list[bytes]) -> float:
    """Keyspace ``put`` of every key into a fresh StateDB, committing every 10 k puts."""
    with StateDB.open(directory / "state") as db:
        keyspace = db.keyspace(KEYSPACE)

        def put_all() -> None:
            put = keyspace.put
            commit = db.commit
            for start in range(0, len(writes), COMMIT_EVERY):
                for key in writes[start:start + COMMIT_EVERY]:
                    put(key, VALUE)
                commit()

        return timed(put_all)


def raw_reads(directory: Path, reads: list[bytes]) -> tuple[float, float]:
    """rocksdict ``get`` of every key, then a full scan, on the StateDB's own files."""
    families = {"meta": Options(raw_mode=True), "ks:" + KEYSPACE: Options(raw_mode=True)}
    db = Rdict(str(directory / "state" / "db"), Options(raw_mode=True),
               column_families=families)
    column = db.get_column_family("ks:" + KEYSPACE)
    get = column.get
    start = time.perf_counter()
    for key in reads:
        get(key)
    get_duration = time.perf_counter() - start
    start = time.perf_counter()
    assert len(list(column.items())) == len(reads)
    scan_duration = time.perf_counter() - start
    del column, get  # rocksdict keeps the database locked while a column family object lives
    db.close()
    return get_duration, scan_duration


def statedb_reads(directory: Path, reads: list[bytes]) -> tuple[float, float]:
    """Keyspace ``get`` of every key (no pending writes), then a full scan."""
    with StateDB.open(directory / "state") as db:
        keyspace = db.keyspace(KEYSPACE)

        def get_all() -> None:
            get = keyspace.get
            for key in reads:
                get(key)

        def scan() -> None:
            assert len(list(keyspace.items())) == len(reads)

        return timed(get_all), timed(scan)


def main() -> None:
    """Run the benchmark and print rates and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(1)
    writes = [b"key%012d" % i for i in range(args.keys)]
    rng.shuffle(writes)
    reads = list(writes)
    rng.shuffle(reads)
    raw_runs, ours_runs = [], []
    for run in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="statedb-bench-") as tmp:
            directory = Path(tmp)
            raw_put = raw_puts(directory, writes)
            ours_put = statedb_puts(directory, writes)
            if run % 2:  # alternate which side reads the files first
                ours_get, ours_scan = statedb_reads(directory, reads)
                raw_get, raw_scan = raw_reads(directory, reads)
            else:
                raw_get, raw_scan = raw_reads(directory, reads)
                ours_get, ours_scan = statedb_reads(directory, reads)
            raw_runs.append((raw_put, raw_get, raw_scan))
            ours_runs.append((ours_put, ours_get, ours_scan))
    print(f"{args.keys:,} keys, median of {args.repeat} runs (ops/s)")
    print(f"{'':6} {'raw rocksdict':>14} {'StateDB':>14} {'ratio':>7}")
    for index, name in enumerate(["put", "get", "scan"]):
        raw = args.keys / statistics.median(run[index] for run in raw_runs)
        ours = args.keys / statistics.median(run[index] for run in ours_runs)
        print(f"{name:6} {raw:14,.0f} {ours:14,.0f} {ours / raw:6.2f}x")


if __name__ == "__main__":
    main()
