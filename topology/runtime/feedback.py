"""Feedback loops: records a topology writes to topics it reads, and the cycle that feeds them.

One input record may feed back at most ``max_feedback_records`` records through topics the
topology reads (:class:`~topology.errors.FeedbackLoopError`); the error's message names the
cycle of topics and sink nodes, if there is one (:func:`feedback_cycle`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .graph import GraphNode

__all__ = ("feedback_cycle", "feedback_message")


def feedback_message(max_feedback_records: int, cycle: str | None) -> str:
    """The message of the :class:`~topology.errors.FeedbackLoopError` past the limit.

    :param cycle: the cycle of :func:`feedback_cycle`, ``None`` if there is none.
    """
    where = (f"the topology writes to topics it reads, in a cycle: {cycle}" if cycle
             else "records fed back through the topology's internal topics")
    return (f"one input record fed back more than max_feedback_records="
            f"{max_feedback_records} records: {where}. Break the cycle, or raise "
            f"max_feedback_records if the fan-out is intended")


def feedback_cycle(nodes: Iterable[GraphNode], sources: Mapping[str, GraphNode],
                   resolve_topic: Callable[[str], str]) -> str | None:
    """A cycle ``topic -> sink node -> topic ...`` through sources and sinks, if any.

    :param nodes: the topology's nodes.
    :param sources: the source node of each topic read (real topic names).
    :param resolve_topic: the real name of a topic a sink writes.
    """
    by_name = {n.name: n for n in nodes}
    edges: dict[str, list[tuple[str, str]]] = {}  # topic -> [(sink node, written topic)]
    for topic, source in sources.items():
        seen, stack, out = set(), [source], []
        while stack:
            node = stack.pop()
            if node.name in seen:
                continue
            seen.add(node.name)
            if node.kind == "sink":
                out += [(node.name, resolve_topic(t)) for t in node.topics]
            stack.extend(by_name[c.name] for c in node.children)
        edges[topic] = out

    def walk(topics: list[str], sinks: list[str]) -> str | None:
        for sink, written in edges.get(topics[-1], []):
            if written in topics:
                start = topics.index(written)
                hops = [f"{t} -> {s}" for t, s in
                        zip(topics[start:], sinks[start:] + [sink], strict=True)]
                return " -> ".join(hops + [written])
            if written in edges:
                found = walk(topics + [written], sinks + [sink])
                if found:
                    return found
        return None

    for topic in sorted(edges):
        found = walk([topic], [])
        if found:
            return found
    return None
