"""Seeded workloads shared by the benchmarks."""

from __future__ import annotations

import random

Record = tuple[str, object, int]


def clicks(n: int, keys: int, seed: int = 7) -> list[Record]:
    """``n`` records over ``keys`` keys, ~1 ms apart; 10 % arrive up to 3 s late."""
    rng = random.Random(seed)
    names = [f"user-{i}" for i in range(keys)]
    out = []
    for i in range(n):
        ts = max(0, i - rng.randrange(3_000)) if rng.random() < 0.1 else i
        out.append((names[rng.randrange(keys)], "v", ts))
    return out


def table_updates(n: int, keys: int, seed: int = 11) -> list[Record]:
    """``n`` in-order table updates (int values) over ``keys`` keys, ~1 ms apart."""
    rng = random.Random(seed)
    names = [f"row-{i}" for i in range(keys)]
    return [(names[rng.randrange(keys)], i, i) for i in range(n)]


def rates(keys: int, versions: int, span: int, seed: int = 13) -> list[Record]:
    """``versions`` rate updates per key (float values) at random times in ``[0, span)``."""
    rng = random.Random(seed)
    updates = [(f"user-{k}", round(rng.random(), 6), rng.randrange(span))
               for k in range(keys) for _ in range(versions)]
    rng.shuffle(updates)
    return updates
