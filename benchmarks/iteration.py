"""Benchmark: backward against forward iteration on every store, and session store put/find.

**Both directions.** Every store type and backend (key-value, window, session, versioned; in
memory and on RocksDB) is filled with the same data (``--keys`` string keys, 20 k; windows
and sessions: ``--windows`` (10) per key; versioned: 5 versions per key), committed, then
each query is run forward and backward over the same random bounds: key ranges of about 100
keys (a window key range: 5 of them, each reading the whole time range), time ranges of
half the windows, single keys over half the windows, and whole-store scans.
A row prints the items read per second each way and the ratio backward / forward (goal:
>= 0.8x). Before timing, each backward result is checked to be the forward one reversed.

**Session store put/find.** The session aggregation's loop: for each of ``--records``
records (200 k, ``--session-keys`` keys, 2 k, timestamps rising with jitter), find the
key's sessions within the inactivity gap (``find_sessions(key, t - gap, t + gap)``), remove
them and put the merged session with the count. The reference is plain Python doing the same
merging on a ``dict`` of per-key lists sorted with ``bisect``. Also: ``put`` of every final
session into an empty store, and ``find_sessions`` of random (key, time) points, each
against the same reference structure. Retention covers the whole stream, so nothing expires
on either side; final sessions are compared once, untimed. The RocksDB store commits its
StateDB every 10 k records (as the runtime does); it has no target, printed for context.

Each figure is the median CPU time (``time.process_time``) of ``--repeat`` paired runs, the
two sides back to back (forward first on odd runs, backward first on even ones).

Usage: ``python benchmarks/iteration.py [--keys N] [--windows W] [--records R]
[--session-keys K] [--repeat R] [--only both-ways|sessions]``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from bisect import bisect_left, insort
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's packages

from topology.serde import Serdes, serializer_of  # noqa: E402
from topology.state.memory import (  # noqa: E402
    InMemoryKeyValueStore,
    InMemorySessionStore,
    InMemoryVersionedKeyValueStore,
    InMemoryWindowStore,
)
from topology.state.rocksdb import (  # noqa: E402
    RocksDBKeyValueStore,
    RocksDBSessionStore,
    RocksDBVersionedKeyValueStore,
    RocksDBWindowStore,
    StateDB,
)
from topology.windows import Window, Windowed  # noqa: E402

SER = serializer_of(Serdes.string())
WINDOW_MS = 1_000
FAR = 10**12
"""A retention (ms) longer than any benchmark stream: nothing expires."""
COMMIT_EVERY = 10_000
GAP = 300_000
"""The inactivity gap (ms): a key's records arrive about 200 s apart, so most merge."""

Calls = list[Callable[[], Iterator[Any]]]
Query = tuple[str, Calls, Calls]
"""A row: its name, and the forward and backward calls (each returns an iterator)."""


def cpu(fn: Callable[[], Any]) -> float:
    """CPU seconds ``fn()`` took."""
    start = time.process_time()
    fn()
    return time.process_time() - start


def drain(calls: Calls) -> Callable[[], int]:
    """A function reading every call's iterator to the end; returns the items read."""
    def run() -> int:
        n = 0
        for call in calls:
            for _ in call():
                n += 1
        return n
    return run


def fill(db: StateDB | None, keys: list[str], windows: int) -> dict[str, Any]:
    """One store of each type, filled with the same data (RocksDB ones if ``db`` is given)."""
    if db is None:
        kv: Any = InMemoryKeyValueStore("kv", SER)
        window: Any = InMemoryWindowStore("w", SER, WINDOW_MS, FAR)
        session: Any = InMemorySessionStore("s", SER, FAR)
        versioned: Any = InMemoryVersionedKeyValueStore("v", SER, FAR)
    else:
        kv = RocksDBKeyValueStore("kv", SER, db.keyspace("kv"))
        window = RocksDBWindowStore("w", SER, WINDOW_MS, FAR, db.keyspace("w"))
        session = RocksDBSessionStore("s", SER, FAR, db.keyspace("s"))
        versioned = RocksDBVersionedKeyValueStore("v", SER, db.keyspace("v"), FAR)
    writes = 0
    for i, key in enumerate(keys):
        kv.put(key, i)
        for w in range(windows):
            window.put(key, i + w, w * WINDOW_MS)
            session.put(Windowed(key, Window(w * 3 * GAP, w * 3 * GAP + GAP)), i + w)
        for v in range(5):
            versioned.put(key, i + v, v * 10)
        writes += 1
        if db is not None and writes % 1_000 == 0:
            db.commit()
    if db is not None:
        db.commit()
    return {"kv": kv, "window": window, "session": session, "versioned": versioned}


def queries(stores: dict[str, Any], keys: list[str], windows: int, rng: random.Random
            ) -> list[Query]:
    """The rows of the both-directions table: forward and backward calls over the same bounds."""
    ordered = sorted(keys)
    spans = []
    for _ in range(200):
        i = rng.randrange(len(ordered) - 100)
        spans.append((ordered[i], ordered[i + 99]))
    some = rng.sample(keys, 2_000)
    half = windows // 2 * WINDOW_MS
    kv, window, session, versioned = (stores[k] for k in ("kv", "window", "session",
                                                          "versioned"))
    prefixes = sorted({key[:-2] for key in rng.sample(keys, 200)})

    def each(method: Callable[..., Any], args: list[tuple[Any, ...]], **kw: Any
             ) -> list[Callable[[], Iterator[Any]]]:
        return [lambda a=a: iter(method(*a, **kw)) for a in args]

    return [
        ("kv range (100 keys)", each(kv.range, spans), each(kv.reverse_range, spans)),
        ("kv all", [kv.all], [kv.reverse_all]),
        ("kv prefix_scan", each(kv.prefix_scan, [(p,) for p in prefixes]),
         each(kv.reverse_prefix_scan, [(p,) for p in prefixes])),
        ("window fetch(key, from, to)",
         each(window.fetch, [(k, 0, half) for k in some]),
         each(window.backward_fetch, [(k, 0, half) for k in some])),
        ("window fetch(key range)",
         each(window.fetch, [(lo, hi, 0, half) for lo, hi in spans[:5]]),
         each(window.backward_fetch, [(lo, hi, 0, half) for lo, hi in spans[:5]])),
        ("window fetch_all(half)", each(window.fetch_all, [(0, half)]),
         each(window.backward_fetch_all, [(0, half)])),
        ("window all", [window.all], [window.backward_all]),
        ("session find_sessions(key)",
         each(session.find_sessions, [(k, 0, half * 3 * GAP) for k in some]),
         each(session.backward_find_sessions, [(k, 0, half * 3 * GAP) for k in some])),
        ("session fetch(key range)", each(session.fetch, spans),
         each(session.backward_fetch, spans)),
        ("session all", [session.all], [session.backward_all]),
        ("versioned range (100 keys)", each(versioned.range, spans),
         each(versioned.reverse_range, spans)),
        ("versioned get_versions", each(versioned.get_versions, [(k,) for k in some]),
         each(versioned.get_versions, [(k,) for k in some], descending=True)),
    ]


def both_ways(repeat: int, keys: list[str], windows: int) -> None:
    """Print the backward / forward table for both backends."""
    print(f"Backward vs forward: {len(keys):,} keys, {windows} windows and sessions per key; "
          f"median CPU time of {repeat} paired runs (items/s)")
    print(f"{'backend':8} {'query':30} {'forward':>12} {'backward':>12} {'ratio':>7}")
    for backend in ("memory", "rocksdb"):
        with tempfile.TemporaryDirectory(prefix="iteration-bench-") as tmp:
            db = None if backend == "memory" else StateDB.open(Path(tmp) / "state")
            try:
                stores = fill(db, keys, windows)
                for name, forward, backward in queries(stores, keys, windows,
                                                       random.Random(2)):
                    items = 0
                    for ahead_call, back_call in zip(forward, backward, strict=True):
                        ahead = list(ahead_call())
                        if list(back_call()) != ahead[::-1]:
                            raise SystemExit(f"{backend} {name}: backward is not forward "
                                             "reversed")
                        items += len(ahead)
                    f_times, b_times = [], []
                    for run in range(repeat):
                        pair = [(f_times, drain(forward)), (b_times, drain(backward))]
                        for times, fn in (pair if run % 2 == 0 else pair[::-1]):
                            times.append(cpu(fn))
                    f_rate = items / statistics.median(f_times)
                    b_rate = items / statistics.median(b_times)
                    print(f"{backend:8} {name:30} {f_rate:12,.0f} {b_rate:12,.0f} "
                          f"{b_rate / f_rate:6.2f}x")
            finally:
                if db is not None:
                    db.close()


# -- session store put/find ------------------------------------------------------------------

def session_records(n: int, keys: int, seed: int) -> list[tuple[str, int]]:
    """``(key, timestamp)``: times rising 100 ms per record with up to 20 s of jitter."""
    rng = random.Random(seed)
    names = [f"user-{i:05d}" for i in range(keys)]
    return [(rng.choice(names), i * 100 + rng.randrange(20_000)) for i in range(n)]


def aggregate(store: Any, records: list[tuple[str, int]], commit: Callable[[], None] | None
              ) -> None:
    """The session aggregation's store calls: find, remove the merged sessions, put."""
    find = store.find_sessions
    remove = store.remove
    put = store.put
    for i, (key, t) in enumerate(records):
        start, end, count = t, t, 1
        for session, n in list(find(key, t - GAP, t + GAP)):
            window = session.window
            if window.start < start:
                start = window.start
            if window.end > end:
                end = window.end
            count += n
            remove(session)
        put(Windowed(key, Window(start, end)), count)
        if commit is not None and i % COMMIT_EVERY == COMMIT_EVERY - 1:
            commit()


def aggregate_reference(records: list[tuple[str, int]]) -> dict[str, list[list[int]]]:
    """The same merging in plain Python: per key a list of ``[end, start, count]``, by end."""
    sessions: dict[str, list[list[int]]] = {}
    for key, t in records:
        mine = sessions.get(key)
        if mine is None:
            mine = sessions[key] = []
        start, end, count = t, t, 1
        i = bisect_left(mine, [t - GAP])
        j = i
        while j < len(mine) and mine[j][1] <= t + GAP:
            s_end, s_start, n = mine[j]
            if s_start < start:
                start = s_start
            if s_end > end:
                end = s_end
            count += n
            j += 1
        # a session ending later but starting within the gap can also sit past j (none
        # here: sessions of a key never overlap), so the merged ones are exactly [i, j)
        del mine[i:j]
        insort(mine, [end, start, count])
    return sessions


def flatten(store: Any) -> list[tuple[str, int, int, int]]:
    return sorted((w.key, w.window.start, w.window.end, n) for w, n in store.all())


def flatten_reference(sessions: dict[str, list[list[int]]]) -> list[tuple[str, int, int, int]]:
    return sorted((k, s, e, n) for k, mine in sessions.items() for e, s, n in mine)


def session_bench(repeat: int, n: int, keys: int) -> None:
    """Print the session store against the plain-Python reference."""
    records = session_records(n, keys, 3)
    memory = InMemorySessionStore("s", SER, FAR)
    aggregate(memory, records, None)
    final = flatten(memory)
    if final != flatten_reference(aggregate_reference(records)):
        raise SystemExit("the session store and the reference merged differently")
    puts = [(Windowed(k, Window(s, e)), c) for k, s, e, c in final]
    random.Random(4).shuffle(puts)
    rng = random.Random(5)
    points = [(rng.choice(final)[0], rng.randrange(n * 100)) for _ in range(n)]
    ref_final = aggregate_reference(records)

    def store_put() -> None:
        store = InMemorySessionStore("s", SER, FAR)
        put = store.put
        for session, count in puts:
            put(session, count)

    def ref_put() -> None:
        sessions: dict[str, list[list[int]]] = {}
        for session, count in puts:
            key, (start, end) = session
            mine = sessions.get(key)
            if mine is None:
                mine = sessions[key] = []
            insort(mine, [end, start, count])

    def store_find() -> None:
        find = memory.find_sessions
        for key, t in points:
            for _ in find(key, t - GAP, t + GAP):
                pass

    def ref_find() -> None:
        for key, t in points:
            mine = ref_final[key]
            for j in range(bisect_left(mine, [t - GAP]), len(mine)):
                if mine[j][1] > t + GAP:
                    break
                _ = (Windowed(key, Window(mine[j][1], mine[j][0])), mine[j][2])

    def rocksdb_aggregate() -> None:
        with tempfile.TemporaryDirectory(prefix="session-bench-") as tmp, \
                StateDB.open(Path(tmp) / "state") as db:
            aggregate(RocksDBSessionStore("s", SER, FAR, db.keyspace("s")), records, db.commit)
            db.commit()

    rows = [
        ("aggregate (find+remove+put)", n, lambda: aggregate(
            InMemorySessionStore("s", SER, FAR), records, None),
         lambda: aggregate_reference(records)),
        ("put (final sessions)", len(puts), store_put, ref_put),
        ("find_sessions (random points)", len(points), store_find, ref_find),
        ("aggregate on RocksDB", n, rocksdb_aggregate, lambda: aggregate_reference(records)),
    ]
    print(f"\nSession store: {n:,} records, {keys:,} keys, gap {GAP:,} ms, {len(final):,} "
          f"final sessions; median CPU time of {repeat} paired runs (ops/s)")
    print(f"{'':30} {'reference':>12} {'store':>12} {'ratio':>7}")
    for name, count, ours, ref in rows:
        o_times, r_times = [], []
        for run in range(repeat):
            pair = [(o_times, ours), (r_times, ref)]
            for times, fn in (pair if run % 2 == 0 else pair[::-1]):
                times.append(cpu(fn))
        o_rate = count / statistics.median(o_times)
        r_rate = count / statistics.median(r_times)
        print(f"{name:30} {r_rate:12,.0f} {o_rate:12,.0f} {o_rate / r_rate:6.2f}x")


def main() -> None:
    """Run both benchmarks and print rates and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=20_000)
    parser.add_argument("--windows", type=int, default=10)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--session-keys", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", choices=["both-ways", "sessions"], default=None)
    args = parser.parse_args()
    keys = [f"key-{i:07d}" for i in range(args.keys)]
    random.Random(1).shuffle(keys)
    if args.only != "sessions":
        both_ways(args.repeat, keys, args.windows)
    if args.only != "both-ways":
        session_bench(args.repeat, args.records, args.session_keys)


if __name__ == "__main__":
    main()
