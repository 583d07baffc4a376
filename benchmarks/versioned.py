"""Versioned store benchmark: ``get(key, as_of)`` against a plain dict of sorted lists.

Target: the in-memory versioned store answers point-in-time lookups at >= 0.5x the rate of
the plainest fast Python that does the same lookup: a ``dict`` of ``key -> (timestamps,
values)`` searched with ``bisect.bisect_right``. Workload: ``--keys`` keys (100 k) with
``--versions`` versions each (10) at random timestamps, and ``--queries`` random
``(key, as_of)`` lookups (1 M), all inside history retention. The target loop uses each
result at once, as a stream-table join does. The store builds the returned record on read
(it keeps plain values, so writes allocate nothing for the collector to track); keeping a
million fresh records alive instead makes the collector's full passes dominate, which the
second row shows. Also printed, without a target: latest-value ``get(key)`` against a dict
lookup, and building the data with ``put`` in random arrival order against bisect
insertion into the reference.

Each figure is the median CPU time (``time.process_time``) of ``--repeat`` paired runs, store
and reference back to back; results are compared once before timing.

Usage: ``python benchmarks/versioned.py [--keys N] [--versions V] [--queries Q]``.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time
from bisect import bisect_right
from collections.abc import Callable
from typing import Any

from topology.state.memory import InMemoryVersionedKeyValueStore

HORIZON = 10_000_000


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


def main() -> None:
    """Run the measurements and print rates and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--versions", type=int, default=10)
    parser.add_argument("--queries", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
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

    print(f"{args.keys:,} keys x {args.versions} versions, {args.queries:,} lookups, "
          f"median CPU time of {args.repeat} paired runs")
    rows = [
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
    for label, n, (ours, theirs) in rows:
        print(f"{label:52s} store {n / ours / 1e6:5.2f} M/s  reference "
              f"{n / theirs / 1e6:5.2f} M/s  ratio {theirs / ours:4.2f}x")


if __name__ == "__main__":
    main()
