"""Store values shared by every backend."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, final

__all__ = ("VersionedRecord",)


@final
@dataclass(frozen=True, slots=True)
class VersionedRecord:
    """One version of a key in a versioned store: value, timestamp (ms) and ``valid_to``.

    ``valid_to`` is exclusive, and ``None`` for the latest version.
    """

    value: Any
    timestamp: int
    valid_to: int | None = None
