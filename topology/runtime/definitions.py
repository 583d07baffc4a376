"""What each node of a topology does, as data: the definitions the DSL calls record.

Every DSL call adds a :class:`~topology.runtime.graph.GraphNode` carrying one definition: its
kind (the class), what the user gave (windows, serdes, functions, store names) and ``create``,
the supplier of a fresh processor for one task. Whoever needs to know what a node is (the
runtime, ``describe()``, the Spark compiler) reads the definition; nobody instantiates a
processor to look inside it.

The classes form a closed set: a source, a sink, a stateless stream step, a user processor, a
table source, a stateful table step, a table's regrouping, ``to_stream()``, an aggregation, a
suppression and a stream-table join.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from suppress.config import Suppressed

from ..windows import SessionWindows, SlidingWindows, TimeWindows
from .processor import InternalProcessor

__all__ = ("Aggregation", "Definition", "Sink", "Source", "StreamStep", "StreamTableJoin",
           "Suppression", "TableRegroup", "TableSource", "TableStep", "ToStream",
           "UserProcessor")


@dataclass(frozen=True, kw_only=True)
class Definition:
    """What one node does; each subclass is one kind of node."""

    create: Callable[[], InternalProcessor]
    """A fresh processor for one task (each task calls it once; tasks share no state)."""


@dataclass(frozen=True, kw_only=True)
class Source(Definition):
    """Reads the node's topics (``GraphNode.topics``, serdes in ``GraphNode.consumed``)."""


@dataclass(frozen=True, kw_only=True)
class Sink(Definition):
    """Writes its records to ``topic`` with the ``Produced`` serdes (``None``: none given)."""

    topic: str
    key_serde: Any
    value_serde: Any


@dataclass(frozen=True, kw_only=True)
class StreamStep(Definition):
    """A stream step that keeps no state: one record in, zero or more out.

    ``operation`` is the DSL call: ``filter``, ``filter_not``, ``map``, ``map_values``,
    ``flat_map``, ``flat_map_values``, ``select_key``, ``group_by`` (its key selection),
    ``peek``, ``merge``, or ``pass`` (the filter of a repartition topic, which passes every
    record on).
    """

    operation: str


@dataclass(frozen=True, kw_only=True)
class UserProcessor(Definition):
    """``KStream.process``: the user's processor, with access to ``stores``."""

    stores: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class TableSource(Definition):
    """A table read from a topic into ``store`` (versioned: a versioned store)."""

    store: str
    versioned: bool


@dataclass(frozen=True, kw_only=True)
class TableStep(Definition):
    """A table step computed from other tables' changes.

    ``operation``: ``filter``, ``filter_not``, ``map_values``, ``join-this``,
    ``join-other`` or ``join-merge`` (a table-table join's three nodes).
    """

    operation: str


@dataclass(frozen=True, kw_only=True)
class TableRegroup(Definition):
    """``KTable.group_by``: each change becomes a removal and an addition under new keys."""


@dataclass(frozen=True, kw_only=True)
class ToStream(Definition):
    """``KTable.to_stream()``: the stream of a table's changes."""


AnyWindows = TimeWindows | SlidingWindows | SessionWindows


@dataclass(frozen=True, kw_only=True)
class Aggregation(Definition):
    """A ``count``, ``reduce`` or ``aggregate`` of a grouped stream or table, into ``store``.

    ``initializer`` and ``aggregator`` are the functions the processor calls (a ``reduce``
    of a stream has no initializer, except in sliding windows, where it starts from
    ``None``); ``merger`` merges sessions; ``subtractor`` takes a table row's old value out.
    """

    grouped: str
    """``"stream"`` or ``"table"``."""
    windows: AnyWindows | None
    initializer: Callable[[], Any] | None
    aggregator: Callable[[Any, Any, Any], Any]
    store: str
    merger: Callable[[Any, Any, Any], Any] | None = None
    subtractor: Callable[[Any, Any, Any], Any] | None = None
    late_records_to: str | None = None
    """The topic of records dropped for closed windows (windowed aggregations only)."""


@dataclass(frozen=True, kw_only=True)
class Suppression(Definition):
    """``KTable.suppress``: the buffer ``store`` holding updates back as ``suppressed`` says.

    ``delay_ms``: a final result's grace (the window's close delay) or the time limit;
    ``buffer_time`` the time a windowed key's final result is due at (``None`` for a time
    limit); ``key_serializer``/``value_serializer`` size the buffer's entries.
    """

    suppressed: Suppressed
    delay_ms: int
    store: str
    key_serializer: Callable[[Any], bytes | None]
    value_serializer: Callable[[Any], bytes | None]
    buffer_time: Callable[[Any], int] | None


@dataclass(frozen=True, kw_only=True)
class StreamTableJoin(Definition):
    """A stream's ``join``/``left_join`` with a table, looked up in ``stores``.

    ``grace_ms``: how long a versioned table's join holds records back (``None``: none).
    """

    stores: tuple[str, ...]
    left: bool
    grace_ms: int | None
