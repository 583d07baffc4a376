"""Aggregations over grouped streams, grouped tables and time windows."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

from suppress.entry import RecordContext
from suppress.processor import WindowUpdate
from suppress.time import NO_TIMESTAMP, is_window_closed, window_close_time

from ...record import Change
from ...windows import LONG_MAX, TimeWindows, Window, Windowed, time_window_end
from ..metrics import DropReason, log
from ..processor import Entry, InternalProcessor
from .late import LateRecords
from .table import log_null_key

__all__ = (
    "StreamAggregateProcessor",
    "TableAggregateProcessor",
    "WindowedAggregateBase",
    "WindowedAggregateProcessor",
    "count_adder",
    "count_initializer",
    "count_subtractor",
)

Initializer = Callable[[], Any]
Aggregator = Callable[[Any, Any, Any], Any]


def count_initializer() -> int:
    """``count()``'s initializer: 0."""
    return 0


def count_adder(key: Any, value: Any, agg: int) -> int:
    """``count()``'s aggregator (and a grouped table's adder): ``agg + 1``.

    A windowed aggregation's raw entry recognises it and adds 1 in place of the call.
    """
    return agg + 1


def count_subtractor(key: Any, value: Any, agg: int) -> int:
    """A grouped table's ``count()`` subtractor: ``agg - 1``."""
    return agg - 1


_new_tuple = tuple.__new__  # a RecordContext of values known to be valid


def drop_null(task: Any, key: Any, value: Any, ctx: RecordContext,
              node: str | None = None) -> bool:
    """Count and log a record aggregation ``node`` cannot use; True if it was dropped."""
    if key is None:
        log_null_key(task, ctx, node)
        return True
    if value is None:
        task.metrics.drop(DropReason.NULL_VALUE, node=node)
        log.debug("Skipping record due to null value. topic=[%s] partition=[%s] offset=[%s]",
                    ctx.topic, ctx.partition, ctx.offset)
        return True
    return False


class StreamAggregateProcessor(InternalProcessor):
    """Grouped-stream ``aggregate``/``count`` (and ``reduce`` when ``initializer`` is None).

    Forwards ``Change(new_agg, old_agg)``; for ``aggregate`` the first old value is the
    initializer's, for ``reduce`` it is ``None``. The timestamp is the max of the record's and
    the stored aggregate's.
    """

    def __init__(self, store_name: str, initializer: Initializer | None, aggregator: Aggregator,
                 send_old: Callable[[], bool]) -> None:
        self._store_name = store_name
        self._initializer = initializer
        self._aggregator = aggregator
        self._send_old = send_old

    def init(self, task: Any) -> None:
        """Bind the store."""
        self._task = task
        self._store = task.stores[self._store_name]
        self._old = self._send_old()

    def process(self, key: Any, value: Any, ctx: RecordContext) -> None:
        """Fold the record into its key's aggregate and forward the change."""
        if drop_null(self._task, key, value, ctx, self.name):
            return
        item = self._store.get_with_timestamp(key)
        ts = ctx.timestamp
        if item is None:
            if self._initializer is None:
                old, new = None, value
            else:
                old = self._initializer()
                new = self._aggregator(key, value, old)
        else:
            old = item[0]
            if item[1] > ts:
                ts = item[1]
            new = self._aggregator(key, value, old)
        self._store.put_with_timestamp(key, new, ts)
        self.forward_change(key, new, old if self._old else None, ctx.with_timestamp(ts))


class TableAggregateProcessor(InternalProcessor):
    """Grouped-table ``aggregate``/``count``/``reduce``: subtract the old value, add the new.

    ``adder(key, value, agg)`` and ``subtractor(key, value, agg)``; for ``reduce``
    (``initializer`` None) the first value added starts the aggregate, otherwise
    ``initializer()`` does. Forwards ``Change(new_agg, old_agg)`` with timestamp
    ``max(record ts, aggregate ts)``.
    """

    def __init__(self, store_name: str, initializer: Initializer | None, adder: Aggregator,
                 subtractor: Aggregator, send_old: Callable[[], bool]) -> None:
        self._store_name = store_name
        self._initializer = initializer
        self._adder = adder
        self._subtractor = subtractor
        self._send_old = send_old

    def init(self, task: Any) -> None:
        """Bind the store."""
        self._task = task
        self._store = task.stores[self._store_name]
        self._old = self._send_old()

    def process(self, key: Any, value: Change, ctx: RecordContext) -> None:
        """:meth:`process_change` for a ``Change``."""
        self.process_change(key, value[0], value[1], ctx)

    def process_change(self, key: Any, new: Any, old: Any, ctx: RecordContext) -> None:
        """Subtract ``old``, add ``new``; forward ``Change(new_agg, old_agg)``."""
        if key is None:
            log_null_key(self._task, ctx, self.name)
            return
        item = self._store.get_with_timestamp(key)
        ts = ctx.timestamp
        old_agg = None
        if item is not None:
            old_agg = item[0]
            ts = max(ts, item[1])
        agg = old_agg
        if old is not None and old_agg is not None:
            agg = self._subtractor(key, old, old_agg)
        if new is not None:
            if agg is not None:
                agg = self._adder(key, new, agg)
            elif self._initializer is not None:
                agg = self._adder(key, new, self._initializer())
            else:
                agg = new
        self._store.put_with_timestamp(key, agg, ts)
        self.forward_change(key, agg, old_agg if self._old else None, ctx.with_timestamp(ts))


class WindowedAggregateBase(InternalProcessor):
    """What every windowed aggregation shares: its late records and their optional sink.

    With ``late_sink``, the node's first child is the sink of the late-records topic
    (added by the DSL right after the aggregation); :meth:`connect` gives it to
    :attr:`late` and the other children receive the table updates.
    """

    late: LateRecords
    late_sink: str | None = None
    """The name of the late-records sink node, if any (set by the DSL)."""
    _final: tuple[WindowUpdate, Callable[[Any], Hashable], type] | None = None
    """After :meth:`hand_changes_to`: the update, the identity and its own type."""

    def hand_changes_to(self, update: WindowUpdate, identity: Callable[[Any], Hashable],
                        own: type) -> None:
        """Send every window change to ``update``, the only child's entry by window.

        ``update(time, window, part, identity, new, old, timestamp, context, topic)``: see
        :meth:`suppress.processor.SuppressProcessor.window_entry`. ``identity`` gives a key's
        identity there, a key of exactly type ``own`` being its own. Time windows hand over
        the inner key as the part, under its window (a window whose end was capped at the
        largest timestamp is still forwarded as a windowed key: the buffer keeps such keys
        whole); sliding and session windows hand over ``(key, start, end)``, identified as
        ``(identity(key), start, end)``.
        """
        self._final = (update, identity, own)

    def raw_entry(self) -> Callable[[Any, Any, int, int, str], None] | None:
        """Where records piped without headers may arrive: ``(key, value, ts, offset, topic)``.

        ``None``: through ``process`` (an aggregation may have a faster entry).
        """
        return None

    def hand_on(self, key: Any, start: int, end: int, new: Any, old: Any, timestamp: int,
                context: Any, topic: str | None) -> None:
        """Hand the change of window ``[start, end]`` of ``key`` (inclusive end) on.

        For sliding and session windows after :meth:`hand_changes_to`: buffer time ``end +
        1``, part ``(key, start, end)``; ``context`` and ``topic`` as ``update`` takes them.
        """
        update, identity, own = self._final  # type: ignore[misc]
        part = (key, start, end)
        update(end + 1, None, part, part if key.__class__ is own else (identity(key), start, end),
               new, old, timestamp, context, topic)

    def init_late(self, task: Any, inclusive_end: bool) -> None:
        """Create :attr:`late` (call from ``init``)."""
        self.late = LateRecords(task, inclusive_end, self.name)

    def connect(self, children: Sequence[Entry]) -> None:
        """The late-records sink first (if any), then the table's children."""
        if self.late_sink is not None:
            self.late.route = children[0].record
            children = children[1:]
        super().connect(children)


class WindowedAggregateProcessor(WindowedAggregateBase):
    """Time-windowed ``aggregate``/``count``/``reduce`` (``initializer`` None for reduce).

    Keeps its own stream time ``T`` (after the null-key check). For each window of the
    record, in ascending start order: if the window is closed
    (:func:`suppress.time.is_window_closed`)
    the record is dropped for it (counted and logged once per window); otherwise the window's
    aggregate is updated and ``Change(new, old)`` is forwarded under ``Windowed(key, window)``
    with timestamp ``max(record ts, window ts)``.

    When its only child is a final-results suppression that takes changes by window
    (:meth:`hand_changes_to`), each change goes to it as the key and its window, and the
    windowed key is built only when the window's final result leaves.
    """

    def __init__(self, store_name: str, windows: TimeWindows, initializer: Initializer | None,
                 aggregator: Aggregator, send_old: Callable[[], bool]) -> None:
        self._store_name = store_name
        self._windows = windows
        self._initializer = initializer
        self._aggregator = aggregator
        self._send_old = send_old
        self._window_cache: dict[int, Window] = {}
        self._tumbling = windows.advance_ms == windows.size_ms
        self.stream_time = NO_TIMESTAMP

    def init(self, task: Any) -> None:
        """Bind the store."""
        self._task = task
        self._store = task.stores[self._store_name]
        self._bucket_of = getattr(self._store, "bucket", None)
        self._old = self._send_old()
        self.init_late(task, False)

    def checkpoint(self, keyspace: Callable[[str], Any]) -> Any:
        """The aggregation's stream time (its windows live in the store)."""
        return self.stream_time

    def restore(self, state: Any, keyspace: Callable[[str], Any]) -> None:
        """Take back the stream time of the last commit."""
        self.stream_time = int(state)

    def process(self, key: Any, value: Any, ctx: RecordContext) -> None:
        """Update every open window of the record; drop it for the closed ones.

        Only a ``None`` key is dropped; a ``None`` value reaches the aggregator (Kafka's
        ``KStreamWindowAggregate`` checks the key only).
        """
        if key is None:
            log_null_key(self._task, ctx, self.name)
            return
        ts = ctx.timestamp
        if ts > self.stream_time:
            self.stream_time = ts
        windows = self._windows
        size, grace, now = windows.size_ms, windows.grace_ms, self.stream_time
        starts = (ts - ts % size,) if self._tumbling else windows.window_starts(ts)
        for start in starts:
            end = time_window_end(start, size)
            if is_window_closed(end, grace, now):
                self._drop_expired(key, value, ctx, start, end)
                continue
            old, new, out_ts = self.aggregate_into(key, value, ts, start)
            window = self._window_cache.get(start)
            if window is None:
                window = self._window_of(start, end)
            final = self._final
            if final is not None and end != LONG_MAX:
                update, identity, own = final
                update(end, window, key, key if key.__class__ is own else identity(key), new,
                       old if self._old else None, out_ts, ctx, None)
                continue
            self.forward_change(Windowed(key, window), new,
                                old if self._old else None,
                                ctx if out_ts == ts else ctx._replace(timestamp=out_ts))

    def raw_entry(self) -> Callable[[Any, Any, int, int, str], None] | None:
        """Where records piped without headers may arrive: ``(key, value, ts, offset, topic)``.

        For tumbling windows in the in-memory store whose changes go to final results
        (:meth:`hand_changes_to`): a record for the window last written, while that window is
        open, of a key that is its own identity (in the store and the buffer alike), updates
        the window's dict and hands the change on, with no context or windowed key built.
        Every other record goes through :meth:`process`, which does the same in general.
        ``None`` otherwise.
        """
        store = self._store
        if not self._tumbling or self._final is None or self._bucket_of is None:
            return None
        final, final_identity, final_own = self._final
        own, identity = store.own_identity, store.key_identity
        if own is not final_own and identity is not final_identity:
            return None  # the store and the buffer may not identify keys alike
        process, windows = self.process, self._windows
        size, grace = windows.size_ms, windows.grace_ms
        aggregator, initializer = self._aggregator, self._initializer
        # count(): its aggregator adds 1, its initializer gives 0 (same results, no calls)
        counting = aggregator is count_adder and initializer is count_initializer
        send_old = self._old
        last_start, last_version, last_close, last_end = -1, -1, -1, -1
        last_bucket: dict[Any, Any] = {}
        last_window = Window(-1, -1)

        def step(key: Any, value: Any, ts: int, offset: int, topic: str) -> None:
            nonlocal last_start, last_version, last_close, last_end, last_bucket, last_window
            start = ts - ts % size
            now = self.stream_time
            if ts > now:
                now = ts
            if (start != last_start or now >= last_close or store.layout_version != last_version
                    or key.__class__ is not own and (key is None or identity(key) is not key)):
                process(key, value, _new_tuple(RecordContext, (ts, offset, topic, 0, ())))
                if start != last_start or store.layout_version != last_version:
                    end = time_window_end(start, size)
                    close = window_close_time(end, grace)
                    bucket = (store.bucket(start, create=False) if self.stream_time < close
                              else None)
                    if bucket is not None and end != LONG_MAX:  # (a capped end: forwarded)
                        last_start, last_bucket, last_close, last_end = start, bucket, close, end
                        last_version = store.layout_version
                        last_window = self._window_cache.get(start) or self._window_of(start,
                                                                                       end)
                return
            if now == ts:
                self.stream_time = ts
            item = last_bucket.get(key)
            if item is None:
                out_ts = ts
                if counting:
                    old, new = 0, 1
                elif initializer is None:  # reduce: the first value starts it
                    old, new = None, value
                else:
                    old = initializer()
                    new = aggregator(key, value, old)
            else:
                old = item[0]
                out_ts = item[1] if item[1] > ts else ts
                new = old + 1 if counting else aggregator(key, value, old)
            if new is None:
                store.put_with_timestamp(key, None, start, out_ts)  # a delete
            else:
                last_bucket[key] = (new, out_ts)
            final(last_end, last_window, key, key, new, old if send_old else None, out_ts,
                  offset, topic)

        return step

    def aggregate_into(self, key: Any, value: Any, ts: int, start: int
                       ) -> tuple[Any, Any, int]:
        """Fold one record into its window's aggregate in the store.

        Returns ``(old, new, timestamp)``: the aggregate before and after (``None`` new
        deletes the window) and the result's timestamp, the max of the window's records'.
        """
        store = self._store
        bucket_of = self._bucket_of
        if bucket_of is not None:  # the in-memory store: one dict per window start
            bucket = bucket_of(start)
            identity = key if key.__class__ is store.own_identity else store.key_identity(key)
            item = None if bucket is None else bucket.get(identity)
        else:
            bucket = None
            item = store.get_with_timestamp(key, start)
        if item is None:
            out_ts = ts
            if self._initializer is None:
                old, new = None, value
            else:
                old = self._initializer()
                new = self._aggregator(key, value, old)
        else:
            old = item[0]
            out_ts = item[1] if item[1] > ts else ts
            new = self._aggregator(key, value, old)
        if new is None or bucket is None:
            store.put_with_timestamp(key, new, start, out_ts)
        else:
            if identity is not key:
                store.note_key(start, identity, key)
            bucket[identity] = (new, out_ts)
        return old, new, out_ts

    def _window_of(self, start: int, end: int) -> Window:
        """A shared Window object per start (few distinct windows are live at once)."""
        cache = self._window_cache
        if len(cache) > 1024:
            cache.clear()
        window = cache[start] = Window(start, end)
        return window

    def _drop_expired(self, key: Any, value: Any, ctx: RecordContext, start: int,
                      end: int) -> None:
        now = self.stream_time
        self.late.drop(key, value, ctx, start, end, now - self._windows.grace_ms, now)
