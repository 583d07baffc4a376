"""Benchmark suite: the runtime against plain-Python references, in one process.

Targets (issue 3), each printed with both absolute rates and the ratio, after checking that the
runtime and the reference produce identical outputs:

1. stream -> group_by_key -> tumbling count -> until_window_closes -> to_stream -> to, via
   ``pipe_records`` (goal >= 0.3x the tight loop) and ``pipe_input`` per record (>= 0.15x),
   and (1c) via ``pipe_records`` through string serdes, bytes in and out, against the same
   object-level loop (>= 0.25x); then 1a with the aggregation forwarding windowed keys to the
   suppression (1a': ``fuse_final_results=False``, for information);
2. table -> until_time_limit with max_records(n).emit_early_when_full() (>= 0.2x);
3. final results with a max_bytes limit (byte accounting on) vs without (>= 0.6x);
4. memory of 1 M buffered windowed keys vs a plain dict of the same objects (<= 2x);
5. a stream joined as of each record's time to a versioned table (10 versions per key),
   via ``pipe_records``, against the per-record windowed-count pipeline of 1b (>= 0.5x),
   its output checked against a dict of sorted lists with ``bisect``.

Each figure is the median CPU time (``time.process_time``) of ``--repeat`` runs, the runtime
and its reference run back to back each time: the machine is shared, and CPU time with paired,
median runs is what stays stable from one run to the next. A runtime run is timed from building
the driver to the list of output records read back; turning those into the reference's tuples
for the comparison is not timed.

Usage: ``make bench`` or ``python benchmarks/run.py [--records N] [--keys K]``.
"""

from __future__ import annotations

import argparse
import gc
import logging
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import reference
import workloads

from suppress import BufferConfig, Suppressed
from suppress.entry import RecordContext
from suppress.processor import SuppressProcessor
from topology import (
    Consumed,
    Materialized,
    Produced,
    StreamsBuilder,
    TimeWindows,
    TopologyTestDriver,
    Window,
    Windowed,
)
from topology.serde import Serdes, windowed_serializer

SIZE = 60_000
GRACE = 2_000
LONG_MAX = 2**63 - 1


def cpu_time(fn: Callable[[], Any]) -> float:
    """The CPU time ``fn()`` took (this process only, steal excluded); its result is dropped."""
    gc.collect()
    t0 = time.process_time()
    result = fn()
    elapsed = time.process_time() - t0
    del result  # freeing a large result is not part of the run
    return elapsed


def paired(repeat: int, fn: Callable[[], Any], ref: Callable[[], Any],
           check: Callable[[Any, Any], Any]) -> tuple[Any, float, float]:
    """Check ``fn``'s output against ``ref``'s, then time both back to back ``repeat`` times.

    ``check(output, reference_output)`` raises ``SystemExit`` if they differ and returns a
    summary. Returns that summary and the median of each one's CPU times. The machine is
    shared, so pairs taken close together and medians are what stays stable from run to
    run. While a run is timed only its input is alive: other live objects change the garbage
    collector's work (a full collection scans every live container, and how often one runs
    depends on how much survived), which moved the reference's figures by 50 %.
    """
    summary = check(fn(), ref())
    ref_times, times = [], []
    for _ in range(repeat):
        ref_times.append(cpu_time(ref))
        times.append(cpu_time(fn))
    return summary, statistics.median(times), statistics.median(ref_times)


# -- 1 and 3: final results -----------------------------------------------------------------

def final_results_topology(buffer: Any) -> Any:
    b = StreamsBuilder()
    (b.stream("in").group_by_key()
     .windowed_by(TimeWindows.of_size_and_grace(SIZE, GRACE)).count()
     .suppress(Suppressed.until_window_closes(buffer))
     .to_stream().to("out"))
    return b.build()


def run_final(records: list, bulk: bool, buffer: Any, fuse: bool = True
              ) -> tuple[list[Any], int]:
    """The output records and the dropped-record count (timed).

    ``fuse=False``: the aggregation forwards windowed keys to the suppression (the driver's
    ``fuse_final_results``) instead of handing it each change by window.
    """
    with TopologyTestDriver(final_results_topology(buffer), {"fuse_final_results": fuse},
                            initial_wall_clock_ms=0) as d:
        topic = d.create_input_topic("in")
        if bulk:
            topic.pipe_records(records)
        else:
            pipe = topic.pipe_input
            for key, value, ts in records:
                pipe(key, value, ts)
        out = d.create_output_topic("out").read_records_to_list()
        return out, int(d.metrics()["dropped-records-total"])


def run_final_serdes(records: list) -> tuple[list[Any], int]:
    """:func:`run_final` as a Kafka user pipes: bytes in and out through string serdes."""
    windowed = Serdes.time_windowed(Serdes.string(), SIZE)
    b = StreamsBuilder()
    (b.stream("in", Consumed(Serdes.string(), Serdes.string())).group_by_key()
     .windowed_by(TimeWindows.of_size_and_grace(SIZE, GRACE)).count()
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream().to("out", Produced(windowed, Serdes.long())))
    with TopologyTestDriver(b.build(), initial_wall_clock_ms=0) as d:
        d.create_input_topic("in", Serdes.string(), Serdes.string()).pipe_records(records)
        out = d.create_output_topic("out", windowed, Serdes.long()).read_records_to_list()
        return out, int(d.metrics()["dropped-records-total"])


def comparable_final(result: tuple[list[Any], int]) -> tuple[list[tuple], int]:
    """:func:`run_final`'s result in the reference's shape (not timed)."""
    records, dropped = result
    return [(r.key.key, r.key.window.start, r.value, r.timestamp) for r in records], dropped


# -- 2: rate limiting ------------------------------------------------------------------------

def run_time_limited(records: list, limit: int, max_records: int) -> list[Any]:
    """The output records (timed)."""
    b = StreamsBuilder()
    (b.table("in")
     .suppress(Suppressed.until_time_limit(
         limit, BufferConfig.max_records(max_records).emit_early_when_full()))
     .to_stream().to("out"))
    with TopologyTestDriver(b.build(), initial_wall_clock_ms=0) as d:
        d.create_input_topic("in").pipe_records(records)
        return d.create_output_topic("out").read_records_to_list()


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


Row = tuple[str, float, float, str, bool]  # label, runtime rate, reference rate, goal, met


def bench_final(n: int, keys: int, rep: int) -> tuple[tuple[int, int], list[Row]]:
    """Targets 1a, 1b, 1c and 3 on one clicks workload, then 1a forwarding windowed keys;
    (final windows, late drops) and rows."""
    clicks = workloads.clicks(n, keys)
    unbounded = BufferConfig.unbounded()

    def same_as_reference(out: Any, ref_out: tuple[list[tuple], int]) -> tuple[int, int]:
        if comparable_final(out) != ref_out:
            raise SystemExit("final results differ from the reference")
        return len(ref_out[0]), ref_out[1]

    rows: list[Row] = []
    for label, bulk, goal in (("1a final results, pipe_records", True, 0.30),
                              ("1b final results, pipe_input", False, 0.15)):
        summary, t, t_ref = paired(
            rep, lambda bulk=bulk: run_final(clicks, bulk, unbounded),
            lambda: reference.final_counts(clicks, SIZE, GRACE), same_as_reference)
        rows.append((label, n / t, n / t_ref, f">= {goal:.2f}", t_ref / t >= goal))
    _, t, t_ref = paired(rep, lambda: run_final_serdes(clicks),  # str keys and values
                         lambda: reference.final_counts(clicks, SIZE, GRACE), same_as_reference)
    rows.append(("1c as 1a, through string serdes", n / t, n / t_ref, ">= 0.25",
                 t_ref / t >= 0.25))

    def same_as_without(out: Any, out_off: Any) -> None:
        if comparable_final(out) != comparable_final(out_off):
            raise SystemExit("final results with max_bytes differ from those without")

    bytes_cfg = unbounded.with_max_bytes(LONG_MAX)
    _, t3, t3_off = paired(rep, lambda: run_final(clicks, True, bytes_cfg),
                           lambda: run_final(clicks, True, unbounded), same_as_without)
    rows.append(("3  max_bytes on vs off", n / t3, n / t3_off, ">= 0.60", t3_off / t3 >= 0.6))

    # 1a with the aggregation forwarding windowed keys (each change a Windowed key)
    _, t, t_ref = paired(rep, lambda: run_final(clicks, True, unbounded, fuse=False),
                         lambda: reference.final_counts(clicks, SIZE, GRACE), same_as_reference)
    rows.append(("1a' 1a, windowed keys forwarded", n / t, n / t_ref, "(info)", True))
    return summary, rows


def bench_time_limited(n: int, keys: int, rep: int) -> tuple[int, Row]:
    """Target 2: the number of rate-limited updates emitted, and the row."""
    updates = workloads.table_updates(n, keys)
    limit, cap = 10_000, 1_000

    def same_updates(out: list[Any], ref_out: list[tuple]) -> int:
        if [(r.key, r.value, r.timestamp) for r in out] != ref_out:
            raise SystemExit("time-limited output differs from the reference")
        return len(ref_out)

    emitted, t, t_ref = paired(rep, lambda: run_time_limited(updates, limit, cap),
                               lambda: reference.time_limited(updates, limit, cap),
                               same_updates)
    return emitted, ("2  until_time_limit + max_records", n / t, n / t_ref, ">= 0.20",
                     t_ref / t >= 0.2)


# -- 5: as-of stream-table join -------------------------------------------------------------

def run_join(rates: list, records: list, retention: int) -> list[Any]:
    """The joined output records (timed): the rates piped first, then the stream."""
    b = StreamsBuilder()
    table = b.table("rates", materialized=Materialized.versioned("rates", retention))
    b.stream("tx").join(table, lambda value, rate: (value, rate)).to("out")
    with TopologyTestDriver(b.build(), initial_wall_clock_ms=0) as d:
        d.create_input_topic("rates").pipe_records(rates)
        d.create_input_topic("tx").pipe_records(records)
        return d.create_output_topic("out").read_records_to_list()


def bench_join(n: int, keys: int, rep: int, per_record_rate: float) -> tuple[int, list[Row]]:
    """Target 5: joined records and the rows (vs the reference, and vs 1b's rate)."""
    clicks = workloads.clicks(n, keys)
    rates = workloads.rates(keys, 10, n)

    def same_joins(out: list[Any], ref_out: list[tuple]) -> int:
        if [(r.key, r.value, r.timestamp) for r in out] != ref_out:
            raise SystemExit("as-of join output differs from the reference")
        return len(ref_out)

    joined, t, t_ref = paired(rep, lambda: run_join(rates, clicks, n + 1),
                              lambda: reference.as_of_join(rates, clicks), same_joins)
    rate = n / t
    return joined, [
        ("5  as-of join vs 1b (pipe_input)", rate, per_record_rate, ">= 0.50",
         rate / per_record_rate >= 0.5),
        ("5r as-of join vs dict+bisect", rate, n / t_ref, "(info)", True),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--memory-entries", type=int, default=1_000_000)
    args = parser.parse_args()
    logging.getLogger("topology").setLevel(logging.ERROR)  # late-record warnings
    n, rep = args.records, args.repeat

    (final_windows, late), final_rows = bench_final(n, args.keys, rep)
    rate_limited, time_limited_row = bench_time_limited(n, args.keys, rep)
    joined, join_rows = bench_join(n, args.keys, rep, final_rows[1][1])
    rows = [*final_rows[:3], time_limited_row, *final_rows[3:], *join_rows]

    print(f"{n:,} records, {args.keys:,} keys, median CPU time of {rep} paired runs; outputs "
          f"identical to the references ({final_windows:,} final windows, {late:,} late drops; "
          f"{rate_limited:,} rate-limited updates; {joined:,} joined records)")
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
