"""Join processors: stream-table (as-of for versioned tables, optional grace) and table-table.

Stream-table join (Kafka's ``KStreamKTableJoinProcessor``): each stream record looks the
table up and, for a match (or always, for a left join), forwards ``joiner(stream value,
table value)`` with the stream record's key and timestamp. A versioned table is read **as of
the stream record's timestamp**; any other table, at its latest value. Table updates never
produce output. A stream record with a ``None`` key or value is dropped and counted.

With a grace period (KIP-923, versioned tables only) stream records wait in a time-ordered
buffer until the buffer's time (the largest timestamp buffered) has passed their timestamp by
the grace period, so that table updates arriving a little late still reach them; a record
already older than that is joined at once. Records leave the buffer in (timestamp, key bytes,
arrival) order.

Table-table joins (Kafka's ``KTableKTable{Inner,Left,Right,Outer}Join``): one processor per
side; an update of one side reads the other side's current value and forwards the joined
change, with timestamp ``max(this update, other side's value)``; a merge node below both
forwards (and, when materialized, stores) the result. Out-of-order updates of a versioned
side are dropped and counted (KIP-914).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from suppress.buffer import serialized_key
from suppress.entry import RecordContext

from ..getters import GetterFactory, ValueGetter
from ..metrics import DropReason, log
from ..processor import Forward, InternalProcessor
from .table import log_null_key

if TYPE_CHECKING:
    from ..task import Task

__all__ = ("StreamTableJoinProcessor", "TableJoinMerger", "TableJoinProcessor")


def _drop_null_value(task: Task, ctx: RecordContext, node: str | None = None) -> None:
    task.metrics.drop(DropReason.NULL_VALUE, node=node)
    log.debug("Skipping record due to null join key or value. topic=[%s] partition=[%s] "
                "offset=[%s]", ctx.topic, ctx.partition, ctx.offset)


class StreamTableJoinProcessor(InternalProcessor):
    """Joins each stream record with the table's value (as of its timestamp if versioned).

    :param getter: builds the table's value getter.
    :param joiner: ``joiner(stream_value, table_value)``.
    :param left: a left join (``table_value`` may be ``None``) instead of an inner join.
    :param grace_ms: the grace period, or ``None`` for none (join at once).
    :param key_serializer: orders buffered records with equal timestamps (grace only).
    """

    def __init__(self, getter: GetterFactory, joiner: Callable[[Any, Any], Any], left: bool,
                 grace_ms: int | None, key_serializer: Callable[[Any], bytes | None]) -> None:
        self._getter_factory = getter
        self._joiner = joiner
        self._left = left
        self._grace = grace_ms
        self._key_serializer = key_serializer
        self._buffer: list[tuple[int, bytes, int, Any, Any, RecordContext]] = []
        self._buffer_time = -1
        self._arrivals = 0

    def init(self, task: Task) -> None:
        """Bind the table's getter (as of a time: a table without history gives its latest)."""
        self._task = task
        getter: ValueGetter = self._getter_factory(task)
        self._lookup = getter.get_as_of

    def record_entry(self) -> Forward:
        """:meth:`process`, or without a grace period the join itself."""
        return self.process if self._grace is not None else self._join_now

    def checkpoint(self, keyspace: Callable[[str], Any]) -> Any:
        """The grace buffer: its time, arrival count and held records (``None`` without grace)."""
        if self._grace is None:
            return None
        held = [(ts, kb, seq, key, value, tuple(ctx))
                for ts, kb, seq, key, value, ctx in self._buffer]
        return (self._buffer_time, self._arrivals, held)

    def restore(self, state: Any, keyspace: Callable[[str], Any]) -> None:
        """Take back the grace buffer of the last commit."""
        if state is None:
            return
        self._buffer_time, self._arrivals, held = state
        self._buffer = [(ts, kb, seq, key, value, RecordContext(*ctx))
                        for ts, kb, seq, key, value, ctx in held]
        heapq.heapify(self._buffer)

    def _drop(self, key: Any, ctx: RecordContext) -> None:
        if key is None:
            log_null_key(self._task, ctx, self.name)
        else:
            _drop_null_value(self._task, ctx, self.name)

    def _dropped(self, key: Any, value: Any, ctx: RecordContext) -> bool:
        """Drop (and count) a record the join cannot take: ``True`` if it was dropped.

        A ``None`` value always; a ``None`` key only in an inner join: a left join takes it
        with no table value, as Kafka does since 3.7 (KIP-962).
        """
        if value is None or (key is None and not self._left):
            self._drop(key, ctx)
            return True
        return False

    def _join_now(self, key: Any, value: Any, ctx: RecordContext) -> None:
        if self._dropped(key, value, ctx):
            return
        found = None if key is None else self._lookup(key, ctx[0])
        if found is not None:
            self.forward(key, self._joiner(value, found[0]), ctx)
        elif self._left:
            self.forward(key, self._joiner(value, None), ctx)

    @property
    def buffered(self) -> int:
        """Stream records waiting for the grace period to pass."""
        return len(self._buffer)

    def process(self, key: Any, value: Any, ctx: RecordContext) -> None:
        """Join the record now, or buffer it for the grace period."""
        if self._grace is None:
            self._join_now(key, value, ctx)
            return
        if self._dropped(key, value, ctx):
            return
        timestamp = ctx[0]
        if timestamp < self._buffer_time - self._grace:
            self._join_now(key, value, ctx)
            return
        self._buffer_time = max(self._buffer_time, timestamp)
        self._arrivals += 1
        key_bytes = b"" if key is None else serialized_key(self._key_serializer, key)
        heapq.heappush(self._buffer, (timestamp, key_bytes, self._arrivals, key, value, ctx))
        deadline = self._buffer_time - self._grace
        buffer = self._buffer
        while buffer and buffer[0][0] <= deadline:
            _, _, _, k, v, c = heapq.heappop(buffer)
            self._join_now(k, v, c)


class TableJoinProcessor(InternalProcessor):
    """One side of a table-table join: joins this side's updates with the other's value.

    ``mode`` says when this side's update gives a result (``joiner`` is already oriented so
    that it takes this side's value first):

    - ``"inner"``: only while the other side has a value;
    - ``"left"`` (the left side of a left join): always; a delete gives a delete;
    - ``"right"`` (the right side of a left join): only while the other (left) side has a
      value; a delete of this side gives ``joiner(None, other)``;
    - ``"outer"``: whenever either side has a value.

    :param send_old: whether old values are needed downstream (then old results are joined
        too).
    """

    def __init__(self, other: GetterFactory, joiner: Callable[[Any, Any], Any], mode: str,
                 send_old: Callable[[], bool]) -> None:
        self._other_factory = other
        self._joiner = joiner
        self._mode = mode
        self._send_old = send_old

    def init(self, task: Task) -> None:
        """Bind the other side's getter."""
        self._task = task
        self._other = self._other_factory(task).get
        self._old = self._send_old()

    def process(self, key: Any, value: Any, ctx: RecordContext) -> None:
        """:meth:`process_change` for a ``Change``."""
        self.process_change(key, value[0], value[1], ctx)

    def process_stale(self, key: Any, new: Any, old: Any, ctx: RecordContext) -> None:
        """Drop (and count) an out-of-order update of a versioned table."""
        self._task.metrics.drop(DropReason.OUT_OF_ORDER, node=self.name)
        log.debug("Skipping out-of-order update of a versioned table in a join. topic=[%s] "
                    "partition=[%s] offset=[%s]", ctx.topic, ctx.partition, ctx.offset)

    def process_change(self, key: Any, new: Any, old: Any, ctx: RecordContext) -> None:
        """Forward the joined change, if this join kind has one."""
        if key is None:
            log_null_key(self._task, ctx, self.name)
            return
        found = self._other(key)
        other = None if found is None else found[0]
        mode = self._mode
        joiner = self._joiner
        send_old = self._old
        if mode == "inner" or mode == "right":
            if other is None:
                return
            if mode == "inner":
                new_result = None if new is None else joiner(new, other)
                old_result = joiner(old, other) if send_old and old is not None else None
            else:
                new_result = joiner(new, other)
                old_result = joiner(old, other) if send_old else None
        elif mode == "left":
            new_result = None if new is None else joiner(new, other)
            old_result = joiner(old, other) if send_old and old is not None else None
        else:
            if other is None and new is None and old is None:
                return
            new_result = joiner(new, other) if new is not None or other is not None else None
            old_result = (joiner(old, other)
                          if send_old and (old is not None or other is not None) else None)
        if found is not None and found[1] > ctx[0]:
            ctx = ctx._replace(timestamp=found[1])
        self.forward_change(key, new_result, old_result, ctx)


class TableJoinMerger(InternalProcessor):
    """Below both sides of a table-table join: forwards the results, storing them if named.

    :param store_name: the join's store (``Materialized`` with a name), or ``None``.
    :param send_old: whether old values are needed downstream.
    """

    def __init__(self, store_name: str | None, send_old: Callable[[], bool]) -> None:
        self._store_name = store_name
        self._send_old = send_old

    def init(self, task: Task) -> None:
        """Bind the store, if any."""
        self._upsert = (None if self._store_name is None
                        else task.stores[self._store_name].upsert)
        self._old = self._send_old()

    def process(self, key: Any, value: Any, ctx: RecordContext) -> None:
        """:meth:`process_change` for a ``Change``."""
        self.process_change(key, value[0], value[1], ctx)

    def process_change(self, key: Any, new: Any, old: Any, ctx: RecordContext) -> None:
        """Store the new result (if materialized) and forward the change."""
        upsert = self._upsert
        if upsert is not None:
            item = upsert(key, new, ctx[0])
            old = item[0] if item is not None else None
        self.forward_change(key, new, old if self._old else None, ctx)
