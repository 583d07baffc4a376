"""Benchmark suite: the runtime against plain-Python references, in one process.

Targets (issue 3), each printed with both absolute rates and the ratio, after checking that the
runtime and the reference produce identical outputs:

1. stream -> group_by_key -> tumbling count -> until_window_closes -> to_stream -> to, via
   ``pipe_records`` (goal >= 0.25x the tight loop) and ``pipe_input`` per record (>= 0.15x);
2. table -> until_time_limit with max_records(n).emit_early_when_full() (>= 0.2x);
3. final results with a max_bytes limit (byte accounting on) vs without (>= 0.6x);
4. memory of 1 M buffered windowed keys vs a plain dict of the same objects (<= 2x).

Each timing is the best of ``--repeat`` runs (the machine is shared; best-of is the stable
figure). Usage: ``make bench`` or ``python benchmarks/run.py [--records N] [--keys K]``.
"""

from __future__ import annotations

import argparse
import gc
import logging
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import reference
import workloads

from suppress import BufferConfig, Suppressed
from suppress.entry import RecordContext
from suppress.processor import SuppressProcessor
from topology import StreamsBuilder, TimeWindows, TopologyTestDriver, Window, Windowed
from topology.serde import Serdes, windowed_serializer

SIZE = 60_000
GRACE = 2_000
LONG_MAX = 2**63 - 1


def best_of(repeat: int, fn: Callable[[], Any]) -> tuple[Any, float]:
    """The result of ``fn`` and its fastest wall time over ``repeat`` runs."""
    best = float("inf")
    result = None
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return result, best


# -- 1 and 3: final results -----------------------------------------------------------------

def final_results_topology(buffer: Any) -> Any:
    b = StreamsBuilder()
    (b.stream("in").group_by_key()
     .windowed_by(TimeWindows.of_size_and_grace(SIZE, GRACE)).count()
     .suppress(Suppressed.until_window_closes(buffer))
     .to_stream().to("out"))
    return b.build()


def run_final(records: list, bulk: bool, buffer: Any) -> tuple[list[tuple], int]:
    with TopologyTestDriver(final_results_topology(buffer), initial_wall_clock_ms=0) as d:
        topic = d.create_input_topic("in")
        if bulk:
            topic.pipe_records(records)
        else:
            pipe = topic.pipe_input
            for key, value, ts in records:
                pipe(key, value, ts)
        out = [(r.key.key, r.key.window.start, r.value, r.timestamp)
               for r in d.create_output_topic("out").read_records_to_list()]
        return out, int(d.metrics()["dropped-records-total"])


# -- 2: rate limiting ------------------------------------------------------------------------

def run_time_limited(records: list, limit: int, max_records: int) -> list[tuple]:
    b = StreamsBuilder()
    (b.table("in")
     .suppress(Suppressed.until_time_limit(
         limit, BufferConfig.max_records(max_records).emit_early_when_full()))
     .to_stream().to("out"))
    with TopologyTestDriver(b.build(), initial_wall_clock_ms=0) as d:
        d.create_input_topic("in").pipe_records(records)
        return [(r.key, r.value, r.timestamp)
                for r in d.create_output_topic("out").read_records_to_list()]


# -- 4: memory ---------------------------------------------------------------------------------

def memory(n: int) -> tuple[float, float]:
    """Bytes per entry: (suppress buffer, plain dict), each with the key/value objects."""
    window = Window(0, SIZE)
    ser = windowed_serializer(Serdes.string(), session=False)

    def objects() -> tuple[list, list]:
        keys = [Windowed(f"user-{i}", window) for i in range(n)]
        ctxs = [RecordContext(0, i, "in", 0, ()) for i in range(n)]
        return keys, ctxs

    gc.collect()
    tracemalloc.start()
    keys, ctxs = objects()
    engine = SuppressProcessor("m", Suppressed.until_window_closes(BufferConfig.unbounded()),
                               GRACE, lambda *a: None, ser, Serdes.long().serialize)
    for key, ctx in zip(keys, ctxs, strict=True):
        engine.process(key, 1, 0, ctx, SIZE)
    buffered = tracemalloc.get_traced_memory()[0]
    assert engine.buffer.num_records == n
    del engine, keys, ctxs
    gc.collect()
    tracemalloc.stop()

    gc.collect()
    tracemalloc.start()
    keys, ctxs = objects()
    plain = {key: (1, ctx) for key, ctx in zip(keys, ctxs, strict=True)}
    baseline = tracemalloc.get_traced_memory()[0]
    assert len(plain) == n
    del plain, keys, ctxs
    tracemalloc.stop()
    return buffered / n, baseline / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--memory-entries", type=int, default=1_000_000)
    args = parser.parse_args()
    logging.getLogger("topology").setLevel(logging.ERROR)  # late-record warnings
    n, rep = args.records, args.repeat
    rows: list[tuple[str, float, float, str, bool]] = []

    clicks = workloads.clicks(n, args.keys)
    (ref_out, ref_dropped), ref_t = best_of(rep, lambda: reference.final_counts(
        clicks, SIZE, GRACE))
    unbounded = BufferConfig.unbounded()
    timings = {}
    for label, bulk, buffer in (
        ("pipe_records", True, unbounded),
        ("pipe_input", False, unbounded),
        ("pipe_records+max_bytes", True, unbounded.with_max_bytes(LONG_MAX)),
    ):
        out, t = best_of(rep, lambda bulk=bulk, buffer=buffer: run_final(clicks, bulk, buffer))
        if out != (ref_out, ref_dropped):
            raise SystemExit(f"final results ({label}) differ from the reference")
        timings[label] = t
    rows.append(("1a final results, pipe_records", n / timings["pipe_records"], n / ref_t,
                 ">= 0.25", ref_t / timings["pipe_records"] >= 0.25))
    rows.append(("1b final results, pipe_input", n / timings["pipe_input"], n / ref_t,
                 ">= 0.15", ref_t / timings["pipe_input"] >= 0.15))

    updates = workloads.table_updates(n, args.keys)
    limit, cap = 10_000, 1_000
    ref2, ref2_t = best_of(rep, lambda: reference.time_limited(updates, limit, cap))
    out2, t2 = best_of(rep, lambda: run_time_limited(updates, limit, cap))
    if out2 != ref2:
        raise SystemExit("time-limited output differs from the reference")
    rows.append(("2  until_time_limit + max_records", n / t2, n / ref2_t, ">= 0.20",
                 ref2_t / t2 >= 0.2))

    with_bytes = timings["pipe_records+max_bytes"]
    rows.append(("3  max_bytes on vs off", n / with_bytes, n / timings["pipe_records"],
                 ">= 0.60", timings["pipe_records"] / with_bytes >= 0.6))

    print(f"{n:,} records, {args.keys:,} keys, best of {rep}; outputs identical to the "
          f"references ({len(ref_out):,} final windows, {ref_dropped:,} late drops; "
          f"{len(ref2):,} rate-limited updates)")
    print(f"  {'target':<36} {'runtime':>12} {'reference':>12} {'ratio':>7}  goal     met")
    for label, rt, rf, goal, met in rows:
        print(f"  {label:<36} {rt / 1e3:>9,.0f} k/s {rf / 1e3:>9,.0f} k/s {rt / rf:>7.3f}  "
              f"{goal:<8} {'yes' if met else 'NO'}")

    per_entry, per_plain = memory(args.memory_entries)
    ratio = per_entry / per_plain
    print(f"  {'4  memory, ' + format(args.memory_entries, ',') + ' buffered keys':<36} "
          f"{per_entry:>8,.0f} B/entry vs plain dict {per_plain:,.0f} B/entry: "
          f"{ratio:.2f}x (goal <= 2.0: {'yes' if ratio <= 2 else 'NO'})")


if __name__ == "__main__":
    main()
