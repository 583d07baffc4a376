"""Hypothesis profiles: how many examples a run tries, chosen by ``HYPOTHESIS_PROFILE``.

``dev`` (10 per property: ``make check``) for quick runs while editing, ``ci`` (100, the
default, what ``make test`` runs) and ``nightly`` (1,000) for long searches. A property that
needs more or fewer examples than its neighbours says so relative to the profile:
``examples(300)`` is 3x the profile's count (300 under ``ci``, 30 under ``dev``, 3,000 under
``nightly``).
"""

from __future__ import annotations

import os

from hypothesis import settings

BASE = 100
"""The ``ci`` profile's examples per property: the unit of :func:`examples`."""

settings.register_profile("dev", max_examples=10)
settings.register_profile("ci", max_examples=BASE)
settings.register_profile("nightly", max_examples=10 * BASE)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def examples(weight: int) -> int:
    """The examples for a property weighted ``weight`` (``BASE`` is the profile's count)."""
    return max(1, weight * settings.default.max_examples // BASE)
