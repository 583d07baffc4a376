"""Table processors: source tables, filter/map_values, to_stream, group_by re-keying.

Table records carry a :class:`~topology.record.Change`. ``send_old`` says whether a
downstream node (suppress, a table group_by) needs old values; when it does not, old values
are not computed and are forwarded as ``None``, as in Kafka.

A versioned source table (KIP-914) forwards an out-of-order update (older than the key's
latest version, within the history retention) through the *stale* entry: ``filter`` and
``map_values`` pass it on as stale, ``to_stream`` emits it, re-grouping drops and counts it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from suppress.entry import RecordContext

from ...record import Change
from ...state.api import PUT_RETURN_CODE_NOT_PUT, PUT_RETURN_CODE_VALID_TO_UNDEFINED
from ..metrics import DropReason, log
from ..processor import InternalProcessor

__all__ = (
    "TableFilterProcessor",
    "TableMapValuesProcessor",
    "TableRepartitionMapProcessor",
    "TableSourceProcessor",
    "ToStreamProcessor",
    "VersionedTableSourceProcessor",
    "log_null_key",
)


def log_null_key(task: Any, ctx: RecordContext, node: str | None = None) -> None:
    """Count a record dropped for its ``None`` key at ``node``; log it (Kafka's wording)."""
    task.metrics.drop(DropReason.NULL_KEY, node=node)
    log.debug("Skipping record due to null key. topic=[%s] partition=[%s] offset=[%s]",
                ctx.topic, ctx.partition, ctx.offset)


class TableSourceProcessor(InternalProcessor):
    """Materializes a topic as a table and forwards ``Change(new, old)`` for every record.

    A delete of an absent key is forwarded as ``Change(None, None)`` (no record cache).
    """

    def __init__(self, store_name: str, send_old: Callable[[], bool]) -> None:
        self._store_name = store_name
        self._send_old = send_old

    def init(self, task: Any) -> None:
        """Bind the store."""
        self._task = task
        self._upsert = task.stores[self._store_name].upsert
        self._old = self._send_old()

    def process(self, key: Any, value: Any, ctx: RecordContext) -> None:
        """Upsert (or delete) ``key`` and forward the change."""
        if key is None:
            log_null_key(self._task, ctx, self.name)
            return
        item = self._upsert(key, value, ctx[0])
        self.forward_change(key, value, item[0] if item is not None and self._old else None, ctx)


class VersionedTableSourceProcessor(InternalProcessor):
    """Materializes a topic as a versioned table (KIP-914).

    The old value is the key's latest version whatever the record's timestamp. A write the
    store rejects (older than its history retention) forwards nothing; the store counts it
    (``dropped-records-total``, reason ``expired-version``). An accepted write that is not
    the key's latest version goes out through the stale entry.
    """

    def __init__(self, store_name: str, send_old: Callable[[], bool]) -> None:
        self._store_name = store_name
        self._send_old = send_old

    def init(self, task: Any) -> None:
        """Bind the store."""
        self._task = task
        store = task.stores[self._store_name]
        self._get = store.get
        self._put = store.put
        self._old = self._send_old()

    def process(self, key: Any, value: Any, ctx: RecordContext) -> None:
        """Write the version and forward the change (stale if it is not the latest)."""
        if key is None:
            log_null_key(self._task, ctx, self.name)
            return
        latest = self._get(key) if self._old else None
        code = self._put(key, value, ctx[0])
        if code == PUT_RETURN_CODE_NOT_PUT:
            return
        old = None if latest is None else latest.value
        if code == PUT_RETURN_CODE_VALID_TO_UNDEFINED:
            self.forward_change(key, value, old, ctx)
        else:
            self.forward_stale(key, value, old, ctx)


class TableFilterProcessor(InternalProcessor):
    """Table filter: a value failing ``predicate(key, value)`` becomes ``None`` (a delete).

    With old values on, a change that is a delete on both sides is not forwarded, unless the
    table reads a versioned table (``versioned``), where Kafka forwards it (KIP-914).
    """

    def __init__(self, predicate: Callable[[Any, Any], bool], negate: bool,
                 send_old: Callable[[], bool], versioned: bool = False) -> None:
        self._predicate = predicate
        self._negate = negate
        self._send_old = send_old
        self._versioned = versioned

    def init(self, task: Any) -> None:
        """Read the old-values flag."""
        self._old = self._send_old()

    def _keep(self, key: Any, value: Any) -> Any:
        if value is not None and bool(self._predicate(key, value)) is not self._negate:
            return value
        return None

    def process(self, key: Any, value: Change, ctx: RecordContext) -> None:
        """:meth:`process_change` for a ``Change``."""
        self.process_change(key, value[0], value[1], ctx)

    def _filtered(self, key: Any, new: Any, old: Any) -> tuple[Any, Any] | None:
        new = self._keep(key, new)
        if self._old:
            old = self._keep(key, old)
            if new is None and old is None and not self._versioned:
                return None
        else:
            old = None
        return new, old

    def process_change(self, key: Any, new: Any, old: Any, ctx: RecordContext) -> None:
        """Forward the filtered change (nothing when both sides are ``None`` with old values)."""
        change = self._filtered(key, new, old)
        if change is not None:
            self.forward_change(key, change[0], change[1], ctx)

    def process_stale(self, key: Any, new: Any, old: Any, ctx: RecordContext) -> None:
        """Forward the filtered out-of-order update, still flagged as such."""
        change = self._filtered(key, new, old)
        if change is not None:
            self.forward_stale(key, change[0], change[1], ctx)


class TableMapValuesProcessor(InternalProcessor):
    """Table map_values: ``mapper(value)`` applied to the new (and old) value."""

    def __init__(self, mapper: Callable[[Any], Any], send_old: Callable[[], bool]) -> None:
        self._mapper = mapper
        self._send_old = send_old

    def init(self, task: Any) -> None:
        """Read the old-values flag."""
        self._old = self._send_old()

    def process(self, key: Any, value: Change, ctx: RecordContext) -> None:
        """:meth:`process_change` for a ``Change``."""
        self.process_change(key, value[0], value[1], ctx)

    def _mapped(self, new: Any, old: Any) -> tuple[Any, Any]:
        mapper = self._mapper
        return (None if new is None else mapper(new),
                mapper(old) if self._old and old is not None else None)

    def process_change(self, key: Any, new: Any, old: Any, ctx: RecordContext) -> None:
        """Forward the mapped change."""
        new, old = self._mapped(new, old)
        self.forward_change(key, new, old, ctx)

    def process_stale(self, key: Any, new: Any, old: Any, ctx: RecordContext) -> None:
        """Forward the mapped out-of-order update, still flagged as such."""
        new, old = self._mapped(new, old)
        self.forward_stale(key, new, old, ctx)


class ToStreamProcessor(InternalProcessor):
    """Turns table changes into a stream of their new values (``None`` for deletes)."""

    def process(self, key: Any, value: Change, ctx: RecordContext) -> None:
        """Forward ``value.new``."""
        self.forward(key, value[0], ctx)

    def process_change(self, key: Any, new: Any, old: Any, ctx: RecordContext) -> None:
        """Forward ``new``."""
        self.forward(key, new, ctx)


class TableRepartitionMapProcessor(InternalProcessor):
    """KTable ``group_by``: ``selector(key, value) -> (new_key, new_value)``.

    The selector sees the new value, then the old one (``None`` values are not selected).
    When both pairs have the same key, one ``Change(new, old)`` is forwarded, so the
    aggregation subtracts and adds in one step (Kafka 3.5+, KIP-904). Otherwise the old
    value's pair is forwarded first as a subtraction ``Change(None, old)``, then the new
    value's pair as an addition ``Change(new, None)``. A pair with a ``None`` key or value,
    or a ``None`` instead of a pair, is skipped, as in Kafka's ``KTableRepartitionMap``; a
    skipped new pair is also counted as dropped (Kafka does not count it), a skipped old
    pair is not, as it was never added.
    """

    def __init__(self, selector: Callable[[Any, Any], tuple[Any, Any]]) -> None:
        self._selector = selector

    def init(self, task: Any) -> None:
        """Bind the task for drop counting."""
        self._task = task

    def _select(self, key: Any, value: Any, ctx: RecordContext,
                count: bool) -> tuple[Any, Any] | None:
        if value is None:
            return None
        pair = self._selector(key, value)
        if pair is not None and (not isinstance(pair, tuple) or len(pair) != 2):
            raise TypeError(f"KTable.group_by selector must return (key, value), got {pair!r}")
        if pair is None or pair[0] is None:
            if count:
                log_null_key(self._task, ctx, self.name)
            return None
        if pair[1] is None:
            if count:
                self._task.metrics.drop(DropReason.NULL_VALUE, node=self.name)
                log.debug("Skipping record due to null value. topic=[%s] partition=[%s] "
                            "offset=[%s]", ctx.topic, ctx.partition, ctx.offset)
            return None
        return pair

    def process(self, key: Any, value: Change, ctx: RecordContext) -> None:
        """:meth:`process_change` for a ``Change``."""
        self.process_change(key, value[0], value[1], ctx)

    def process_stale(self, key: Any, new: Any, old: Any, ctx: RecordContext) -> None:
        """Drop (and count) an out-of-order update of a versioned table (KIP-914)."""
        self._task.metrics.drop(DropReason.OUT_OF_ORDER, node=self.name)
        log.debug("Skipping out-of-order update of a versioned table in a re-grouping. "
                    "topic=[%s] partition=[%s] offset=[%s]", ctx.topic, ctx.partition,
                    ctx.offset)

    def process_change(self, key: Any, new: Any, old: Any, ctx: RecordContext) -> None:
        """Forward the subtraction, then the addition."""
        new_pair = self._select(key, new, ctx, True)
        old_pair = self._select(key, old, ctx, False)
        if old_pair is not None and new_pair is not None and old_pair[0] == new_pair[0]:
            self.forward_change(new_pair[0], new_pair[1], old_pair[1], ctx)
            return
        if old_pair is not None:
            self.forward_change(old_pair[0], None, old_pair[1], ctx)
        if new_pair is not None:
            self.forward_change(new_pair[0], new_pair[1], None, ctx)
