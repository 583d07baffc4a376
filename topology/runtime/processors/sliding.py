"""Sliding-window aggregation: Kafka's window contents and creation rules, our close rule.

Windows are ``[start, start + d]``, both ends inclusive, kept in a window store under their
start with ``(aggregate, timestamp)``, the timestamp being the largest of the window's
records. A record at ``t`` (with ``t >= d``), in Kafka Streams' order
(``KStreamSlidingWindowAggregate`` with a backward store iterator):

1. every existing window of the key with start in ``[t - 2d, t + 1]``, newest first:
   the record's own right window (start ``t + 1``) is noted; a window containing ``t`` is
   updated (the newest one's aggregate is kept as the right window's contents); a window
   ending exactly at ``t`` is the record's left window, updated, and if its latest record
   is not older than ``t`` nothing more is created; the first window ending before ``t``
   gives the previous record (its latest timestamp) and the left window's contents;
2. the previous record's right window ``[p + 1, p + 1 + d]``, if missing and ``t`` is in it,
   is created from the initializer and the record;
3. the record's left window ``[t - d, t]``, if missing: the previous record's window
   contents plus the record when the previous record is in it, else the initializer plus
   the record;
4. the record's right window ``[t + 1, t + 1 + d]``, if missing and some window containing
   ``t`` holds a record later than ``t``: a copy of that window's aggregate.

A record with ``t < d`` goes to the window ``[0, d]`` (Kafka's ``processEarly``): windows
never start before 0.

Closing: the one rule of :func:`suppress.time.is_window_closed`, with the exclusive end
``end + 1`` and the grace as delay. A record is dropped outright when every window that
could hold it is closed (``t + d + 1`` closed, counted once; the log line and the
late-records headers name the window ``[t, t + d]``, the one Kafka names there, the latest
that could hold the record); otherwise each update of a closed window is dropped and
counted (once per record and window) and the rest applied.
Since ``until_window_closes`` emits a window by the same rule, a window is never updated
after its final result went out.

The store's window ends are ``start + d``; the processor keeps, per key, the sorted starts of
its windows (a superset: a start whose window the store no longer holds is forgotten when
met), rebuilt from the store when the task starts on persistent state.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Iterator
from typing import Any

from suppress.entry import RecordContext
from suppress.time import NO_TIMESTAMP, is_window_closed

from ...windows import SlidingWindows, Window, Windowed
from .aggregate import Aggregator, Initializer, WindowedAggregateBase, drop_null

__all__ = ("SlidingWindowAggregateProcessor",)

Item = tuple[Any, int]
"""A window's ``(aggregate, timestamp)`` as the store holds it."""


class SlidingWindowAggregateProcessor(WindowedAggregateBase):
    """Sliding-window ``aggregate``/``count``/``reduce`` (see the module docstring).

    ``reduce`` is an aggregate whose initializer gives ``None`` and whose aggregator starts
    from the first value (Kafka's ``aggregatorForReducer``). Forwards
    ``Change(new, old)`` under ``Windowed(key, Window(start, start + d))`` with the window's
    timestamp. Records with a ``None`` key or value are dropped and counted.
    """

    def __init__(self, store_name: str, windows: SlidingWindows, initializer: Initializer,
                 aggregator: Aggregator, send_old: Callable[[], bool]) -> None:
        self._store_name = store_name
        self._windows = windows
        self._d = windows.time_difference_ms
        self._grace = windows.grace_ms
        self._initializer = initializer
        self._aggregator = aggregator
        self._send_old = send_old
        self.stream_time = NO_TIMESTAMP
        self._starts: dict[Any, list[int]] = {}
        """Key identity (``store.key_identity``) -> the starts of its windows, sorted."""
        self._swept = NO_TIMESTAMP
        self._swept_below = -(2**63)
        """Starts below this were forgotten by the last sweep (the store may still hold them)."""

    def init(self, task: Any) -> None:
        """Bind the store; index the windows it already holds (persistent state)."""
        self._task = task
        self._store = task.stores[self._store_name]
        self._identity = self._store.key_identity
        self._old = self._send_old()
        self.init_late(task, True)
        if getattr(self._store, "persistent", False):
            self.reindex()

    def reindex(self) -> None:
        """Index the windows the store already holds (call after ``init``).

        For a store filled before this processor ran: persistent state, or the windows of
        a bucket the distributed runner restored into a fresh in-memory store.
        """
        starts = self._starts
        starts.clear()
        for windowed, _ in self._store.all():
            starts.setdefault(self._identity(windowed.key), []).append(windowed.window.start)
        for key_starts in starts.values():
            key_starts.sort()

    def checkpoint(self, keyspace: Callable[[str], Any]) -> Any:
        """The aggregation's stream time (its windows live in the store)."""
        return self.stream_time

    def restore(self, state: Any, keyspace: Callable[[str], Any]) -> None:
        """Take back the stream time of the last commit."""
        self.stream_time = int(state)

    # -- processing ----------------------------------------------------------------------------

    def process(self, key: Any, value: Any, ctx: RecordContext) -> None:
        """Update, create or drop the record's windows (see the module docstring)."""
        if drop_null(self._task, key, value, ctx, self.name):
            return
        ts = ctx.timestamp
        if ts > self.stream_time:
            self.stream_time = ts
            if ts - self._swept > 2 * self._d + self._grace + 1:
                self._sweep()
        d = self._d
        if is_window_closed(ts + d + 1, self._grace, self.stream_time):
            self._drop(key, value, ctx, ts)  # the window Kafka names here: [ts, ts + d]
            return
        if ts < d:
            self._process_early(key, value, ctx, ts)
        else:
            self._process(key, value, ctx, ts)

    def _windows_between(self, key: Any, lo: int, hi: int,
                         backward: bool = False) -> Iterator[tuple[int, Item]]:
        """``(start, item)`` of the key's windows with start in ``[lo, hi]``, ascending.

        ``backward``: descending. Lazy: a window is read from the store when reached. A start
        whose window the store no longer holds (expired) is forgotten.
        """
        starts = self._starts.get(self._identity(key))
        if not starts:
            return
        i, j = bisect_left(starts, lo), bisect_right(starts, hi)
        if i >= j:
            return
        get = self._store.get_with_timestamp
        gone = []
        try:
            for start in (starts[j - 1:i - 1 if i else None:-1] if backward else starts[i:j]):
                item = get(key, start)
                if item is None:
                    gone.append(start)
                else:
                    yield start, item
        finally:
            for start in gone:
                starts.remove(start)

    def _process(self, key: Any, value: Any, ctx: RecordContext, ts: int) -> None:
        d = self._d
        seen: set[int] = set()
        left_agg: Item | None = None
        right_agg: Item | None = None
        left_created = right_created = False
        previous: int | None = None
        for start, item in self._windows_between(key, max(0, ts - 2 * d), ts + 1, True):
            seen.add(start)
            end = start + d
            if start == ts + 1:
                right_created = True
            elif end > ts:
                if right_agg is None:
                    right_agg = item
                self._update(key, value, ctx, start, item)
            elif end == ts:
                left_created = True
                self._update(key, value, ctx, start, item)
                if item[1] < ts:
                    previous = item[1]
                else:
                    return
            else:
                left_agg = item
                previous = item[1]
                break
        if previous is not None:
            prev_right = previous + 1
            if prev_right not in seen and prev_right + d >= ts:
                self._update(key, value, ctx, prev_right, (self._initializer(), ts))
        if not left_created:
            if previous is not None and ts - d <= previous and left_agg is not None:
                item = (left_agg[0], ts)
            else:
                item = (self._initializer(), ts)
            self._update(key, value, ctx, ts - d, item)
        if not right_created and right_agg is not None and right_agg[1] > ts:
            self._create_right(key, ctx, ts, right_agg)

    def _process_early(self, key: Any, value: Any, ctx: RecordContext, ts: int) -> None:
        """A record with ``ts < d``: its windows would start before 0; ``[0, d]`` holds it."""
        seen: set[int] = set()
        combined: Item | None = None
        right_agg: Item | None = None
        right_created = False
        previous: int | None = None
        for start, item in self._windows_between(key, 0, ts + 1):
            seen.add(start)
            if start == 0:
                combined = item
                if item[1] < ts:
                    previous = item[1]
            elif start <= ts:
                right_agg = item
                self._update(key, value, ctx, start, item)
            else:
                right_created = True
        if right_agg is None and combined is not None and combined[1] > ts:
            right_agg = combined
        if not right_created and right_agg is not None and right_agg[1] > ts:
            self._create_right(key, ctx, ts, right_agg)
        if previous is not None and previous + 1 not in seen:
            self._update(key, value, ctx, previous + 1, (self._initializer(), ts))
        self._update(key, value, ctx, 0, combined if combined is not None
                     else (self._initializer(), ts))

    # -- window writes -------------------------------------------------------------------------

    def _update(self, key: Any, value: Any, ctx: RecordContext, start: int, item: Item) -> None:
        """Fold the record into window ``start`` (holding ``item``), unless it is closed."""
        end = start + self._d
        if is_window_closed(end + 1, self._grace, self.stream_time):
            self._drop(key, value, ctx, start)
            return
        old = item[0]
        new = self._aggregator(key, value, old)
        ts = ctx[0]
        out_ts = ts if old is None or item[1] < ts else item[1]
        self._write_window(key, start, new, old if self._old else None, out_ts, ctx)

    def _create_right(self, key: Any, ctx: RecordContext, ts: int, agg: Item) -> None:
        """The record's right window ``[ts + 1, ts + 1 + d]``: a copy of ``agg``."""
        self._write_window(key, ts + 1, agg[0], None, agg[1], ctx)

    def _write_window(self, key: Any, start: int, new: Any, old: Any, timestamp: int,
                      ctx: RecordContext) -> None:
        """Store window ``start``'s new aggregate, then forward the update (``old`` as sent).

        ``timestamp``: the window's (ms), the update's timestamp; ``ctx``: the record's. When
        changes are handed on (:meth:`hand_changes_to`), no windowed key is built.
        """
        self._put(key, start, new, timestamp)
        end = start + self._d
        if self._final is None:
            self.forward_change(Windowed(key, Window(start, end)), new, old,
                                ctx.with_timestamp(timestamp))
            return
        self.hand_on(key, start, end, new, old, timestamp, ctx, None)

    def _put(self, key: Any, start: int, value: Any, ts: int) -> None:
        self._store.put_with_timestamp(key, value, start, ts)
        identity = self._identity(key)
        starts = self._starts.get(identity)
        if value is None:
            if starts is not None:
                i = bisect_left(starts, start)
                if i < len(starts) and starts[i] == start:
                    del starts[i]
            return
        if starts is None:
            self._starts[identity] = [start]
        else:
            i = bisect_left(starts, start)
            if i == len(starts) or starts[i] != start:
                insort(starts, start)

    def _drop(self, key: Any, value: Any, ctx: RecordContext, start: int) -> None:
        now = self.stream_time
        self.late.drop(key, value, ctx, start, start + self._d, now - self._grace, now)

    def _check(self) -> None:
        """Assert the invariants (tests call it).

        Each key's starts are sorted and unique, and every window the store holds that a
        record may still reach (not swept, see :meth:`_sweep`) is indexed.
        """
        for key, starts in self._starts.items():
            assert starts and starts == sorted(set(starts)), f"{key!r}: starts {starts}"
        for windowed, _ in self._store.all():
            if windowed.window.start >= self._swept_below:
                assert windowed.window.start in self._starts.get(
                    self._identity(windowed.key), ()), \
                    f"{windowed} is stored but not indexed"

    def _sweep(self) -> None:
        """Forget starts no record can reach any more (older than ``T - grace - 3d - 1``).

        An accepted record has ``t > T - grace - d - 1`` and looks back to ``t - 2d``; runs
        once per ``2d + grace + 1`` ms of stream time, so the index stays as large as the
        live windows.
        """
        now = self.stream_time
        self._swept = now
        limit = self._swept_below = now - self._grace - 3 * self._d - 1
        empty = []
        for key, starts in self._starts.items():
            if starts and starts[0] < limit:
                del starts[:bisect_left(starts, limit)]
                if not starts:
                    empty.append(key)
        for key in empty:
            del self._starts[key]
