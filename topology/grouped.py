"""Grouped streams and tables, and their (windowed) aggregations.

Every aggregation goes through one path, :meth:`_Grouping._aggregate`, which names things in
Kafka 3.9's order (its ``GroupedStreamAggregateBuilder`` and ``KGroupedTableImpl``):

* streams (grouped or windowed): the store (``<P>-STATE-STORE-<n>`` unless named), the
  processor (``<P>-<n+1>``), then, when the key changed upstream, the repartition topic's
  sink, filter and source (three numbers); ``count`` with a ``Materialized`` that names no
  store spends one number first, as Kafka still does;
* tables: the store (``KTABLE-AGGREGATE-STATE-STORE-<n>``, for ``reduce`` too), the
  repartition sink and source, then the processor.

A ``named=`` (Kafka's ``Named``) names the aggregation's processor instead (the number is
spent anyway); for tables it also names the repartition sink and source ``<name>-sink`` and
``<name>-source`` (``KGroupedTableImpl.doAggregate``).

The repartition topic is ``<Grouped name>-repartition``, else ``<store>-repartition``. With a
``Grouped`` name, later aggregations of the same grouping read the same topic (Kafka reuses
its repartition node, still spending the numbers of the names it would have made).
"""

from __future__ import annotations

import operator
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from .errors import TopologyError
from .options import K, Materialized, Named, V, checked_materialized, name_of
from .runtime.definitions import Aggregation
from .runtime.getters import KeyValueStoreGetter
from .runtime.graph import GraphNode
from .runtime.processor import InternalProcessor
from .runtime.processors import aggregate as ap
from .runtime.processors.session import SessionWindowAggregateProcessor
from .runtime.processors.sliding import SlidingWindowAggregateProcessor
from .runtime.processors.stateless import sink_definition
from .runtime.store_specs import session_store_spec, window_store_spec
from .serde import Serde, Serdes
from .table import KTable, OldValues, TableLookup, WindowInfo
from .windows import SessionWindows, SlidingWindows, TimeWindows, Windowed

if TYPE_CHECKING:
    from .builder import StreamsBuilder

__all__ = ("KGroupedStream", "KGroupedTable", "SessionWindowedKStream", "TimeWindowedKStream")

VA = TypeVar("VA")
"""An aggregate's type."""


def _check(fn: Any, what: str) -> None:
    if not callable(fn):
        raise TypeError(f"{what} must be callable, got {type(fn).__name__}")


def _materialized(m: Materialized | None) -> Materialized:
    m = checked_materialized(m)
    if m.is_versioned:
        raise TopologyError("aggregations keep their latest value: Materialized.versioned is "
                            "only for StreamsBuilder.table")
    return m


def _reducer_as_aggregator(reducer: Callable[[Any, Any], Any]) -> Callable[[Any, Any, Any], Any]:
    return lambda key, value, agg: reducer(agg, value)


AnyWindows = TimeWindows | SlidingWindows | SessionWindows


@dataclass(frozen=True)
class _Kind:
    """What differs between aggregations: names, value serde rule, functions, windows."""

    prefix: str
    """Processor name prefix, e.g. ``KSTREAM-AGGREGATE``."""
    store_prefix: str
    """Generated store names are ``<store_prefix>-STATE-STORE-<n>``."""
    value_serde: Callable[[Materialized, Serde[Any] | None], Serde[Any] | None]
    """``value_serde(materialized, input value serde)``: the result table's value serde."""
    grouped: str
    """``"stream"`` or ``"table"``."""
    initializer: Callable[[], Any] | None
    aggregator: Callable[[Any, Any, Any], Any]
    window: AnyWindows | None = None
    merger: Callable[[Any, Any, Any], Any] | None = None
    subtractor: Callable[[Any, Any, Any], Any] | None = None
    late_records_to: str | None = None
    """The topic of records dropped for closed windows (windowed aggregations only)."""


def _processor(definition: Aggregation, old: OldValues) -> InternalProcessor:
    """A fresh processor of the aggregation ``definition`` (its kind, functions and store)."""
    store, initializer, aggregator = definition.store, definition.initializer, definition.aggregator
    windows = definition.windows
    if definition.grouped == "table":
        assert definition.subtractor is not None
        return ap.TableAggregateProcessor(store, initializer, aggregator, definition.subtractor,
                                          old)
    if windows is None:
        return ap.StreamAggregateProcessor(store, initializer, aggregator, old)
    if isinstance(windows, SlidingWindows):
        assert initializer is not None
        return SlidingWindowAggregateProcessor(store, windows, initializer, aggregator, old)
    if isinstance(windows, SessionWindows):
        assert initializer is not None and definition.merger is not None
        return SessionWindowAggregateProcessor(store, windows, initializer, aggregator,
                                               definition.merger, old)
    return ap.WindowedAggregateProcessor(store, windows, initializer, aggregator, old)


def _count_serde(m: Materialized, _: Serde[Any] | None) -> Serde[Any] | None:
    return m.value_serde or Serdes.long()


def _reduce_serde(m: Materialized, value_serde: Serde[Any] | None) -> Serde[Any] | None:
    return m.value_serde or value_serde


def _aggregate_serde(m: Materialized, _: Serde[Any] | None) -> Serde[Any] | None:
    return m.value_serde


_window_end = operator.attrgetter("window.end")
"""Buffer time of a time-windowed key for final results: the window's exclusive end."""


def _inclusive_window_end(windowed: Any) -> int:
    """Buffer time of a sliding or session window's key: its exclusive end (end + 1)."""
    end: int = windowed.window.end
    return end + 1


class _Grouping(ABC):
    """A grouped stream or table: where records come from, and aggregating them.

    Subclasses say how an aggregation is wired in (:meth:`_wire`).
    """

    def __init__(self, builder: StreamsBuilder, node: GraphNode, key_serde: Serde[Any] | None,
                 value_serde: Serde[Any] | None, repartition: bool, name: str | None) -> None:
        self._builder = builder
        self._node = node
        self._key_serde = key_serde
        self._value_serde = value_serde
        self._repartition = repartition
        self._name = name
        self._reused: GraphNode | None = None
        """With a ``Grouped`` name: the source of the repartition topic, made once."""

    @abstractmethod
    def _wire(self, store: str, prefix: str, name: str | None) -> tuple[GraphNode, str]:
        """The node an aggregation with ``store`` reads from, and the aggregation's name.

        ``name``: the name a ``Named`` gave the aggregation, if any.
        """

    def _repartitioned(self, make: Callable[[], GraphNode]) -> GraphNode:
        """``make()``'s repartition source, or with a ``Grouped`` name the one made first."""
        if self._reused is not None:
            return self._reused
        source = make()
        if self._name is not None:
            self._reused = source
        return source

    def _aggregate(self, kind: _Kind, materialized: Materialized | None,
                   count_with_materialized: bool = False,
                   named: Named | None = None) -> KTable[Any, Any]:
        """Add the store, the repartition topic if needed and the processor of ``kind``.

        ``count_with_materialized``: a stream ``count`` given a ``Materialized`` without a
        store name spends one extra number first (Kafka keeps that for compatibility).
        ``named`` names the processor (and a table's repartition nodes).
        """
        given = name_of(named)
        m = _materialized(materialized)
        b = self._builder
        if count_with_materialized and m.name is None:
            b.next_name(f"{kind.store_prefix}-STATE-STORE")
        store = m.name or b.next_name(f"{kind.store_prefix}-STATE-STORE")
        key_serde = m.key_serde or self._key_serde
        source, name = self._wire(store, kind.prefix, given)
        window = kind.window
        if window is None:
            b.add_kv_store(store, key_serde, m.persistence)
            info = None
        else:
            info = _add_window_store(b, store, key_serde, window, m.persistence)
        old = OldValues()
        late_sink: list[str] = []  # the sink's name, known once it is added below

        def factory() -> InternalProcessor:
            proc = _processor(definition, old)
            if late_sink:
                proc.late_sink = late_sink[0]  # type: ignore[attr-defined]
            return proc

        definition = Aggregation(
            create=factory, grouped=kind.grouped, windows=window, initializer=kind.initializer,
            aggregator=kind.aggregator, store=store, merger=kind.merger,
            subtractor=kind.subtractor, late_records_to=kind.late_records_to)
        node = b.add_node(kind.prefix, definition, [source], name=name, stores=[store])
        if info is not None:
            info = replace(info, aggregation=node.name)
        if kind.late_records_to is not None:
            topic = kind.late_records_to
            late_sink.append(b.add_node(
                "KSTREAM-SINK", sink_definition(topic, self._key_serde, self._value_serde),
                [node],
                kind="sink", topics=(topic,)).name)
        lookup = None if window is not None else (lambda: TableLookup(
            lambda task: KeyValueStoreGetter(task.stores[store]), (store,)))
        return KTable(b, node, key_serde, kind.value_serde(m, self._value_serde), old, info,
                      store_name=store, lookup=lookup)


def _add_window_store(b: StreamsBuilder, store: str, key_serde: Serde[Any] | None,
                      window: AnyWindows, persistence: bool | None) -> WindowInfo:
    """Add the store of a windowed aggregation; its table's close delay and buffer time.

    Sessions: a session store keeping ``gap + grace + 1`` ms past a session's end (Kafka:
    ``gap + grace``), so it never expires an open session. Time windows: size ``size``,
    retention ``size + grace``. Sliding windows: a window store
    of size ``d`` keeping ``3d + grace + 2`` ms: an accepted record has ``t >= T - grace - d``
    and looks back to ``t - 2d``, while the store's newest window may start at ``T + 1``.
    (Kafka keeps ``2d + grace``, which for ``d < 2`` lets an open window expire.)
    """
    if isinstance(window, TimeWindows):
        size, retention = window.size_ms, window.size_ms + window.grace_ms
        info = WindowInfo(window.grace_ms, _window_end, time_windows=True)
    elif isinstance(window, SlidingWindows):
        size = window.time_difference_ms
        retention = 3 * size + window.grace_ms + 2
        info = WindowInfo(window.grace_ms, _inclusive_window_end, own_ends=True)
    else:
        b.add_store(session_store_spec(store, key_serde, window.gap_ms + window.grace_ms + 1,
                                       persistence))
        return WindowInfo(window.gap_ms + window.grace_ms, _inclusive_window_end, session=True,
                          own_ends=True)

    b.add_store(window_store_spec(store, key_serde, size, retention, persistence))
    return info


def _stream_kind(prefix: str, value_serde: Callable[..., Serde[Any] | None],
                 initializer: Callable[[], Any] | None, aggregator: Callable[[Any, Any, Any], Any],
                 windows: TimeWindows | SlidingWindows | None,
                 late_records_to: str | None = None) -> _Kind:
    """A grouped-stream aggregation; ``initializer`` None for ``reduce``.

    In sliding windows a ``reduce`` starts from ``None`` (the first value starts it).
    """
    if isinstance(windows, SlidingWindows) and initializer is None:
        initializer, aggregator = _none, _reducing(aggregator)
    return _Kind(prefix, prefix, value_serde, "stream", initializer, aggregator, windows,
                 late_records_to=late_records_to)


def _none() -> None:
    return None


def _reducing(aggregator: Callable[[Any, Any, Any], Any]) -> Callable[[Any, Any, Any], Any]:
    """A reduce as an aggregate from ``None``: the first value starts it (Kafka's shape)."""

    def aggregate(key: Any, value: Any, agg: Any) -> Any:
        return value if agg is None else aggregator(key, value, agg)

    return aggregate


def _late_topic(topic: str | None) -> str | None:
    if topic is not None and (not isinstance(topic, str) or not topic):
        raise TopologyError(f"late_records_to must be a non-empty topic name, got {topic!r}")
    return topic


class _StreamAggregations(Generic[K, V]):
    """``count``, ``reduce`` and ``aggregate`` of a grouped stream."""

    _grouping: KGroupedStream[K, V]

    def count(self, materialized: Materialized | None = None, *,
              named: Named | None = None) -> KTable[K, int]:
        """Count records per key; ``None`` keys are dropped and counted.

        As Kafka's ``count(Materialized)``, a ``materialized`` that names no store spends
        one generated number more than ``count()``.

        :param named: a :class:`~topology.Named` giving the processor's name (Kafka's
            ``Named``); without it ``KSTREAM-AGGREGATE-<n>``.
        """
        kind = _stream_kind("KSTREAM-AGGREGATE", _count_serde, ap.count_initializer,
                            ap.count_adder, None)
        return self._grouping._aggregate(kind, materialized, materialized is not None, named)

    def reduce(self, reducer: Callable[[V, V], V],
               materialized: Materialized | None = None, *,
               named: Named | None = None) -> KTable[K, V]:
        """Combine values per key with ``reducer(agg, value)``.

        The first value of a key starts its aggregate.

        :param named: a :class:`~topology.Named` giving the processor's name (Kafka's
            ``Named``); without it ``KSTREAM-REDUCE-<n>``.
        """
        _check(reducer, "reducer")
        kind = _stream_kind("KSTREAM-REDUCE", _reduce_serde, None,
                            _reducer_as_aggregator(reducer), None)
        return self._grouping._aggregate(kind, materialized, named=named)

    def aggregate(self, initializer: Callable[[], VA],
                  aggregator: Callable[[K, V, VA], VA],
                  materialized: Materialized | None = None, *,
                  named: Named | None = None) -> KTable[K, VA]:
        """Fold values per key: ``agg = aggregator(key, value, agg)``.

        Each aggregate starts from ``initializer()``.

        :param named: a :class:`~topology.Named` giving the processor's name (Kafka's
            ``Named``); without it ``KSTREAM-AGGREGATE-<n>``.
        """
        _check(initializer, "initializer")
        _check(aggregator, "aggregator")
        kind = _stream_kind("KSTREAM-AGGREGATE", _aggregate_serde, initializer, aggregator,
                            None)
        return self._grouping._aggregate(kind, materialized, named=named)


class KGroupedStream(_Grouping, _StreamAggregations[K, V]):
    """A stream grouped by key: aggregate it into a table, or window it first.

    Generic in the key and value types (``KGroupedStream[str, int]``), for type checkers only.
    """

    def __init__(self, builder: StreamsBuilder, node: GraphNode, key_serde: Serde[Any] | None,
                 value_serde: Serde[Any] | None, repartition: bool, name: str | None) -> None:
        super().__init__(builder, node, key_serde, value_serde, repartition, name)
        self._grouping = self

    def _wire(self, store: str, prefix: str, name: str | None) -> tuple[GraphNode, str]:
        """Processor name first, then the repartition topic if the key changed upstream."""
        b = self._builder
        name = b.given_or_next(prefix, name)
        if not self._repartition:
            return self._node, name
        if self._reused is not None:  # a reused topic still spends its three numbers
            for spent in ("KSTREAM-SINK", "KSTREAM-FILTER", "KSTREAM-SOURCE"):
                b.next_name(spent)
        source = self._repartitioned(
            lambda: b.add_stream_repartition(self._node, self._name or store))
        return source, name

    @overload
    def windowed_by(self, windows: TimeWindows | SlidingWindows
                    ) -> TimeWindowedKStream[K, V]: ...

    @overload
    def windowed_by(self, windows: SessionWindows) -> SessionWindowedKStream[K, V]: ...

    def windowed_by(self, windows: AnyWindows
                    ) -> TimeWindowedKStream[K, V] | SessionWindowedKStream[K, V]:
        """Aggregate per key and window: time (tumbling, hopping), sliding or session.

        :raises TopologyError: for anything that is not a window definition.
        """
        if isinstance(windows, TimeWindows | SlidingWindows):
            return TimeWindowedKStream(self, windows)
        if isinstance(windows, SessionWindows):
            return SessionWindowedKStream(self, windows)
        raise TopologyError("windowed_by() needs TimeWindows, SlidingWindows or SessionWindows, "
                            f"got {type(windows).__name__}")


class TimeWindowedKStream(Generic[K, V]):
    """A grouped stream cut into time or sliding windows: ``count``, ``reduce``, ``aggregate``.

    The result is a table keyed by ``Windowed(key, Window(start, end))`` (time windows:
    ``end`` exclusive; sliding windows: ``end = start + time difference``, inclusive). It
    shares the grouping's repartition topic when the grouping has a name.

    Each operation takes ``late_records_to``: a topic that receives every record the
    aggregation drops because its window closed (once per record and closed window, the
    record as it arrived, with headers ``late.reason``, ``late.window.start``,
    ``late.window.end`` and ``late.stream.time``). Such records are counted in
    ``dropped-records-total`` either way.
    """

    def __init__(self, grouped: KGroupedStream[K, V],
                 windows: TimeWindows | SlidingWindows) -> None:
        self._grouping = grouped
        self._windows = windows

    def count(self, materialized: Materialized | None = None, *,
              late_records_to: str | None = None,
              named: Named | None = None) -> KTable[Windowed[K], int]:
        """Count records per key and window; ``None`` keys are dropped and counted.

        As Kafka's ``count(Materialized)``, a ``materialized`` that names no store spends
        one generated number more than ``count()`` (not for sliding windows, as in Kafka).

        :param named: a :class:`~topology.Named` giving the processor's name (Kafka's
            ``Named``); without it ``KSTREAM-AGGREGATE-<n>`` (``KSTREAM-REDUCE-<n>``).
        :raises TopologyError: for an empty ``late_records_to``.
        """
        kind = _stream_kind("KSTREAM-AGGREGATE", _count_serde, ap.count_initializer, ap.count_adder,
                            self._windows, _late_topic(late_records_to))
        # Kafka's TimeWindowedKStreamImpl.count(Named, Materialized) spends a number for an
        # unnamed store; SlidingWindowedKStreamImpl's does not
        extra = materialized is not None and not isinstance(self._windows, SlidingWindows)
        return self._grouping._aggregate(kind, materialized, extra, named)

    def reduce(self, reducer: Callable[[V, V], V],
               materialized: Materialized | None = None, *,
               late_records_to: str | None = None,
               named: Named | None = None) -> KTable[Windowed[K], V]:
        """Combine values per key and window with ``reducer(agg, value)``.

        The first value of a window starts its aggregate.

        :param named: a :class:`~topology.Named` giving the processor's name (Kafka's
            ``Named``); without it ``KSTREAM-AGGREGATE-<n>`` (``KSTREAM-REDUCE-<n>``).
        :raises TopologyError: for an empty ``late_records_to``.
        """
        _check(reducer, "reducer")
        kind = _stream_kind("KSTREAM-REDUCE", _reduce_serde, None,
                            _reducer_as_aggregator(reducer), self._windows,
                            _late_topic(late_records_to))
        return self._grouping._aggregate(kind, materialized, named=named)

    def aggregate(self, initializer: Callable[[], VA],
                  aggregator: Callable[[K, V, VA], VA],
                  materialized: Materialized | None = None, *,
                  late_records_to: str | None = None,
                  named: Named | None = None) -> KTable[Windowed[K], VA]:
        """Fold values per key and window: ``agg = aggregator(key, value, agg)``.

        Each window's aggregate starts from ``initializer()``.

        :param named: a :class:`~topology.Named` giving the processor's name (Kafka's
            ``Named``); without it ``KSTREAM-AGGREGATE-<n>`` (``KSTREAM-REDUCE-<n>``).
        :raises TopologyError: for an empty ``late_records_to``.
        """
        _check(initializer, "initializer")
        _check(aggregator, "aggregator")
        kind = _stream_kind("KSTREAM-AGGREGATE", _aggregate_serde, initializer, aggregator,
                            self._windows, _late_topic(late_records_to))
        return self._grouping._aggregate(kind, materialized, named=named)


class SessionWindowedKStream(Generic[K, V]):
    """A grouped stream cut into sessions: ``count``, ``reduce``, ``aggregate`` (with a merger).

    The result is a table keyed by ``Windowed(key, Window(start, end))``, both ends
    inclusive (serialized as Kafka's session keys: key, end, start). Records ``gap`` ms apart
    or closer fall into one session; a record bridging two open sessions merges them (the
    old sessions are deleted: their tombstones go downstream, then the merged session).
    ``late_records_to`` works as for :class:`TimeWindowedKStream`.
    """

    def __init__(self, grouped: KGroupedStream[K, V], windows: SessionWindows) -> None:
        self._grouping = grouped
        self._windows = windows

    def _kind(self, prefix: str, value_serde: Callable[..., Serde[Any] | None],
              initializer: Callable[[], Any], aggregator: Callable[[Any, Any, Any], Any],
              merger: Callable[[Any, Any, Any], Any], late_records_to: str | None) -> _Kind:
        return _Kind(prefix, prefix, value_serde, "stream", initializer, aggregator,
                     self._windows, merger, late_records_to=_late_topic(late_records_to))

    def count(self, materialized: Materialized | None = None, *,
              late_records_to: str | None = None,
              named: Named | None = None) -> KTable[Windowed[K], int]:
        """Count records per session; ``None`` keys are dropped and counted.

        :param named: a :class:`~topology.Named` giving the processor's name (Kafka's
            ``Named``); without it ``KSTREAM-AGGREGATE-<n>`` (``KSTREAM-REDUCE-<n>``).
        :raises TopologyError: for an empty ``late_records_to``.
        """
        kind = self._kind("KSTREAM-AGGREGATE", _count_serde, ap.count_initializer, ap.count_adder,
                          _add_counts, late_records_to)
        return self._grouping._aggregate(kind, materialized, materialized is not None, named)

    def reduce(self, reducer: Callable[[V, V], V],
               materialized: Materialized | None = None, *,
               late_records_to: str | None = None,
               named: Named | None = None) -> KTable[Windowed[K], V]:
        """Combine values per session with ``reducer(agg, value)``; merged sessions too.

        Merging sessions reduces their aggregates: ``reducer(agg1, agg2)``.

        :param named: a :class:`~topology.Named` giving the processor's name (Kafka's
            ``Named``); without it ``KSTREAM-AGGREGATE-<n>`` (``KSTREAM-REDUCE-<n>``).
        :raises TopologyError: for an empty ``late_records_to``.
        """
        _check(reducer, "reducer")
        aggregator = _reducing(_reducer_as_aggregator(reducer))

        def merger(key: Any, agg1: Any, agg2: Any) -> Any:
            return aggregator(key, agg2, agg1)

        kind = self._kind("KSTREAM-REDUCE", _reduce_serde, _none, aggregator, merger,
                          late_records_to)
        return self._grouping._aggregate(kind, materialized, named=named)

    def aggregate(self, initializer: Callable[[], VA],
                  aggregator: Callable[[K, V, VA], VA],
                  merger: Callable[[K, VA, VA], VA],
                  materialized: Materialized | None = None, *,
                  late_records_to: str | None = None,
                  named: Named | None = None) -> KTable[Windowed[K], VA]:
        """Fold values per session: ``aggregator(key, value, agg)``; ``merger(key, a1, a2)``.

        A new session starts from ``initializer()``; sessions merged by a record are
        combined with ``merger`` (starting from ``initializer()``) before the record is
        added.

        :param named: a :class:`~topology.Named` giving the processor's name (Kafka's
            ``Named``); without it ``KSTREAM-AGGREGATE-<n>`` (``KSTREAM-REDUCE-<n>``).
        :raises TopologyError: for an empty ``late_records_to``.
        """
        _check(initializer, "initializer")
        _check(aggregator, "aggregator")
        _check(merger, "merger")
        kind = self._kind("KSTREAM-AGGREGATE", _aggregate_serde, initializer, aggregator,
                          merger, late_records_to)
        return self._grouping._aggregate(kind, materialized, named=named)


def _add_counts(key: Any, agg1: int, agg2: int) -> int:
    return agg1 + agg2


class KGroupedTable(_Grouping, Generic[K, V]):
    """A table re-grouped by a new key: every update subtracts the old row, adds the new one.

    Generic in the new key and value types (``KGroupedTable[str, int]``), for type checkers
    only.
    """

    def __init__(self, builder: StreamsBuilder, node: GraphNode, key_serde: Serde[Any] | None,
                 value_serde: Serde[Any] | None, name: str | None) -> None:
        super().__init__(builder, node, key_serde, value_serde, True, name)

    def _wire(self, store: str, prefix: str, name: str | None) -> tuple[GraphNode, str]:
        """Repartition sink and source names, then the processor name, then the topic."""
        b = self._builder
        sink = b.suffixed_or_next("KSTREAM-SINK", name, "-sink")
        source = b.suffixed_or_next("KSTREAM-SOURCE", name, "-source")
        name = b.given_or_next(prefix, name)
        topic = f"{self._name or store}-repartition"
        return self._repartitioned(
            lambda: b.add_table_repartition(self._node, topic, sink, source)), name

    def count(self, materialized: Materialized | None = None, *,
              named: Named | None = None) -> KTable[K, int]:
        """Count rows per new key.

        :param named: a :class:`~topology.Named` giving the processor's name (Kafka's
            ``Named``; its repartition sink and source are then ``<name>-sink`` and
            ``<name>-source``); without it ``KTABLE-AGGREGATE-<n>``.
        """
        return self._table_aggregate("KTABLE-AGGREGATE", _count_serde, materialized,
                                     ap.count_initializer, ap.count_adder, ap.count_subtractor,
                                     named)

    def reduce(self, adder: Callable[[V, V], V], subtractor: Callable[[V, V], V],
               materialized: Materialized | None = None, *,
               named: Named | None = None) -> KTable[K, V]:
        """Combine rows per new key: ``adder(agg, value)``, ``subtractor(agg, value)``.

        :param named: a :class:`~topology.Named` giving the processor's name (Kafka's
            ``Named``; its repartition sink and source are then ``<name>-sink`` and
            ``<name>-source``); without it ``KTABLE-REDUCE-<n>``.
        """
        _check(adder, "adder")
        _check(subtractor, "subtractor")
        kind = _Kind("KTABLE-REDUCE", "KTABLE-AGGREGATE", _reduce_serde, "table", None,
                     lambda k, v, agg: adder(agg, v),
                     subtractor=lambda k, v, agg: subtractor(agg, v))
        return self._aggregate(kind, materialized, named=named)

    def aggregate(self, initializer: Callable[[], VA], adder: Callable[[K, V, VA], VA],
                  subtractor: Callable[[K, V, VA], VA],
                  materialized: Materialized | None = None, *,
                  named: Named | None = None) -> KTable[K, VA]:
        """Fold rows per new key: ``adder(key, value, agg)``, ``subtractor(key, value, agg)``.

        :param named: a :class:`~topology.Named` giving the processor's name (Kafka's
            ``Named``; its repartition sink and source are then ``<name>-sink`` and
            ``<name>-source``); without it ``KTABLE-AGGREGATE-<n>``.
        """
        _check(initializer, "initializer")
        _check(adder, "adder")
        _check(subtractor, "subtractor")
        return self._table_aggregate("KTABLE-AGGREGATE", _aggregate_serde, materialized,
                                     initializer, adder, subtractor, named)

    def _table_aggregate(self, prefix: str, value_serde: Callable[..., Serde[Any] | None],
                         materialized: Materialized | None, initializer: Callable[[], Any],
                         adder: Callable[[Any, Any, Any], Any],
                         subtractor: Callable[[Any, Any, Any], Any],
                         named: Named | None) -> KTable[Any, Any]:
        kind = _Kind(prefix, prefix, value_serde, "table", initializer, adder,
                     subtractor=subtractor)
        return self._aggregate(kind, materialized, named=named)
