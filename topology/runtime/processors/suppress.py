"""The suppress node: adapts the runtime to :class:`suppress.processor.SuppressProcessor`.

For ``spill_to_disk_when_full()`` it also gives the engine its disk tier
(:class:`~suppress.spill.SpillBackend`): a keyspace of the task's state database, opened at
the first spill, the task's commit, and the state codec (:mod:`topology.state.codec`), which
reads back the objects it wrote and runs no code of the data's choosing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any

from suppress.buffer import serialized_key
from suppress.config import BufferFullStrategy, Suppressed
from suppress.entry import RecordContext
from suppress.final import BucketKeys
from suppress.final_heap import PartKeys
from suppress.processor import SuppressProcessor, WindowUpdate
from suppress.spill import OrderedByteStore, SpillBackend, SpillingBuffer
from suppress.time import NO_TIMESTAMP

from ..._key_identity import inner_key_identity, key_identity
from ...serde import pack_session_bounds, session_windowed_inner, time_windowed_parts
from ...state.codec import StateCodecError, decode, encode
from ...windows import LONG_MAX, Window, Windowed
from ..processor import Entry, ForwardChange, InternalProcessor

if TYPE_CHECKING:
    from ..task import Task
    from .aggregate import WindowedAggregateBase

__all__ = ("SuppressNodeProcessor", "WindowParts")

_TYPE_IN_MESSAGE = re.compile(r"a value of type (\S+)")
_new_tuple = tuple.__new__  # a Windowed of a key and a Window, without its __new__


class SuppressNodeProcessor(InternalProcessor):
    """Feeds table changes to the suppression engine and forwards what it emits.

    The engine is this node's change entry: parents hand it updates directly.

    :param buffer_time: for final results, the buffer time of a windowed key (the window's
        exclusive end); ``None`` for time limits (the record timestamp is used).
    :param store_name: the name of the suppression's buffer as a state store (Kafka's
        ``KTABLE-SUPPRESS-STATE-STORE-<n>`` or ``<name>-store``).
    :param upstream: for final results, the windowed aggregation node above: idle close
        moves its stream time along with the suppression's.
    :param time_windows: final results of time windows (one window per buffer time): the
        buffer keeps each key as its window and inner key (:class:`WindowParts`), and
        :meth:`window_entry` takes changes that way.
    :param own_ends: final results of sliding or session windows (nearly every window an
        end of its own): the buffer keeps each key as ``(inner key, start, end)`` in one heap
        (:class:`~suppress.final_heap.PartKeys`), and :meth:`window_entry` takes changes that
        way.

    **Idle close** (``Suppressed.with_idle_close(idle)``): at every wall-clock advance to
    ``W``, if no record reached this node since the clock last moved, and ``W - W_last >=
    idle`` (``W_last``: the wall time when the last record arrived, or when the task
    started), stream time becomes ``T_last + (W - W_last)`` (``T_last``: stream time after
    that record) for the suppression and the upstream aggregation, and what is due is
    emitted. As the wall clock stands still between advances, records seen since the last
    advance arrived at the clock's previous value. Not before the first record.
    """

    def __init__(self, suppressed: Suppressed, delay_ms: int,
                 key_serializer: Callable[[Any], bytes | None],
                 value_serializer: Callable[[Any], bytes | None],
                 buffer_time: Callable[[Any], int] | None,
                 store_name: str | None = None, upstream: str | None = None,
                 time_windows: bool = False, own_ends: bool = False) -> None:
        self.suppressed = suppressed
        self.delay_ms = delay_ms
        self.key_serializer = key_serializer
        self.key_identity = key_identity(key_serializer)
        """The identity of this suppression's keys (:mod:`topology._key_identity`)."""
        self.value_serializer = value_serializer
        self._buffer_time = buffer_time
        self.store_name = store_name
        self._upstream_name = upstream
        self._time_windows = time_windows
        self._own_ends = own_ends
        self._idle = suppressed.idle_close_ms
        self._seen = 0
        """Records that reached this node (counted only with idle close)."""

    def init(self, task: Task) -> None:
        """Create the engine and register it as this node's suppression."""
        spill = None
        inner_identity, own = inner_key_identity(self.key_serializer)
        self.window_parts = (WindowParts(self, inner_identity)
                             if self._time_windows and inner_identity is not None else None)
        """How the buffer keeps the keys of time windows (``None``: keys kept whole)."""
        self.parts_identity: tuple[Callable[[Any], Hashable], type] | None = None
        """``(identity, own type)`` of the inner keys, when the buffer keeps keys by parts."""
        part_keys = None
        if inner_identity is not None and (self._time_windows or self._own_ends):
            self.parts_identity = (inner_identity, own)
            if self._own_ends:
                part_keys = self._part_keys(inner_identity, own)
        self._spills = (self.suppressed.buffer_config.strategy
                        is BufferFullStrategy.SPILL_TO_DISK)
        if self._spills:
            spill = self._spill_backend(task)
        self.engine = SuppressProcessor(
            self.name, self.suppressed, self.delay_ms, self._emit,
            self.key_serializer, self.value_serializer,  # type: ignore[arg-type]
            debug_metrics=task.debug_metrics, buffer_time_of=self._buffer_time, spill=spill,
            key_identity=self.key_identity, window_keys=self.window_parts,
            part_keys=part_keys)
        task.register_suppression(self.name, self.engine, self.engine.metrics,
                                  self.store_name)
        self._dirty: dict[Hashable, Any] = (
            self.engine.track_changes() if task.durable and not self._spills else {})
        """With a state directory: the keys whose buffered entry changed since the last
        commit, as values (kept by the buffer itself, see ``track_changes``)."""
        if self._idle is not None:
            self._upstream = (None if self._upstream_name is None
                              else task.processors[self._upstream_name])
            self._wall_prev = self._wall_last = task.clock.now_ms()
            self._seen_at_tick = 0
            self._time_last = NO_TIMESTAMP
            task.on_wall_clock(self._wall_tick)

    def _wall_tick(self, now: int) -> None:
        """Idle close: follow the wall clock after ``idle`` ms without input (class doc)."""
        if self._seen != self._seen_at_tick:  # records arrived while the clock stood still
            self._seen_at_tick = self._seen
            self._wall_last = self._wall_prev
            self._time_last = self.engine.stream_time
        elif self._time_last == NO_TIMESTAMP:  # none yet, or a stream time restored since
            self._time_last = self.engine.stream_time
        self._wall_prev = now
        idle_for = now - self._wall_last
        assert self._idle is not None
        if idle_for < self._idle or self._time_last == NO_TIMESTAMP:
            return
        target = self._time_last + idle_for
        upstream = self._upstream
        if upstream is not None and target > upstream.stream_time:  # type: ignore[attr-defined]
            upstream.stream_time = target  # type: ignore[attr-defined]
        self.engine.advance_stream_time(target)

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

        # A durable task's disk tier is part of its state, committed with it: the buffer
        # never commits it mid-step. Otherwise it is scratch space the buffer commits itself.
        commit = _no_commit if task.durable else task.commit_state
        return SpillBackend(open_store, commit, encode_spilled, decode)

    def window_entry(self) -> WindowUpdate | None:
        """Where a windowed aggregation may hand changes by window, if this node takes them.

        ``update(time, window, part, identity, new, old, timestamp, context, topic)`` (see
        :meth:`suppress.processor.SuppressProcessor.window_entry`): for final results buffered
        in memory by parts (:attr:`parts_identity`), when nothing here needs to see each
        change (no idle close); else ``None``.
        """
        if self.parts_identity is None or self._spills or self._idle is not None:
            return None
        return self.engine.window_entry()

    def take_changes_from(self, aggregation: WindowedAggregateBase) -> bool:
        """Let ``aggregation`` (this node's parent) hand its changes to :meth:`window_entry`.

        Returns whether it does: this node takes changes by window (see
        :meth:`window_entry`); else the aggregation goes on forwarding windowed keys.
        """
        update = self.window_entry()
        if update is None or self.parts_identity is None:  # (the second: implied, for mypy)
            return False
        aggregation.hand_changes_to(update, *self.parts_identity)
        return True

    def change_entry(self) -> ForwardChange:
        """The engine's change entry; :meth:`process_change` when it must see records.

        That is with idle close (records seen).
        """
        if self._idle is not None:
            return self.process_change
        return self.engine.change_entry()

    def connect(self, children: Sequence[Entry]) -> None:
        """Bind the forwards, and let the engine emit straight to the children."""
        super().connect(children)
        self.engine.emit = self.forward_change

    def process(self, key: Any, value: Any, ctx: RecordContext) -> None:
        """A ``Change`` given as one value: buffer it."""
        self.process_change(key, value[0], value[1], ctx)

    def process_change(self, key: Any, new: Any, old: Any, ctx: RecordContext) -> None:
        """Buffer the change; the engine emits what is due."""
        self._seen += 1
        self.engine.process_change(key, new, old, ctx)

    def checkpoint(self, keyspace: Callable[[str], Any]) -> Any:
        """Write the entries changed since the last commit; return the stream time.

        The buffer's image lives in the keyspace ``node.<name>``: key bytes -> (buffer time,
        key, new, old, prior, context) through the state codec.

        A spilling buffer keeps its image in its own keyspace, beside its disk tier (see
        ``SpillingBuffer.checkpoint``): each entry is stored once.

        :raises StateCodecError: for a key or value the state codec cannot write.
        """
        buffer = self.engine.buffer
        if isinstance(buffer, SpillingBuffer):
            try:
                buffer.checkpoint()
            except StateCodecError as exc:
                raise StateCodecError(
                    f"suppression {self.name} cannot keep a buffered entry in the state "
                    f"directory: {exc}") from exc
            return self.engine.stream_time
        if self._dirty:
            image = keyspace(self.name)
            buffer = self.engine.buffer
            for key in self._dirty.values():
                key_bytes = serialized_key(self.key_serializer, key)
                entry = buffer.get(key)
                if entry is None:
                    image.delete(key_bytes)
                    continue
                try:
                    image.put(key_bytes, encode((entry.time, entry.key, entry.new, entry.old,
                                                 entry.prior, tuple(entry.context))))
                except StateCodecError as exc:
                    raise StateCodecError(
                        f"suppression {self.name} cannot keep a buffered entry in the state "
                        f"directory: {exc}") from exc
            self._dirty.clear()
        return self.engine.stream_time

    def restore(self, state: Any, keyspace: Callable[[str], Any]) -> None:
        """Take back the stream time and the buffered entries of the last commit.

        A spilling buffer reopens lazily from its own keyspace, in memory bounded by its
        bounds (its disk tier stays on disk). Entries are put back one at a time, in any
        order (the buffer orders them): no list of them all is built.
        """
        self.engine.stream_time = int(state)
        buffer = self.engine.buffer
        if isinstance(buffer, SpillingBuffer):
            buffer.restore()
        image = keyspace(self.name)
        for _, value in image.items():  # a spilling buffer: an image an older version wrote
            time, key, new, old, prior, context = decode(value)
            ctx = RecordContext(*context)
            buffer.put(time, key, new, prior, ctx)  # a new entry: its prior is ``prior``
            buffer.put(time, key, new, old, ctx)  # then its latest change
        self._dirty.clear()  # what was restored is what the image holds
        if self._spills:
            last = next(image.items(reverse=True), None)
            if last is not None:  # now kept in the buffer's own keyspace: stored once
                image.delete_range(b"", last[0] + b"\x00")

    def _part_keys(self, inner_identity: Callable[[Any], Hashable], own: type) -> PartKeys:
        """Keys of sliding or session windows as parts ``(inner key, start, end)``.

        Built and serialized through this node (so that an error is located here); a part's
        identity is ``(inner identity, start, end)``, a part whose key is of exactly type
        ``own`` being its own identity.
        """
        def part_of(key: Windowed) -> tuple[Any, int, int]:
            window = key[1]
            return key[0], window[0], window[1]

        def key_of(part: tuple[Any, int, int]) -> Windowed:
            key: Windowed = _new_tuple(Windowed, (part[0], _new_tuple(Window, part[1:])))
            return key

        def identity(part: tuple[Any, int, int]) -> Hashable:
            key, start, end = part
            return part if key.__class__ is own else (inner_identity(key), start, end)

        session_inner = session_windowed_inner(self.key_serializer)
        if session_inner is None:  # sliding windows: the time-windowed layout
            def key_bytes(part: tuple[Any, int, int]) -> bytes:
                return self.windowed_key_bytes(*part)
        else:
            def key_bytes(part: tuple[Any, int, int]) -> bytes:
                key, start, end = part
                data = (session_inner(key) or b"") + pack_session_bounds(end, start)
                if type(data) is bytes:
                    return data
                return self.key_bytes(
                    _new_tuple(Windowed, (key, _new_tuple(Window, (start, end)))), data)

        # (the functions refer to this node, so that an error raised in them is located here)
        return PartKeys(part_of, BucketKeys(key_of, key_bytes, identity))

    def key_bytes(self, key: Any, data: Any = None) -> bytes:
        """``key``'s bytes, as this suppression's buffer orders it (see ``serialized_key``).

        ``data``: what the key serializer gave for ``key``, if it was called already.
        """
        if data is None:
            return serialized_key(self.key_serializer, key)
        return serialized_key(lambda _: data, key)

    def windowed_key_bytes(self, key: Any, start: int, end: int) -> bytes:
        """:meth:`key_bytes` of ``Windowed(key, Window(start, end))``: the same bytes and errors.

        For the built-in time-windowed layout the windowed key is not built.
        """
        parts = time_windowed_parts(self.key_serializer, start)
        if parts is None:
            return self.key_bytes(_new_tuple(Windowed, (key, _new_tuple(Window, (start, end)))))
        inner, packed = parts
        data = (inner(key) or b"") + packed
        if type(data) is bytes:
            return data
        return self.key_bytes(_new_tuple(Windowed, (key, _new_tuple(Window, (start, end)))),
                              data)

    def window_key_bytes(self, window: Window) -> Callable[[Any], bytes]:
        """``key`` -> :meth:`key_bytes` of ``Windowed(key, window)``, for many keys of a window.

        The same bytes and errors; for the built-in time-windowed layout the window's start
        is packed once. (The function refers to this node, so that an error raised in it is
        located here, as one raised in :meth:`key_bytes`.)
        """
        parts = time_windowed_parts(self.key_serializer, window[0])
        if parts is None:
            return lambda key: self.key_bytes(_new_tuple(Windowed, (key, window)))
        inner, packed = parts

        def of(key: Any) -> bytes:
            data = (inner(key) or b"") + packed
            if type(data) is bytes:
                return data
            return self.key_bytes(_new_tuple(Windowed, (key, window)), data)

        return of

    def value_bytes(self, value: Any) -> bytes | None:
        """``value``'s bytes for byte accounting (``None`` for ``None``)."""
        return None if value is None else self.value_serializer(value)

    def _emit(self, key: Any, new: Any, old: Any, ctx: RecordContext) -> None:
        self.forward_change(key, new, old, ctx)


class WindowParts:
    """The keys of time windows as the final-results buffer keeps them: window and inner key.

    Built and serialized through the node (so that an error is located there), identified
    by the inner key's identity (:attr:`inner_identity`). Only for the windowed layouts built
    here, whose inner keys' identity is known
    (:func:`~topology._key_identity.inner_key_identity`).

    A window whose end was capped at the largest timestamp (``time_window_end``) shares that
    buffer time with the other capped windows: its keys are kept whole.
    """

    def __init__(self, node: SuppressNodeProcessor,
                 inner_identity: Callable[[Any], Hashable]) -> None:
        self._node = node
        self.inner_identity = inner_identity

    def split(self, key: Any) -> tuple[Window | None, Any]:
        """``(window, inner key)`` of a windowed key; ``(None, key)`` for a capped window."""
        window = key[1]
        if window[1] == LONG_MAX:
            return None, key
        return window, key[0]

    def bucket_keys(self, window: Window) -> BucketKeys:
        """How the keys of ``window`` are built, serialized and identified."""
        node = self._node

        def key_of(part: Any) -> Windowed:
            key: Windowed = _new_tuple(Windowed, (part, window))
            return key

        return BucketKeys(key_of, node.window_key_bytes(window), self.inner_identity)


def _no_commit() -> None:
    """A durable task's disk tier is committed with the task's state, not by the buffer."""
