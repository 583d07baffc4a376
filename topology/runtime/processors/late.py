"""Records a windowed aggregation drops because their window closed: counted, logged, routed.

Every windowed aggregation (time, sliding, session) reports each drop here, once per record
and closed window, as Kafka counts ``dropped-records-total``. When the user asked for it
(``late_records_to="topic"`` on the windowed ``count``/``reduce``/``aggregate``), the record
is also written, as it arrived (key, value, timestamp), to that topic, with its headers plus:

* ``late.reason``: ``expired-window``;
* ``late.window.start`` and ``late.window.end``: the closed window's bounds, decimal ASCII ms
  (the end as the window type states it: exclusive for time windows, inclusive for sliding
  and session windows);
* ``late.stream.time``: the aggregation's stream time when it dropped the record.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from suppress.entry import RecordContext

from ..metrics import DropReason, log

__all__ = ("LATE_HEADERS", "LateRecords")

LATE_HEADERS = ("late.reason", "late.window.start", "late.window.end", "late.stream.time")
"""Names of the headers added to a record routed to a late-records topic, in order."""

_REASON = DropReason.EXPIRED_WINDOW.encode()


class LateRecords:
    """Counts, logs and (optionally) routes the records one aggregation drops as late.

    :param inclusive_end: whether the windows' ends are inclusive (sliding, session): only
        changes how the log line writes the window (``[s,e]`` or ``[s,e)``, as Kafka).
    :param node: the aggregation's name, for the drop summary.
    """

    __slots__ = ("_task", "_inclusive", "_node", "route")

    def __init__(self, task: Any, inclusive_end: bool, node: str | None = None) -> None:
        self._task = task
        self._inclusive = inclusive_end
        self._node = node
        self.route: Callable[[Any, Any, RecordContext], None] | None = None
        """The late-records sink's record entry, or ``None`` when none was asked for."""

    def drop(self, key: Any, value: Any, ctx: RecordContext, start: int, end: int,
             expiration: int, stream_time: int) -> None:
        """Count and log one (record, closed window) drop; route it if asked.

        :param end: the window's end as its type states it (exclusive for time windows).
        :param expiration: Kafka's ``closeTime`` for the log line (stream time - grace, for
            sessions - gap too).
        """
        metrics = self._task.metrics
        metrics.drop(DropReason.EXPIRED_WINDOW, node=self._node)
        observer = metrics.late_observer
        if observer is not None:  # a test driver recording its timeline
            observer(key, ctx.timestamp, start, end, stream_time)
        close = "]" if self._inclusive else ")"
        log.debug(  # counted per batch and reason: one line per record only at DEBUG
            "Skipping record for expired window. topic=[%s] partition=[%s] offset=[%s] "
            "timestamp=[%s] window=[%s,%s%s expiration=[%s] streamTime=[%s]",
            ctx.topic, ctx.partition, ctx.offset, ctx.timestamp, start, end, close,
            expiration, stream_time,
        )
        route = self.route
        if route is not None:
            reason, start_name, end_name, time_name = LATE_HEADERS
            headers = (*ctx.headers, (reason, _REASON),
                       (start_name, str(start).encode()),
                       (end_name, str(end).encode()),
                       (time_name, str(stream_time).encode()))
            route(key, value, ctx._replace(headers=headers))
