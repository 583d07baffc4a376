"""How the distributed runner reads a topology: which parts become which Spark operators.

:func:`compile_topology` walks the built graph and sorts every node into one of these parts:

- **pre**: the stateless stream nodes between the sources and the first stateful node or an
  output topic (``filter``, ``map``, ``map_values``, ``flat_map``, ``flat_map_values``,
  ``select_key``, ``peek``, ``merge``, repartitions). They run on the executors in
  ``mapInArrow``, the user's functions called by the library's own processors.
- **batched**: an aggregation of a grouped stream (without windows, or in time, session or
  sliding windows), followed by ``to_stream()`` (every update), or by a suppression
  (``until_window_closes`` or ``until_time_limit``, any buffer) and ``to_stream()``: it
  runs in ``transformWithStateInPandas`` by :mod:`topology.spark._aggregations`, the
  library's own aggregation and suppression, a key group (a bucket of keys of one input
  partition) per call, with the partition's stream time (one bucket per partition for a
  bounded buffer); a table aggregation the same way, after its **regroup**: the table
  source and its ``group_by`` (``b.table(topic).group_by(...)``, read by nothing else) in a
  batched processor of their own (:mod:`topology.spark._regroup`);
- or **limit**: a table source whose only child is ``suppress(until_time_limit(d, ...))``,
  followed by ``to_stream()``: run in Spark's ``transformWithStateInPandas`` by
  :mod:`topology.spark._time_limit` (a bounded buffer in one bucket of keys);
- or **join**: a stream's ``join``/``left_join`` (with or without ``grace``) with a versioned
  table source that nothing else reads: both run in one ``transformWithStateInPandas``
  (:mod:`topology.spark._join`), and so does the **joined** chain, the join node and the
  stateless stream nodes after it, up to output topics or a **batched** aggregation that
  only the join feeds (as above, in its own ``transformWithStateInPandas``; the join then
  packs the joined records for it, one key group per input partition, so that the
  aggregation gets them in the task's order);
- **post**: the stateless stream nodes after the ``to_stream()`` of the batched aggregation
  or the limit, up to output topics.

Everything else (other tables, other table aggregations, joins with tables without history,
user processors, any other second stateful node) is refused with a
:class:`UnsupportedTopologyError` naming the node, before any Spark query is defined.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from suppress.config import BufferConfig, BufferFullStrategy, Suppressed
from suppress.entry import RecordContext

from ..errors import TopologyError
from ..runtime.definitions import (
    Aggregation,
    Definition,
    StreamStep,
    StreamTableJoin,
    Suppression,
    TableRegroup,
    TableSource,
    TableStep,
    ToStream,
    UserProcessor,
)
from ..runtime.engine import DEFAULT_APPLICATION_ID
from ..runtime.graph import GraphNode, StoreSpec
from ..runtime.processor import InternalProcessor
from ..runtime.processors import stateless as sp
from ..serde import serializer_of
from ..topology import Topology
from ..windows import SessionWindows, SlidingWindows, TimeWindows

__all__ = ("AGGREGATION", "DROPS", "OUTPUTS", "TABLE_UPDATE", "BatchedAggregationSpec", "ChainSpec",
           "JoinSpec", "Plan", "ReadInternalTopic", "RegroupSpec", "TimeLimitSpec",
           "UnsupportedTopologyError", "compile_topology")

def _time_limit(definition: Definition) -> bool:
    """Whether a node is a time-limit suppression (``until_time_limit``)."""
    return isinstance(definition, Suppression) and not definition.suppressed.final_results

AGGREGATION = -1
"""The route of records that reach the stateful node: the aggregation or the time-limited
table, or the stream side of the as-of join; in the joined chain, the aggregation after the
join (others: the output topic's index)."""

TABLE_UPDATE = -2
"""The route of records that reach the versioned table source of the as-of join (packed with
the stream's records; the join's processor tells them apart by their topic)."""

DROPS = -3
"""The route of a batched processor's drop counts: one row per reason, the reason's name
(UTF-8) in ``k`` and the count in ``ts``; counted by the runner, never sent to a sink."""

OUTPUTS = -4
"""The route of a batched processor's results: one row per call, ``k`` the state codec's bytes
of the list of records that left its post chain (``(route, key, value, timestamp,
headers)``, routes of output topics), ``st`` their number; unpacked by the runner before the
sinks."""


class ReadInternalTopic(InternalProcessor):
    """The source of an internal (repartition) topic inside a chain.

    Passes records on with the topic a task would have read them from (a suppression's
    buffer counts the name's bytes): the test driver's name, with its default application id.
    """

    def __init__(self, topic: str) -> None:
        self.topic = topic

    def process(self, key: Any, value: Any, ctx: RecordContext) -> None:
        """Forward the record with :attr:`topic` as its context's topic."""
        self.forward(key, value, ctx._replace(topic=self.topic))


class UnsupportedTopologyError(TopologyError):
    """A topology (or a node of it) the distributed runner cannot run, raised when it is built.

    The message names the node, what it is and why it cannot run on Spark's executors, and
    what can (the :class:`~topology.spark.ForeachBatchRunner` runs every topology).
    """


@dataclass(frozen=True)
class ChainSpec:
    """Stateless nodes run as one chain on an executor, in a form that pickles.

    ``nodes[i] = (name, factory, children)``; a child is a node index, or ``("out", route,
    node name)`` for a record leaving the chain: ``route`` is the index of an output topic
    in ``topics``, or :data:`AGGREGATION`. ``roots`` maps each source topic (for the post
    chain: ``""``) to the node indices that receive its records; ``to_streams`` holds the
    indices of the ``to_stream()`` nodes (they run no user code).
    """

    nodes: tuple[tuple[str, Callable[[], InternalProcessor], tuple[Any, ...]], ...]
    roots: dict[str, tuple[int, ...]]
    topics: tuple[str, ...]
    to_streams: frozenset[int] = frozenset()


@dataclass(frozen=True)
class TimeLimitSpec:
    """A table's ``suppress(until_time_limit(d, ...))``: run in a batched processor."""

    name: str
    delay_ms: int
    key_serializer: Callable[[Any], bytes | None]
    """The suppression's key bytes: its eviction order, and the bucket of a key."""
    value_serializer: Callable[[Any], bytes | None]
    """The suppression's value bytes (the table's value serde): a ``max_bytes`` bound
    counts them."""
    buffer_config: Any
    """A bounded buffer's config (``max_records``/``max_bytes``, emit early or shut down);
    ``None``: unbounded (a spilling buffer's output is the unbounded one). A bounded buffer
    runs in one bucket, where the bound is the task's."""
    table: str
    """The table source node: with a ``max_bytes`` bound its processor runs ahead of the
    suppression, which counts each change's old value, as in a task."""
    table_factory: Callable[[], InternalProcessor]
    store: str
    store_factory: Callable[[], Any]
    """Builds the table's (in-memory) key-value store, as the test driver does."""


@dataclass(frozen=True)
class JoinSpec:
    """A stream's as-of join with a versioned table: run in a batched processor.

    The join node itself is the root of the joined chain (built on the executor); the table
    source and its store are built from the topology's own factories.
    """

    name: str
    """The join node."""
    table: str
    """The versioned table source node."""
    table_factory: Callable[[], InternalProcessor]
    table_topics: frozenset[str]
    """The table source's topics: a record read from one is a table update."""
    store: str
    store_factory: Callable[[], Any]
    """Builds the table's (in-memory) versioned store, as the test driver does."""
    key_serializer: Callable[[Any], bytes | None]
    """The table's key bytes: both sides' records are bucketed by them."""
    grace_ms: int | None
    feeds_aggregation: bool = False
    """An aggregation takes the joined records (the plan's ``batched``)."""


@dataclass(frozen=True)
class BatchedAggregationSpec:
    """An aggregation of a grouped stream run in a batched processor, with its suppression.

    Every aggregation of a grouped stream (a table's too, after its regroup; a stream's also
    after an as-of join): without windows or in time, session or sliding windows, emitting
    every update, rate-limited (``until_time_limit``) or with final results in any buffer.
    The aggregation, its store and its suppression (if any) are built from the topology's
    own factories.
    """

    name: str
    """The aggregation node."""
    factory: Callable[[], InternalProcessor]
    store: str
    store_factory: Callable[[], Any]
    """Builds the aggregation's (in-memory) store, as the test driver does."""
    key_serializer: Callable[[Any], bytes | None]
    """The store's key bytes: records are bucketed by them."""
    kind: str
    """``"time"``, ``"session"``, ``"sliding"`` or ``"none"`` (no windows): which store, and
    which windows a record may still update."""
    span_ms: int
    """The window size (time windows), the inactivity gap (sessions) or the time difference
    (sliding windows); 0 without windows."""
    grace_ms: int
    suppression: str | None = None
    """The suppression node; ``None``: every update goes on to ``to_stream()``."""
    suppressed: Suppressed | None = None
    """The suppression's config; a spilling buffer's is unbounded (its output is the
    unbounded one's)."""
    suppression_factory: Callable[[], InternalProcessor] | None = None
    """Builds the suppression node, as the topology builds it (then given :attr:`suppressed`)."""

    @property
    def bounded(self) -> bool:
        """Whether the buffer has a bound (then it runs in one bucket, as in a task)."""
        return self.suppressed is not None and self.suppressed.buffer_config.is_bounded

    @property
    def drops_null_values(self) -> bool:
        """Whether a record with a ``None`` value is dropped before it moves stream time.

        So it is without windows and in sliding windows, as Kafka's ``KStreamAggregate`` and
        ``KStreamSlidingWindowAggregate`` do; time and session windows check the key only,
        and hand a ``None`` value to the aggregator.
        """
        return self.kind in ("none", "sliding")


@dataclass(frozen=True)
class RegroupSpec:
    """A table source re-grouped (``table.group_by(...)``) for a table aggregation.

    Its table and selecting node run in a batched processor ahead of the aggregation's,
    built from the topology's own factories.
    """

    table: str
    """The table source node."""
    table_factory: Callable[[], InternalProcessor]
    store: str
    store_factory: Callable[[], Any]
    """Builds the table's (in-memory) key-value store, as the test driver does."""
    key_serializer: Callable[[Any], bytes | None]
    """The table's key bytes: its records are bucketed by them."""
    select: str
    """The ``group_by`` node."""
    select_factory: Callable[[], InternalProcessor]
    topic: str
    """The repartition topic a task reads the regrouped changes from (the test driver's name,
    with its default application id)."""


@dataclass(frozen=True)
class Plan:
    """A topology sorted into the parts the distributed runner runs."""

    sources: dict[str, Any]
    """External source topic -> its ``Consumed`` (key and value serdes)."""
    pre: ChainSpec
    limit: TimeLimitSpec | None
    join: JoinSpec | None
    joined: ChainSpec | None
    """The join and the stateless nodes after it, up to output topics or the batched
    aggregation (route :data:`AGGREGATION`), run in the join's processor."""
    post: ChainSpec
    """The stateless nodes after the to_stream() of the aggregation or the time limit."""
    topics: tuple[str, ...]
    """The output topics, indexed by route."""
    batched: BatchedAggregationSpec | None = None
    """The aggregation run in a batched processor (after ``join``, if any)."""
    regroup: RegroupSpec | None = None
    """For a table aggregation: the table and its ``group_by``, run before ``batched``."""

    @property
    def rekeyed(self) -> bool:
        """Whether the pre chain's records reach the stateful node through a repartition.

        Then the node runs as the one task of a repartition topic of one partition,
        whatever input partition a record came from.
        """
        return _repartitions(self.pre)

    @property
    def aggregation_rekeyed(self) -> bool:
        """Whether the joined records reach the aggregation as one repartition partition.

        So they do after a re-key before the join (all of it runs there) or between the two.
        """
        return self.rekeyed or (self.joined is not None and _repartitions(self.joined))


def _repartitions(chain: ChainSpec) -> bool:
    """Whether ``chain`` reads a repartition topic."""
    return any(isinstance(factory, partial) and factory.func is ReadInternalTopic
               for _, factory, _ in chain.nodes)


def _what(node: GraphNode) -> str:
    """The node's name and what it is, for an error message."""
    definition = node.definition
    if isinstance(definition, TableSource):
        what = "a versioned table source" if definition.versioned else "a table source (b.table)"
    elif isinstance(definition, Aggregation):
        windows = definition.windows
        what = ("a table aggregation" if definition.grouped == "table" else
                "an aggregation without windows" if windows is None else
                "a sliding-windowed aggregation" if isinstance(windows, SlidingWindows) else
                "a session-windowed aggregation" if isinstance(windows, SessionWindows) else
                "a windowed aggregation")
    else:
        what = {StreamTableJoin: "a stream-table join", UserProcessor: "a user processor "
                "(process)", Suppression: "a suppression", ToStream: "to_stream()",
                TableRegroup: "a table's group_by", StreamStep: "a stream step",
                TableStep: "a table step"}.get(type(definition), type(definition).__name__)
    return f"{node.name} ({what})"


def _refuse(node: GraphNode, why: str) -> UnsupportedTopologyError:
    return UnsupportedTopologyError(
        f"DistributedRunner cannot run node {_what(node)}: {why}. It compiles "
        f"stateless stream steps, one count/reduce/aggregate of a grouped stream (with or "
        f"without windows) or of b.table(topic).group_by(...) + to_stream(), optionally "
        f"suppressed in between, one table "
        f"with suppress(until_time_limit(d, ...)) + to_stream(), or one stream's join or "
        f"left_join with a versioned table source that nothing else reads, optionally "
        f"followed by an aggregation of the joined stream; "
        f"ForeachBatchRunner runs every topology")


def compile_topology(topology: Topology) -> Plan:
    """Sort ``topology``'s nodes into the pre, limit, join, joined, batched and post parts.

    :raises UnsupportedTopologyError: naming the first node that cannot run distributed.
    """
    internal = topology.internal_topics
    readers = {t: node for node in topology.nodes if node.kind == "source"
               for t in node.topics if t in internal}
    topics = tuple(sorted(t for n in topology.nodes if n.kind == "sink" for t in n.topics
                          if t not in internal))

    def children(node: GraphNode) -> list[GraphNode]:
        if node.kind == "sink" and node.topics[0] in internal:
            return [readers[node.topics[0]]]
        return list(node.children)

    stateful: GraphNode | None = None
    """The first stateful node: the aggregation, the table source of a time limit, or the
    join (an aggregation may follow the join)."""
    after_join: GraphNode | None = None
    """The aggregation of the joined stream, if one follows the join."""
    batched: BatchedAggregationSpec | None = None
    regroup: RegroupSpec | None = None
    limit: TimeLimitSpec | None = None
    join: JoinSpec | None = None
    join_node: GraphNode | None = None
    exits: dict[str, int] = {}
    """Stateful node name -> the route by which the pre chain's records reach it."""
    to_streams: list[GraphNode] = []
    """The roots of the post chain: the to_stream() after the last stateful node."""
    absorbed: set[str] = set()
    """The suppression node run with its aggregation in the batched processor."""
    for node in topology.nodes:
        definition = node.definition
        if node.name in absorbed:
            continue
        if isinstance(definition, Aggregation | StreamTableJoin) or _time_limit(definition):
            if stateful is not None and not (
                    join_node is not None and after_join is None
                    and isinstance(definition, Aggregation) and definition.grouped != "table"):
                raise _refuse(node, f"the runner compiles one stateful aggregation or "
                                    f"join per topology, or an as-of join followed by "
                                    f"an aggregation of the joined stream, and "
                                    f"{(after_join or stateful).name} is another")
        if isinstance(definition, Aggregation):
            suppression_node, to_streams = _tail(node)
            suppression = None if suppression_node is None else suppression_node.definition
            assert suppression is None or isinstance(suppression, Suppression)
            batched = _batched_spec(node, definition, suppression_node, suppression, topology)
            if suppression_node is not None:
                absorbed.add(suppression_node.name)
            if join_node is not None:
                after_join = node
            else:
                stateful = node
                if definition.grouped == "table":
                    regroup = _regroup_spec(node, topology, readers)
                    exits = {regroup.table: AGGREGATION}
        elif isinstance(definition, Suppression) and not definition.suppressed.final_results:
            stateful = _check_time_limit(node, definition)
            store = _store(topology, stateful.stores[0])
            limit = TimeLimitSpec(node.name, definition.delay_ms, definition.key_serializer,
                                  definition.value_serializer,
                                  definition.suppressed.buffer_config if _bounded(definition)
                                  else None, stateful.name, stateful.factory, store.name,
                                  store.factory)
            to_streams = list(node.children)
        elif isinstance(definition, StreamTableJoin):
            table = _check_join(node, topology)
            store = _store(topology, node.stores[0])
            stateful = stateful or node
            join_node = node
            join = JoinSpec(node.name, table.name, table.factory,
                            frozenset(table.parents[0].topics), store.name, store.factory,
                            _key_serializer(store), definition.grace_ms)
            exits = {node.name: AGGREGATION, table.name: TABLE_UPDATE}
    if stateful is not None and not exits:
        exits = {stateful.name: AGGREGATION}
    if join_node is not None and after_join is not None:
        if after_join.name not in _downstream(join_node, children):
            raise _refuse(join_node, f"the runner compiles an aggregation after an as-of "
                          f"join, not before or beside it, and {after_join.name} is not fed "
                          f"by this join")
        assert join is not None
        join = replace(join, feeds_aggregation=True)

    def refused(node: GraphNode, part: str) -> UnsupportedTopologyError:
        if part == "pre" and node is after_join:
            return _refuse(node, f"its records come from the as-of join "
                                       f"{join_node.name if join_node else ''} and from "
                                       f"elsewhere: an aggregation after a join is "
                                       f"compiled only when all its records pass the join")
        return _refuse(node, _reason(node.definition))

    def chain(roots: dict[str, list[GraphNode]], part: str, heads: tuple[GraphNode, ...],
              exits: dict[str, int]) -> ChainSpec:
        """The stateless chain from ``roots``, records for ``exits`` leaving by their routes.

        ``heads`` may be stateful: the to_stream() nodes or the join heading the chain.
        """
        index: dict[str, int] = {}
        order: list[GraphNode] = []
        stack = [n for ns in roots.values() for n in ns]
        while stack:
            node = stack.pop()
            if node.name in index:
                continue
            if node.kind == "sink" and node.topics[0] not in internal:
                continue
            if node.kind not in ("source", "sink") and \
                    not isinstance(node.definition, StreamStep) and node not in heads:
                if node.name in exits:
                    continue
                raise refused(node, part)
            index[node.name] = len(order)
            order.append(node)
            stack.extend(children(node))
        specs = []
        for node in order:
            kids: list[Any] = []
            for child in children(node):
                if child.kind == "sink" and child.topics[0] not in internal:
                    kids.append(("out", topics.index(child.topics[0]), child.name))
                elif child.name in exits:
                    kids.append(("out", exits[child.name], child.name))
                else:
                    kids.append(index[child.name])
            factory: Callable[[], InternalProcessor] = node.factory
            if node.kind == "sink":
                factory = sp.PassThrough
            elif node.kind == "source":
                factory = sp.PassThrough if not set(node.topics) & internal else \
                    partial(ReadInternalTopic, f"{DEFAULT_APPLICATION_ID}-{node.topics[0]}")
            specs.append((node.name, factory, tuple(kids)))
        root_index = {topic: tuple(index[n.name] for n in ns if n.name in index)
                      for topic, ns in roots.items()}
        to_streams = frozenset(i for i, node in enumerate(order)
                               if isinstance(node.definition, ToStream))
        return ChainSpec(tuple(specs), root_index, topics, to_streams)

    sources: dict[str, Any] = {}
    roots: dict[str, list[GraphNode]] = {}
    for node in topology.nodes:
        if node.kind == "source" and not set(node.topics) & internal:
            for topic in node.topics:
                sources[topic] = node.consumed
                roots[topic] = [node]
    pre = chain(roots, "pre", (), exits)
    joined = None if join_node is None else chain(
        {"": [join_node]}, "joined", (join_node,),
        {} if after_join is None else {after_join.name: AGGREGATION})
    post = chain({"": to_streams}, "post", tuple(to_streams), {}) if to_streams \
        else ChainSpec((), {}, topics)
    return Plan(sources, pre, limit, join, joined, post, topics, batched, regroup)


def _downstream(node: GraphNode, children: Callable[[GraphNode], list[GraphNode]]
                ) -> set[str]:
    """The names of the nodes ``node``'s records can reach."""
    seen: set[str] = set()
    stack = children(node)
    while stack:
        child = stack.pop()
        if child.name not in seen:
            seen.add(child.name)
            stack.extend(children(child))
    return seen


def _reason(definition: Definition) -> str:
    """Why a node that is not one of the compiled shapes is refused."""
    if isinstance(definition, TableSource | TableStep | TableRegroup) or (
            isinstance(definition, Aggregation) and definition.grouped == "table"):
        return "tables keep per-key state that Spark's executors have no operator for here"
    if isinstance(definition, StreamTableJoin):
        return "only one stream-table join is compiled"
    if isinstance(definition, UserProcessor):
        return "a user processor's stores and punctuations have no Spark equivalent"
    if isinstance(definition, Suppression):
        return "a suppression is compiled only right after an aggregation or (until_time_limit)" \
               " right on a table source"
    if isinstance(definition, ToStream):
        return "to_stream() is compiled only right after an aggregation or its suppression"
    return "it has no compiled form"


def _store(topology: Topology, name: str) -> StoreSpec:
    """The spec of store ``name``."""
    return next(spec for spec in topology.stores if spec.name == name)


def _key_serializer(store: StoreSpec) -> Callable[[Any], bytes | None]:
    """The bytes of a store's keys (the fallback encoding where the spec names none)."""
    return store.key_serializer or serializer_of(None)


def _tail(node: GraphNode) -> tuple[GraphNode | None, list[GraphNode]]:
    """An aggregation's suppression (if any) and the ``to_stream()`` nodes after it.

    :raises UnsupportedTopologyError: for anything else after the aggregation.
    """
    kids = node.children
    suppression = None
    definition = node.definition
    if len(kids) == 1 and isinstance(kids[0].definition, Suppression):
        suppression = kids[0]
        _check_idle_close(suppression)
        kids = suppression.children
    elif isinstance(definition, Aggregation) and definition.late_records_to is not None:
        raise _refuse(node, "late records sent to a topic (late_records_to=) are not compiled")
    for child in kids:
        if not isinstance(child.definition, ToStream):
            raise _refuse(child, "after an aggregation (and its suppression) only to_stream() "
                          "is compiled")
    return suppression, list(kids)


def _check_idle_close(node: GraphNode) -> None:
    """A suppression with idle close is refused: nothing here follows a wall clock."""
    definition = node.definition
    assert isinstance(definition, Suppression)
    if definition.suppressed.idle_close_ms is not None:
        raise _refuse(node, "idle close (with_idle_close) moves a suppression's stream "
                      "time with the wall clock while no input arrives; the runner's time is "
                      "its input partitions' stream times, which move only with input "
                      "(ForeachBatchRunner runs it, its wall clock being the driver's)")


def _check_time_limit(node: GraphNode, definition: Suppression) -> GraphNode:
    """A time limit is compiled right on a table source; return that table source node."""
    _check_idle_close(node)
    parent = node.parents[0] if len(node.parents) == 1 else None
    if parent is None or not isinstance(parent.definition, TableSource) or \
            parent.definition.versioned or \
            parent.children != [node] or parent.parents[0].children != [parent]:
        raise _refuse(node, "until_time_limit is compiled only right on a table source "
                      "(b.table(topic).suppress(...)) that nothing else reads")
    for child in node.children:
        if not isinstance(child.definition, ToStream):
            raise _refuse(child, "after a compiled suppression only to_stream() is supported")
    return parent


def _check_join(node: GraphNode, topology: Topology) -> GraphNode:
    """A join is compiled on a versioned table source nothing else reads; return that node."""
    specs = {s.name: s for s in topology.stores}
    if len(node.stores) != 1 or specs[node.stores[0]].kind != "versioned":
        raise _refuse(node, "only a join with a versioned table (Materialized."
                      "versioned) is compiled: its history is what the batched processor "
                      "keeps per bucket of keys")
    store = node.stores[0]
    tables = [n for n in topology.nodes if n.stores == [store]
              and isinstance(n.definition, TableSource) and n.definition.versioned]
    if len(tables) != 1:
        raise _refuse(node, f"the join's table (store {store!r}) is compiled only "
                      f"when it is a versioned table source (b.table(topic, Materialized."
                      f"versioned(...))), read as it is")
    table = tables[0]
    source = table.parents[0] if len(table.parents) == 1 else None
    if table.children or source is None or source.children != [table] or \
            set(source.topics) & topology.internal_topics:
        raise _refuse(table, "a versioned table is compiled only as the table of one join, "
                      "with nothing else reading its topic or its changes")
    if len(node.parents) != 1:
        raise _refuse(node, "the join's stream has more than one parent node")
    return table


def _bounded(definition: Suppression) -> bool:
    """Whether a suppression's buffer has a bound that shows in its output.

    A spilling buffer's output is the unbounded one's.
    """
    config = definition.suppressed.buffer_config
    return config.is_bounded and config.strategy is not BufferFullStrategy.SPILL_TO_DISK


def _batched_spec(node: GraphNode, definition: Aggregation, suppression_node: GraphNode | None,
                  suppression: Suppression | None, topology: Topology
                  ) -> BatchedAggregationSpec:
    store = _store(topology, definition.store)
    windows = definition.windows
    if isinstance(windows, SlidingWindows):
        kind, span, grace = "sliding", windows.time_difference_ms, windows.grace_ms
    elif isinstance(windows, SessionWindows):
        kind, span, grace = "session", windows.gap_ms, windows.grace_ms
    elif isinstance(windows, TimeWindows):
        kind, span, grace = "time", windows.size_ms, windows.grace_ms
    else:
        kind, span, grace = "none", 0, 0
    spec = BatchedAggregationSpec(node.name, node.factory, store.name, store.factory,
                                  _key_serializer(store), kind, span, grace)
    if suppression_node is None or suppression is None:
        return spec
    suppressed = suppression.suppressed
    if not _bounded(suppression):  # a spilling buffer's output is the unbounded one's
        unbounded = BufferConfig.unbounded()
        suppressed = Suppressed.until_window_closes(unbounded) if suppressed.final_results \
            else Suppressed.until_time_limit(suppression.delay_ms, unbounded)
    return replace(spec, suppression=suppression_node.name, suppressed=suppressed,
                   suppression_factory=suppression_node.factory)


def _regroup_spec(node: GraphNode, topology: Topology, readers: dict[str, GraphNode]
                  ) -> RegroupSpec:
    """A table aggregation is compiled on ``b.table(topic).group_by(...)``, nothing else."""
    why = ("a table aggregation is compiled only as b.table(topic).group_by(...) followed by "
           "count/reduce/aggregate, with nothing else reading the topic or the table")
    parent = node.parents[0] if len(node.parents) == 1 else None
    topic = parent.topics[0] if parent is not None and parent.kind == "source" else None
    sinks = [n for n in topology.nodes if n.kind == "sink" and n.topics == (topic,)]
    select = sinks[0].parents[0] if topic is not None and len(sinks) == 1 else None
    table = select.parents[0] if select is not None and len(select.parents) == 1 else None
    source = table.parents[0] if table is not None and len(table.parents) == 1 else None
    if parent is None or topic is None or readers.get(topic) is not parent or \
            select is None or not isinstance(select.definition, TableRegroup) \
            or select.children != sinks or table is None or \
            not isinstance(table.definition, TableSource) or table.definition.versioned or \
            table.children != [select] or source is None or source.children != [table] or \
            len(source.topics) != 1 or set(source.topics) & topology.internal_topics:
        raise _refuse(node, why)
    store = _store(topology, table.stores[0])
    return RegroupSpec(table.name, table.factory, store.name, store.factory,
                       _key_serializer(store), select.name, select.factory,
                       f"{DEFAULT_APPLICATION_ID}-{topic}")
