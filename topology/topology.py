"""``Topology``: a built, immutable processor graph, ready to run."""

from __future__ import annotations

from collections.abc import Iterable

from .runtime.graph import GraphNode, StoreSpec

__all__ = ("Topology",)


class Topology:
    """An immutable, built topology: nodes parent-first, stores, source and sink topics.

    Built by :meth:`topology.StreamsBuilder.build`; run it with
    :class:`topology.TopologyTestDriver` or the Spark engines. :meth:`describe` prints it;
    :meth:`to_mermaid` and :meth:`to_dot` draw it.
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

    def to_mermaid(self) -> str:
        """A Mermaid ``flowchart`` of :meth:`describe`'s graph, for Markdown pages and notes.

        One ``subgraph`` per sub-topology, numbered as :meth:`describe` numbers them; nodes
        in its order with Kafka's names (sources with their topics, sinks with their topic,
        processors with their stores); each store a cylinder (``[(store)]``) joined to its
        processors by a dotted line; each internal repartition topic a bold arrow from its
        sink to its source. Ids are sanitised names (``n_`` nodes, ``s_`` stores); ``"``,
        ``#``, ``<``, ``>`` and the like in names become Mermaid entity codes. The same
        topology always gives the same text.

        >>> from topology import StreamsBuilder
        >>> b = StreamsBuilder()
        >>> b.stream("in").to("out")
        >>> print(b.build().to_mermaid())
        flowchart TB
            subgraph sub_0["Sub-topology: 0"]
                n_KSTREAM_SOURCE_0000000000(["Source: KSTREAM-SOURCE-0000000000<br/>topics: [in]"])
                n_KSTREAM_SINK_0000000001(["Sink: KSTREAM-SINK-0000000001<br/>topic: out"])
                n_KSTREAM_SOURCE_0000000000 --> n_KSTREAM_SINK_0000000001
            end
        <BLANKLINE>
        """
        from .pictures import to_mermaid

        return to_mermaid(self)

    def to_dot(self) -> str:
        r"""A Graphviz DOT ``digraph`` of :meth:`describe`'s graph (render it with ``dot -Tsvg``).

        The content of :meth:`to_mermaid`: one ``cluster_N`` per sub-topology, the same ids
        and labels (quotes and backslashes in names escaped), stores as cylinders joined by
        dotted lines, repartition topics as bold labelled edges between sub-topologies.

        >>> from topology import StreamsBuilder
        >>> b = StreamsBuilder()
        >>> b.stream("in").to("out")
        >>> print(b.build().to_dot())  # doctest: +ELLIPSIS
        digraph topology {
            rankdir=TB;
            node [shape=box];
            subgraph cluster_0 {
                label="Sub-topology: 0";
                n_KSTREAM_SOURCE_0000000000 [style=rounded, label="Source: ...\ntopics: [in]"];
                n_KSTREAM_SINK_0000000001 [style=rounded, label="Sink: ...\ntopic: out"];
                n_KSTREAM_SOURCE_0000000000 -> n_KSTREAM_SINK_0000000001;
            }
        }
        <BLANKLINE>
        """
        from .pictures import to_dot

        return to_dot(self)

    def __repr__(self) -> str:
        return f"Topology({len(self._nodes)} nodes, {len(self._stores)} stores)"
