"""Sliding and session final results against the tumbling pipeline, on the same records.

Four pipelines, ``stream -> group_by_key -> windowed_by(W).count() ->
until_window_closes -> to_stream -> to``, over one seeded workload (``workloads.clicks``:
~1 ms apart, 10 % up to 3 s late), all with a grace of 2 s:

* tumbling windows of 60 s (the fused step of ``benchmarks/run.py``, target 1a), and, for
  scale only, of 5 s: windows as long as the others, which emit about as many results;
* sliding windows with a time difference of 5 s;
* session windows with an inactivity gap of 5 s, whose output is first checked against a
  plain-Python reference doing the same work (:func:`sessions_reference`).

Goal: sliding and session records/s at least 0.5x the tumbling pipeline's. Each figure is
the median CPU time of ``--repeat`` runs taken back to back, as in ``benchmarks/run.py``.
Sliding and session windows emit many more final results per record than 60 s tumbling
windows (a result per burst of a key rather than one per key and minute), and each result
goes through the suppression buffer and out to the output topic: the output counts are
printed beside the rates.

Usage: ``make bench`` or ``python benchmarks/windows.py [--records N] [--keys K]``.
"""

from __future__ import annotations

import argparse
import heapq
import logging
from collections.abc import Callable
from typing import Any

import workloads
from run import cpu_time, paired

from suppress import BufferConfig, Suppressed
from topology import (
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    TimeWindows,
    TopologyTestDriver,
)

SIZE = 60_000
DIFFERENCE = 5_000
GAP = 5_000
GRACE = 2_000


def final_counts(windows: Any, records: list[Any]) -> tuple[list[Any], int]:
    """The final results of ``windows`` over ``records`` and the late-drop count (timed)."""
    b = StreamsBuilder()
    (b.stream("in").group_by_key().windowed_by(windows).count()
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream().to("out"))
    with TopologyTestDriver(b.build(), initial_wall_clock_ms=0) as d:
        d.create_input_topic("in").pipe_records(records)
        out = d.create_output_topic("out").read_records_to_list()
        return out, int(d.metrics()["dropped-records-total"])


def sessions_reference(records: list[Any], gap: int, grace: int) -> tuple[list[tuple], int]:
    """Session counts with final results, plain Python: the same rules as the runtime.

    Per key, the open sessions ``[start, end, count]``; a record merges those with
    ``end >= t - gap`` and ``start <= t + gap``, is dropped if the merged session is closed
    (``T >= end + 1 + gap + grace``), and a heap of close times emits each session once.
    Returns ``(key, start, end, count)`` of the emitted sessions and the drop count.
    """
    delay = gap + grace
    open_sessions: dict[str, list[list[int]]] = {}
    closing: list[tuple[int, str, int, int]] = []  # (close time, key, start, end)
    out: list[tuple] = []
    dropped = 0
    now = -1
    for key, _, ts in records:
        if ts > now:
            now = ts
        sessions = open_sessions.get(key)
        if sessions is None:
            sessions = open_sessions[key] = []
        start = end = ts
        count = 1
        keep = []
        for s in sessions:
            if s[1] >= ts - gap and s[0] <= ts + gap and s[1] + 1 + delay > now:
                start, end, count = min(start, s[0]), max(end, s[1]), count + s[2]
            else:
                keep.append(s)
        if now >= end + 1 + delay:
            dropped += 1
            continue
        keep.append([start, end, count])
        open_sessions[key] = keep
        heapq.heappush(closing, (end + 1 + delay, key, start, end))
        while closing and closing[0][0] <= now:
            _, k, s0, e0 = heapq.heappop(closing)
            for s in open_sessions.get(k, ()):
                if s[0] == s0 and s[1] == e0:
                    out.append((k, s0, e0, s[2]))
                    open_sessions[k].remove(s)
                    break
    return out, dropped


def comparable(result: tuple[list[Any], int]) -> tuple[list[tuple], int]:
    records, dropped = result
    return sorted((r.key.key, r.key.window.start, r.key.window.end, r.value)
                  for r in records), dropped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    logging.getLogger("topology").setLevel(logging.ERROR)  # late-record warnings
    records = workloads.clicks(args.records, args.keys)

    def run(windows: Any) -> Callable[[], tuple[list[Any], int]]:
        return lambda: final_counts(windows, records)

    def same(out: Any, ref: Any) -> tuple[int, int]:
        got, expected = comparable(out), (sorted(ref[0]), ref[1])
        if got != expected:
            raise SystemExit("session final results differ from the reference")
        return len(got[0]), got[1]

    (sessions, late), session_time, ref_time = paired(
        args.repeat, run(SessionWindows.of_inactivity_gap_and_grace(GAP, GRACE)),
        lambda: sessions_reference(records, GAP, GRACE), same)
    pipelines = {"tumbling": run(TimeWindows.of_size_and_grace(SIZE, GRACE)),
                 "short": run(TimeWindows.of_size_and_grace(DIFFERENCE, GRACE)),
                 "sliding": run(SlidingWindows.of_time_difference_and_grace(DIFFERENCE, GRACE))}
    counts = {name: len(pipeline()[0]) for name, pipeline in pipelines.items()}
    times: dict[str, list[float]] = {name: [] for name in pipelines}
    for _ in range(args.repeat):
        for name, pipeline in pipelines.items():
            times[name].append(cpu_time(pipeline))
    tumbling_time, short_time, sliding_time = (sorted(times[name])[args.repeat // 2]
                                               for name in ("tumbling", "short", "sliding"))
    n = args.records
    print(f"{n:,} records, {args.keys:,} keys, median CPU time of {args.repeat} runs; session "
          f"output identical to the reference ({sessions:,} sessions, {late:,} late drops)")
    print(f"  {'pipeline':<40} {'records/s':>11} {'results':>9} {'vs tumbling':>12}  goal")
    rows = [(f"tumbling {SIZE // 1000} s, grace {GRACE // 1000} s", tumbling_time,
             counts["tumbling"], None),
            (f"tumbling {DIFFERENCE // 1000} s, grace {GRACE // 1000} s (for scale)", short_time,
             counts["short"], None),
            (f"sliding {DIFFERENCE // 1000} s, grace {GRACE // 1000} s", sliding_time,
             counts["sliding"], 0.5),
            (f"session gap {GAP // 1000} s, grace {GRACE // 1000} s", session_time, sessions,
             0.5),
            ("session reference (plain Python)", ref_time, sessions, None)]
    for label, seconds, results, goal in rows:
        ratio = tumbling_time / seconds
        verdict = "" if goal is None else f">= {goal}: {'yes' if ratio >= goal else 'NO'}"
        print(f"  {label:<40} {n / seconds / 1e3:>9,.0f} k {results:>9,} {ratio:>11.3f}x  "
              f"{verdict}")
    print(f"  session runtime vs its reference: {ref_time / session_time:.3f}x")
    print("  (tumbling windows as long as the sliding and session ones emit as many results "
          "per record; the goal is against the 60 s ones)")


if __name__ == "__main__":
    main()
