"""Session-window aggregation: Kafka's merge rules, closed by the one close rule.

Sessions are ``[start, end]``, both ends inclusive, kept in a session store. A record at
``t`` (Kafka's ``KStreamSessionWindowAggregate``):

1. finds the key's sessions with ``end >= t - gap`` and ``start <= t + gap`` (records
   exactly ``gap`` apart merge), leaving out sessions that are closed;
2. merges them with ``[t, t]``: the window is ``[min start, max end]`` and the aggregate
   ``merger(key, ... merger(key, initializer(), agg1) ..., aggN)``, then
   ``aggregator(key, value, aggregate)``;
3. is dropped (counted, and routed when asked) if the merged session is closed;
4. otherwise, when the merged window is not ``[t, t]``, removes each merged session and
   forwards a tombstone for it (timestamp: its end), then stores and forwards the merged
   session (timestamp: its end).

Closing: :func:`suppress.time.is_window_closed` with the exclusive end ``end + 1`` and the
delay ``gap + grace`` (``until_window_closes`` uses the same, so a session is emitted in the
step that closes it). Step 1 is where this differs from Kafka: a closed session never takes
part in a merge, so a session whose final result went out never grows (Kafka can merge a
session at the very stream time its final result is emitted). The store keeps sessions for
``gap + grace + 1`` ms after their end, so it never expires an open one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from suppress.entry import RecordContext
from suppress.time import NO_TIMESTAMP, is_window_closed

from ...state.sessions import MAX_TIME, MIN_TIME
from ...windows import SessionWindows, Window, Windowed
from .aggregate import Aggregator, Initializer, WindowedAggregateBase
from .table import log_null_key

__all__ = ("Merger", "SessionWindowAggregateProcessor")

Merger = Callable[[Any, Any, Any], Any]
"""``merger(key, agg1, agg2)``: the aggregate of two merged sessions."""


class SessionWindowAggregateProcessor(WindowedAggregateBase):
    """Session-window ``aggregate``/``count``/``reduce`` (see the module docstring).

    Forwards ``Change(new, old)`` under ``Windowed(key, Window(start, end))``; a record with
    a ``None`` key is dropped and counted (a ``None`` value reaches the aggregator, as in
    Kafka).
    """

    def __init__(self, store_name: str, windows: SessionWindows, initializer: Initializer,
                 aggregator: Aggregator, merger: Merger, send_old: Callable[[], bool]) -> None:
        self._store_name = store_name
        self._gap = windows.gap_ms
        self._grace = windows.grace_ms
        self._delay = windows.gap_ms + windows.grace_ms
        self._initializer = initializer
        self._aggregator = aggregator
        self._merger = merger
        self._send_old = send_old
        self.stream_time = NO_TIMESTAMP

    def init(self, task: Any) -> None:
        """Bind the store."""
        self._task = task
        self._store = task.stores[self._store_name]
        self._old = self._send_old()
        self.init_late(task, True)

    def checkpoint(self, keyspace: Callable[[str], Any]) -> Any:
        """The aggregation's stream time (its sessions live in the store)."""
        return self.stream_time

    def restore(self, state: Any, keyspace: Callable[[str], Any]) -> None:
        """Take back the stream time of the last commit."""
        self.stream_time = int(state)

    def process(self, key: Any, value: Any, ctx: RecordContext) -> None:
        """Merge the record into its key's open sessions (see the module docstring)."""
        if key is None:
            log_null_key(self._task, ctx, self.name)
            return
        ts = ctx.timestamp
        if ts > self.stream_time:
            self.stream_time = ts
        now, delay, gap = self.stream_time, self._delay, self._gap
        start = end = ts
        merged = []
        agg = self._initializer()
        merger = self._merger
        earliest, latest = max(ts - gap, MIN_TIME), min(ts + gap, MAX_TIME)  # saturated
        for session, session_agg in self._store.find_sessions(key, earliest, latest):
            window = session.window
            if is_window_closed(window.end + 1, delay, now):
                continue  # its final result is due or out: it takes no more records
            merged.append((session, session_agg))
            agg = merger(key, agg, session_agg)
            if window.start < start:
                start = window.start
            if window.end > end:
                end = window.end
        if is_window_closed(end + 1, delay, now):
            self.late.drop(key, value, ctx, start, end, now - delay, now)
            return
        if start != ts or end != ts:
            for session, session_agg in merged:
                self._store.remove(session)
                self.forward_change(session, None, session_agg if self._old else None,
                                    ctx.with_timestamp(session.window.end))
        agg = self._aggregator(key, value, agg)
        session = Windowed(key, Window(start, end))
        self._store.put(session, agg)
        self.forward_change(session, agg, None, ctx.with_timestamp(end))
