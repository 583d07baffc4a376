"""``KStream``: a record stream handle. Each method validates and adds a node, nothing runs."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from suppress.time import to_millis

from .errors import TopologyError
from .grouped import KGroupedStream
from .options import Grouped, K, Named, Produced, V, name_of
from .runtime.api import Processor
from .runtime.definitions import StreamStep, StreamTableJoin, UserProcessor
from .runtime.graph import GraphNode
from .runtime.processors import stateless as sp
from .runtime.processors.join import StreamTableJoinProcessor
from .serde import Serde, serializer_of
from .table import KTable

if TYPE_CHECKING:
    from .builder import StreamsBuilder

__all__ = ("KStream",)

KR = TypeVar("KR")
VR = TypeVar("VR")
VT = TypeVar("VT")


def _check_callable(fn: Any, what: str) -> None:
    if not callable(fn):
        raise TypeError(f"{what} must be callable, got {type(fn).__name__}")


class KStream(Generic[K, V]):
    """An unbounded stream of key-value records.

    Operations return new handles; key-changing ones (``map``, ``flat_map``, ``select_key``)
    mark the stream so that a later grouping repartitions it by the new key.

    Generic in the key and value types (``KStream[str, int]``), for type checkers only: a
    source's types come from its ``Consumed`` serdes (``Any`` without them), and each
    operation derives its result's types from the functions it is given.
    """

    def __init__(self, builder: StreamsBuilder, node: GraphNode, key_serde: Serde[Any] | None,
                 value_serde: Serde[Any] | None, repartition_required: bool = False) -> None:
        self._builder = builder
        self._node = node
        self._key_serde = key_serde
        self._value_serde = value_serde
        self._repartition_required = repartition_required

    def _then(self, prefix: str, operation: str, factory: Callable[[], Any],
              named: Named | None, *, key_changed: bool = False,
              keep_value_serde: bool = True) -> KStream[Any, Any]:
        """Add one stateless step below this stream: ``named``'s name or ``<prefix>-<n>``.

        A number is spent even for a given name (``NamedInternal.orElseGenerateWithPrefix``).
        """
        b = self._builder
        node = b.add_node(prefix, StreamStep(create=factory, operation=operation),
                          [self._node], name=b.given_or_next(prefix, name_of(named)))
        return KStream(
            self._builder, node,
            None if key_changed else self._key_serde,
            self._value_serde if keep_value_serde else None,
            self._repartition_required or key_changed,
        )

    def filter(self, predicate: Callable[[K, V], bool], *,
               named: Named | None = None) -> KStream[K, V]:
        """Keep records for which ``predicate(key, value)`` is true.

        :param named: a :class:`~topology.Named` giving the processor's name (Kafka's
            ``Named``); without it ``KSTREAM-FILTER-<n>``.
        """
        _check_callable(predicate, "filter predicate")
        return self._then("KSTREAM-FILTER", "filter",
                          lambda: sp.FilterProcessor(predicate, False), named)

    def filter_not(self, predicate: Callable[[K, V], bool], *,
                   named: Named | None = None) -> KStream[K, V]:
        """Drop records for which ``predicate(key, value)`` is true.

        :param named: a :class:`~topology.Named` giving the processor's name (Kafka's
            ``Named``); without it ``KSTREAM-FILTER-<n>``.
        """
        _check_callable(predicate, "filter_not predicate")
        return self._then("KSTREAM-FILTER", "filter_not",
                          lambda: sp.FilterProcessor(predicate, True), named)

    def map(self, mapper: Callable[[K, V], tuple[KR, VR]], *,
            named: Named | None = None) -> KStream[KR, VR]:
        """Replace each record by ``mapper(key, value) -> (new_key, new_value)``.

        :param named: a :class:`~topology.Named` giving the processor's name (Kafka's
            ``Named``); without it ``KSTREAM-MAP-<n>``.
        """
        _check_callable(mapper, "map mapper")
        return self._then("KSTREAM-MAP", "map",
                          lambda: sp.MapProcessor(mapper), named,
                          key_changed=True, keep_value_serde=False)

    def map_values(self, mapper: Callable[[V], VR], *,
                   named: Named | None = None) -> KStream[K, VR]:
        """Replace each value by ``mapper(value)``; the key is kept.

        :param named: a :class:`~topology.Named` giving the processor's name (Kafka's
            ``Named``); without it ``KSTREAM-MAPVALUES-<n>``.
        """
        _check_callable(mapper, "map_values mapper")
        return self._then("KSTREAM-MAPVALUES", "map_values",
                          lambda: sp.MapValuesProcessor(mapper), named,
                          keep_value_serde=False)

    def flat_map(self, mapper: Callable[[K, V], Iterable[tuple[KR, VR]]], *,
                 named: Named | None = None) -> KStream[KR, VR]:
        """Replace each record by the pairs of ``mapper(key, value)`` (zero or more).

        :param named: a :class:`~topology.Named` giving the processor's name (Kafka's
            ``Named``); without it ``KSTREAM-FLATMAP-<n>``.
        """
        _check_callable(mapper, "flat_map mapper")
        return self._then("KSTREAM-FLATMAP", "flat_map",
                          lambda: sp.FlatMapProcessor(mapper), named,
                          key_changed=True, keep_value_serde=False)

    def flat_map_values(self, mapper: Callable[[V], Iterable[VR]], *,
                        named: Named | None = None) -> KStream[K, VR]:
        """Replace each value by the values of ``mapper(value)`` (zero or more), same key.

        :param named: a :class:`~topology.Named` giving the processor's name (Kafka's
            ``Named``); without it ``KSTREAM-FLATMAPVALUES-<n>``.
        """
        _check_callable(mapper, "flat_map_values mapper")
        return self._then("KSTREAM-FLATMAPVALUES", "flat_map_values",
                          lambda: sp.FlatMapValuesProcessor(mapper),
                          named, keep_value_serde=False)

    def select_key(self, mapper: Callable[[K, V], KR], *,
                   named: Named | None = None) -> KStream[KR, V]:
        """Re-key each record with ``mapper(key, value)``.

        :param named: a :class:`~topology.Named` giving the processor's name (Kafka's
            ``Named``); without it ``KSTREAM-KEY-SELECT-<n>``.
        """
        _check_callable(mapper, "select_key mapper")
        return self._then("KSTREAM-KEY-SELECT", "select_key",
                          lambda: sp.SelectKeyProcessor(mapper), named,
                          key_changed=True)

    def peek(self, action: Callable[[K, V], None], *,
             named: Named | None = None) -> KStream[K, V]:
        """Call ``action(key, value)`` for each record, which passes on unchanged.

        :param named: a :class:`~topology.Named` giving the processor's name (Kafka's
            ``Named``); without it ``KSTREAM-PEEK-<n>``.
        """
        _check_callable(action, "peek action")
        return self._then("KSTREAM-PEEK", "peek",
                          lambda: sp.PeekProcessor(action), named)

    def merge(self, other: KStream[K, V], *, named: Named | None = None) -> KStream[K, V]:
        """Interleave this stream with ``other`` (records keep their own timestamps).

        :param named: a :class:`~topology.Named` giving the processor's name (Kafka's
            ``Named``); without it ``KSTREAM-MERGE-<n>``.

        :raises TopologyError: if ``other`` belongs to another builder.
        """
        if not isinstance(other, KStream) or other._builder is not self._builder:
            raise TopologyError("merge() needs a KStream of the same StreamsBuilder")
        b = self._builder
        node = b.add_node("KSTREAM-MERGE", StreamStep(create=sp.PassThrough, operation="merge"),
                          [self._node, other._node],
                          name=b.given_or_next("KSTREAM-MERGE", name_of(named)))
        same_key = self._key_serde is other._key_serde
        same_value = self._value_serde is other._value_serde
        return KStream(self._builder, node, self._key_serde if same_key else None,
                       self._value_serde if same_value else None,
                       self._repartition_required or other._repartition_required)

    def to(self, topic: str, produced: Produced[K, V] | None = None, *,
           named: Named | None = None) -> None:
        """Write every record to ``topic``, serialized with ``produced``'s serdes if given.

        :param named: a :class:`~topology.Named` giving the sink's name (Kafka's
            ``Produced.as``); without it ``KSTREAM-SINK-<n>``.
        """
        if not isinstance(topic, str) or not topic:
            raise TopologyError(f"topic must be a non-empty str, got {topic!r}")
        out: Produced[K, V] = produced or Produced()
        b = self._builder
        b.add_node(
            "KSTREAM-SINK", sp.sink_definition(topic, out.key_serde, out.value_serde),
            [self._node], name=b.given_or_next("KSTREAM-SINK", name_of(named)), kind="sink",
            topics=(topic,))

    def process(self, supplier: Callable[[], Processor], *store_names: str,
                named: Named | None = None) -> KStream[Any, Any]:
        """Run a user :class:`~topology.runtime.api.Processor` (a fresh one per task).

        ``store_names`` are stores added with ``StreamsBuilder.add_state_store``
        (key-value), ``add_window_store`` or ``add_session_store`` that the processor may
        open with ``context.get_state_store(name)``.

        :param named: a :class:`~topology.Named` giving the processor's name (Kafka's
            ``Named``); without it ``KSTREAM-PROCESSOR-<n>``. As in Kafka, a given name
            spends no number.

        :raises TopologyError: for an unknown store name.
        """
        _check_callable(supplier, "process supplier")
        for name in store_names:
            if not self._builder.has_store(name):
                raise TopologyError(f"process(): no state store named {name!r}; add it with "
                                    "StreamsBuilder.add_state_store first")
        node = self._builder.add_node(
            "KSTREAM-PROCESSOR", UserProcessor(
                create=lambda: sp.UserProcessorAdapter(supplier, store_names),
                stores=tuple(store_names)),
            [self._node], name=name_of(named), stores=list(store_names))
        return KStream(self._builder, node, None, None, True)

    def join(self, table: KTable[K, VT], joiner: Callable[[V, VT], VR], *,
             grace: int | _dt.timedelta | None = None,
             named: Named | None = None) -> KStream[K, VR]:
        """Inner join with ``table``: ``joiner(stream_value, table_value)`` for each match.

        Each stream record looks the table up by its key: a versioned table **as of the
        record's timestamp** (the version valid then), any other table at its current value.
        Without a value, the record gives nothing. The result keeps the stream record's key
        and timestamp; table updates alone never give output. A record with a ``None`` key
        or value is dropped and counted in ``dropped-records-total``. A stream whose key an
        earlier step changed is repartitioned first (``<node>-repartition``).

        ``grace`` (ms or ``timedelta``, versioned tables only) holds each stream record back
        until records ``grace`` ms newer arrived, so table updates up to ``grace`` late still
        reach it; a record already older than that is joined at once. Held records leave in
        (timestamp, key bytes, arrival) order; they are in memory and not joined when the
        driver closes.

        Named ``KSTREAM-JOIN-<n>`` as in Kafka.

        :param named: a :class:`~topology.Named` giving the processor's name (Kafka's
            ``Joined.as``; a number is spent anyway); a repartition before the join is then
            ``<name>-repartition``, its nodes ``<name>-repartition-sink``, ``-filter`` and
            ``-source``.

        :raises TypeError: for a non-table ``table`` or a non-callable ``joiner``.
        :raises TopologyError: for a windowed table; a grace period on a table that is not
            versioned, or longer than the table's history retention.
        :raises ValueError: for a negative grace period.
        """
        return self._join_table(table, joiner, False, grace, named)

    def left_join(self, table: KTable[K, VT], joiner: Callable[[V, VT | None], VR], *,
                  grace: int | _dt.timedelta | None = None,
                  named: Named | None = None) -> KStream[K, VR]:
        """Left join with ``table``: as :meth:`join`, with ``table_value`` ``None`` if absent.

        Named ``KSTREAM-LEFTJOIN-<n>`` as in Kafka.

        :param named: a :class:`~topology.Named` giving the processor's name (Kafka's
            ``Joined.as``), as for :meth:`join`.
        """
        return self._join_table(table, joiner, True, grace, named)

    def _join_table(self, table: KTable[Any, Any], joiner: Callable[[Any, Any], Any], left: bool,
                    grace: int | _dt.timedelta | None,
                    named: Named | None) -> KStream[Any, Any]:
        what = "KStream.left_join" if left else "KStream.join"
        if not isinstance(table, KTable):
            raise TypeError(f"{what} needs a KTable, got {type(table).__name__}")
        _check_callable(joiner, f"{what} joiner")
        given = name_of(named)
        grace_ms = None if grace is None else to_millis(grace, "grace")
        if grace_ms is not None:
            retention = table._history_retention_ms
            if retention is None:
                raise TopologyError(f"{what}: the table must be versioned to use a grace "
                                    "period in a stream-table join "
                                    "(Materialized.versioned)")
            if retention < grace_ms:
                raise TopologyError(f"{what}: the table's history retention ({retention} ms) "
                                    f"must be at least the grace period ({grace_ms} ms)")
        lookup = table.looked_up(what)
        b = self._builder
        parent = self._node
        if self._repartition_required:  # KStreamImpl.join: repartitionForJoin(name or this)
            parent = b.add_stream_repartition(parent, given or parent.name)
        key_ser = serializer_of(self._key_serde)
        prefix = "KSTREAM-LEFTJOIN" if left else "KSTREAM-JOIN"
        node = b.add_node(
            prefix, StreamTableJoin(
                create=lambda: StreamTableJoinProcessor(lookup.getter, joiner, left, grace_ms,
                                                        key_ser),
                stores=tuple(lookup.stores), left=left, grace_ms=grace_ms),
            [parent], name=b.given_or_next(prefix, given), stores=list(lookup.stores))
        return KStream(b, node, self._key_serde, None)

    def group_by_key(self, grouped: Grouped[K, V] | None = None) -> KGroupedStream[K, V]:
        """Group records by their current key (repartitioned if an earlier step changed it)."""
        g: Grouped[K, V] = grouped or Grouped()
        return KGroupedStream(self._builder, self._node, g.key_serde or self._key_serde,
                              g.value_serde or self._value_serde,
                              self._repartition_required, g.name)

    def group_by(self, selector: Callable[[K, V], KR],
                 grouped: Grouped[Any, V] | None = None) -> KGroupedStream[KR, V]:
        """Group records by ``selector(key, value) -> new_key`` (always repartitioned).

        The key-selecting node is called ``grouped.name`` when given (as in Kafka, which
        still spends a number on it), else ``KSTREAM-KEY-SELECT-<n>``.
        """
        _check_callable(selector, "group_by selector")
        g: Grouped[Any, V] = grouped or Grouped()
        name = self._builder.given_or_next("KSTREAM-KEY-SELECT", g.name)
        node = self._builder.add_node(
            "KSTREAM-KEY-SELECT",
            StreamStep(create=lambda: sp.SelectKeyProcessor(selector), operation="group_by"),
            [self._node], name=name)
        return KGroupedStream(self._builder, node, g.key_serde,
                              g.value_serde or self._value_serde, True, g.name)
