"""Pictures of a topology: Mermaid and Graphviz DOT text, drawn from ``describe()``'s walk.

Both pictures show what :meth:`topology.Topology.describe` prints, in its order and with
Kafka's names: one box (Mermaid ``subgraph``, DOT ``cluster``) per sub-topology, numbered as
``describe()`` numbers them; sources labelled with their topics, sinks with their topic,
processors with their stores; each store a cylinder inside its sub-topology, joined to the
processors that use it by a dotted line; and each internal repartition topic a bold arrow
from the sink that writes it to the source that reads it, across sub-topologies.

The nodes come from :func:`topology.describe.walk_topology`, the walk behind
``describe()``, so the pictures and the text cannot disagree, and the same topology always
gives the same text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .describe import walk_topology

if TYPE_CHECKING:
    from .topology import Topology

__all__ = ("to_dot", "to_mermaid")


@dataclass
class _Box:
    """One node of a picture: its id, shape and label lines (unescaped).

    ``shape``: ``source``, ``sink``, ``processor`` or ``store``.
    """

    id: str
    shape: str
    lines: tuple[str, ...]


@dataclass
class _Cluster:
    """One sub-topology: its boxes, its processor edges and its store links (by id)."""

    number: int
    boxes: list[_Box] = field(default_factory=list)
    edges: list[tuple[str, str]] = field(default_factory=list)
    store_links: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class _Picture:
    clusters: list[_Cluster]
    topic_edges: list[tuple[str, str, str]]  # sink id, source id, repartition topic


class _Ids:
    """Identifiers safe in both languages (letters, digits, ``_``), unique, deterministic.

    A prefix (``n_`` for a node, ``s_`` for a store) keeps a node and a store of the same name
    apart and no id a keyword (``end``, ``graph``, ``node``); two names that sanitise alike
    get ``_2``, ``_3``... in the order the walk meets them.
    """

    def __init__(self) -> None:
        self._taken: set[str] = set()
        self._ids: dict[tuple[str, str], str] = {}

    def get(self, prefix: str, name: str) -> str:
        key = (prefix, name)
        if key not in self._ids:
            base = prefix + re.sub(r"[^A-Za-z0-9_]", "_", name)
            candidate, n = base, 1
            while candidate in self._taken:
                n += 1
                candidate = f"{base}_{n}"
            self._taken.add(candidate)
            self._ids[key] = candidate
        return self._ids[key]


def _picture(topology: Topology) -> _Picture:
    """The picture's content from ``describe()``'s walk: clusters, boxes and edges, in order."""
    ids = _Ids()
    internal = topology.internal_topics
    clusters: list[_Cluster] = []
    writers: dict[str, list[str]] = {}  # internal topic -> sink ids, in walk order
    readers: dict[str, list[str]] = {}  # internal topic -> source ids, in walk order
    for number, group in enumerate(walk_topology(topology)):
        cluster = _Cluster(number)
        stores_seen: set[str] = set()
        for node in group:
            node_id = ids.get("n_", node.name)
            if node.kind == "source":
                lines = (f"Source: {node.name}", f"topics: [{', '.join(node.topics)}]")
                for topic in node.topics:
                    if topic in internal:
                        readers.setdefault(topic, []).append(node_id)
            elif node.kind == "sink":
                lines = (f"Sink: {node.name}", f"topic: {node.topics[0]}")
                if node.topics[0] in internal:
                    writers.setdefault(node.topics[0], []).append(node_id)
            else:
                lines = (f"Processor: {node.name}", f"stores: [{', '.join(node.stores)}]")
            shape = node.kind if node.kind in ("source", "sink") else "processor"
            cluster.boxes.append(_Box(node_id, shape, lines))
            for child in node.successors:
                cluster.edges.append((node_id, ids.get("n_", child)))
            for store in node.stores:
                store_id = ids.get("s_", store)
                if store not in stores_seen:
                    stores_seen.add(store)
                    cluster.boxes.append(_Box(store_id, "store", (store,)))
                cluster.store_links.append((node_id, store_id))
        clusters.append(cluster)
    topic_edges = [(sink, source, topic) for topic, sinks in writers.items()
                   for sink in sinks for source in readers.get(topic, ())]
    return _Picture(clusters, topic_edges)


_MERMAID_UNSAFE = re.compile(r'["#&<>`|\\\x00-\x1f\x7f]')


def _mermaid_text(text: str) -> str:
    """``text`` for a quoted Mermaid label, its syntax characters as entity codes.

    ``"``, ``#``, ``&``, ``<``, ``>``, backtick, ``|``, backslash and control characters,
    which Mermaid or HTML would read as syntax, become ``#34;`` and the like. Brackets and
    parentheses are safe inside the quotes and stay as they are.
    """
    return _MERMAID_UNSAFE.sub(lambda m: f"#{ord(m.group())};", text)


_MERMAID_SHAPES = {"source": ('(["', '"])'), "sink": ('(["', '"])'),
                   "processor": ('["', '"]'), "store": ('[("', '")]')}


def to_mermaid(topology: Topology) -> str:
    """A Mermaid ``flowchart`` of ``topology``: see :meth:`topology.Topology.to_mermaid`."""
    picture = _picture(topology)
    out = ["flowchart TB"]
    for cluster in picture.clusters:
        out.append(f'    subgraph sub_{cluster.number}["Sub-topology: {cluster.number}"]')
        for box in cluster.boxes:
            left, right = _MERMAID_SHAPES[box.shape]
            label = "<br/>".join(_mermaid_text(line) for line in box.lines)
            out.append(f"        {box.id}{left}{label}{right}")
        for a, b in cluster.edges:
            out.append(f"        {a} --> {b}")
        for a, b in cluster.store_links:
            out.append(f"        {a} -.- {b}")
        out.append("    end")
    for sink, source, topic in picture.topic_edges:
        out.append(f'    {sink} ==>|"{_mermaid_text(topic)}"| {source}')
    return "\n".join(out) + "\n"


def _dot_text(text: str) -> str:
    r"""``text`` inside a DOT double-quoted string: ``\``, ``"`` and line breaks escaped.

    So no name can end the string or start an escape sequence of its own (``\n``, ``\l``).
    """
    text = text.replace("\\", "\\\\").replace('"', '\\"')
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\\n")


_DOT_SHAPES = {"source": "style=rounded, ", "sink": "style=rounded, ", "processor": "",
               "store": "shape=cylinder, "}


def to_dot(topology: Topology) -> str:
    """A Graphviz ``digraph`` of ``topology``: see :meth:`topology.Topology.to_dot`."""
    picture = _picture(topology)
    out = ["digraph topology {", "    rankdir=TB;", "    node [shape=box];"]
    for cluster in picture.clusters:
        out.append(f"    subgraph cluster_{cluster.number} {{")
        out.append(f'        label="Sub-topology: {cluster.number}";')
        for box in cluster.boxes:
            label = "\\n".join(_dot_text(line) for line in box.lines)
            out.append(f'        {box.id} [{_DOT_SHAPES[box.shape]}label="{label}"];')
        for a, b in cluster.edges:
            out.append(f"        {a} -> {b};")
        for a, b in cluster.store_links:
            out.append(f"        {a} -> {b} [style=dotted, arrowhead=none];")
        out.append("    }")
    for sink, source, topic in picture.topic_edges:
        out.append(f'    {sink} -> {source} [style=bold, label="{_dot_text(topic)}"];')
    out.append("}")
    return "\n".join(out) + "\n"
