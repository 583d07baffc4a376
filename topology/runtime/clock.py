"""Wall-clock time, injected: the runtime never reads the system clock directly.

The test driver and the Spark runner run their tasks on a :class:`MockClock`, which moves
only when told to (the runner moves it to the system clock at each micro-batch).
"""

from __future__ import annotations

import time
from typing import Protocol

from suppress.time import to_millis

__all__ = ("Clock", "MockClock", "SystemClock")


class Clock(Protocol):
    """A source of wall-clock time in milliseconds since the epoch."""

    def now_ms(self) -> int:
        """Current wall-clock time (ms)."""
        ...


class SystemClock:
    """The machine's clock."""

    def now_ms(self) -> int:
        """Current wall-clock time (ms)."""
        return time.time_ns() // 1_000_000


class MockClock:
    """A wall clock (ms since the epoch) that moves only through :meth:`advance`.

    The driver runs on one; ``driver.advance_wall_clock_time(d)`` advances it and then runs
    the wall-clock punctuations that became due.

    >>> clock = MockClock(1_000)
    >>> clock.advance(500)
    1500
    >>> clock.now_ms()
    1500
    """

    def __init__(self, start_ms: int = 0) -> None:
        self._now = to_millis(start_ms, "mock clock start")

    def now_ms(self) -> int:
        """Current mock time (ms)."""
        return self._now

    def advance(self, ms: int) -> int:
        """Move forward by ``ms`` (>= 0) and return the new time (ms).

        :raises ValueError: for a negative advance.
        :raises TypeError: for an advance that is not an int of ms or a timedelta.
        """
        self._now += to_millis(ms, "wall-clock advance")
        return self._now
