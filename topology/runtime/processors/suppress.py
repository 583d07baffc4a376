"""Adapter from the topology runtime to :class:`suppress.processor.SuppressProcessor`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from suppress.config import Suppressed
from suppress.entry import RecordContext
from suppress.processor import SuppressProcessor

from ...record import Change
from ..graph import InternalProcessor

__all__ = ("SuppressNodeProcessor",)


class SuppressNodeProcessor(InternalProcessor):
    """Feeds table changes to the suppression engine and forwards what it emits.

    :param buffer_time: for final results, the buffer time of a windowed key (the window's
        exclusive end); ``None`` for time limits (the record timestamp is used).
    """

    def __init__(self, suppressed: Suppressed, delay_ms: int,
                 key_serializer: Callable[[Any], bytes | None],
                 value_serializer: Callable[[Any], bytes | None],
                 buffer_time: Callable[[Any], int] | None) -> None:
        self.suppressed = suppressed
        self._delay_ms = delay_ms
        self.key_serializer = key_serializer
        self.value_serializer = value_serializer
        self._buffer_time = buffer_time

    def init(self, task: Any) -> None:
        """Create the engine, register its metrics, and process changes with it directly."""
        self.engine = SuppressProcessor(
            self.name, self.suppressed, self._delay_ms, self._emit,
            self.key_serializer, self.value_serializer,  # type: ignore[arg-type]
            debug_metrics=task.debug_metrics, buffer_time_of=self._buffer_time)
        task.metrics.suppressors[self.name] = self.engine.metrics
        task.suppressors[self.name] = self.engine
        self.process_change = self.engine.process_change  # type: ignore[method-assign]

    def process(self, key: Any, value: Change, ctx: RecordContext) -> None:
        """:meth:`process_change` for a ``Change``."""
        self.engine.process_change(key, value[0], value[1], ctx)

    def process_change(self, key: Any, new: Any, old: Any, ctx: RecordContext) -> None:
        """Buffer the change; the engine emits what is due (replaced by the engine's own)."""
        self.engine.process_change(key, new, old, ctx)

    def connected(self) -> None:
        """Let the engine emit straight to this node's children."""
        self.engine.emit = self.forward_change

    def _emit(self, key: Any, new: Any, old: Any, ctx: RecordContext) -> None:
        self.forward_change(key, new, old, ctx)
