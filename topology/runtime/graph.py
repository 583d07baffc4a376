"""The processor graph that DSL calls build, and the immutable :class:`Topology` it becomes.

DSL handles only validate arguments and add :class:`GraphNode` objects; the runtime
(:mod:`topology.runtime.task`) instantiates fresh processors and stores from a topology for
each task, so tasks share no state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from suppress.entry import RecordContext

from ..record import Change

__all__ = ("GraphNode", "InternalProcessor", "StoreSpec", "Topology")


_new_tuple = tuple.__new__  # builds Change without its Python-level __new__


class InternalProcessor:
    """Base of the built-in processors: ``process(key, value, context)`` then ``forward``.

    ``forward`` is wired by the task to the children's ``process`` methods (a single child is
    called directly, no loop).

    Table updates can also travel as their two values, without a
    :class:`~topology.record.Change`: a table node calls ``forward_change(key, new, old,
    ctx)``, which the task wires to the children's :meth:`process_change`. A child that
    takes changes overrides it; the default builds the ``Change`` and calls :meth:`process`.
    """

    name: str = ""

    def init(self, task: Any) -> None:
        """Connect stores and metrics of ``task`` (called once, parents before children).

        A processor may install a specialised ``process`` or ``process_change`` here: its
        parents are wired to them afterwards.
        """

    def connected(self) -> None:
        """Called once every node's ``forward`` and ``forward_change`` are wired."""

    def process(self, key: Any, value: Any, ctx: RecordContext) -> None:
        """Handle one record."""
        self.forward(key, value, ctx)

    def process_change(self, key: Any, new: Any, old: Any, ctx: RecordContext) -> None:
        """Handle one table update ``Change(new, old)``, given as its two values."""
        self.process(key, _new_tuple(Change, (new, old)), ctx)

    def forward(self, key: Any, value: Any, ctx: RecordContext) -> None:
        """Replaced by the task with the children's entry points."""

    def forward_change(self, key: Any, new: Any, old: Any, ctx: RecordContext) -> None:
        """Replaced by the task with the children's :meth:`process_change`."""

    def close(self) -> None:
        """Release resources when the task closes."""


@dataclass(frozen=True)
class StoreSpec:
    """A state store to create per task: its name, kind and a factory of fresh instances."""

    name: str
    kind: str  # "key-value" | "window" | "suppression-buffer"
    factory: Callable[[], Any]


@dataclass(eq=False)
class GraphNode:
    """One processor of the topology, as the DSL defined it."""

    name: str
    kind: str  # "source" | "processor" | "sink"
    factory: Callable[[], InternalProcessor]
    parents: list[GraphNode] = field(default_factory=list)
    children: list[GraphNode] = field(default_factory=list)
    stores: list[str] = field(default_factory=list)
    topics: tuple[str, ...] = ()
    subtopology_root: bool = False

    def add_child(self, child: GraphNode) -> None:
        """Connect ``child`` below this node."""
        self.children.append(child)
        child.parents.append(self)


class Topology:
    """An immutable, built topology: nodes parent-first, stores, source and sink topics.

    Built by :meth:`topology.StreamsBuilder.build`; run it with
    :class:`topology.TopologyTestDriver` or the Spark engines. :meth:`describe` prints it.
    """

    def __init__(self, nodes: list[GraphNode], stores: list[StoreSpec],
                 internal_topics: set[str]) -> None:
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
        from ..describe import describe_topology

        return describe_topology(self)

    def __repr__(self) -> str:
        return f"Topology({len(self._nodes)} nodes, {len(self._stores)} stores)"
