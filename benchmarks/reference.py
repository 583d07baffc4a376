"""Plain-Python references: the same results as the runtime, computed in tight loops."""

from __future__ import annotations

import bisect
import heapq

from workloads import Record


def final_counts(records: list[Record], size: int, grace: int) -> tuple[list[tuple], int]:
    """Tumbling-window counts emitted when each window closes, and the late-drop count.

    A dict of window start -> {key: [count, max ts]} and a heap of window ends; at close a
    window's keys come out in key-bytes order (all share the start).
    """
    windows: dict[int, dict[str, list[int]]] = {}
    ends: list[int] = []
    stream_time = -1
    out: list[tuple] = []
    dropped = 0
    for key, _value, ts in records:
        if ts > stream_time:
            stream_time = ts
        start = ts - ts % size
        if start + size <= stream_time - grace:
            dropped += 1
        else:
            bucket = windows.get(start)
            if bucket is None:
                bucket = windows[start] = {}
                heapq.heappush(ends, start + size)
            entry = bucket.get(key)
            if entry is None:
                bucket[key] = [1, ts]
            else:
                entry[0] += 1
                if ts > entry[1]:
                    entry[1] = ts
        while ends and ends[0] <= stream_time - grace:
            end = heapq.heappop(ends)
            bucket = windows.pop(end - size)
            for k in sorted(bucket, key=str.encode):
                count, max_ts = bucket[k]
                out.append((k, end - size, count, max_ts))
    return out, dropped


def time_limited(records: list[Record], limit: int, max_records: int) -> list[tuple]:
    """``until_time_limit(limit)`` with ``max_records(n).emit_early_when_full()``.

    A dict key -> [value, ts] and a heap of (first ts, key bytes, key); due keys, then the
    oldest keys while over capacity, come out with their latest value and timestamp.
    """
    index: dict[str, list] = {}
    heap: list[tuple[int, bytes, str]] = []
    out: list[tuple] = []
    stream_time = -1
    for key, value, ts in records:
        if ts > stream_time:
            stream_time = ts
        entry = index.get(key)
        if entry is None:
            index[key] = [value, ts]
            heapq.heappush(heap, (ts, key.encode(), key))
        else:
            entry[0] = value
            entry[1] = ts
        expiry = stream_time - limit
        while heap and heap[0][0] <= expiry:
            k = heapq.heappop(heap)[2]
            v, t = index.pop(k)
            out.append((k, v, t))
        while len(index) > max_records:
            k = heapq.heappop(heap)[2]
            v, t = index.pop(k)
            out.append((k, v, t))
    return out


def as_of_join(rates: list[Record], records: list[Record]) -> list[tuple]:
    """Each record joined with the rate valid at its timestamp (a dict of sorted lists).

    Rates for one key and timestamp replace each other; a record before a key's first rate
    gives nothing (an inner join).
    """
    times: dict[str, list[int]] = {}
    values: dict[str, list[object]] = {}
    for key, value, ts in rates:
        key_times = times.setdefault(key, [])
        key_values = values.setdefault(key, [])
        i = bisect.bisect_left(key_times, ts)
        if i < len(key_times) and key_times[i] == ts:
            key_values[i] = value
        else:
            key_times.insert(i, ts)
            key_values.insert(i, value)
    out = []
    for key, value, ts in records:
        key_times = times.get(key)
        if key_times is None:
            continue
        i = bisect.bisect_right(key_times, ts)
        if i:
            out.append((key, (value, values[key][i - 1]), ts))
    return out
