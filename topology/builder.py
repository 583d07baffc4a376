"""``StreamsBuilder``: where a topology is defined, and :meth:`StreamsBuilder.build`."""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Callable
from typing import Any

from suppress.time import to_millis

from .errors import TopologyError
from .grouped import KGroupedTable
from .options import Consumed, K, Materialized, V, checked_materialized, validate_name
from .runtime.definitions import Definition, Source, StreamStep, TableSource
from .runtime.getters import KeyValueStoreGetter, VersionedStoreGetter
from .runtime.graph import GraphNode, StoreSpec
from .runtime.processors.stateless import PassThrough, TableSourceWithoutStore, sink_definition
from .runtime.processors.table import TableSourceProcessor, VersionedTableSourceProcessor
from .runtime.store_specs import (
    key_value_store_spec,
    session_store_spec,
    versioned_store_spec,
    window_store_spec,
)
from .serde import Serde
from .stream import KStream
from .table import Flag, KTable, OldValues, TableLookup
from .topology import Topology

Duration = int | _dt.timedelta
"""A duration: ``int`` milliseconds or a ``timedelta``."""

__all__ = ("StreamsBuilder",)

_GENERATED = re.compile(r"KSTREAM.*-[0-9]{10}")
"""A repartition prefix that names its nodes by number (Kafka's ``createRepartitionedSource``)."""


class StreamsBuilder:
    """Defines a topology: start with :meth:`stream` or :meth:`table`, finish with :meth:`build`.

    Node and store names follow Kafka 3.9's scheme (``KSTREAM-SOURCE-0000000000``...): one
    counter for nodes and stores, advanced in the order Kafka's DSL advances it, including the
    numbers Kafka spends on names it then replaces by given ones.
    """

    def __init__(self) -> None:
        self._nodes: list[GraphNode] = []
        self._names: set[str] = set()
        self._stores: dict[str, StoreSpec] = {}
        self._store_names: set[str] = set()
        self._table_sources: list[tuple[GraphNode, str, Callable[[], bool]]] = []
        self._source_topics: set[str] = set()
        self._internal_topics: set[str] = set()
        self._index = 0

    # -- sources -------------------------------------------------------------------------------

    def stream(self, topic: str | list[str],
               consumed: Consumed[K, V] | None = None) -> KStream[K, V]:
        """A stream of the records of ``topic`` (or several topics).

        Its key and value types are those of ``consumed``'s serdes (``Any`` without them):
        ``stream("t", Consumed(Serdes.string(), Serdes.long()))`` is a ``KStream[str, int]``.

        :raises TopologyError: if a topic already has a source in this builder.
        """
        c: Consumed[K, V] = consumed or Consumed()
        topics = (topic,) if isinstance(topic, str) else tuple(topic)
        node = self._add_source(topics, c)
        return KStream(self, node, c.key_serde, c.value_serde)

    def table(self, topic: str, consumed: Consumed[K, V] | None = None,
              materialized: Materialized | None = None) -> KTable[K, V]:
        """A table of the latest value per key of ``topic``; ``None`` values delete.

        Its key and value types are those of ``consumed``'s serdes, as for :meth:`stream`.

        As in Kafka, the table is kept in a key-value store only when it is materialized: when
        ``materialized`` names the store (read it with ``driver.get_key_value_store(name)``),
        or when a later operation needs the table's old values (``suppress``, ``group_by``)
        or looks it up (a join), which materializes it as ``<topic>-STATE-STORE-<n>``. That
        is decided by :meth:`build`; a table without a store forwards each record as an
        update without an old value.

        With ``Materialized.versioned(name, history_retention)`` the table is kept in a
        versioned store (read it with ``driver.get_versioned_key_value_store(name)``): a
        stream joined to it reads each key as of the stream record's timestamp, and an
        out-of-order update (older than the key's latest version) is forwarded flagged, so
        that joins and re-groupings drop it (counted) while ``to_stream`` still emits it.

        :raises TopologyError: if the topic already has a source in this builder, or a
            versioned store has no name.
        """
        consumed = consumed or Consumed()
        materialized = checked_materialized(materialized)
        if materialized.is_versioned:
            return self._versioned_table(topic, consumed, materialized)
        store = materialized.name or self.next_name(f"{topic}-STATE-STORE")
        source = self._add_source((topic,), consumed)
        key_serde = materialized.key_serde or consumed.key_serde
        value_serde = materialized.value_serde or consumed.value_serde
        self.add_kv_store(store, key_serde, materialized.persistence)
        old = OldValues()
        looked_up = Flag()
        named = materialized.name is not None

        def materialize() -> bool:
            return named or old.enabled or looked_up.enabled

        def factory() -> Any:
            if materialize():
                return TableSourceProcessor(store, old)
            return TableSourceWithoutStore()

        def lookup() -> TableLookup:
            looked_up.enable()
            return TableLookup(lambda task: KeyValueStoreGetter(task.stores[store]), (store,))

        node = self.add_node("KTABLE-SOURCE", TableSource(create=factory, store=store,
                                                          versioned=False),
                             [source], stores=[store])
        self._table_sources.append((node, store, materialize))
        return KTable(self, node, key_serde, value_serde, old,
                      store_name=store if named else None, lookup=lookup)

    def _versioned_table(self, topic: str, consumed: Consumed[Any, Any],
                         m: Materialized) -> KTable[Any, Any]:
        """:meth:`table` kept in a versioned store (``m.is_versioned``)."""
        store = m.name
        if store is None:
            raise TopologyError(f"table({topic!r}): a versioned store needs a name "
                                "(Materialized.versioned(name, history_retention))")
        retention = m.history_retention_ms
        assert retention is not None
        source = self._add_source((topic,), consumed)
        key_serde = m.key_serde or consumed.key_serde
        value_serde = m.value_serde or consumed.value_serde
        self.add_store(versioned_store_spec(store, key_serde, retention, m.segment_interval_ms,
                                            m.persistence))
        old = OldValues()
        node = self.add_node("KTABLE-SOURCE", TableSource(
            create=lambda: VersionedTableSourceProcessor(store, old), store=store,
            versioned=True), [source], stores=[store])

        def lookup() -> TableLookup:
            return TableLookup(lambda task: VersionedStoreGetter(task.stores[store]), (store,))

        return KTable(self, node, key_serde, value_serde, old, store_name=store,
                      lookup=lookup, history_retention_ms=retention)

    def add_state_store(self, materialized: Materialized) -> str:
        """Add an in-memory key-value store for ``KStream.process`` processors; return its name.

        :raises TopologyError: without a store name, or for a name already used.
        """
        materialized = checked_materialized(materialized)
        if materialized.name is None:
            raise TopologyError("add_state_store() needs Materialized(name=...)")
        if materialized.is_versioned:
            raise TopologyError("add_state_store(): versioned stores are for tables "
                                "(StreamsBuilder.table); use Materialized(name=...)")
        self.add_kv_store(materialized.name, materialized.key_serde, materialized.persistence)
        return materialized.name

    def add_window_store(self, materialized: Materialized, window_size: Duration,
                         retention: Duration) -> str:
        """Add a window store for ``KStream.process`` processors; return its name.

        The store keeps ``(key, window start) -> value`` for windows of ``window_size``
        (ms or ``timedelta``), each for ``retention`` behind the store's observed stream
        time; a processor opens it with ``context.get_state_store(name)``, the test driver
        with ``get_window_store(name)``. ``materialized`` gives the name, the key serde (it
        orders the keys) and the backend choice.

        :raises TopologyError: without a store name, for a versioned ``materialized``, or for
            a name already used.
        :raises TypeError: a duration that is neither an ``int`` nor a ``timedelta``.
        :raises ValueError: a negative duration, or a window size of zero.
        """
        name = self._processor_store_name(materialized, "add_window_store")
        size = to_millis(window_size, "window_size")
        if size == 0:
            raise ValueError("window_size must be larger than zero, got 0 ms")
        self.add_store(window_store_spec(name, materialized.key_serde, size,
                                         to_millis(retention, "retention"),
                                         materialized.persistence))
        return name

    def add_session_store(self, materialized: Materialized, retention: Duration) -> str:
        """Add a session store for ``KStream.process`` processors; return its name.

        The store keeps ``Windowed(key, Window(start, end)) -> aggregate`` for sessions whose
        end is within ``retention`` (ms or ``timedelta``) of the store's observed stream
        time; a processor opens it with ``context.get_state_store(name)``, the test driver
        with ``get_session_store(name)``. ``materialized`` gives the name, the key serde (it
        orders the keys) and the backend choice.

        :raises TopologyError: without a store name, for a versioned ``materialized``, or for
            a name already used.
        :raises TypeError: a retention that is neither an ``int`` nor a ``timedelta``.
        :raises ValueError: a negative retention.
        """
        name = self._processor_store_name(materialized, "add_session_store")
        self.add_store(session_store_spec(name, materialized.key_serde,
                                          to_millis(retention, "retention"),
                                          materialized.persistence))
        return name

    def _processor_store_name(self, materialized: Materialized, method: str) -> str:
        """The name of a store added for processors, checked.

        :raises TopologyError: without a name, or for a versioned ``materialized``.
        """
        materialized = checked_materialized(materialized)
        if materialized.name is None:
            raise TopologyError(f"{method}() needs Materialized(name=...)")
        if materialized.is_versioned:
            raise TopologyError(f"{method}(): versioned stores are for tables "
                                "(StreamsBuilder.table); use Materialized(name=...)")
        return materialized.name

    # -- build ---------------------------------------------------------------------------------

    def build(self) -> Topology:
        """Freeze the definitions into an immutable :class:`Topology`.

        Table sources that nothing materialized lose their store here (see :meth:`table`).

        :raises TopologyError: for a topology without any source.
        """
        if not self._source_topics:
            raise TopologyError("a topology needs at least one source (stream() or table())")
        unused = set()
        for node, store, materialize in self._table_sources:
            if materialize():
                node.stores = [store]
            else:
                node.stores = []
                unused.add(store)
        stores = [spec for spec in self._stores.values() if spec.name not in unused]
        return Topology(list(self._nodes), stores, set(self._internal_topics))

    # -- internal: used by the DSL handles -----------------------------------------------------

    def stream_below(self, node: GraphNode, key_serde: Serde[Any] | None,
                     value_serde: Serde[Any] | None) -> KStream[Any, Any]:
        """The stream of the records ``node`` forwards (``KTable.to_stream``'s handle).

        Handles that make handles of another kind ask the builder, which knows them all:
        the DSL modules import one another in one direction only (builder, stream, grouped,
        table).
        """
        return KStream(self, node, key_serde, value_serde)

    def grouped_table_below(self, node: GraphNode, key_serde: Serde[Any] | None,
                            value_serde: Serde[Any] | None,
                            name: str | None) -> KGroupedTable[Any, Any]:
        """The grouped table of the regrouped rows ``node`` forwards (``KTable.group_by``)."""
        return KGroupedTable(self, node, key_serde, value_serde, name)

    def next_name(self, prefix: str) -> str:
        """The next Kafka-style generated name with ``prefix``."""
        name = f"{prefix}-{self._index:010d}"
        self._index += 1
        return name

    def given_or_next(self, prefix: str, name: str | None) -> str:
        """``name`` if given, else the next generated name; a number is spent either way.

        Kafka's ``NamedInternal.orElseGenerateWithPrefix``.
        """
        generated = self.next_name(prefix)
        return generated if name is None else name

    def suffixed_or_next(self, prefix: str, name: str | None, suffix: str) -> str:
        """``name + suffix`` if a name is given, else the next generated name.

        A number is spent either way: Kafka's ``NamedInternal.suffixWithOrElseGet(suffix,
        provider, prefix)``, which checks the suffixed name again (it may be too long).

        :raises TopologyError: for a suffixed name longer than 249 characters.
        """
        generated = self.next_name(prefix)
        if name is None:
            return generated
        validate_name(name + suffix)
        return name + suffix

    def add_node(self, prefix: str, definition: Definition,
                 parents: list[GraphNode], *, name: str | None = None, kind: str = "processor",
                 stores: list[str] | None = None, topics: tuple[str, ...] = ()) -> GraphNode:
        """Add a node doing ``definition`` below ``parents``, named ``name`` or ``<prefix>-<n>``.

        :raises TopologyError: for a name that is already taken.
        """
        node_name = name or self.next_name(prefix)
        if node_name in self._names:
            raise TopologyError(f"a processor named {node_name!r} already exists")
        self._names.add(node_name)
        node = GraphNode(node_name, kind, definition, stores=list(stores or ()), topics=topics)
        for parent in parents:
            parent.add_child(node)
        self._nodes.append(node)
        return node

    def _add_source(self, topics: tuple[str, ...], consumed: Consumed,
                    internal: bool = False, name: str | None = None) -> GraphNode:
        if not topics:
            raise TopologyError("a source needs at least one topic")
        if len(set(topics)) != len(topics):
            raise TopologyError(f"a source lists a topic twice: {list(topics)}")
        for topic in topics:
            if not isinstance(topic, str) or not topic:
                raise TopologyError(f"topic names must be non-empty str, got {topic!r}")
            if topic in self._source_topics:
                raise TopologyError(f"topic {topic!r} has already been registered by another "
                                    "source")
        self._source_topics.update(topics)
        if internal:
            self._internal_topics.update(topics)
        node = self.add_node("KSTREAM-SOURCE", Source(create=PassThrough), [], name=name,
                             kind="source", topics=topics)
        node.consumed = consumed
        return node

    def add_stream_repartition(self, parent: GraphNode, prefix: str) -> GraphNode:
        """Repartition a stream through ``<prefix>-repartition``; return the source reading it.

        As Kafka's ``createRepartitionedSource``: three numbers are spent (sink, filter,
        source); the nodes keep them when ``prefix`` is itself a generated ``KSTREAM...``
        name, and are otherwise called ``<topic>-filter``, ``<topic>-sink`` and
        ``<topic>-source``. The filter passes every record on: since Kafka 3.7 it no longer
        drops ``None`` keys (the aggregation behind the topic drops and counts them). The
        driver prefixes the topic with the application id, as Kafka does.
        """
        topic = prefix if prefix.endswith("-repartition") else f"{prefix}-repartition"
        sink = self.next_name("KSTREAM-SINK")
        filter_name = self.next_name("KSTREAM-FILTER")
        source = self.next_name("KSTREAM-SOURCE")
        if not _GENERATED.fullmatch(prefix):
            sink, filter_name, source = f"{topic}-sink", f"{topic}-filter", f"{topic}-source"
        node = self.add_node("KSTREAM-FILTER", StreamStep(create=PassThrough, operation="pass"),
                             [parent], name=filter_name)
        self.add_node("KSTREAM-SINK", sink_definition(topic), [node],
                      name=sink, kind="sink", topics=(topic,))
        return self._add_source((topic,), Consumed(), internal=True, name=source)

    def add_table_repartition(self, parent: GraphNode, topic: str, sink: str,
                              source: str) -> GraphNode:
        """Repartition table updates through ``topic`` (a sink and a source, no filter).

        Kafka's ``GroupedTableOperationRepartitionNode``; the caller names the nodes.
        """
        self.add_node("KSTREAM-SINK", sink_definition(topic), [parent],
                      name=sink, kind="sink", topics=(topic,))
        return self._add_source((topic,), Consumed(), internal=True, name=source)

    def add_kv_store(self, name: str, key_serde: Any, persistence: bool | None = None) -> None:
        """Register a key-value store ``name`` (in memory or RocksDB, see ``StoreSpec``).

        :raises TopologyError: for a name already used.
        """
        self.add_store(key_value_store_spec(name, key_serde, persistence))

    def add_store(self, spec: StoreSpec) -> None:
        """Register a store spec.

        :raises TopologyError: for a name already used.
        """
        self.reserve_store_name(spec.name)
        self._stores[spec.name] = spec

    def reserve_store_name(self, name: str) -> None:
        """Claim a store name for a store the runtime creates itself (a suppression buffer).

        :raises TopologyError: for a name already used.
        """
        if name in self._store_names:
            raise TopologyError(f"a state store named {name!r} already exists")
        self._store_names.add(name)

    def has_store(self, name: str) -> bool:
        """Whether a store ``name`` is registered."""
        return name in self._stores
