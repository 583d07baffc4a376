"""The suppress node: adapts the runtime to :class:`suppress.processor.SuppressProcessor`.

For ``spill_to_disk_when_full()`` it also gives the engine its disk tier
(:class:`~suppress.spill.SpillBackend`): a keyspace of the task's state database, opened at
the first spill, the task's commit, and the state codec (:mod:`topology.state.codec`), which
reads back the objects it wrote and runs no code of the data's choosing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from suppress.buffer import serialized_key
from suppress.config import BufferFullStrategy, Suppressed
from suppress.entry import RecordContext
from suppress.processor import SuppressProcessor
from suppress.spill import OrderedByteStore, SpillBackend

from ...state.codec import StateCodecError, decode, encode
from ..processor import Entry, ForwardChange, InternalProcessor

if TYPE_CHECKING:
    from ..task import Task

__all__ = ("SuppressNodeProcessor",)

_TYPE_IN_MESSAGE = re.compile(r"a value of type (\S+)")


class SuppressNodeProcessor(InternalProcessor):
    """Feeds table changes to the suppression engine and forwards what it emits.

    The engine is this node's change entry: parents hand it updates directly.

    :param buffer_time: for final results, the buffer time of a windowed key (the window's
        exclusive end); ``None`` for time limits (the record timestamp is used).
    :param store_name: the name of the suppression's buffer as a state store (Kafka's
        ``KTABLE-SUPPRESS-STATE-STORE-<n>`` or ``<name>-store``).
    """

    def __init__(self, suppressed: Suppressed, delay_ms: int,
                 key_serializer: Callable[[Any], bytes | None],
                 value_serializer: Callable[[Any], bytes | None],
                 buffer_time: Callable[[Any], int] | None,
                 store_name: str | None = None) -> None:
        self.suppressed = suppressed
        self.delay_ms = delay_ms
        self.key_serializer = key_serializer
        self.value_serializer = value_serializer
        self._buffer_time = buffer_time
        self.store_name = store_name

    def init(self, task: Task) -> None:
        """Create the engine and register it as this node's suppression."""
        spill = None
        if self.suppressed.buffer_config.strategy is BufferFullStrategy.SPILL_TO_DISK:
            spill = self._spill_backend(task)
        self.engine = SuppressProcessor(
            self.name, self.suppressed, self.delay_ms, self._emit,
            self.key_serializer, self.value_serializer,  # type: ignore[arg-type]
            debug_metrics=task.debug_metrics, buffer_time_of=self._buffer_time, spill=spill)
        task.register_suppression(self.name, self.engine, self.engine.metrics,
                                  self.store_name)

    def _spill_backend(self, task: Task) -> SpillBackend:
        """The disk tier: a keyspace of the task's state, its commit, and the state codec."""
        store_name = self.store_name or self.name
        name = self.name

        def open_store() -> OrderedByteStore:
            return task.spill_keyspace(store_name)

        def encode_spilled(value: Any) -> bytes:
            try:
                return encode(value)
            except StateCodecError as exc:
                found = _TYPE_IN_MESSAGE.search(str(exc))
                raise StateCodecError(
                    f"suppression {name} cannot move a buffered entry to disk: "
                    f"spill_to_disk_when_full() keeps keys and values made of None, bool, int, "
                    f"float, str, bytes, tuples, lists, dicts and windowed keys, and this entry "
                    f"holds {'something else' if found is None else 'a ' + found[1]}"
                ) from exc

        return SpillBackend(open_store, task.commit_state, encode_spilled, decode)

    def change_entry(self) -> ForwardChange:
        """The engine's own ``process_change``."""
        return self.engine.process_change

    def connect(self, children: Sequence[Entry]) -> None:
        """Bind the forwards, and let the engine emit straight to the children."""
        super().connect(children)
        self.engine.emit = self.forward_change

    def process(self, key: Any, value: Any, ctx: RecordContext) -> None:
        """A ``Change`` given as one value: buffer it."""
        self.engine.process_change(key, value[0], value[1], ctx)

    def process_change(self, key: Any, new: Any, old: Any, ctx: RecordContext) -> None:
        """Buffer the change; the engine emits what is due."""
        self.engine.process_change(key, new, old, ctx)

    def key_bytes(self, key: Any) -> bytes:
        """``key``'s bytes, as this suppression's buffer orders it (see ``serialized_key``)."""
        return serialized_key(self.key_serializer, key)

    def value_bytes(self, value: Any) -> bytes | None:
        """``value``'s bytes for byte accounting (``None`` for ``None``)."""
        return None if value is None else self.value_serializer(value)

    def _emit(self, key: Any, new: Any, old: Any, ctx: RecordContext) -> None:
        self.forward_change(key, new, old, ctx)
