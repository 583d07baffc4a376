"""``KTable``: a changelog-table handle (latest value per key) and ``suppress``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from suppress.config import Suppressed

from .errors import TopologyError
from .options import Grouped, K, Materialized, Named, V, checked_materialized, name_of
from .runtime.definitions import (
    Definition,
    Suppression,
    TableRegroup,
    TableStep,
    ToStream,
)
from .runtime.getters import (
    FilterGetter,
    GetterFactory,
    JoinGetter,
    KeyValueStoreGetter,
    MapValuesGetter,
    SuppressGetter,
    ValueGetter,
)
from .runtime.graph import GraphNode
from .runtime.processors import table as tp
from .runtime.processors.join import TableJoinMerger, TableJoinProcessor
from .runtime.processors.suppress import SuppressNodeProcessor
from .serde import Serde, fallback_value_bytes, serializer_of, windowed_serializer

if TYPE_CHECKING:
    from .builder import StreamsBuilder
    from .grouped import KGroupedTable
    from .runtime.task import Task
    from .stream import KStream

__all__ = ("Flag", "KTable", "OldValues", "TableLookup", "WindowInfo")

KR = TypeVar("KR")
VR = TypeVar("VR")
VO = TypeVar("VO")


class Flag:
    """A switch set while the topology is defined and read once by each task."""

    __slots__ = ("enabled",)

    def __init__(self) -> None:
        self.enabled = False

    def enable(self) -> None:
        """Set the flag."""
        self.enabled = True


class OldValues(Flag):
    """Whether a table node must compute old values; enabling it enables its upstream too.

    Called with no arguments by the processors (once, at task start) to read the flag.
    """

    __slots__ = ("_upstream",)

    def __init__(self, *upstream: OldValues) -> None:
        super().__init__()
        self._upstream = upstream

    def enable(self) -> None:
        """Ask this node (and the nodes it reads from) to send old values."""
        self.enabled = True
        for parent in self._upstream:
            parent.enable()

    def __call__(self) -> bool:
        """Whether old values are needed."""
        return self.enabled


@dataclass(frozen=True)
class TableLookup:
    """How a join reads a table: a getter factory and the stores it reads (for describe())."""

    getter: GetterFactory
    stores: tuple[str, ...]


_JOIN_MODES = {"inner": ("inner", "inner"), "left": ("left", "right"), "outer": ("outer", "outer")}
"""Join kind -> the modes of this side's processor and the other's."""


@dataclass(frozen=True)
class WindowInfo:
    """What a windowed table knows of its windows: close delay and buffer-time rule.

    ``delay_ms`` is D of the close rule (grace; sessions: grace + gap); ``buffer_time`` maps a
    windowed key to its exclusive end.
    """

    delay_ms: int
    buffer_time: Callable[[Any], int]
    session: bool = False
    time_windows: bool = False
    """Time windows (tumbling, hopping): one window per exclusive end, so a final-results
    buffer keeps their keys by window."""
    own_ends: bool = False
    """Sliding and session windows, whose ends are nearly all distinct: a final-results
    buffer keeps their keys in one heap."""
    aggregation: str | None = None
    """The name of the windowed aggregation node (idle close moves its stream time too)."""


class KTable(Generic[K, V]):
    """A table: for each key, its latest value. Updates flow as ``Change(new, old)``.

    Generic in the key and value types (``KTable[str, int]``; a windowed aggregation's keys
    are ``Windowed[K]``), for type checkers only, as :class:`~topology.KStream`.
    """

    def __init__(self, builder: StreamsBuilder, node: GraphNode, key_serde: Serde[Any] | None,
                 value_serde: Serde[Any] | None, old_values: OldValues,
                 window: WindowInfo | None = None, store_name: str | None = None,
                 lookup: Callable[[], TableLookup] | None = None,
                 history_retention_ms: int | None = None) -> None:
        self._builder = builder
        self._node = node
        self._key_serde = key_serde
        self._value_serde = value_serde
        self._old_values = old_values
        self._window = window
        self._lookup = lookup
        self._history_retention_ms = history_retention_ms
        self.store_name = store_name
        """Name of the store holding this table, or ``None`` if it is not materialized."""

    @property
    def is_versioned(self) -> bool:
        """Whether this table reads a versioned store (joins look it up as of a time)."""
        return self._history_retention_ms is not None

    def _derive(self, prefix: str, definition: Definition, old: OldValues,
                value_serde: Serde[Any] | None, name: str | None = None, *,
                named: Named | None = None,
                stores: list[str] | None = None,
                lookup: Callable[[], TableLookup] | None = None,
                history_retention_ms: int | None = None) -> KTable[Any, Any]:
        b = self._builder
        if name is None:  # NamedInternal.orElseGenerateWithPrefix: a number spent either way
            name = b.given_or_next(prefix, name_of(named))
        node = b.add_node(prefix, definition, [self._node], name=name, stores=stores)
        return KTable(self._builder, node, self._key_serde, value_serde, old, self._window,
                      lookup=lookup, history_retention_ms=history_retention_ms)

    def _derived_lookup(self, wrap: Callable[[ValueGetter], ValueGetter]
                        ) -> Callable[[], TableLookup] | None:
        """The lookup of a table computed from this one by ``wrap`` around its getter."""
        parent = self._lookup
        if parent is None:
            return None

        def lookup() -> TableLookup:
            inner = parent()
            return TableLookup(lambda task: wrap(inner.getter(task)), inner.stores)

        return lookup

    def looked_up(self, what: str) -> TableLookup:
        """How ``what`` (a join) reads this table; materializes it if needed.

        :raises TopologyError: for a windowed table.
        """
        if self._lookup is None:
            raise TopologyError(f"{what}: table [{self._node.name}] cannot be looked up: "
                                "joins on windowed tables are not supported")
        return self._lookup()

    def filter(self, predicate: Callable[[K, V], bool], *,
               named: Named | None = None) -> KTable[K, V]:
        """Keep rows for which ``predicate(key, value)`` holds; others become deletes.

        :param named: a :class:`~topology.Named` giving the processor's name (Kafka's
            ``Named``); without it ``KTABLE-FILTER-<n>``.
        """
        if not callable(predicate):
            raise TypeError("filter predicate must be callable")
        return self._filter(predicate, False, named)

    def _filter(self, predicate: Callable[[K, V], bool], negate: bool,
                named: Named | None) -> KTable[K, V]:
        old = OldValues(self._old_values)
        versioned = self.is_versioned

        def keep(key: K, value: V) -> bool:
            return bool(predicate(key, value)) is not negate

        return self._derive("KTABLE-FILTER", TableStep(
                            create=lambda: tp.TableFilterProcessor(predicate, negate, old,
                                                                   versioned),
                            operation="filter_not" if negate else "filter"),
                            old, self._value_serde, named=named,
                            lookup=self._derived_lookup(lambda g: FilterGetter(g, keep)),
                            history_retention_ms=self._history_retention_ms)

    def filter_not(self, predicate: Callable[[K, V], bool], *,
                   named: Named | None = None) -> KTable[K, V]:
        """Drop rows for which ``predicate(key, value)`` holds (they become deletes).

        :param named: a :class:`~topology.Named` giving the processor's name (Kafka's
            ``Named``); without it ``KTABLE-FILTER-<n>``.
        """
        if not callable(predicate):
            raise TypeError("filter_not predicate must be callable")
        return self._filter(predicate, True, named)

    def map_values(self, mapper: Callable[[V], VR], *,
                   named: Named | None = None) -> KTable[K, VR]:
        """Map each value with ``mapper(value)``; deletes stay deletes.

        :param named: a :class:`~topology.Named` giving the processor's name (Kafka's
            ``Named``); without it ``KTABLE-MAPVALUES-<n>``.
        """
        if not callable(mapper):
            raise TypeError("map_values mapper must be callable")
        old = OldValues(self._old_values)
        return self._derive("KTABLE-MAPVALUES", TableStep(
                            create=lambda: tp.TableMapValuesProcessor(mapper, old),
                            operation="map_values"),
                            old, None, named=named,
                            lookup=self._derived_lookup(lambda g: MapValuesGetter(g, mapper)),
                            history_retention_ms=self._history_retention_ms)

    def to_stream(self, *, named: Named | None = None) -> KStream[K, V]:
        """The stream of this table's updates: each change's new value (``None`` = delete).

        :param named: a :class:`~topology.Named` giving the processor's name (Kafka's
            ``Named``); without it ``KTABLE-TOSTREAM-<n>``.
        """
        b = self._builder
        node = b.add_node("KTABLE-TOSTREAM", ToStream(create=tp.ToStreamProcessor), [self._node],
                          name=b.given_or_next("KTABLE-TOSTREAM", name_of(named)))
        return b.stream_below(node, self._key_serde, self._value_serde)

    def suppress(self, suppressed: Suppressed) -> KTable[K, V]:
        """Hold back updates as ``suppressed`` says (final results or a time limit).

        ``Suppressed.until_window_closes`` needs a windowed table: its delay is the grace
        period of the windowed aggregation upstream.

        Names as Kafka: the node is ``suppressed.name`` or ``KTABLE-SUPPRESS-<n>``, its buffer
        store ``<name>-store`` or ``KTABLE-SUPPRESS-STATE-STORE-<n+1>`` (read it with
        ``driver.get_state_store``). The buffer is logged, so the driver lists its changelog
        topic once a record reached it.

        A join reading a suppressed table sees, for a key still buffered, the value the
        suppression last emitted (nothing if it never emitted the key); for other keys, the
        upstream table's value.

        :raises TopologyError: for final results on a table that is not windowed, a
            versioned table (its out-of-order updates cannot be suppressed meaningfully, as in
            Kafka), or a store name already taken.
        :raises TypeError: if ``suppressed`` is not a :class:`~suppress.Suppressed`.
        """
        if not isinstance(suppressed, Suppressed):
            raise TypeError(f"suppress() needs a Suppressed, got {type(suppressed).__name__}")
        if self.is_versioned:
            raise TopologyError(
                f"suppress() is not supported on a versioned table: [{self._node.name}] reads "
                "a versioned store (Materialized.versioned); materialize it in a plain store "
                "or suppress a table that is not versioned")
        name = suppressed.name or self._builder.next_name("KTABLE-SUPPRESS")
        window = self._window
        if suppressed.final_results:
            if window is None:
                raise TopologyError(
                    "Window close time is only defined for windowed computations. Got "
                    f"[{self._node.name}], which is not downstream of a windowed aggregation"
                )
            delay = window.delay_ms
            buffer_time: Callable[[Any], int] | None = window.buffer_time
            upstream = window.aggregation
        else:
            assert suppressed.time_limit_ms is not None
            delay = suppressed.time_limit_ms
            buffer_time = None
            upstream = None
        if window is None:
            key_ser = serializer_of(self._key_serde)
        else:
            key_ser = windowed_serializer(self._key_serde, window.session)
        value_ser = serializer_of(self._value_serde, fallback_value_bytes)
        if suppressed.name is None:
            store = self._builder.next_name("KTABLE-SUPPRESS-STATE-STORE")
        else:
            store = f"{suppressed.name}-store"
        self._builder.reserve_store_name(store)
        self._old_values.enable()
        return self._derive(
            "KTABLE-SUPPRESS",
            Suppression(create=lambda: SuppressNodeProcessor(
                            suppressed, delay, key_ser, value_ser, buffer_time, store, upstream,
                            time_windows=(suppressed.final_results and window is not None
                                          and window.time_windows),
                            own_ends=(suppressed.final_results and window is not None
                                      and window.own_ends)),
                        suppressed=suppressed, delay_ms=delay, store=store,
                        key_serializer=key_ser, value_serializer=value_ser,
                        buffer_time=buffer_time),
            OldValues(self._old_values), self._value_serde, name=name, stores=[store],
            lookup=self._suppressed_lookup(name, store),
        )

    def _suppressed_lookup(self, name: str, store: str) -> Callable[[], TableLookup] | None:
        """The lookup of suppression ``name`` (buffer ``store``) below this table."""
        parent = self._lookup
        if parent is None:
            return None

        def lookup() -> TableLookup:
            inner = parent()

            def getter(task: Task) -> ValueGetter:
                return SuppressGetter(inner.getter(task), task.suppression_lookup(name))

            return TableLookup(getter, (store, *inner.stores))

        return lookup

    def group_by(self, selector: Callable[[K, V], tuple[KR, VR]],
                 grouped: Grouped[Any, Any] | None = None) -> KGroupedTable[KR, VR]:
        """Re-group rows by ``selector(key, value) -> (new_key, new_value)``.

        Each update subtracts the old row's pair and adds the new one downstream (Kafka's
        ``KTableRepartitionMap``): the selector is applied to the new value and to the old
        one (never to ``None``); when both pairs have the same key, one change carries both;
        otherwise the old pair's subtraction goes first, then the new pair's addition. A pair
        whose key or value is ``None``, or a selector returning ``None`` instead of a pair,
        is skipped: an old pair like that was never added, so nothing is subtracted; a new
        pair like that is counted in ``dropped-records-total`` (reason ``null-key`` or
        ``null-value``), where Kafka skips it without counting.

        The selecting node is called ``grouped.name`` when given (a number is spent anyway),
        else ``KTABLE-SELECT-<n>``.
        """
        if not callable(selector):
            raise TypeError("group_by selector must be callable")
        grouped = grouped or Grouped()
        self._old_values.enable()
        name = self._builder.given_or_next("KTABLE-SELECT", grouped.name)
        node = self._builder.add_node(
            "KTABLE-SELECT", TableRegroup(create=lambda: tp.TableRepartitionMapProcessor(selector)),
            [self._node], name=name)
        return self._builder.grouped_table_below(node, grouped.key_serde, grouped.value_serde,
                                                 grouped.name)

    # -- table-table joins ---------------------------------------------------------------------

    def join(self, other: KTable[K, VO], joiner: Callable[[V, VO], VR],
             materialized: Materialized | None = None, *,
             named: Named | None = None) -> KTable[K, VR]:
        """Inner join with ``other`` on the key: ``joiner(this_value, other_value)``.

        An update of either side reads the other side's current value (a versioned side: its
        latest) and, while both have one, updates the result; a delete of either side deletes
        it. The result's timestamp is the later of the two sides'. Out-of-order updates of a
        versioned side are dropped and counted (``dropped-records-total``, reason
        ``out-of-order-update``). ``materialized`` stores the result, in its named store or,
        without a name, in ``KTABLE-MERGE-STATE-STORE-<n>`` (as Kafka).

        Names as Kafka (``KTableImpl.doJoin``): ``KTABLE-MERGE-<n>``, ``KTABLE-JOINTHIS-<n+1>``,
        ``KTABLE-JOINOTHER-<n+2>``, for every kind of join.

        :param named: a :class:`~topology.Named` giving the processors' names (Kafka's
            ``Named``): ``<name>`` for the merge, ``<name>-join-this`` and
            ``<name>-join-other`` for the two sides (numbers are spent anyway).

        :raises TypeError: for a non-table ``other``, a non-callable joiner or a bad
            ``materialized``.
        :raises TopologyError: for a windowed table on either side.
        """
        return self._table_join(other, joiner, "inner", materialized, named)

    def left_join(self, other: KTable[K, VO], joiner: Callable[[V, VO | None], VR],
                  materialized: Materialized | None = None, *,
                  named: Named | None = None) -> KTable[K, VR]:
        """Left join with ``other``: every key of this table, ``other_value`` ``None`` if absent.

        As :meth:`join` (names and ``named`` included), except that this side's value alone
        gives a result.
        """
        return self._table_join(other, joiner, "left", materialized, named)

    def outer_join(self, other: KTable[K, VO], joiner: Callable[[V | None, VO | None], VR],
                   materialized: Materialized | None = None, *,
                   named: Named | None = None) -> KTable[K, VR]:
        """Outer join with ``other``: every key of either table (the missing side ``None``).

        As :meth:`join` (names and ``named`` included), except that either side's value
        alone gives a result.
        """
        return self._table_join(other, joiner, "outer", materialized, named)

    def _table_join(self, other: KTable[Any, Any], joiner: Callable[[Any, Any], Any], kind: str,
                    materialized: Materialized | None, named: Named | None) -> KTable[Any, Any]:
        if not isinstance(other, KTable):
            raise TypeError(f"{kind} join needs a KTable, got {type(other).__name__}")
        if not callable(joiner):
            raise TypeError(f"{kind} join joiner must be callable, got {type(joiner).__name__}")
        m = checked_materialized(materialized)
        if m.is_versioned:
            raise TopologyError("a join result keeps its latest value: Materialized.versioned "
                                "is only for StreamsBuilder.table")
        given = name_of(named)
        what = f"KTable.{'join' if kind == 'inner' else kind + '_join'}"
        this_lookup = self.looked_up(what)
        other_lookup = other.looked_up(what)
        b = self._builder
        this_mode, other_mode = _JOIN_MODES[kind]
        # KTableImpl.join(..., Materialized): MaterializedInternal names an unnamed store
        # first; doJoin then names the merge, this side and the other side, in that order
        store = m.name
        if store is None and materialized is not None:
            store = b.next_name("KTABLE-MERGE-STATE-STORE")
        merge_name = b.given_or_next("KTABLE-MERGE", given)
        this_name = b.suffixed_or_next("KTABLE-JOINTHIS", given, "-join-this")
        other_name = b.suffixed_or_next("KTABLE-JOINOTHER", given, "-join-other")
        if store is not None:
            b.add_kv_store(store, m.key_serde or self._key_serde, m.persistence)
        old = OldValues(self._old_values, other._old_values)

        def reversed_joiner(other_value: Any, this_value: Any) -> Any:
            return joiner(this_value, other_value)

        this_node = b.add_node("KTABLE-JOINTHIS", TableStep(create=lambda: TableJoinProcessor(
            other_lookup.getter, joiner, this_mode, old), operation="join-this"),
            [self._node], name=this_name, stores=list(other_lookup.stores))
        other_node = b.add_node("KTABLE-JOINOTHER", TableStep(create=lambda: TableJoinProcessor(
            this_lookup.getter, reversed_joiner, other_mode, old), operation="join-other"),
            [other._node], name=other_name, stores=list(this_lookup.stores))
        merge = b.add_node("KTABLE-MERGE", TableStep(create=lambda: TableJoinMerger(store, old),
                                                     operation="join-merge"),
                           [this_node, other_node], name=merge_name,
                           stores=[] if store is None else [store])

        def lookup() -> TableLookup:
            if store is not None:
                return TableLookup(lambda task: KeyValueStoreGetter(task.stores[store]),
                                   (store,))
            return TableLookup(lambda task: JoinGetter(this_lookup.getter(task),
                                                       other_lookup.getter(task), joiner,
                                                       kind),
                               this_lookup.stores + other_lookup.stores)

        return KTable(b, merge, self._key_serde, m.value_serde, old, store_name=store,
                      lookup=lookup)
