"""Benchmark: persistent key-value and window stores against raw rocksdict doing the same calls.

Measured in one process, on fresh databases in a temporary directory, both sides opened with
the options of every StateDB column family (``statedb._options``: raw mode, RocksDB
defaults, write-ahead log on). ``--keys`` string keys (100 k), int values, random order:

* key-value put: ``store.put(key, value)`` of every key, committing the StateDB every 10 k
  writes as the runtime will, vs ``rdict.put(serialize(key), encode(value))`` (each a WAL
  write);
* key-value get: ``store.get(key)`` of every key in another random order (nothing pending),
  vs ``decode(rdict.get(serialize(key)))``;
* window put: ``store.put(key, value, start)`` of every key, in ``--windows`` windows (10,
  a tenth of the keys in each), window after window as a stream writes them, committing
  every 10 k writes, vs ``rdict.put(encode_int64(start) + serialize(key), encode(value))``;
* window fetch: ``store.fetch(key, start)`` of every written window in random order, vs
  ``decode(rdict.get(encode_int64(start) + serialize(key)))``.

The raw side does the work any store on rocksdict must do for these calls: turn the key into
bytes with the same serializer (``Serdes.string()``) and the value with the state codec
(:mod:`topology.state.codec`). The last column, for context only, is raw rocksdict given
bytes prepared in advance: no serializing at all. Each side reads what it wrote, in the same
session. Results of both sides are compared once per run, untimed.

Each figure is the median wall time of ``--repeat`` runs, the two sides run back to back each
time; target: the stores at >= 0.5x raw rocksdict (same work) for get and put of both stores.

Usage: ``python benchmarks/stores.py [--keys N] [--windows W] [--repeat R]``.
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's packages

from rocksdict import Rdict  # noqa: E402

from topology.serde import Serdes, serializer_of  # noqa: E402
from topology.state.codec import decode, encode  # noqa: E402
from topology.state.rocksdb import (  # noqa: E402
    RocksDBKeyValueStore,
    RocksDBWindowStore,
    StateDB,
    encode_int64,
)
from topology.state.rocksdb.statedb import _DEFAULT_OPTIONS  # noqa: E402

_options = _DEFAULT_OPTIONS.factory()
"""The options of every StateDB column family (``StateDB.open`` without options)."""

COMMIT_EVERY = 10_000
"""Writes between two commits of the StateDB (the runtime commits as often)."""
WINDOW_MS = 60_000
SER = serializer_of(Serdes.string())

Rows = dict[str, float]
"""Seconds per measurement: ``kv put``, ``kv get``, ``window put``, ``window fetch``."""


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Seconds ``fn()`` took (wall clock), and its result."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def committing(db: StateDB, put: Callable[..., None], writes: list[tuple[Any, ...]]) -> None:
    """``put(*write)`` for every write, committing ``db`` every ``COMMIT_EVERY`` writes."""
    commit = db.commit
    for first in range(0, len(writes), COMMIT_EVERY):
        for write in writes[first:first + COMMIT_EVERY]:
            put(*write)
        commit()


def stores(directory: Path, kv_writes: list[tuple[str, int]], kv_reads: list[str],
           window_writes: list[tuple[str, int, int]], window_reads: list[tuple[str, int]],
           windows: int) -> tuple[Rows, list[Any]]:
    """The stores' timings, and what their reads returned."""
    rows: Rows = {}
    with StateDB.open(directory / "state") as db:
        kv = RocksDBKeyValueStore("kv", SER, db.keyspace("kv"))
        rows["kv put"], _ = timed(lambda: committing(db, kv.put, kv_writes))
        get = kv.get
        rows["kv get"], kv_found = timed(lambda: [get(key) for key in kv_reads])
        window = RocksDBWindowStore("w", SER, WINDOW_MS, windows * WINDOW_MS,
                                    db.keyspace("w"))
        rows["window put"], _ = timed(lambda: committing(db, window.put, window_writes))
        fetch = window.fetch
        rows["window fetch"], window_found = timed(
            lambda: [fetch(key, start) for key, start in window_reads])
    return rows, [kv_found, window_found]


def raw(directory: Path, kv_writes: list[tuple[str, int]], kv_reads: list[str],
        window_writes: list[tuple[str, int, int]], window_reads: list[tuple[str, int]]
        ) -> tuple[Rows, list[Any]]:
    """Raw rocksdict's timings (serializing keys, encoding values), and what reads returned."""
    rows: Rows = {}
    kv_db = Rdict(str(directory / "raw-kv"), _options(create=True))
    put, get = kv_db.put, kv_db.get

    def kv_put_all() -> None:
        for key, value in kv_writes:
            put(SER(key), encode(value))

    def kv_get_all() -> list[Any]:
        out = []
        for key in kv_reads:
            data = get(SER(key))
            out.append(None if data is None else decode(data))
        return out

    rows["kv put"], _ = timed(kv_put_all)
    rows["kv get"], kv_found = timed(kv_get_all)
    kv_db.close()
    window_db = Rdict(str(directory / "raw-w"), _options(create=True))
    put, get = window_db.put, window_db.get

    def window_put_all() -> None:
        for key, value, start in window_writes:
            put(encode_int64(start) + SER(key), encode(value))

    def window_fetch_all() -> list[Any]:
        out = []
        for key, start in window_reads:
            data = get(encode_int64(start) + SER(key))
            out.append(None if data is None else decode(data))
        return out

    rows["window put"], _ = timed(window_put_all)
    rows["window fetch"], window_found = timed(window_fetch_all)
    window_db.close()
    return rows, [kv_found, window_found]


def raw_bytes(directory: Path, kv_writes: list[tuple[str, int]], kv_reads: list[str],
              window_writes: list[tuple[str, int, int]], window_reads: list[tuple[str, int]]
              ) -> Rows:
    """Raw rocksdict's timings on bytes prepared in advance (context, no target)."""
    rows: Rows = {}
    cases = [
        ("kv", [(SER(k), encode(v)) for k, v in kv_writes], [SER(k) for k in kv_reads]),
        ("window", [(encode_int64(s) + SER(k), encode(v)) for k, v, s in window_writes],
         [encode_int64(s) + SER(k) for k, s in window_reads]),
    ]
    for name, writes, reads in cases:
        db = Rdict(str(directory / f"bytes-{name}"), _options(create=True))
        put, get = db.put, db.get
        rows[f"{name} put"], _ = timed(lambda put=put, writes=writes: [
            put(key, value) for key, value in writes])
        rows[f"{name} {'get' if name == 'kv' else 'fetch'}"], _ = timed(
            lambda get=get, reads=reads: [get(key) for key in reads])
        db.close()
    return rows


def main() -> None:
    """Run the benchmark and print rates and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--windows", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(1)
    keys = [f"key-{i:07d}" for i in range(args.keys)]
    kv_writes = [(key, i) for i, key in enumerate(keys)]
    rng.shuffle(kv_writes)
    kv_reads = list(keys)
    rng.shuffle(kv_reads)
    rng.shuffle(keys)
    per_window = -(-len(keys) // args.windows)
    window_writes = [(key, i, i // per_window * WINDOW_MS) for i, key in enumerate(keys)]
    window_reads = [(key, start) for key, _, start in window_writes]
    rng.shuffle(window_reads)

    ours_runs, raw_runs, bytes_runs = [], [], []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="stores-bench-") as tmp:
            directory = Path(tmp)
            ours, ours_found = stores(directory, kv_writes, kv_reads, window_writes,
                                      window_reads, args.windows)
            theirs, raw_found = raw(directory, kv_writes, kv_reads, window_writes,
                                    window_reads)
            if ours_found != raw_found:
                raise SystemExit("the stores and raw rocksdict read different values")
            ours_runs.append(ours)
            raw_runs.append(theirs)
            bytes_runs.append(raw_bytes(directory, kv_writes, kv_reads, window_writes,
                                        window_reads))
    print(f"{args.keys:,} keys (over {args.windows} windows in the window store), commit "
          f"every {COMMIT_EVERY:,} writes; median wall time of {args.repeat} runs (ops/s)")
    print(f"{'':13} {'raw rocksdict':>14} {'store':>12} {'ratio':>7}   "
          f"{'raw, bytes only':>15}")
    counts = {"kv put": len(kv_writes), "kv get": len(kv_reads),
              "window put": len(window_writes), "window fetch": len(window_reads)}
    for name, n in counts.items():
        ours_rate = n / statistics.median(run[name] for run in ours_runs)
        raw_rate = n / statistics.median(run[name] for run in raw_runs)
        bytes_rate = n / statistics.median(run[name] for run in bytes_runs)
        print(f"{name:13} {raw_rate:14,.0f} {ours_rate:12,.0f} {ours_rate / raw_rate:6.2f}x"
              f"   {bytes_rate:15,.0f}")


if __name__ == "__main__":
    main()
