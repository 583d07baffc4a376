"""The processor graph that DSL calls build.

DSL handles only validate arguments and add :class:`GraphNode` objects, each carrying its
:mod:`~topology.runtime.definitions` entry;
:meth:`topology.StreamsBuilder.build` freezes them into a :class:`~topology.Topology`, and
each task (:mod:`topology.runtime.task`) creates fresh processors and stores from it, so tasks
share no state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from .definitions import Definition
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
    ``parameters`` are what lays the store out on disk (see :attr:`signature`);
    ``key_serializer`` writes the keys.
    """

    name: str
    kind: str
    factory: Callable[[], Any]
    persistent_factory: Callable[[Keyspace], Any] | None = None
    persistence: bool | None = None
    parameters: tuple[tuple[str, int], ...] | None = None
    """``(name, ms)`` pairs that fix where the store's records go on disk: window size,
    retention, history retention, segment interval. ``None``: read from a fresh in-memory
    store (``factory()``), its :data:`LAYOUT_ATTRIBUTES` that are ints."""
    key_serializer: Callable[[Any], bytes | None] | None = None
    """The bytes of a key (they define equality and order); ``None`` where not given."""

    @cached_property
    def signature(self) -> str:
        """The kind and the layout parameters, sorted: equal signatures, same layout on disk.

        A durable task records each store's signature with its commits and refuses to reuse
        the state of a store whose signature changed (e.g. a new window size or grace under
        the same store name): its records would be read with the wrong layout.

        >>> StoreSpec("counts", "key-value", dict).signature
        'key-value'
        >>> StoreSpec("w", "window", dict, parameters=(("window_size_ms", 10),
        ...                                             ("retention_ms", 15))).signature
        'window retention_ms=15 window_size_ms=10'
        """
        parameters = self.parameters
        if parameters is None:
            store = self.factory()
            parameters = tuple((name, value) for name in LAYOUT_ATTRIBUTES
                               if type(value := getattr(store, name, None)) is int)
            close = getattr(store, "close", None)
            if close is not None:
                close()
        return " ".join([self.kind, *(f"{name}={value}" for name, value in sorted(parameters))])


LAYOUT_ATTRIBUTES = ("window_size_ms", "retention_ms", "history_retention_ms",
                     "segment_interval_ms")
"""The store attributes that :attr:`StoreSpec.signature` reads when it is not given them."""


@dataclass(eq=False)
class GraphNode:
    """One processor of the topology, as the DSL defined it."""

    name: str
    kind: str  # "source" | "processor" | "sink"
    definition: Definition
    """What the node does, as the DSL call defined it."""
    parents: list[GraphNode] = field(default_factory=list)
    children: list[GraphNode] = field(default_factory=list)
    stores: list[str] = field(default_factory=list)
    topics: tuple[str, ...] = ()
    consumed: Any = None
    """A source's ``Consumed`` (serdes of the records piped into its topics)."""

    @property
    def factory(self) -> Callable[[], InternalProcessor]:
        """The supplier of a fresh processor for one task (the definition's ``create``)."""
        return self.definition.create

    def add_child(self, child: GraphNode) -> None:
        """Connect ``child`` below this node."""
        self.children.append(child)
        child.parents.append(self)
