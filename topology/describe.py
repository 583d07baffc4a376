"""Text description of a topology, character for character as Kafka's ``TopologyDescription``.

Kafka prints a topology as sub-topologies of nodes, each node with its successors (``-->``)
and predecessors (``<--``). Several orders in that text are not definition order:

* a sub-topology is a connected group of nodes, where nodes that share a store count as
  connected; groups are numbered by their first node in definition order;
* a sub-topology's nodes are sorted by the size of the sub-graph below them (largest first,
  a node reached twice counted twice), then by name;
* the topics of a source and the stores of a processor come out in the iteration order of a
  ``java.util.HashSet`` of the names;
* the successors and predecessors of a node are ``java.util.TreeSet`` s filled while the
  sizes are still being computed, in the iteration order of a ``java.util.HashMap`` of the
  node names: each insertion compares with the sizes of that moment, so two nodes of equal
  final size need not come out by name.

This module reproduces those three Java collections (String hash codes, hash-table buckets,
red-black tree insertion), so that the text equals what Kafka 3.9 prints for the same graph.

Every node kind this DSL makes has a Kafka counterpart and is printed as Kafka prints it: a
``KTABLE-SOURCE`` without a store is Kafka's unmaterialized table source, and a
suppression lists its buffer store. Fusing a windowed aggregation with its suppression is a
runtime matter and does not change the description.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .runtime.graph import GraphNode
    from .topology import Topology

__all__ = ("DescribedNode", "describe_topology", "java_hash_order", "walk_topology")


def _java_string_hash(text: str) -> int:
    """``String.hashCode()``: over UTF-16 code units, as an unsigned 32-bit value."""
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def _java_order_key(text: str) -> bytes:
    """A key that sorts as ``String.compareTo`` (UTF-16 code units)."""
    return text.encode("utf-16-be")


def java_hash_order(names: Iterable[str]) -> list[str]:
    """``names`` in the iteration order of a ``java.util.HashSet`` they were added to.

    The table has the smallest power-of-two capacity (at least 16) that holds the names under
    the load factor 0.75; iteration goes bucket by bucket (``h ^ (h >>> 16)`` masked by the
    capacity), and in insertion order within a bucket. Duplicates keep their first place.
    """
    unique = list(dict.fromkeys(names))
    capacity = 16
    while len(unique) * 4 > capacity * 3:
        capacity *= 2
    mask = capacity - 1

    def bucket(name: str) -> int:
        h = _java_string_hash(name)
        return (h ^ (h >> 16)) & mask

    return sorted(unique, key=bucket)  # a stable sort keeps insertion order within a bucket


class _Entry:
    __slots__ = ("item", "left", "right", "parent", "red")

    def __init__(self, item: Any, parent: _Entry | None) -> None:
        self.item = item
        self.left: _Entry | None = None
        self.right: _Entry | None = None
        self.parent = parent
        self.red = True


class _JavaTreeSet:
    """Insertion into a ``java.util.TreeSet``: a red-black tree ordered by ``compare``.

    The comparator is called at insertion time only, so an order that changes afterwards
    (node sizes still growing) leaves the elements where they were put. Rebalancing follows
    the classic red-black insertion fix-up, which decides which elements later insertions are
    compared with.
    """

    def __init__(self, compare: Callable[[Any, Any], int]) -> None:
        self._compare = compare
        self._root: _Entry | None = None
        self._items: list[Any] = []

    def add(self, item: Any) -> None:
        """Insert ``item`` unless an element compares equal to it."""
        node = self._root
        if node is None:
            self._root = _Entry(item, None)
            self._root.red = False
            self._items.append(item)
            return
        while True:
            c = self._compare(item, node.item)
            if c == 0:
                return
            child = node.left if c < 0 else node.right
            if child is None:
                entry = _Entry(item, node)
                if c < 0:
                    node.left = entry
                else:
                    node.right = entry
                break
            node = child
        self._items.append(item)
        self._fix_after_insertion(entry)

    def __iter__(self) -> Iterator[Any]:
        stack: list[_Entry] = []
        node = self._root
        while stack or node is not None:
            while node is not None:
                stack.append(node)
                node = node.left
            node = stack.pop()
            yield node.item
            node = node.right

    def items(self) -> list[Any]:
        """The elements in insertion order (for sums, where order does not matter)."""
        return self._items

    def _rotate_left(self, p: _Entry) -> None:
        r = p.right
        assert r is not None
        p.right = r.left
        if r.left is not None:
            r.left.parent = p
        r.parent = p.parent
        if p.parent is None:
            self._root = r
        elif p.parent.left is p:
            p.parent.left = r
        else:
            p.parent.right = r
        r.left = p
        p.parent = r

    def _rotate_right(self, p: _Entry) -> None:
        left = p.left
        assert left is not None
        p.left = left.right
        if left.right is not None:
            left.right.parent = p
        left.parent = p.parent
        if p.parent is None:
            self._root = left
        elif p.parent.right is p:
            p.parent.right = left
        else:
            p.parent.left = left
        left.right = p
        p.parent = left

    def _fix_after_insertion(self, x: _Entry) -> None:
        while x is not self._root and x.parent is not None and x.parent.red:
            parent = x.parent
            grand = parent.parent
            assert grand is not None  # a red node is never the root
            if parent is grand.left:
                uncle = grand.right
                if uncle is not None and uncle.red:
                    parent.red = uncle.red = False
                    grand.red = True
                    x = grand
                    continue
                if x is parent.right:
                    x = parent
                    self._rotate_left(x)
                    moved = x.parent
                    assert moved is not None
                    parent = moved
                parent.red = False
                grand.red = True
                self._rotate_right(grand)
            else:
                uncle = grand.left
                if uncle is not None and uncle.red:
                    parent.red = uncle.red = False
                    grand.red = True
                    x = grand
                    continue
                if x is parent.left:
                    x = parent
                    self._rotate_right(x)
                    moved = x.parent
                    assert moved is not None
                    parent = moved
                parent.red = False
                grand.red = True
                self._rotate_left(grand)
        assert self._root is not None
        self._root.red = False


def _node_groups(topology: Topology) -> list[list[GraphNode]]:
    """Sub-topologies: nodes joined by edges or by a shared store, in definition order."""
    nodes = topology.nodes
    parent_of = list(range(len(nodes)))
    index = {id(n): i for i, n in enumerate(nodes)}

    def root(i: int) -> int:
        while parent_of[i] != i:
            parent_of[i] = parent_of[parent_of[i]]
            i = parent_of[i]
        return i

    def unite(a: int, b: int) -> None:
        parent_of[root(a)] = root(b)

    store_user: dict[str, int] = {}
    for i, node in enumerate(nodes):
        for parent in node.parents:
            unite(i, index[id(parent)])
        for store in node.stores:
            if store in store_user:
                unite(i, store_user[store])
            else:
                store_user[store] = i
    groups: dict[int, list[GraphNode]] = {}
    for i, node in enumerate(nodes):
        groups.setdefault(root(i), []).append(node)
    return list(groups.values())


@dataclass(frozen=True)
class DescribedNode:
    """One node as ``describe()`` prints it, with every list in Kafka's printed order.

    ``topics``: a source's topics (``java.util.HashSet`` order) or a sink's one topic, empty
    for a processor; ``stores``: a processor's stores (``HashSet`` order), empty otherwise;
    ``successors`` and ``predecessors``: node names as Kafka's ``TreeSet`` s iterate them.
    """

    kind: str  # "source" | "processor" | "sink"
    name: str
    topics: tuple[str, ...]
    stores: tuple[str, ...]
    successors: tuple[str, ...]
    predecessors: tuple[str, ...]


def _walk_group(nodes: list[GraphNode]) -> list[DescribedNode]:
    """One sub-topology's nodes, as Kafka connects, sizes and sorts them."""
    size = {n.name: 1 for n in nodes}
    by_name = {n.name: n for n in nodes}

    def compare(a: str, b: str) -> int:
        if a == b:
            return 0
        if size[a] != size[b]:
            return size[b] - size[a]
        ka, kb = _java_order_key(a), _java_order_key(b)
        return -1 if ka < kb else 1

    successors = {n.name: _JavaTreeSet(compare) for n in nodes}
    predecessors = {n.name: _JavaTreeSet(compare) for n in nodes}

    def grow(name: str, delta: int) -> None:
        size[name] += delta
        for p in predecessors[name].items():
            grow(p, delta)

    # Kafka connects nodes in the iteration order of a HashMap keyed by name, filled in
    # the order of a HashSet that got the nodes in definition order.
    for name in java_hash_order(by_name):
        for parent in by_name[name].parents:
            predecessors[name].add(parent.name)
            successors[parent.name].add(name)
            grow(parent.name, size[name])
    ranked = sorted(by_name, key=lambda n: (-size[n], _java_order_key(n)))
    walked = []
    for name in ranked:
        node = by_name[name]
        topics: tuple[str, ...] = ()
        stores: tuple[str, ...] = ()
        if node.kind == "source":
            topics = tuple(java_hash_order(node.topics))
        elif node.kind == "sink":
            topics = (node.topics[0],)
        else:
            stores = tuple(java_hash_order(node.stores))
        walked.append(DescribedNode(node.kind, name, topics, stores, tuple(successors[name]),
                                    tuple(predecessors[name])))
    return walked


def walk_topology(topology: Topology) -> list[list[DescribedNode]]:
    """The sub-topologies of ``topology`` as ``describe()`` numbers them, nodes in its order.

    The one walk behind :func:`describe_topology` and the pictures
    (:mod:`topology.pictures`): the text and the drawings cannot disagree.
    """
    return [_walk_group(group) for group in _node_groups(topology)]


def _node_lines(node: DescribedNode) -> str:
    after = ", ".join(node.successors) or "none"
    before = ", ".join(node.predecessors) or "none"
    if node.kind == "source":
        topics = ", ".join(node.topics)
        return f"    Source: {node.name} (topics: [{topics}])\n      --> {after}"
    if node.kind == "sink":
        return f"    Sink: {node.name} (topic: {node.topics[0]})\n      <-- {before}"
    stores = ", ".join(node.stores)
    return (f"    Processor: {node.name} (stores: [{stores}])\n      --> {after}\n"
            f"      <-- {before}")


def describe_topology(topology: Topology) -> str:
    """Kafka's ``TopologyDescription.toString()`` of ``topology``.

    ``Topologies:``, then per sub-topology a ``Sub-topology: N`` line (the first indented
    by three spaces, the others by two, as Kafka prints them), its nodes and a blank line.
    """
    out = ["Topologies:\n "]
    for i, group in enumerate(walk_topology(topology)):
        out.append(f"  Sub-topology: {i}\n")
        for node in group:
            out.append(_node_lines(node) + "\n")
        out.append("\n")
    return "".join(out)
