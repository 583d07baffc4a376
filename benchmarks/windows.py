"""Sliding and session final results against plain-Python references of the same windows.

Four pipelines, ``stream -> group_by_key -> windowed_by(W).count() ->
until_window_closes -> to_stream -> to``, over one seeded workload (``workloads.clicks``:
~1 ms apart, 10 % up to 3 s late), all with a grace of 2 s:

* sliding windows with a time difference of 5 s, and session windows with an inactivity gap
  of 5 s, each first checked against a plain-Python reference applying the same rules
  (:func:`sliding_reference`, :func:`sessions_reference`: the same final results and the same
  late-drop count), then timed in pairs with it;
* for scale only, tumbling windows of 60 s (``benchmarks/run.py``'s target 1a) and of 5 s
  (windows as long as the others).

Goal: sliding and session final results at least 0.2x their reference's records/s. Each
figure is the median CPU time of ``--repeat`` runs taken back to back, as in
``benchmarks/run.py``.

Usage: ``make bench`` or ``python benchmarks/windows.py [--records N] [--keys K]``.
"""

from __future__ import annotations

import argparse
import heapq
import logging
from bisect import bisect_left, bisect_right, insort
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


def sliding_reference(records: list[Any], d: int, grace: int) -> tuple[list[tuple], int]:
    """Sliding-window counts with final results, plain Python: the same rules as the runtime.

    Kafka's window creation rules (see ``topology/runtime/processors/sliding.py``) over a
    dict of ``(key, start) -> [count, latest timestamp]`` and each key's sorted starts, no
    store, processor or buffer; a heap of close times (``end + 1 + grace``) emits each
    window once. A closed window stays readable, as in the store, until it can no longer be
    looked back to. Returns ``(key, start, end, count)`` of the emitted windows and the drop
    count (a record dropped outright, and each of its updates of a closed window).
    """
    windows: dict[tuple[str, int], list[int]] = {}
    starts_of: dict[str, list[int]] = {}
    closing: list[tuple[int, str, int]] = []  # (close time, key, start)
    out: list[tuple] = []
    dropped = 0
    now = swept = -1

    def closed(start: int) -> bool:
        return start + d + 1 + grace <= now

    def update(key: str, start: int, count: int, latest: int, ts: int) -> None:
        nonlocal dropped
        if closed(start):
            dropped += 1
            return
        window = windows.get((key, start))
        if window is None:
            windows[(key, start)] = [count + 1, max(latest, ts)]
            insort(starts_of.setdefault(key, []), start)
            heapq.heappush(closing, (start + d + 1 + grace, key, start))
        else:
            window[0] = count + 1
            window[1] = max(latest, ts)

    def create(key: str, start: int, count: int, latest: int) -> None:
        windows[(key, start)] = [count, latest]
        insort(starts_of.setdefault(key, []), start)
        heapq.heappush(closing, (start + d + 1 + grace, key, start))

    for key, _, ts in records:
        if ts > now:
            now = ts
        if closed(ts):  # every window that could hold the record is closed
            dropped += 1
        else:
            starts = starts_of.get(key, [])
            seen = set()
            right_created = False
            right: list[int] | None = None
            previous: int | None = None
            if ts < d:  # the window [0, d] holds it
                combined: list[int] | None = None
                lo, hi = bisect_left(starts, 0), bisect_right(starts, ts + 1)
                for start in starts[lo:hi]:
                    count, latest = windows[(key, start)]  # as read, before any update
                    seen.add(start)
                    if start == 0:
                        combined = [count, latest]
                        if latest < ts:
                            previous = latest
                    elif start <= ts:
                        right = [count, latest]
                        update(key, start, count, latest, ts)
                    else:
                        right_created = True
                if right is None and combined is not None and combined[1] > ts:
                    right = combined
                if not right_created and right is not None and right[1] > ts:
                    create(key, ts + 1, right[0], right[1])
                if previous is not None and previous + 1 not in seen:
                    update(key, previous + 1, 0, ts, ts)
                if combined is None:
                    update(key, 0, 0, ts, ts)
                else:
                    update(key, 0, combined[0], combined[1], ts)
            else:
                left: list[int] | None = None
                left_created = False
                lo, hi = bisect_left(starts, max(0, ts - 2 * d)), bisect_right(starts, ts + 1)
                done = False
                for start in reversed(starts[lo:hi]):
                    count, latest = windows[(key, start)]  # as read, before any update
                    seen.add(start)
                    end = start + d
                    if start == ts + 1:
                        right_created = True
                    elif end > ts:
                        if right is None:
                            right = [count, latest]
                        update(key, start, count, latest, ts)
                    elif end == ts:
                        left_created = True
                        update(key, start, count, latest, ts)
                        if latest < ts:
                            previous = latest
                        else:
                            done = True
                            break
                    else:
                        left = [count, latest]
                        previous = latest
                        break
                if not done:
                    if previous is not None and previous + 1 not in seen \
                            and previous + 1 + d >= ts:
                        update(key, previous + 1, 0, ts, ts)
                    if not left_created:
                        if previous is not None and ts - d <= previous and left is not None:
                            update(key, ts - d, left[0], ts, ts)
                        else:
                            update(key, ts - d, 0, ts, ts)
                    if not right_created and right is not None and right[1] > ts:
                        create(key, ts + 1, right[0], right[1])
        while closing and closing[0][0] <= now:
            _, k, start = heapq.heappop(closing)
            out.append((k, start, start + d, windows[(k, start)][0]))
        if now - swept > 2 * d + grace + 1:  # forget the windows no record can look back to
            swept, limit = now, now - grace - 3 * d - 1
            for k, starts in starts_of.items():
                cut = bisect_left(starts, limit)
                for start in starts[:cut]:
                    del windows[(k, start)]
                del starts[:cut]
    return out, dropped


def comparable(result: tuple[list[Any], int]) -> tuple[list[tuple], int]:
    records, dropped = result
    return sorted((r.key.key, r.key.window.start, r.key.window.end, r.value)
                  for r in records), dropped


GOAL = 0.2
"""Sliding and session final results: at least this share of their plain-Python reference's
records/s, each reference computing the same windows."""


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

    def same(what: str) -> Callable[[Any, Any], tuple[int, int]]:
        def check(out: Any, ref: Any) -> tuple[int, int]:
            got, expected = comparable(out), (sorted(ref[0]), ref[1])
            if got != expected:
                raise SystemExit(f"{what} final results differ from the reference")
            return len(got[0]), got[1]
        return check

    (sessions, session_late), session_time, session_ref = paired(
        args.repeat, run(SessionWindows.of_inactivity_gap_and_grace(GAP, GRACE)),
        lambda: sessions_reference(records, GAP, GRACE), same("session"))
    (slides, slide_late), sliding_time, sliding_ref = paired(
        args.repeat, run(SlidingWindows.of_time_difference_and_grace(DIFFERENCE, GRACE)),
        lambda: sliding_reference(records, DIFFERENCE, GRACE), same("sliding"))
    scale = {"tumbling": run(TimeWindows.of_size_and_grace(SIZE, GRACE)),
             "short": run(TimeWindows.of_size_and_grace(DIFFERENCE, GRACE))}
    counts = {name: len(pipeline()[0]) for name, pipeline in scale.items()}
    times: dict[str, list[float]] = {name: [] for name in scale}
    for _ in range(args.repeat):
        for name, pipeline in scale.items():
            times[name].append(cpu_time(pipeline))
    tumbling_time, short_time = (sorted(times[name])[args.repeat // 2]
                                 for name in ("tumbling", "short"))
    n = args.records
    print(f"{n:,} records, {args.keys:,} keys, median CPU time of {args.repeat} runs; output "
          f"identical to the references ({slides:,} sliding windows, {slide_late:,} late "
          f"drops; {sessions:,} sessions, {session_late:,} late drops)")
    print(f"  {'pipeline':<44} {'records/s':>11} {'results':>9}")
    rows = [(f"tumbling {SIZE // 1000} s, grace {GRACE // 1000} s (for scale)", tumbling_time,
             counts["tumbling"]),
            (f"tumbling {DIFFERENCE // 1000} s, grace {GRACE // 1000} s (for scale)", short_time,
             counts["short"]),
            (f"sliding {DIFFERENCE // 1000} s, grace {GRACE // 1000} s", sliding_time, slides),
            ("sliding reference (plain Python)", sliding_ref, slides),
            (f"session gap {GAP // 1000} s, grace {GRACE // 1000} s", session_time, sessions),
            ("session reference (plain Python)", session_ref, sessions)]
    for label, seconds, results in rows:
        print(f"  {label:<44} {n / seconds / 1e3:>9,.0f} k {results:>9,}")
    for what, seconds, ref in (("sliding", sliding_time, sliding_ref),
                               ("session", session_time, session_ref)):
        ratio = ref / seconds
        print(f"{what} final results / their plain-Python reference: {ratio:.3f}x "
              f"(goal >= {GOAL}: {'yes' if ratio >= GOAL else 'NO'})")


if __name__ == "__main__":
    main()
