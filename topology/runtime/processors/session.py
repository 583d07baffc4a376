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

from collections.abc import Callable, Hashable
from typing import Any

from suppress.entry import RecordContext
from suppress.processor import WindowUpdate
from suppress.time import NO_TIMESTAMP, last_closed_end

from ...state.sessions import MAX_TIME, MIN_TIME
from ...windows import SessionWindows, Window, Windowed
from .aggregate import (
    Aggregator,
    Initializer,
    WindowedAggregateBase,
    count_adder,
    count_initializer,
)
from .table import log_null_key

__all__ = ("Merger", "SessionWindowAggregateProcessor")

_new_tuple = tuple.__new__  # the named tuples of values known to be valid
_UNSET: Any = object()

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
        # count(): its aggregator adds 1, its initializer gives 0 (same results, no calls)
        self._counting = initializer is count_initializer and aggregator is count_adder
        self.stream_time = NO_TIMESTAMP

    def init(self, task: Any) -> None:
        """Bind the store."""
        self._task = task
        self._store = task.stores[self._store_name]
        self._old = self._send_old()
        self.init_late(task, True)
        self._step = self._make_step()

    def checkpoint(self, keyspace: Callable[[str], Any]) -> Any:
        """The aggregation's stream time (its sessions live in the store)."""
        return self.stream_time

    def restore(self, state: Any, keyspace: Callable[[str], Any]) -> None:
        """Take back the stream time of the last commit."""
        self.stream_time = int(state)

    def hand_changes_to(self, update: WindowUpdate, identity: Callable[[Any], Hashable],
                        own: type) -> None:
        """As :meth:`WindowedAggregateBase.hand_changes_to` (the step is built again)."""
        super().hand_changes_to(update, identity, own)
        self._step = self._make_step()

    def raw_entry(self) -> Callable[[Any, Any, int, int, str], None] | None:
        """Where records piped without headers may arrive: ``(key, value, ts, offset, topic)``.

        When changes are handed on (:meth:`hand_changes_to`): the same steps as
        :meth:`process`, with no context built unless a record is dropped. ``None`` otherwise.
        """
        if self._final is None:
            return None
        return self._step

    def process(self, key: Any, value: Any, ctx: RecordContext) -> None:
        """Merge the record into its key's open sessions (see the module docstring)."""
        self._step(key, value, ctx[0], ctx, None)

    def _make_step(self) -> Callable[[Any, Any, int, Any, str | None], None]:
        """The step of a record: ``step(key, value, ts, context, topic)``.

        ``context`` is the record's :class:`~suppress.entry.RecordContext` (``topic``
        ``None``), or the offset of a record without headers read from ``topic``. It does
        what the module docstring says, with the node's parts bound once (a closure: the
        step runs per record).
        """
        near, put = self._store.near, self._store.put_session
        delay, gap = self._delay, self._gap
        counting, initializer = self._counting, self._initializer
        aggregator, merger = self._aggregator, self._merger
        send_old, late = self._old, self.late
        final = self._final
        forward = self._forward
        if final is not None:
            update, identity, own = final

        def step(key: Any, value: Any, ts: int, context: Any, topic: str | None) -> None:
            if key is None:
                ctx = context if topic is None else RecordContext(ts, context, topic)
                log_null_key(self._task, ctx, self.name)
                return
            if ts > self.stream_time:
                self.stream_time = ts
            now = self.stream_time
            start = end = ts
            merged = None  # the open sessions near, when there are any
            agg = 0 if counting else initializer()
            closed = last_closed_end(delay, now)  # a session with end + 1 <= closed is closed
            earliest, latest = ts - gap, ts + gap
            if earliest < MIN_TIME:  # saturated
                earliest = MIN_TIME
            if latest > MAX_TIME:
                latest = MAX_TIME
            for found_end, found_start, found_agg in near(key, earliest, latest):
                if found_end + 1 <= closed:
                    continue  # its final result is due or out: it takes no more records
                if merged is None:
                    merged = []
                merged.append((found_start, found_end, found_agg))
                agg = merger(key, agg, found_agg)
                if found_start < start:
                    start = found_start
                if found_end > end:
                    end = found_end
            if end + 1 <= closed:
                ctx = context if topic is None else RecordContext(ts, context, topic)
                late.drop(key, value, ctx, start, end, now - delay, now)
                return
            # handed on: part (key, start, end), buffer time end + 1; the key's identity is
            # taken after the store wrote it, where forwarding takes it (its serializer may
            # fail on the key: the same error at the same point either way)
            key_identity: Any = _UNSET
            if merged is not None and (start != ts or end != ts):
                for found_start, found_end, found_agg in merged:
                    put(key, found_start, found_end, None)
                    old = found_agg if send_old else None
                    if final is None:
                        forward(key, found_start, found_end, None, old, context)
                        continue
                    if key_identity is _UNSET:
                        key_identity = key if key.__class__ is own else identity(key)
                    update(found_end + 1, None, (key, found_start, found_end),
                           (key_identity, found_start, found_end), None, old, found_end,
                           context, topic)
            agg = agg + 1 if counting else aggregator(key, value, agg)
            put(key, start, end, agg)
            if final is None:
                forward(key, start, end, agg, None, context)
                return
            if key_identity is _UNSET:
                key_identity = key if key.__class__ is own else identity(key)
            part = (key, start, end)
            update(end + 1, None, part,
                   part if key_identity is key else (key_identity, start, end), agg, None, end,
                   context, topic)

        return step

    def _forward(self, key: Any, start: int, end: int, new: Any, old: Any,
                 ctx: RecordContext) -> None:
        """Forward the change of session ``[start, end]`` (timestamp: its end).

        Only records with a context get here: a raw entry exists only to hand changes on.
        """
        self.forward_change(_new_tuple(Windowed, (key, _new_tuple(Window, (start, end)))),
                            new, old, ctx.with_timestamp(end))
