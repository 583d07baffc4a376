"""Benchmark: tumbling count + final-results suppression through the runtime.

1 M records, 10 k keys, 60 s windows, 2 s grace, mildly out of order (seeded). Prints
records/s for a plain-Python reference loop computing the same final results and for the
runtime (``pipe_input`` one by one, and ``pipe_records``), with their ratios, after checking
that all three emit exactly the same final results in the same order.

Usage: ``make bench`` or ``python benchmarks/run.py [--records N] [--keys K]``.
"""

from __future__ import annotations

import argparse
import gc
import heapq
import random
import time

from suppress import BufferConfig, Suppressed
from topology import StreamsBuilder, TimeWindows, TopologyTestDriver

SIZE = 60_000
GRACE = 2_000


def make_records(n: int, keys: int, seed: int = 7) -> list[tuple[str, str, int]]:
    """``n`` records over ``keys`` keys, ~1 ms apart, up to 3 s out of order."""
    rng = random.Random(seed)
    names = [f"user-{i}" for i in range(keys)]
    out = []
    for i in range(n):
        ts = max(0, i - rng.randrange(3_000) if rng.random() < 0.1 else i)
        out.append((names[rng.randrange(keys)], "v", ts))
    return out


def reference(records: list[tuple[str, str, int]]) -> tuple[list[tuple], int]:
    """Tight loop: dict of window start -> {key: [count, max ts]} plus a heap of ends."""
    windows: dict[int, dict[str, list[int]]] = {}
    ends: list[int] = []
    stream_time = -1
    out: list[tuple] = []
    dropped = 0
    for key, _value, ts in records:
        if ts > stream_time:
            stream_time = ts
        start = ts - ts % SIZE
        if start + SIZE <= stream_time - GRACE:
            dropped += 1
        else:
            bucket = windows.get(start)
            if bucket is None:
                bucket = windows[start] = {}
                heapq.heappush(ends, start + SIZE)
            entry = bucket.get(key)
            if entry is None:
                bucket[key] = [1, ts]
            else:
                entry[0] += 1
                if ts > entry[1]:
                    entry[1] = ts
        while ends and ends[0] <= stream_time - GRACE:
            end = heapq.heappop(ends)
            bucket = windows.pop(end - SIZE)
            for k in sorted(bucket, key=str.encode):  # same start: key bytes decide
                count, max_ts = bucket[k]
                out.append((k, end - SIZE, count, max_ts))
    return out, dropped


def topology():
    b = StreamsBuilder()
    (b.stream("in").group_by_key()
     .windowed_by(TimeWindows.of_size_and_grace(SIZE, GRACE)).count()
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream().to("out"))
    return b.build()


def run_runtime(records: list[tuple[str, str, int]], bulk: bool) -> tuple[list[tuple], int]:
    import logging

    logging.getLogger("topology").setLevel(logging.ERROR)
    with TopologyTestDriver(topology(), initial_wall_clock_ms=0) as d:
        topic = d.create_input_topic("in")
        out = d.create_output_topic("out")
        if bulk:
            topic.pipe_records(records)
        else:
            pipe = topic.pipe_input
            for key, value, ts in records:
                pipe(key, value, ts)
        result = [(r.key.key, r.key.window.start, r.value, r.timestamp)
                  for r in out.read_records_to_list()]
        return result, int(d.metrics()["dropped-records-total"])


def timed(fn, *args):
    gc.collect()
    t0 = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    args = parser.parse_args()
    records = make_records(args.records, args.keys)
    n = len(records)
    ref, ref_t = timed(reference, records)
    rows = [("plain-Python reference loop", ref_t)]
    for label, bulk in (("runtime, pipe_records (bulk)", True),
                        ("runtime, pipe_input per record", False)):
        got, t = timed(run_runtime, records, bulk)
        if got != ref:
            raise SystemExit(f"{label}: output differs from the reference "
                             f"({len(got[0])} vs {len(ref[0])} windows)")
        rows.append((label, t))
    print(f"{n:,} records, {args.keys:,} keys; {len(ref[0]):,} final windows, "
          f"{ref[1]:,} late drops; outputs identical")
    for label, t in rows:
        print(f"  {label:<34} {n / t / 1e3:>9,.0f} k records/s   ratio {ref_t / t:5.3f}")


if __name__ == "__main__":
    main()
