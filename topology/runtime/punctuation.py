"""Punctuation: callbacks a processor schedules on stream time or on the wall clock.

:class:`Schedule` is one punctuation (the ``Cancellable`` that ``schedule`` returns);
:class:`TaskPunctuation` is the part of :class:`~topology.runtime.task.Task` that schedules
them and fires the stream-time ones. The task fires the wall-clock ones when the clock
advances (:meth:`~topology.runtime.task.Task.wall_clock_advanced`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .api import PunctuationType

if TYPE_CHECKING:
    from .clock import Clock

__all__ = ("Schedule", "TaskPunctuation")


class Schedule:
    """One punctuation: aligned to its start, at most one call per advance."""

    __slots__ = ("next_time", "interval", "callback", "cancelled")

    def __init__(self, start: int, interval: int, callback: Callable[[int], None]) -> None:
        self.next_time = start
        self.interval = interval
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        """Stop this punctuation."""
        self.cancelled = True

    def maybe_fire(self, now: int) -> None:
        """Call the callback once if ``now`` reached the next time, then align the next time.

        The next time is the first one after ``now`` on the schedule's grid (skipped
        intervals give no calls of their own).
        """
        if self.cancelled or now < self.next_time:
            return
        self.callback(now)
        scheduled = self.next_time
        nxt = scheduled + self.interval
        if now >= nxt:
            nxt = scheduled + ((now - scheduled) // self.interval + 1) * self.interval
        self.next_time = nxt


class TaskPunctuation:
    """The punctuations of a :class:`~topology.runtime.task.Task`.

    A part of ``Task`` (its base class), with the attributes ``Task`` sets.
    """

    if TYPE_CHECKING:
        clock: Clock
        stream_time: int
        _stream_schedules: list[Schedule]
        _wall_schedules: list[Schedule]
        _wall_listeners: list[Callable[[int], None]]

    def schedule(self, interval_ms: int, punctuation_type: PunctuationType,
                 callback: Callable[[int], None]) -> Schedule:
        """Schedule ``callback(now_ms)`` every ``interval_ms`` of the given clock.

        Stream-time schedules are aligned to 0 and fire at the first record; wall-clock ones
        first fire ``interval_ms`` after scheduling. Skipped intervals give one call.

        :raises TypeError: if ``punctuation_type`` is not a :class:`PunctuationType`.
        :raises ValueError: for an interval that is not a positive int.
        """
        if not isinstance(punctuation_type, PunctuationType):
            raise TypeError(f"punctuation_type must be PunctuationType.STREAM_TIME or "
                            f"PunctuationType.WALL_CLOCK_TIME, got {punctuation_type!r}")
        if type(interval_ms) is not int or interval_ms <= 0:
            raise ValueError(f"punctuation interval must be a positive int of ms, "
                             f"got {interval_ms!r}")
        if not callable(callback):
            raise TypeError(f"punctuation callback must be callable, got {callback!r}")
        if punctuation_type is PunctuationType.STREAM_TIME:
            schedule = Schedule(0, interval_ms, callback)
            self._stream_schedules.append(schedule)
        else:
            schedule = Schedule(self.clock.now_ms() + interval_ms, interval_ms, callback)
            self._wall_schedules.append(schedule)
        return schedule

    def on_wall_clock(self, listener: Callable[[int], None]) -> None:
        """Call ``listener(now_ms)`` at every wall-clock advance, before punctuations.

        Idle close (``Suppressed.with_idle_close``) uses it.
        """
        self._wall_listeners.append(listener)

    def _punctuate_stream_time(self) -> None:
        """Fire the stream-time punctuations due at the task's stream time."""
        for schedule in list(self._stream_schedules):
            schedule.maybe_fire(self.stream_time)
