"""Grouped streams and tables, and their (windowed) aggregations."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .errors import TopologyError
from .options import Materialized
from .runtime.graph import GraphNode, StoreSpec
from .runtime.processors import aggregate as ap
from .serde import Serde, Serdes, serializer_of
from .state.memory import InMemoryWindowStore
from .table import KTable, OldValues, WindowInfo
from .windows import SessionWindows, SlidingWindows, TimeWindows

if TYPE_CHECKING:
    from .builder import StreamsBuilder

__all__ = ("KGroupedStream", "KGroupedTable", "TimeWindowedKStream")


def _count_init() -> int:
    return 0


def _count_add(key: Any, value: Any, agg: int) -> int:
    return agg + 1


def _count_sub(key: Any, value: Any, agg: int) -> int:
    return agg - 1


def _check(fn: Any, what: str) -> None:
    if not callable(fn):
        raise TypeError(f"{what} must be callable, got {type(fn).__name__}")


def _materialized(m: Materialized | None) -> Materialized:
    if m is None:
        return Materialized()
    if not isinstance(m, Materialized):
        raise TypeError(f"materialized must be a Materialized, got {type(m).__name__}")
    return m


class _Grouping:
    """Shared plumbing: where records come from, and repartitioning them once."""

    def __init__(self, builder: StreamsBuilder, node: GraphNode, key_serde: Serde[Any] | None,
                 value_serde: Serde[Any] | None, repartition: bool, name: str | None) -> None:
        self._builder = builder
        self._node = node
        self._key_serde = key_serde
        self._value_serde = value_serde
        self._repartition = repartition
        self._name = name

    def _input(self, store_name: str) -> GraphNode:
        if not self._repartition:
            return self._node
        return self._builder.add_repartition(self._node, self._name or store_name)

    def _store_name(self, m: Materialized, prefix: str) -> str:
        return m.name or self._builder.next_name(prefix)


class KGroupedStream(_Grouping):
    """A stream grouped by key: aggregate it into a table, or window it first."""

    def count(self, materialized: Materialized | None = None) -> KTable:
        """Count records per key (``None`` keys and values are dropped and counted)."""
        return self.aggregate(_count_init, _count_add,
                              materialized=_with_default_value_serde(materialized))

    def reduce(self, reducer: Callable[[Any, Any], Any],
               materialized: Materialized | None = None) -> KTable:
        """Combine values per key with ``reducer(agg, value)``; the first value starts it."""
        _check(reducer, "reducer")
        return self._aggregate(None, lambda k, v, agg: reducer(agg, v), materialized,
                               "KSTREAM-REDUCE")

    def aggregate(self, initializer: Callable[[], Any],
                  aggregator: Callable[[Any, Any, Any], Any],
                  materialized: Materialized | None = None) -> KTable:
        """Fold values per key: ``agg = aggregator(key, value, agg)`` from ``initializer()``."""
        _check(initializer, "initializer")
        _check(aggregator, "aggregator")
        return self._aggregate(initializer, aggregator, materialized, "KSTREAM-AGGREGATE")

    def _aggregate(self, initializer: Callable[[], Any] | None,
                   aggregator: Callable[[Any, Any, Any], Any],
                   materialized: Materialized | None, prefix: str) -> KTable:
        m = _materialized(materialized)
        store = self._store_name(m, f"{prefix}-STATE-STORE")
        key_serde = m.key_serde or self._key_serde
        value_serde = m.value_serde if initializer is not None else (
            m.value_serde or self._value_serde)
        name = self._builder.next_name(prefix)
        source = self._input(store)
        self._builder.add_kv_store(store, key_serde)
        old = OldValues(None)
        node = self._builder.add_node(
            prefix, lambda: ap.StreamAggregateProcessor(store, initializer, aggregator, old),
            [source], name=name, stores=[store])
        return KTable(self._builder, node, key_serde, value_serde, old, store_name=store)

    def windowed_by(self, windows: TimeWindows) -> TimeWindowedKStream:
        """Aggregate per key and time window.

        :raises TopologyError: for sliding or session windows (they arrive with the windows
            issue) or anything that is not a window definition.
        """
        if isinstance(windows, SlidingWindows | SessionWindows):
            raise TopologyError(
                f"windowed_by({windows!r}): sliding and session window aggregations are not "
                "available in this version yet; use TimeWindows"
            )
        if not isinstance(windows, TimeWindows):
            raise TopologyError(f"windowed_by() needs TimeWindows, got {type(windows).__name__}")
        return TimeWindowedKStream(self, windows)


def _with_default_value_serde(m: Materialized | None) -> Materialized:
    m = _materialized(m)
    if m.value_serde is None:
        return Materialized(m.name, m.key_serde, Serdes.long(), m.backend)
    return m


class TimeWindowedKStream:
    """A grouped stream cut into time windows: ``count``, ``reduce``, ``aggregate``.

    The result is a table keyed by ``Windowed(key, Window(start, end))``.
    """

    def __init__(self, grouped: KGroupedStream, windows: TimeWindows) -> None:
        self._grouped = grouped
        self._windows = windows

    def count(self, materialized: Materialized | None = None) -> KTable:
        """Count records per key and window."""
        return self.aggregate(_count_init, _count_add,
                              materialized=_with_default_value_serde(materialized))

    def reduce(self, reducer: Callable[[Any, Any], Any],
               materialized: Materialized | None = None) -> KTable:
        """Combine values per key and window with ``reducer(agg, value)``."""
        _check(reducer, "reducer")
        return self._aggregate(None, lambda k, v, agg: reducer(agg, v), materialized,
                               "KSTREAM-REDUCE")

    def aggregate(self, initializer: Callable[[], Any],
                  aggregator: Callable[[Any, Any, Any], Any],
                  materialized: Materialized | None = None) -> KTable:
        """Fold values per key and window from ``initializer()``."""
        _check(initializer, "initializer")
        _check(aggregator, "aggregator")
        return self._aggregate(initializer, aggregator, materialized, "KSTREAM-AGGREGATE")

    def _aggregate(self, initializer: Callable[[], Any] | None,
                   aggregator: Callable[[Any, Any, Any], Any],
                   materialized: Materialized | None, prefix: str) -> KTable:
        g = self._grouped
        b = g._builder
        m = _materialized(materialized)
        store = g._store_name(m, f"{prefix}-STATE-STORE")
        key_serde = m.key_serde or g._key_serde
        value_serde = m.value_serde if initializer is not None else (
            m.value_serde or g._value_serde)
        name = b.next_name(prefix)
        source = g._input(store)
        windows = self._windows
        key_ser = serializer_of(key_serde)
        retention = windows.size_ms + windows.grace_ms
        b.add_store(StoreSpec(store, "window", lambda: InMemoryWindowStore(
            store, key_ser, windows.size_ms, retention)))
        old = OldValues(None)
        node = b.add_node(
            prefix,
            lambda: ap.WindowedAggregateProcessor(store, windows, initializer, aggregator, old),
            [source], name=name, stores=[store])
        info = WindowInfo(windows.grace_ms, _window_end)
        return KTable(b, node, key_serde, value_serde, old, info, store_name=store)


_window_end = operator.attrgetter("window.end")
"""Buffer time of a time-windowed key for final results: the window's exclusive end."""


class KGroupedTable(_Grouping):
    """A table re-grouped by a new key: every update subtracts the old row, adds the new one."""

    def __init__(self, builder: StreamsBuilder, node: GraphNode, key_serde: Serde[Any] | None,
                 value_serde: Serde[Any] | None, name: str | None) -> None:
        super().__init__(builder, node, key_serde, value_serde, True, name)

    def count(self, materialized: Materialized | None = None) -> KTable:
        """Count rows per new key."""
        return self.aggregate(_count_init, _count_add, _count_sub,
                              materialized=_with_default_value_serde(materialized))

    def reduce(self, adder: Callable[[Any, Any], Any], subtractor: Callable[[Any, Any], Any],
               materialized: Materialized | None = None) -> KTable:
        """Combine rows per new key: ``adder(agg, value)``, ``subtractor(agg, value)``."""
        _check(adder, "adder")
        _check(subtractor, "subtractor")
        m = _materialized(materialized)
        store = self._store_name(m, "KTABLE-REDUCE-STATE-STORE")
        old = OldValues(None)
        return self._table(m, store, "KTABLE-REDUCE", old, m.value_serde or self._value_serde,
                           lambda: ap.TableAggregateProcessor(
                               store, None, lambda k, v, agg: adder(agg, v),
                               lambda k, v, agg: subtractor(agg, v), old))

    def aggregate(self, initializer: Callable[[], Any], adder: Callable[[Any, Any, Any], Any],
                  subtractor: Callable[[Any, Any, Any], Any],
                  materialized: Materialized | None = None) -> KTable:
        """Fold rows per new key: ``adder(key, value, agg)``, ``subtractor(key, value, agg)``."""
        _check(initializer, "initializer")
        _check(adder, "adder")
        _check(subtractor, "subtractor")
        m = _materialized(materialized)
        store = self._store_name(m, "KTABLE-AGGREGATE-STATE-STORE")
        old = OldValues(None)
        return self._table(m, store, "KTABLE-AGGREGATE", old, m.value_serde,
                           lambda: ap.TableAggregateProcessor(store, initializer, adder,
                                                              subtractor, old))

    def _table(self, m: Materialized, store: str, prefix: str, old: OldValues,
               value_serde: Serde[Any] | None, factory: Callable[[], Any]) -> KTable:
        key_serde = m.key_serde or self._key_serde
        name = self._builder.next_name(prefix)
        source = self._input(store)
        self._builder.add_kv_store(store, key_serde)
        node = self._builder.add_node(prefix, factory, [source], name=name, stores=[store])
        return KTable(self._builder, node, key_serde, value_serde, old, store_name=store)
