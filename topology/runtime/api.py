"""The Processor API: write a processor by hand and plug it in with ``KStream.process``.

>>> class Upper(Processor):
...     def process(self, record):
...         self.context.forward(record.with_value(record.value.upper()))
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Callable
from typing import Any, Protocol

from ..record import Record

__all__ = ("Cancellable", "Processor", "ProcessorContext", "PunctuationType")


class PunctuationType(enum.Enum):
    """Which clock drives a punctuation."""

    STREAM_TIME = "stream_time"
    """The task's stream time (largest record timestamp seen), advanced by records."""
    WALL_CLOCK_TIME = "wall_clock_time"
    """The wall clock (in the test driver: ``advance_wall_clock_time``)."""


class Cancellable(Protocol):
    """A scheduled punctuation; ``cancel()`` stops it."""

    def cancel(self) -> None:
        """Stop the punctuation."""
        ...


class ProcessorContext(Protocol):
    """What a processor can reach: forwarding, stores, clocks and punctuation."""

    def forward(self, record: Record) -> None:
        """Send ``record`` to every child processor."""
        ...

    def get_state_store(self, name: str) -> Any:
        """The store ``name`` connected to this processor.

        :raises topology.errors.StoreError: if it is not connected.
        """
        ...

    def schedule(
        self, interval_ms: int, punctuation_type: PunctuationType,
        callback: Callable[[int], None],
    ) -> Cancellable:
        """Call ``callback(time_ms)`` every ``interval_ms`` of the chosen clock."""
        ...

    def current_stream_time_ms(self) -> int:
        """The task's stream time (ms), -1 before any record."""
        ...

    def current_system_time_ms(self) -> int:
        """Wall-clock time (ms) from the injected clock."""
        ...

    @property
    def topic(self) -> str:
        """Topic of the record being processed."""
        ...

    @property
    def offset(self) -> int:
        """Offset of the record being processed."""
        ...


class Processor(abc.ABC):
    """Base class of user processors: override :meth:`process` (and optionally the others)."""

    context: ProcessorContext

    def init(self, context: ProcessorContext) -> None:
        """Called once before the first record; keeps ``context`` as ``self.context``."""
        self.context = context

    @abc.abstractmethod
    def process(self, record: Record) -> None:
        """Handle one record; forward results with ``self.context.forward``."""

    def close(self) -> None:  # noqa: B027 - optional hook, empty by default
        """Called when the task closes."""
