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
        """Call ``callback(time_ms)`` every ``interval_ms`` of the chosen clock.

        :raises TypeError: if ``punctuation_type`` is not a :class:`PunctuationType` (a
            string such as ``"stream_time"`` is refused, never guessed).
        :raises ValueError: for an interval that is not a positive int of ms.
        """
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
    """Base class of user processors: override :meth:`process` (and optionally the others).

    The base class needs no ``__init__`` call: the runtime sets ``self.context`` before it
    calls :meth:`init`, so a subclass may define ``__init__`` and ``init`` freely.
    """

    context: ProcessorContext
    """What this processor can reach (forwarding, stores, clocks); set by the runtime."""

    def init(self, context: ProcessorContext) -> None:  # noqa: B027 - optional hook
        """Called once before the first record (``self.context`` is already set)."""

    @abc.abstractmethod
    def process(self, record: Record) -> None:
        """Handle one record; forward results with ``self.context.forward``."""

    def close(self) -> None:  # noqa: B027 - optional hook, empty by default
        """Called when the task closes."""
