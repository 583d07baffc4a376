"""``Topology``: a built, immutable processor graph, ready to run."""

from __future__ import annotations

from collections.abc import Iterable

from .runtime.graph import GraphNode, StoreSpec

__all__ = ("Topology",)


class Topology:
    """An immutable, built topology: nodes parent-first, stores, source and sink topics.

    Built by :meth:`topology.StreamsBuilder.build`; run it with
    :class:`topology.TopologyTestDriver` or the Spark engines. :meth:`describe` prints it.
    """

    def __init__(self, nodes: Iterable[GraphNode], stores: Iterable[StoreSpec],
                 internal_topics: Iterable[str]) -> None:
        self._nodes = tuple(nodes)
        self._stores = tuple(stores)
        self._internal_topics = frozenset(internal_topics)

    @property
    def nodes(self) -> tuple[GraphNode, ...]:
        """Nodes, every parent before its children."""
        return self._nodes

    @property
    def stores(self) -> tuple[StoreSpec, ...]:
        """Store specs, one per store name."""
        return self._stores

    @property
    def source_topics(self) -> frozenset[str]:
        """Every topic some source reads (internal repartition topics included)."""
        return frozenset(t for n in self._nodes if n.kind == "source" for t in n.topics)

    @property
    def sink_topics(self) -> frozenset[str]:
        """Every topic some sink writes (internal repartition topics included)."""
        return frozenset(t for n in self._nodes if n.kind == "sink" for t in n.topics)

    @property
    def internal_topics(self) -> frozenset[str]:
        """Repartition topics the topology creates for itself."""
        return self._internal_topics

    def describe(self) -> str:
        """A readable description, one sub-topology per connected group of nodes.

        >>> from topology import StreamsBuilder
        >>> b = StreamsBuilder()
        >>> b.stream("in").to("out")
        >>> print(b.build().describe())
        Topologies:
           Sub-topology: 0
            Source: KSTREAM-SOURCE-0000000000 (topics: [in])
              --> KSTREAM-SINK-0000000001
            Sink: KSTREAM-SINK-0000000001 (topic: out)
              <-- KSTREAM-SOURCE-0000000000
        <BLANKLINE>
        <BLANKLINE>
        """
        from .describe import describe_topology

        return describe_topology(self)

    def __repr__(self) -> str:
        return f"Topology({len(self._nodes)} nodes, {len(self._stores)} stores)"
