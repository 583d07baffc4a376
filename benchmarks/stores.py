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

``--memory-order`` runs another benchmark instead: the in-memory stores' key order under
interleaved writes and range queries. Each store is filled with ``--sizes`` keys (10 k and
40 k), then ``--ops`` times a new key (a new window for the window store) is written and a
range query around it read back (about ten results):

* key-value: ``put(key, value)`` then ``list(range(key - 5, key + 5))``;
* session: ``put(Windowed(key, Window(t, t)), n)`` then ``list(fetch(key - 5, key + 5))``;
* window: ``put(key, value, start)`` at a new start, then ``list(fetch_all(start - 10 ms,
  start))``.

The reference is plain Python computing the same results in a tight loop: a dict plus a list
of key bytes kept sorted with ``bisect.insort``. The stores keep a sorted index
(sortedcontainers) instead of re-sorting the keys after every write; for context the last
column is that old scheme (a dict re-sorted at each query), timed on a few operations only.
Figures are microseconds per write-and-query, the median of ``--repeat`` runs; target: the
stores at >= 0.3x the reference, flat from 10 k to 40 k keys.

Usage: ``python benchmarks/stores.py [--keys N] [--windows W] [--repeat R]`` or
``python benchmarks/stores.py --memory-order [--sizes 10000 40000] [--ops K] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's packages

from rocksdict import Rdict  # noqa: E402

from topology.serde import Serdes, serializer_of  # noqa: E402
from topology.state.codec import decode, encode  # noqa: E402
from topology.state.memory import (  # noqa: E402
    InMemoryKeyValueStore,
    InMemorySessionStore,
    InMemoryWindowStore,
)
from topology.state.rocksdb import (  # noqa: E402
    RocksDBKeyValueStore,
    RocksDBWindowStore,
    StateDB,
    encode_int64,
)
from topology.state.rocksdb.statedb import _DEFAULT_OPTIONS  # noqa: E402
from topology.windows import Window, Windowed  # noqa: E402

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


INT_SER = serializer_of(Serdes.long())


def int_bytes(key: int) -> bytes:
    """The bytes of an int key (``Serdes.long()``), as the references order keys."""
    return INT_SER(key) or b""

RESORT_OPS = 20
"""Write-and-query operations the old re-sorting scheme is timed on (it is O(n log n) each)."""


def memory_kv(n: int, ops: int) -> tuple[float, list[Any]]:
    """Key-value store: fill ``n`` even keys, then ``ops`` times put an odd key and range."""
    store = InMemoryKeyValueStore("kv", INT_SER)
    for key in range(0, 2 * n, 2):
        store.put(key, key)
    list(store.range(0, 1))  # the first range query builds the order (not timed)
    put, range_ = store.put, store.range
    news = [2 * (i * n // ops) + 1 for i in range(ops)]

    def run() -> list[Any]:
        return [list(range_(key - 5, key + 5)) for key in news if put(key, key) is None]

    return timed(run)


def memory_kv_reference(n: int, ops: int, resort: bool) -> tuple[float, list[Any]]:
    """:func:`memory_kv` as a dict and a sorted list of key bytes (``resort``: re-sorted)."""
    ser = int_bytes
    data = {key: key for key in range(0, 2 * n, 2)}
    order = sorted((ser(k), k) for k in data)
    news = [2 * (i * n // ops) + 1 for i in range(ops)]

    def run() -> list[Any]:
        nonlocal order
        out = []
        for key in news:
            if key not in data:
                if resort:
                    data[key] = key
                    order = sorted(((ser(k), k) for k in data), key=lambda p: p[0])
                else:
                    insort(order, (ser(key), key))
            data[key] = key
            lo, hi = ser(key - 5), ser(key + 5)
            first = bisect_left(order, (lo,))
            last = bisect_right(order, (hi, float("inf")))
            out.append([(k, data[k]) for _, k in order[first:last]])
        return out

    return timed(run)


def memory_sessions(n: int, ops: int) -> tuple[float, list[Any]]:
    """Session store: ``n`` keys with a session each, then new keys and key-range fetches."""
    store = InMemorySessionStore("s", INT_SER, retention_ms=10**9)
    for key in range(0, 2 * n, 2):
        store.put(Windowed(key, Window(key, key)), key)
    list(store.fetch(0, 1))
    put, fetch = store.put, store.fetch
    news = [2 * (i * n // ops) + 1 for i in range(ops)]

    def run() -> list[Any]:
        out = []
        for key in news:
            put(Windowed(key, Window(key, key)), key)
            out.append([(w.key, w.window.end, v) for w, v in fetch(key - 5, key + 5)])
        return out

    return timed(run)


def memory_sessions_reference(n: int, ops: int) -> tuple[float, list[Any]]:
    """:func:`memory_sessions` as a dict key bytes -> sessions and a sorted list of bytes."""
    ser = int_bytes
    data: dict[bytes, tuple[int, list[tuple[int, int, int]]]] = {
        ser(key): (key, [(key, key, key)]) for key in range(0, 2 * n, 2)}
    order = sorted(data)
    news = [2 * (i * n // ops) + 1 for i in range(ops)]

    def run() -> list[Any]:
        out = []
        for key in news:
            kb = ser(key)
            if kb not in data:
                data[kb] = (key, [])
                insort(order, kb)
            insort(data[kb][1], (key, key, key))
            found = []
            for i in range(bisect_left(order, ser(key - 5)), bisect_right(order, ser(key + 5))):
                k, sessions = data[order[i]]
                found += [(k, end, v) for end, _, v in sessions]
            out.append(found)
        return out

    return timed(run)


def memory_windows(n: int, ops: int) -> tuple[float, list[Any]]:
    """Window store: ``n`` windows of one key each, then new windows and time-range fetches."""
    store = InMemoryWindowStore("w", INT_SER, 10, 10**9)
    for start in range(0, 20 * n, 20):
        store.put(start, start, start)
    list(store.fetch_all(0, 0))
    put, fetch_all = store.put, store.fetch_all
    news = [20 * (i * n // ops) + 10 for i in range(ops)]

    def run() -> list[Any]:
        out = []
        for start in news:
            put(start, start, start)
            out.append([(w.key, w.window.start, v) for w, v in fetch_all(start - 10, start)])
        return out

    return timed(run)


def memory_windows_reference(n: int, ops: int) -> tuple[float, list[Any]]:
    """:func:`memory_windows` as a dict start -> {key: value} and a sorted list of starts."""
    buckets = {start: {start: start} for start in range(0, 20 * n, 20)}
    starts = sorted(buckets)
    news = [20 * (i * n // ops) + 10 for i in range(ops)]

    def run() -> list[Any]:
        out = []
        for start in news:
            bucket = buckets.get(start)
            if bucket is None:
                bucket = buckets[start] = {}
                insort(starts, start)
            bucket[start] = start
            found = []
            for s in starts[bisect_left(starts, start - 10):bisect_right(starts, start)]:
                found += [(k, s, v) for k, v in sorted(buckets[s].items())]
            out.append(found)
        return out

    return timed(run)


def memory_order(sizes: list[int], ops: int, repeat: int) -> None:
    """Print the in-memory stores' write-then-range timings against the references."""
    print(f"in-memory stores: {ops:,} x (write a new key, range query of ~10); "
          f"median of {repeat} runs; microseconds per operation")
    print(f"{'':10} {'keys':>7} {'reference':>10} {'store':>9} {'ratio':>7}   "
          f"{'old: re-sort':>12}")
    cases: list[tuple[str, Callable[..., tuple[float, Any]], Callable[..., tuple[float, Any]]]]
    cases = [
        ("key-value", memory_kv, lambda n, k: memory_kv_reference(n, k, False)),
        ("session", memory_sessions, memory_sessions_reference),
        ("window", memory_windows, memory_windows_reference),
    ]
    for name, ours, reference in cases:
        for n in sizes:
            ours(n, ops)  # warm up (not counted)
            ours_times, ref_times = [], []
            for _ in range(repeat):
                took, found = ours(n, ops)
                ref_took, ref_found = reference(n, ops)
                if found != ref_found:
                    raise SystemExit(f"{name}: the store and the reference read differently")
                ours_times.append(took)
                ref_times.append(ref_took)
            ours_us = statistics.median(ours_times) / ops * 1e6
            ref_us = statistics.median(ref_times) / ops * 1e6
            resort = ""
            if name == "key-value":
                resort_us = memory_kv_reference(n, RESORT_OPS, True)[0] / RESORT_OPS * 1e6
                resort = f"{resort_us:12,.0f}"
            print(f"{name:10} {n:7,} {ref_us:10.1f} {ours_us:9.1f} {ref_us / ours_us:6.2f}x"
                  f"   {resort}")


def main() -> None:
    """Run the benchmark and print rates and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--windows", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--memory-order", action="store_true")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 40_000])
    parser.add_argument("--ops", type=int, default=2_000)
    args = parser.parse_args()
    if args.memory_order:
        memory_order(args.sizes, args.ops, args.repeat)
        return
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
