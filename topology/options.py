"""Options of DSL calls: ``Consumed``, ``Produced``, ``Grouped``, ``Materialized``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import TopologyError
from .serde import Serde

__all__ = ("Consumed", "Grouped", "Materialized", "Produced")


def _check_serde(serde: Any, what: str) -> None:
    if serde is not None and not isinstance(serde, Serde):
        raise TypeError(f"{what} must be a Serde (see topology.Serdes), got {type(serde).__name__}")


@dataclass(frozen=True)
class Consumed:
    """Serdes for reading a source topic. ``None`` keeps the records as piped."""

    key_serde: Serde[Any] | None = None
    value_serde: Serde[Any] | None = None

    def __post_init__(self) -> None:
        _check_serde(self.key_serde, "Consumed key_serde")
        _check_serde(self.value_serde, "Consumed value_serde")


@dataclass(frozen=True)
class Produced:
    """Serdes for writing a sink topic. ``None`` writes the objects unchanged."""

    key_serde: Serde[Any] | None = None
    value_serde: Serde[Any] | None = None

    def __post_init__(self) -> None:
        _check_serde(self.key_serde, "Produced key_serde")
        _check_serde(self.value_serde, "Produced value_serde")


@dataclass(frozen=True)
class Grouped:
    """Serdes (and optional name) for a grouping and its repartition topic."""

    key_serde: Serde[Any] | None = None
    value_serde: Serde[Any] | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        _check_serde(self.key_serde, "Grouped key_serde")
        _check_serde(self.value_serde, "Grouped value_serde")


@dataclass(frozen=True)
class Materialized:
    """How a table or aggregate is stored: store name, serdes and backend.

    ``Materialized(name)`` and :meth:`in_memory` use the in-memory backend.
    """

    name: str | None = None
    key_serde: Serde[Any] | None = None
    value_serde: Serde[Any] | None = None
    backend: str = "in_memory"

    def __post_init__(self) -> None:
        if self.name is not None and (not isinstance(self.name, str) or not self.name):
            raise TypeError(f"store name must be a non-empty str, got {self.name!r}")
        _check_serde(self.key_serde, "Materialized key_serde")
        _check_serde(self.value_serde, "Materialized value_serde")

    @staticmethod
    def in_memory(name: str) -> Materialized:
        """An in-memory store called ``name``."""
        return Materialized(name=name)

    @staticmethod
    def persistent(name: str) -> Materialized:
        """A RocksDB store called ``name``.

        :raises TopologyError: in this version: persistent (RocksDB) stores arrive with the
            durable-state issue, and silently keeping the data in memory would lose it on
            restart.
        """
        raise TopologyError(
            f"Materialized.persistent({name!r}): RocksDB-backed stores are not available in "
            "this version yet; use Materialized.in_memory(name)"
        )

    @staticmethod
    def versioned(name: str, history_retention: Any, segment_interval: Any = None
                  ) -> Materialized:
        """A versioned store called ``name`` keeping ``history_retention`` ms of history.

        :raises TopologyError: in this version: versioned stores arrive with the
            versioned-tables issue.
        """
        raise TopologyError(
            f"Materialized.versioned({name!r}, ...): versioned stores are not available in "
            "this version yet"
        )
