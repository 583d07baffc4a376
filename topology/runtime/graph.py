"""The processor graph that DSL calls build.

DSL handles only validate arguments and add :class:`GraphNode` objects;
:meth:`topology.StreamsBuilder.build` freezes them into a :class:`~topology.Topology`, and
each task (:mod:`topology.runtime.task`) creates fresh processors and stores from it, so tasks
share no state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .processor import InternalProcessor

if TYPE_CHECKING:
    from ..state.rocksdb import Keyspace

__all__ = ("GraphNode", "StoreSpec")


@dataclass(frozen=True)
class StoreSpec:
    """A state store to create per task: its name, kind and factories of fresh instances.

    ``kind`` is ``"key-value"``, ``"window"``, ``"session"`` or ``"versioned"``.
    ``factory()`` makes the in-memory store; ``persistent_factory(keyspace)`` the RocksDB one
    on a keyspace of the task's state database. ``persistence`` is the user's choice:
    ``None`` follows the runtime, ``True``/``False`` force RocksDB/memory.
    """

    name: str
    kind: str
    factory: Callable[[], Any]
    persistent_factory: Callable[[Keyspace], Any] | None = None
    persistence: bool | None = None


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
    consumed: Any = None
    """A source's ``Consumed`` (serdes of the records piped into its topics)."""

    def add_child(self, child: GraphNode) -> None:
        """Connect ``child`` below this node."""
        self.children.append(child)
        child.parents.append(self)
