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
        self._suppressed = suppressed
        self._delay_ms = delay_ms
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._buffer_time = buffer_time

    def init(self, task: Any) -> None:
        """Create the engine and register its metrics and buffer with the task."""
        self.engine = SuppressProcessor(
            self.name, self._suppressed, self._delay_ms, self._emit,
            self._key_serializer, self._value_serializer,  # type: ignore[arg-type]
            debug_metrics=task.debug_metrics)
        task.metrics.suppressors[self.name] = self.engine.metrics
        task.suppressors[self.name] = self.engine

    def process(self, key: Any, value: Change, ctx: RecordContext) -> None:
        """Buffer the change; the engine emits what is due."""
        buffer_time = ctx.timestamp if self._buffer_time is None else self._buffer_time(key)
        self.engine.process(key, value.new, value.old, ctx, buffer_time)

    def _emit(self, key: Any, new: Any, old: Any, ctx: RecordContext) -> None:
        self.forward(key, Change(new, old), ctx)
