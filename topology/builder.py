"""``StreamsBuilder``: where a topology is defined, and :meth:`StreamsBuilder.build`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .errors import TopologyError
from .options import Consumed, Materialized
from .runtime.graph import GraphNode, StoreSpec
from .runtime.processor import InternalProcessor
from .runtime.processors.stateless import PassThrough
from .serde import serializer_of
from .state.memory import InMemoryKeyValueStore
from .topology import Topology

if TYPE_CHECKING:
    from .stream import KStream
    from .table import KTable

__all__ = ("StreamsBuilder",)


class StreamsBuilder:
    """Defines a topology: start with :meth:`stream` or :meth:`table`, finish with :meth:`build`.

    Node and store names follow Kafka's scheme (``KSTREAM-SOURCE-0000000000``...), numbered in
    definition order, unless a name is given.
    """

    def __init__(self) -> None:
        self._nodes: list[GraphNode] = []
        self._names: set[str] = set()
        self._stores: dict[str, StoreSpec] = {}
        self._source_topics: set[str] = set()
        self._internal_topics: set[str] = set()
        self._index = 0

    # -- sources -------------------------------------------------------------------------------

    def stream(self, topic: str | list[str], consumed: Consumed | None = None) -> KStream:
        """A stream of the records of ``topic`` (or several topics).

        :raises TopologyError: if a topic already has a source in this builder.
        """
        from .stream import KStream

        consumed = consumed or Consumed()
        topics = (topic,) if isinstance(topic, str) else tuple(topic)
        node = self._add_source(topics, consumed)
        return KStream(self, node, consumed.key_serde, consumed.value_serde)

    def table(self, topic: str, consumed: Consumed | None = None,
              materialized: Materialized | None = None) -> KTable:
        """A table of the latest value per key of ``topic``; ``None`` values delete.

        The table is materialized in a key-value store (named by ``materialized`` or
        ``<topic>-STATE-STORE-<n>``), read with ``driver.get_key_value_store(name)``.

        :raises TopologyError: if the topic already has a source in this builder.
        """
        from .runtime.processors.table import TableSourceProcessor
        from .table import KTable, OldValues

        consumed = consumed or Consumed()
        materialized = materialized or Materialized()
        store = materialized.name or self.next_name(f"{topic}-STATE-STORE")
        source = self._add_source((topic,), consumed)
        key_serde = materialized.key_serde or consumed.key_serde
        value_serde = materialized.value_serde or consumed.value_serde
        self.add_kv_store(store, key_serde)
        old = OldValues(None)
        node = self.add_node("KTABLE-SOURCE", lambda: TableSourceProcessor(store, old),
                             [source], stores=[store])
        return KTable(self, node, key_serde, value_serde, old, store_name=store)

    def add_state_store(self, materialized: Materialized) -> str:
        """Add an in-memory key-value store for ``KStream.process`` processors; return its name.

        :raises TopologyError: without a store name, or for a name already used.
        """
        if materialized.name is None:
            raise TopologyError("add_state_store() needs Materialized(name=...)")
        self.add_kv_store(materialized.name, materialized.key_serde)
        return materialized.name

    # -- build ---------------------------------------------------------------------------------

    def build(self) -> Topology:
        """Freeze the definitions into an immutable :class:`Topology`.

        :raises TopologyError: for a topology without any source.
        """
        if not self._source_topics:
            raise TopologyError("a topology needs at least one source (stream() or table())")
        return Topology(list(self._nodes), list(self._stores.values()),
                        set(self._internal_topics))

    # -- internal: used by the DSL handles -----------------------------------------------------

    def next_name(self, prefix: str) -> str:
        """The next Kafka-style generated name with ``prefix``."""
        name = f"{prefix}-{self._index:010d}"
        self._index += 1
        return name

    def add_node(self, prefix: str, factory: Callable[[], InternalProcessor],
                 parents: list[GraphNode], *, name: str | None = None, kind: str = "processor",
                 stores: list[str] | None = None, topics: tuple[str, ...] = ()) -> GraphNode:
        """Add a node below ``parents`` named ``name`` or ``<prefix>-<n>``.

        :raises TopologyError: for a name that is already taken.
        """
        node_name = name or self.next_name(prefix)
        if node_name in self._names:
            raise TopologyError(f"a processor named {node_name!r} already exists")
        self._names.add(node_name)
        node = GraphNode(node_name, kind, factory, stores=list(stores or ()), topics=topics)
        for parent in parents:
            parent.add_child(node)
        self._nodes.append(node)
        return node

    def _add_source(self, topics: tuple[str, ...], consumed: Consumed,
                    internal: bool = False) -> GraphNode:
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
        node = self.add_node("KSTREAM-SOURCE", PassThrough, [], kind="source", topics=topics)
        node.consumed = consumed  # type: ignore[attr-defined]
        return node

    def add_repartition(self, parent: GraphNode, base_name: str) -> GraphNode:
        """Route records from ``parent`` through the internal topic ``<base_name>-repartition``.

        Returns the source node that reads it back. The driver prefixes the topic with the
        application id, as Kafka does.
        """
        from .runtime.processors.stateless import SinkProcessor

        topic = f"{base_name}-repartition"
        sink = self.next_name("KSTREAM-SINK")
        self.next_name("KSTREAM-FILTER")  # numbered as Kafka; the aggregation counts null keys
        self.add_node("KSTREAM-SINK", lambda: SinkProcessor(topic, None, None), [parent],
                      name=sink, kind="sink", topics=(topic,))
        return self._add_source((topic,), Consumed(), internal=True)

    def add_kv_store(self, name: str, key_serde: Any) -> None:
        """Register an in-memory key-value store ``name``.

        :raises TopologyError: for a name already used.
        """
        ser = serializer_of(key_serde)
        self.add_store(StoreSpec(name, "key-value", lambda: InMemoryKeyValueStore(name, ser)))

    def add_store(self, spec: StoreSpec) -> None:
        """Register a store spec.

        :raises TopologyError: for a name already used.
        """
        if spec.name in self._stores:
            raise TopologyError(f"a state store named {spec.name!r} already exists")
        self._stores[spec.name] = spec

    def has_store(self, name: str) -> bool:
        """Whether a store ``name`` is registered."""
        return name in self._stores
