"""``MockClock``: the test driver's wall clock, moved only by the test.

It lives in :mod:`topology.runtime.clock` (the Spark runner runs on one too); this module
keeps its import path.
"""

from __future__ import annotations

from ..runtime.clock import MockClock

__all__ = ("MockClock",)
