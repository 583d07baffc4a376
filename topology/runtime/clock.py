"""Wall-clock time, injected: the runtime never reads the system clock directly."""

from __future__ import annotations

import time
from typing import Protocol

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
    """A clock that moves only when told to (the test driver's wall clock)."""

    def __init__(self, start_ms: int = 0) -> None:
        self._now = start_ms

    def now_ms(self) -> int:
        """Current mock time (ms)."""
        return self._now

    def advance(self, ms: int) -> int:
        """Move forward by ``ms`` (>= 0) and return the new time.

        :raises ValueError: for a negative advance.
        """
        if ms < 0:
            raise ValueError(f"wall-clock advance must not be negative, got {ms} ms")
        self._now += ms
        return self._now
