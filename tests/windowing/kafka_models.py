"""Line-by-line models of Kafka Streams' sliding and session aggregations, for differential tests.

``KafkaSlidingAggregate`` follows ``KStreamSlidingWindowAggregate`` (``process``,
``processReverse``, ``processEarly``, ``createWindows``, ``updateWindowAndForward``, Kafka
3.9/4.x), ``KafkaSessionAggregate`` follows ``KStreamSessionWindowAggregate.process``; both
with caching off and no old values (``Change(new, None)``), emitting on every update.

Their stores are models of Kafka's in-memory window and session stores: a store's observed
stream time is the largest window start (sessions: end) ever put; a window whose start
(sessions: end) is ``<= observed - retention`` is hidden from queries and a put to it is
ignored. The retention is a parameter: Kafka's (sliding ``2d + grace``, sessions
``gap + grace``) or this project's (sliding ``3d + grace + 2``, sessions
``gap + grace + 1``). With the project's retention the models give exactly the project's
output; with Kafka's they reproduce the boundary differences docs/kafka-differences.md
lists.

An update is ``(key, start, end, new_value, timestamp)``; a drop is
``(key, timestamp, window_start, window_end)`` as Kafka's log line names it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Update = tuple[Any, int, int, Any, int]
Drop = tuple[Any, int, int, int]


def sliding_retention(d: int, grace: int, *, kafka: bool) -> int:
    """The sliding-window store's retention: Kafka's ``2d + grace`` or ours ``3d + grace + 2``."""
    return 2 * d + grace if kafka else 3 * d + grace + 2


def session_retention(gap: int, grace: int, *, kafka: bool) -> int:
    """The session store's retention: Kafka's ``gap + grace`` or ours ``gap + grace + 1``."""
    return gap + grace if kafka else gap + grace + 1


class _WindowStore:
    """Kafka's ``InMemoryWindowStore`` as the sliding aggregation uses it (no duplicates)."""

    def __init__(self, retention: int) -> None:
        self.retention = retention
        self.observed = -(2**63)
        self.windows: dict[tuple[Any, int], tuple[Any, int]] = {}

    def put(self, key: Any, item: tuple[Any, int] | None, start: int) -> None:
        self.observed = max(self.observed, start)
        if start <= self.observed - self.retention:
            return  # expired: Kafka logs and skips the write
        if item is None:
            self.windows.pop((key, start), None)
        else:
            self.windows[(key, start)] = item

    def fetch(self, key: Any, lo: int, hi: int,
              backward: bool = False) -> list[tuple[int, tuple[Any, int]]]:
        lo = max(lo, self.observed - self.retention + 1)
        found = sorted((s, item) for (k, s), item in self.windows.items()
                       if k == key and lo <= s <= hi)
        return found[::-1] if backward else found


class KafkaSlidingAggregate:
    """``KStreamSlidingWindowAggregate`` with a reverse iterator (what Kafka's stores offer)."""

    def __init__(self, d: int, grace: int, initializer: Callable[[], Any],
                 aggregator: Callable[[Any, Any, Any], Any], retention: int) -> None:
        self.d, self.grace = d, grace
        self.initializer, self.aggregator = initializer, aggregator
        self.store = _WindowStore(retention)
        self.observed = -1
        self.updates: list[Update] = []
        self.drops: list[Drop] = []

    def process(self, key: Any, value: Any, ts: int) -> None:
        if key is None or value is None:
            return
        self.observed = max(self.observed, ts)
        close = self.observed - self.grace
        if ts + self.d < close:
            self.drops.append((key, ts, ts, ts + self.d))
            return
        if ts < self.d:
            self._process_early(key, value, ts, close)
        else:
            self._process_reverse(key, value, ts, close)

    def _process_reverse(self, key: Any, value: Any, ts: int, close: int) -> None:
        d = self.d
        starts: set[int] = set()
        left_agg = right_agg = None
        left_created = right_created = False
        previous = None
        for start, item in self.store.fetch(key, max(0, ts - 2 * d), ts + 1, backward=True):
            starts.add(start)
            end = start + d
            if start == ts + 1:
                right_created = True
            elif end > ts:
                if right_agg is None:
                    right_agg = item
                self._update(key, value, ts, start, item, close)
            elif end == ts:
                left_created = True
                self._update(key, value, ts, start, item, close)
                if item[1] < ts:
                    previous = item[1]
                else:
                    return
            else:
                left_agg = item
                previous = item[1]
                break
        # createWindows
        if previous is not None:
            prev_right = previous + 1
            if prev_right not in starts and prev_right + d >= ts:
                self._update(key, value, ts, prev_right, (self.initializer(), ts), close)
        if not left_created:
            if previous is not None and ts - d <= previous:
                assert left_agg is not None
                item = (left_agg[0], ts)
            else:
                item = (self.initializer(), ts)
            self._update(key, value, ts, ts - d, item, close)
        if not right_created and right_agg is not None and right_agg[1] > ts:
            self._create_right(key, ts, right_agg)

    def _process_early(self, key: Any, value: Any, ts: int, close: int) -> None:
        combined = right_agg = None
        right_created = False
        starts: set[int] = set()
        previous = None
        for start, item in self.store.fetch(key, 0, ts + 1):
            starts.add(start)
            if start == 0:
                combined = item
                if item[1] < ts:
                    previous = item[1]
            elif start <= ts:
                right_agg = item
                self._update(key, value, ts, start, item, close)
            elif start == ts + 1:
                right_created = True
        if right_agg is None and combined is not None and combined[1] > ts:
            right_agg = combined
        if not right_created and right_agg is not None and right_agg[1] > ts:
            self._create_right(key, ts, right_agg)
        if previous is not None and previous + 1 not in starts:
            self._update(key, value, ts, previous + 1, (self.initializer(), ts), close)
        self._update(key, value, ts, 0, combined if combined is not None
                     else (self.initializer(), ts), close)

    def _create_right(self, key: Any, ts: int, agg: tuple[Any, int]) -> None:
        self.store.put(key, agg, ts + 1)
        self.updates.append((key, ts + 1, ts + 1 + self.d, agg[0], agg[1]))

    def _update(self, key: Any, value: Any, ts: int, start: int, item: tuple[Any, int],
                close: int) -> None:
        """``updateWindowAndForward``."""
        end = start + self.d
        if end >= close:
            old = item[0]
            new = self.aggregator(key, value, old)
            new_ts = ts if old is None else max(ts, item[1])
            self.store.put(key, (new, new_ts), start)
            self.updates.append((key, start, end, new, new_ts))
        else:
            self.drops.append((key, ts, start, end))


class _SessionStore:
    """Kafka's ``InMemorySessionStore`` as the session aggregation uses it."""

    def __init__(self, retention: int) -> None:
        self.retention = retention
        self.observed = -(2**63)
        self.sessions: dict[tuple[Any, int, int], Any] = {}

    def put(self, key: Any, start: int, end: int, agg: Any) -> None:
        self.observed = max(self.observed, end)
        if end <= self.observed - self.retention:
            return
        self.sessions[(key, start, end)] = agg

    def remove(self, key: Any, start: int, end: int) -> None:
        self.sessions.pop((key, start, end), None)

    def find_sessions(self, key: Any, earliest_end: int,
                      latest_start: int) -> list[tuple[int, int, Any]]:
        """Sessions of ``key`` with ``end >= earliest_end`` and ``start <= latest_start``,
        by end then start, the expired ones left out."""
        live = self.observed - self.retention + 1
        return sorted(((s, e, agg) for (k, s, e), agg in self.sessions.items()
                       if k == key and e >= max(earliest_end, live) and s <= latest_start),
                      key=lambda item: (item[1], item[0]))


class KafkaSessionAggregate:
    """``KStreamSessionWindowAggregate.process`` (emit on update, caching off)."""

    def __init__(self, gap: int, grace: int, initializer: Callable[[], Any],
                 aggregator: Callable[[Any, Any, Any], Any],
                 merger: Callable[[Any, Any, Any], Any], retention: int) -> None:
        self.gap, self.grace = gap, grace
        self.initializer, self.aggregator, self.merger = initializer, aggregator, merger
        self.store = _SessionStore(retention)
        self.observed = -1
        self.updates: list[Update] = []
        self.drops: list[Drop] = []

    def process(self, key: Any, value: Any, ts: int) -> None:
        if key is None:
            return
        self.observed = max(self.observed, ts)
        close = self.observed - self.grace - self.gap
        merged = []
        start = end = ts
        agg = self.initializer()
        for s, e, found in self.store.find_sessions(key, ts - self.gap, ts + self.gap):
            merged.append((s, e, found))
            agg = self.merger(key, agg, found)
            start, end = min(start, s), max(end, e)
        if end < close:
            self.drops.append((key, ts, start, end))
            return
        if (start, end) != (ts, ts):
            for s, e, _ in merged:
                self.store.remove(key, s, e)
                self.updates.append((key, s, e, None, e))
        agg = self.aggregator(key, value, agg)
        self.store.put(key, start, end, agg)
        self.updates.append((key, start, end, agg, end))
