"""Text description of a topology, in the shape of Kafka's ``TopologyDescription``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .runtime.graph import GraphNode
    from .topology import Topology

__all__ = ("describe_topology",)


def _subtopologies(topology: Topology) -> list[list[GraphNode]]:
    """Connected groups of nodes (repartition topics split them), in definition order."""
    group_of: dict[int, int] = {}
    groups: list[list[GraphNode]] = []
    for node in topology.nodes:
        parents = [group_of[id(p)] for p in node.parents]
        if parents:
            gid = min(parents)
            for other in set(parents) - {gid}:
                for moved in groups[other]:
                    group_of[id(moved)] = gid
                groups[gid].extend(groups[other])
                groups[other] = []
        else:
            gid = len(groups)
            groups.append([])
        group_of[id(node)] = gid
        groups[gid].append(node)
    order = {id(n): i for i, n in enumerate(topology.nodes)}
    return [sorted(g, key=lambda n: order[id(n)]) for g in groups if g]


def describe_topology(topology: Topology) -> str:
    """Render sub-topologies with sources, processors (and their stores) and sinks."""
    lines = ["Topologies:"]
    for i, group in enumerate(_subtopologies(topology)):
        lines.append(f"   Sub-topology: {i}")
        for node in group:
            if node.kind == "source":
                lines.append(f"    Source: {node.name} (topics: [{', '.join(node.topics)}])")
            elif node.kind == "sink":
                lines.append(f"    Sink: {node.name} (topic: {node.topics[0]})")
            else:
                lines.append(f"    Processor: {node.name} (stores: [{', '.join(node.stores)}])")
            if node.children:
                lines.append(f"      --> {', '.join(c.name for c in node.children)}")
            if node.parents:
                lines.append(f"      <-- {', '.join(p.name for p in node.parents)}")
    lines.append("")
    return "\n".join(lines)
