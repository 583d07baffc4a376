"""``MockClock``: the test driver's wall clock, moved only by the test."""

from __future__ import annotations

from suppress.time import to_millis

__all__ = ("MockClock",)


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
