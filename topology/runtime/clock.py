"""Wall-clock time, injected: the runtime never reads the system clock directly.

The test driver injects :class:`topology.testing.MockClock`, which moves only when told to.
"""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ("Clock", "SystemClock")


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
