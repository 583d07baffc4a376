"""``Topology.to_mermaid()`` and ``Topology.to_dot()``: the pictures of ``describe()``'s graph.

Exact text for three small topologies, then for many: every node, edge and store of
``describe()`` in both pictures, sub-topology by sub-topology; the DOT text parsed (by a small
parser of the DOT grammar, and by ``pydot`` where installed) and the Mermaid text checked line
by line (every label quoted, nothing in it that Mermaid reads as syntax, every edge endpoint
declared).
"""

# ruff: noqa: E501  (the expected pictures hold long lines, as the real output does)

import re
from collections.abc import Callable

import pytest

from suppress import BufferConfig, Suppressed
from topology import Grouped, Materialized, Serdes, StreamsBuilder, TimeWindows
from topology.topology import Topology


def suppressed() -> Topology:
    b = StreamsBuilder()
    (b.stream("clicks").group_by_key().windowed_by(TimeWindows.of_size_and_grace(60_000, 10_000))
     .count().suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream().to("out"))
    return b.build()


def rekeyed() -> Topology:
    b = StreamsBuilder()
    b.stream("words").group_by(lambda k, v: v).count().to_stream().to("counts")
    return b.build()


def versioned_join() -> Topology:
    b = StreamsBuilder()
    rates = b.table("rates", materialized=Materialized.versioned("rates", 60_000))
    b.stream("orders").join(rates, lambda o, r: o * r).to("priced")
    return b.build()


SUPPRESSED_MERMAID = '''\
flowchart TB
    subgraph sub_0["Sub-topology: 0"]
        n_KSTREAM_SOURCE_0000000000(["Source: KSTREAM-SOURCE-0000000000<br/>topics: [clicks]"])
        n_KSTREAM_AGGREGATE_0000000002["Processor: KSTREAM-AGGREGATE-0000000002<br/>stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000001]"]
        s_KSTREAM_AGGREGATE_STATE_STORE_0000000001[("KSTREAM-AGGREGATE-STATE-STORE-0000000001")]
        n_KTABLE_SUPPRESS_0000000003["Processor: KTABLE-SUPPRESS-0000000003<br/>stores: [KTABLE-SUPPRESS-STATE-STORE-0000000004]"]
        s_KTABLE_SUPPRESS_STATE_STORE_0000000004[("KTABLE-SUPPRESS-STATE-STORE-0000000004")]
        n_KTABLE_TOSTREAM_0000000005["Processor: KTABLE-TOSTREAM-0000000005<br/>stores: []"]
        n_KSTREAM_SINK_0000000006(["Sink: KSTREAM-SINK-0000000006<br/>topic: out"])
        n_KSTREAM_SOURCE_0000000000 --> n_KSTREAM_AGGREGATE_0000000002
        n_KSTREAM_AGGREGATE_0000000002 --> n_KTABLE_SUPPRESS_0000000003
        n_KTABLE_SUPPRESS_0000000003 --> n_KTABLE_TOSTREAM_0000000005
        n_KTABLE_TOSTREAM_0000000005 --> n_KSTREAM_SINK_0000000006
        n_KSTREAM_AGGREGATE_0000000002 -.- s_KSTREAM_AGGREGATE_STATE_STORE_0000000001
        n_KTABLE_SUPPRESS_0000000003 -.- s_KTABLE_SUPPRESS_STATE_STORE_0000000004
    end
'''

SUPPRESSED_DOT = '''\
digraph topology {
    rankdir=TB;
    node [shape=box];
    subgraph cluster_0 {
        label="Sub-topology: 0";
        n_KSTREAM_SOURCE_0000000000 [style=rounded, label="Source: KSTREAM-SOURCE-0000000000\\ntopics: [clicks]"];
        n_KSTREAM_AGGREGATE_0000000002 [label="Processor: KSTREAM-AGGREGATE-0000000002\\nstores: [KSTREAM-AGGREGATE-STATE-STORE-0000000001]"];
        s_KSTREAM_AGGREGATE_STATE_STORE_0000000001 [shape=cylinder, label="KSTREAM-AGGREGATE-STATE-STORE-0000000001"];
        n_KTABLE_SUPPRESS_0000000003 [label="Processor: KTABLE-SUPPRESS-0000000003\\nstores: [KTABLE-SUPPRESS-STATE-STORE-0000000004]"];
        s_KTABLE_SUPPRESS_STATE_STORE_0000000004 [shape=cylinder, label="KTABLE-SUPPRESS-STATE-STORE-0000000004"];
        n_KTABLE_TOSTREAM_0000000005 [label="Processor: KTABLE-TOSTREAM-0000000005\\nstores: []"];
        n_KSTREAM_SINK_0000000006 [style=rounded, label="Sink: KSTREAM-SINK-0000000006\\ntopic: out"];
        n_KSTREAM_SOURCE_0000000000 -> n_KSTREAM_AGGREGATE_0000000002;
        n_KSTREAM_AGGREGATE_0000000002 -> n_KTABLE_SUPPRESS_0000000003;
        n_KTABLE_SUPPRESS_0000000003 -> n_KTABLE_TOSTREAM_0000000005;
        n_KTABLE_TOSTREAM_0000000005 -> n_KSTREAM_SINK_0000000006;
        n_KSTREAM_AGGREGATE_0000000002 -> s_KSTREAM_AGGREGATE_STATE_STORE_0000000001 [style=dotted, arrowhead=none];
        n_KTABLE_SUPPRESS_0000000003 -> s_KTABLE_SUPPRESS_STATE_STORE_0000000004 [style=dotted, arrowhead=none];
    }
}
'''

REKEYED_MERMAID = '''\
flowchart TB
    subgraph sub_0["Sub-topology: 0"]
        n_KSTREAM_SOURCE_0000000000(["Source: KSTREAM-SOURCE-0000000000<br/>topics: [words]"])
        n_KSTREAM_KEY_SELECT_0000000001["Processor: KSTREAM-KEY-SELECT-0000000001<br/>stores: []"]
        n_KSTREAM_FILTER_0000000005["Processor: KSTREAM-FILTER-0000000005<br/>stores: []"]
        n_KSTREAM_SINK_0000000004(["Sink: KSTREAM-SINK-0000000004<br/>topic: KSTREAM-AGGREGATE-STATE-STORE-0000000002-repartition"])
        n_KSTREAM_SOURCE_0000000000 --> n_KSTREAM_KEY_SELECT_0000000001
        n_KSTREAM_KEY_SELECT_0000000001 --> n_KSTREAM_FILTER_0000000005
        n_KSTREAM_FILTER_0000000005 --> n_KSTREAM_SINK_0000000004
    end
    subgraph sub_1["Sub-topology: 1"]
        n_KSTREAM_SOURCE_0000000006(["Source: KSTREAM-SOURCE-0000000006<br/>topics: [KSTREAM-AGGREGATE-STATE-STORE-0000000002-repartition]"])
        n_KSTREAM_AGGREGATE_0000000003["Processor: KSTREAM-AGGREGATE-0000000003<br/>stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000002]"]
        s_KSTREAM_AGGREGATE_STATE_STORE_0000000002[("KSTREAM-AGGREGATE-STATE-STORE-0000000002")]
        n_KTABLE_TOSTREAM_0000000007["Processor: KTABLE-TOSTREAM-0000000007<br/>stores: []"]
        n_KSTREAM_SINK_0000000008(["Sink: KSTREAM-SINK-0000000008<br/>topic: counts"])
        n_KSTREAM_SOURCE_0000000006 --> n_KSTREAM_AGGREGATE_0000000003
        n_KSTREAM_AGGREGATE_0000000003 --> n_KTABLE_TOSTREAM_0000000007
        n_KTABLE_TOSTREAM_0000000007 --> n_KSTREAM_SINK_0000000008
        n_KSTREAM_AGGREGATE_0000000003 -.- s_KSTREAM_AGGREGATE_STATE_STORE_0000000002
    end
    n_KSTREAM_SINK_0000000004 ==>|"KSTREAM-AGGREGATE-STATE-STORE-0000000002-repartition"| n_KSTREAM_SOURCE_0000000006
'''

REKEYED_DOT = '''\
digraph topology {
    rankdir=TB;
    node [shape=box];
    subgraph cluster_0 {
        label="Sub-topology: 0";
        n_KSTREAM_SOURCE_0000000000 [style=rounded, label="Source: KSTREAM-SOURCE-0000000000\\ntopics: [words]"];
        n_KSTREAM_KEY_SELECT_0000000001 [label="Processor: KSTREAM-KEY-SELECT-0000000001\\nstores: []"];
        n_KSTREAM_FILTER_0000000005 [label="Processor: KSTREAM-FILTER-0000000005\\nstores: []"];
        n_KSTREAM_SINK_0000000004 [style=rounded, label="Sink: KSTREAM-SINK-0000000004\\ntopic: KSTREAM-AGGREGATE-STATE-STORE-0000000002-repartition"];
        n_KSTREAM_SOURCE_0000000000 -> n_KSTREAM_KEY_SELECT_0000000001;
        n_KSTREAM_KEY_SELECT_0000000001 -> n_KSTREAM_FILTER_0000000005;
        n_KSTREAM_FILTER_0000000005 -> n_KSTREAM_SINK_0000000004;
    }
    subgraph cluster_1 {
        label="Sub-topology: 1";
        n_KSTREAM_SOURCE_0000000006 [style=rounded, label="Source: KSTREAM-SOURCE-0000000006\\ntopics: [KSTREAM-AGGREGATE-STATE-STORE-0000000002-repartition]"];
        n_KSTREAM_AGGREGATE_0000000003 [label="Processor: KSTREAM-AGGREGATE-0000000003\\nstores: [KSTREAM-AGGREGATE-STATE-STORE-0000000002]"];
        s_KSTREAM_AGGREGATE_STATE_STORE_0000000002 [shape=cylinder, label="KSTREAM-AGGREGATE-STATE-STORE-0000000002"];
        n_KTABLE_TOSTREAM_0000000007 [label="Processor: KTABLE-TOSTREAM-0000000007\\nstores: []"];
        n_KSTREAM_SINK_0000000008 [style=rounded, label="Sink: KSTREAM-SINK-0000000008\\ntopic: counts"];
        n_KSTREAM_SOURCE_0000000006 -> n_KSTREAM_AGGREGATE_0000000003;
        n_KSTREAM_AGGREGATE_0000000003 -> n_KTABLE_TOSTREAM_0000000007;
        n_KTABLE_TOSTREAM_0000000007 -> n_KSTREAM_SINK_0000000008;
        n_KSTREAM_AGGREGATE_0000000003 -> s_KSTREAM_AGGREGATE_STATE_STORE_0000000002 [style=dotted, arrowhead=none];
    }
    n_KSTREAM_SINK_0000000004 -> n_KSTREAM_SOURCE_0000000006 [style=bold, label="KSTREAM-AGGREGATE-STATE-STORE-0000000002-repartition"];
}
'''

VERSIONED_JOIN_MERMAID = '''\
flowchart TB
    subgraph sub_0["Sub-topology: 0"]
        n_KSTREAM_SOURCE_0000000002(["Source: KSTREAM-SOURCE-0000000002<br/>topics: [orders]"])
        n_KSTREAM_JOIN_0000000003["Processor: KSTREAM-JOIN-0000000003<br/>stores: [rates]"]
        s_rates[("rates")]
        n_KSTREAM_SOURCE_0000000000(["Source: KSTREAM-SOURCE-0000000000<br/>topics: [rates]"])
        n_KSTREAM_SINK_0000000004(["Sink: KSTREAM-SINK-0000000004<br/>topic: priced"])
        n_KTABLE_SOURCE_0000000001["Processor: KTABLE-SOURCE-0000000001<br/>stores: [rates]"]
        n_KSTREAM_SOURCE_0000000002 --> n_KSTREAM_JOIN_0000000003
        n_KSTREAM_JOIN_0000000003 --> n_KSTREAM_SINK_0000000004
        n_KSTREAM_SOURCE_0000000000 --> n_KTABLE_SOURCE_0000000001
        n_KSTREAM_JOIN_0000000003 -.- s_rates
        n_KTABLE_SOURCE_0000000001 -.- s_rates
    end
'''

VERSIONED_JOIN_DOT = '''\
digraph topology {
    rankdir=TB;
    node [shape=box];
    subgraph cluster_0 {
        label="Sub-topology: 0";
        n_KSTREAM_SOURCE_0000000002 [style=rounded, label="Source: KSTREAM-SOURCE-0000000002\\ntopics: [orders]"];
        n_KSTREAM_JOIN_0000000003 [label="Processor: KSTREAM-JOIN-0000000003\\nstores: [rates]"];
        s_rates [shape=cylinder, label="rates"];
        n_KSTREAM_SOURCE_0000000000 [style=rounded, label="Source: KSTREAM-SOURCE-0000000000\\ntopics: [rates]"];
        n_KSTREAM_SINK_0000000004 [style=rounded, label="Sink: KSTREAM-SINK-0000000004\\ntopic: priced"];
        n_KTABLE_SOURCE_0000000001 [label="Processor: KTABLE-SOURCE-0000000001\\nstores: [rates]"];
        n_KSTREAM_SOURCE_0000000002 -> n_KSTREAM_JOIN_0000000003;
        n_KSTREAM_JOIN_0000000003 -> n_KSTREAM_SINK_0000000004;
        n_KSTREAM_SOURCE_0000000000 -> n_KTABLE_SOURCE_0000000001;
        n_KSTREAM_JOIN_0000000003 -> s_rates [style=dotted, arrowhead=none];
        n_KTABLE_SOURCE_0000000001 -> s_rates [style=dotted, arrowhead=none];
    }
}
'''



@pytest.mark.parametrize(("build", "mermaid", "dot"), [
    (suppressed, SUPPRESSED_MERMAID, SUPPRESSED_DOT),
    (rekeyed, REKEYED_MERMAID, REKEYED_DOT),
    (versioned_join, VERSIONED_JOIN_MERMAID, VERSIONED_JOIN_DOT),
], ids=["suppressed", "rekeyed", "versioned-join"])
def test_exact_pictures(build: Callable[[], Topology], mermaid: str, dot: str) -> None:
    topology = build()
    assert topology.to_mermaid() == mermaid
    assert topology.to_dot() == dot


# --- more topologies, for the structural checks ----------------------------------------------

def table_joins() -> Topology:
    b = StreamsBuilder()
    left = b.table("left", materialized=Materialized("left-store"))
    right = b.table("right", materialized=Materialized("right-store"))
    left.join(right, lambda a, c: (a, c)).outer_join(
        b.table("third"), lambda a, c: (a, c)).to_stream().to("joined")
    return b.build()


def merged_and_reduced() -> Topology:
    b = StreamsBuilder()
    one = b.stream(["a", "b", "c"]).filter(lambda k, v: v is not None)
    two = b.stream("d").map_values(str)
    s = Serdes.string()
    (one.merge(two).select_key(lambda k, v: v).group_by_key(Grouped(s, s))
     .reduce(lambda x, y: x + y).to_stream().to("reduced"))
    two.to("copy")
    return b.build()


def table_regrouped() -> Topology:
    b = StreamsBuilder()
    (b.table("users").group_by(lambda k, v: (v, k)).count(Materialized("per-region"))
     .filter(lambda k, v: v > 1).to_stream().to("regions"))
    return b.build()


def awkward_names() -> Topology:
    """Names with every character the pictures must escape: quotes, brackets, ``#``, ``<``..."""
    b = StreamsBuilder()
    (b.stream('we"ird [in] #1 <x> & `y` | a\\b').group_by_key()
     .count(Materialized('st"ore [a]\\ end')).to_stream().to('o"ut\nnext'))
    b.stream("a-b").group_by_key().count(Materialized("a-b"))
    b.stream("a_b").group_by_key().count(Materialized("a_b"))  # sanitises like "a-b"
    return b.build()


BUILDERS = [suppressed, rekeyed, versioned_join, table_joins, merged_and_reduced,
            table_regrouped, awkward_names]


# --- what describe() says, sub-topology by sub-topology --------------------------------------

NODE_LINE = re.compile(r"^    (Source|Processor|Sink): (.*?) \((topics|topic|stores): (.*)\)$", re.S)


def described(topology: Topology) -> list[tuple[list[str], set[tuple[str, str]], set[tuple[str, str]]]]:
    """Per sub-topology of ``describe()``: its node labels (``Kind: name``) in order, its
    edges (by name) and its store links (processor name, store name)."""
    groups = topology.describe().split("Sub-topology: ")[1:]
    out = []
    for group in groups:
        labels: list[str] = []
        edges: set[tuple[str, str]] = set()
        links: set[tuple[str, str]] = set()
        # a node is its header line plus its --> and <-- lines; names may hold line breaks
        for chunk in re.split(r"\n(?=    (?:Source|Processor|Sink): )", group)[1:]:
            header, _, rest = chunk.partition("\n      ")
            m = NODE_LINE.match(header.rstrip("\n"))
            assert m, header
            kind, name, _, listed = m.groups()
            labels.append(f"{kind}: {name}")
            for line in ("      " + rest).splitlines():
                if line.startswith("      --> ") and line != "      --> none":
                    edges.update((name, child) for child in line[10:].split(", "))
            if kind == "Processor":
                inner = listed[1:-1]
                links.update((name, store) for store in (inner.split(", ") if inner else []))
        out.append((labels, edges, links))
    return out


# --- a small DOT parser ---------------------------------------------------------------------

DOT_TOKEN = re.compile(r'\s+|(?P<str>"(?:[^"\\]|\\.)*")|(?P<id>[A-Za-z_][A-Za-z0-9_]*)'
                       r"|(?P<op>->|--|[{}\[\];=,])", re.S)


def _dot_tokens(text: str) -> list[str]:
    tokens, pos = [], 0
    while pos < len(text):
        m = DOT_TOKEN.match(text, pos)
        assert m, f"DOT: cannot read {text[pos:pos + 30]!r}"
        if m.lastgroup:
            tokens.append(m.group())
        pos = m.end()
    return tokens


def _dot_unquote(token: str) -> str:
    assert token.startswith('"') and token.endswith('"'), token
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), token[1:-1])


class Dot:
    """The DOT grammar's statements, as far as the pictures use them (graph, subgraph, node,
    edge and attribute statements, attribute lists); raises on anything else."""

    def __init__(self, text: str) -> None:
        self.tokens = _dot_tokens(text)
        self.pos = 0
        self.nodes: dict[str, dict[str, str]] = {}
        self.edges: list[tuple[str, str, dict[str, str]]] = []
        self.clusters: list[tuple[str, list[str]]] = []
        self.expect("digraph")
        self.expect("topology")
        self.body(None)
        assert self.pos == len(self.tokens), "DOT: text after the graph"

    def peek(self) -> str:
        assert self.pos < len(self.tokens), "DOT: unexpected end"
        return self.tokens[self.pos]

    def take(self) -> str:
        token = self.peek()
        self.pos += 1
        return token

    def expect(self, token: str) -> None:
        got = self.take()
        assert got == token, f"DOT: {token!r} expected, got {got!r}"

    def ident(self) -> str:
        token = self.take()
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", token), f"DOT: id expected, got {token!r}"
        assert token.lower() not in {"node", "edge", "graph", "digraph", "subgraph", "strict"}
        return token

    def attrs(self) -> dict[str, str]:
        out: dict[str, str] = {}
        self.expect("[")
        while self.peek() != "]":
            key = self.ident()
            self.expect("=")
            value = self.take()
            out[key] = _dot_unquote(value) if value.startswith('"') else value
            if self.peek() in {",", ";"}:
                self.take()
        self.expect("]")
        return out

    def body(self, cluster: list[str] | None) -> None:
        self.expect("{")
        while self.peek() != "}":
            token = self.take()
            if token == "subgraph":
                name = self.ident()
                members: list[str] = []
                self.clusters.append((name, members))
                self.body(members)
            elif token in {"node", "edge", "graph"}:
                self.attrs()
            elif self.peek() == "=":
                self.take()
                self.take()
            else:
                assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", token), token
                if self.peek() == "->":
                    self.take()
                    target = self.ident()
                    attrs = self.attrs() if self.peek() == "[" else {}
                    self.edges.append((token, target, attrs))
                else:
                    assert token not in self.nodes, f"DOT: {token} declared twice"
                    self.nodes[token] = self.attrs()
                    if cluster is not None:
                        cluster.append(token)
            if self.peek() == ";":
                self.take()
        self.expect("}")


# --- a Mermaid checker ----------------------------------------------------------------------

MERMAID_ID = r"[A-Za-z_][A-Za-z0-9_]*"
MERMAID_LABEL = r'"(?P<label>[^"]*)"'
MERMAID_SUBGRAPH = re.compile(rf"^    subgraph (?P<id>{MERMAID_ID})\[{MERMAID_LABEL}\]$")
MERMAID_NODE = re.compile(rf"^        (?P<id>{MERMAID_ID})(?P<open>\(\[|\[\(|\[){MERMAID_LABEL}"
                          r"(?P<close>\]\)|\)\]|\])$")
MERMAID_EDGE = re.compile(rf"^        (?P<a>{MERMAID_ID}) (?P<arrow>-->|-\.-) (?P<b>{MERMAID_ID})$")
MERMAID_TOPIC = re.compile(rf"^    (?P<a>{MERMAID_ID}) ==>\|{MERMAID_LABEL}\| (?P<b>{MERMAID_ID})$")
SHAPES = {"([": ("])", "terminal"), "[(": (")]", "store"), "[": ("]", "processor")}


def _mermaid_label(label: str) -> list[str]:
    """The label's lines as text: only ``<br/>`` and ``#N;`` codes may hold markup."""
    plain = label.replace("<br/>", "\n")
    assert not re.search(r'["<>`|\\&]', plain), f"Mermaid: unescaped character in {label!r}"
    assert not re.search(r"#(?!\d+;)", plain), f"Mermaid: bare # in {label!r}"
    assert not re.search(r"[\x00-\x1f]", plain.replace("\n", "")), label
    return re.sub(r"#(\d+);", lambda m: chr(int(m.group(1))), plain).split("\n")


class Mermaid:
    """A Mermaid picture read line by line: its subgraphs, nodes, edges and topic edges."""

    def __init__(self, text: str) -> None:
        assert text.endswith("\n")
        lines = text[:-1].split("\n")
        assert lines[0] == "flowchart TB"
        self.nodes: dict[str, tuple[str, list[str]]] = {}  # id -> (shape, label lines)
        self.subgraphs: list[tuple[str, list[str]]] = []  # (title, node ids)
        self.edges: list[tuple[str, str, str]] = []  # (a, arrow, b)
        self.topic_edges: list[tuple[str, str, str]] = []  # (sink, topic, source)
        current: list[str] | None = None
        for line in lines[1:]:
            if m := MERMAID_SUBGRAPH.match(line):
                assert current is None, "Mermaid: nested subgraph"
                current = []
                self.subgraphs.append((_mermaid_label(m["label"])[0], current))
            elif line == "    end":
                assert current is not None, "Mermaid: end outside a subgraph"
                current = None
            elif m := MERMAID_NODE.match(line):
                assert current is not None
                close, shape = SHAPES[m["open"]]
                assert m["close"] == close, line
                assert m["id"] not in self.nodes, f"Mermaid: {m['id']} declared twice"
                self.nodes[m["id"]] = (shape, _mermaid_label(m["label"]))
                current.append(m["id"])
            elif m := MERMAID_EDGE.match(line):
                assert current is not None
                self.edges.append((m["a"], m["arrow"], m["b"]))
            elif m := MERMAID_TOPIC.match(line):
                assert current is None
                self.topic_edges.append((m["a"], _mermaid_label(m["label"])[0], m["b"]))
            else:
                raise AssertionError(f"Mermaid: cannot read {line!r}")
        assert current is None, "Mermaid: subgraph not closed"
        ids = [*self.nodes, *(s for s, _ in self.subgraphs)]
        assert len(set(ids)) == len(ids)
        for a, _, b in self.edges + self.topic_edges:
            assert a in self.nodes and b in self.nodes, f"Mermaid: undeclared endpoint {a} or {b}"


# --- the checks -----------------------------------------------------------------------------

def _expected_topic_edges(topology: Topology) -> set[tuple[str, str, str]]:
    sinks = {(n.name, n.topics[0]) for n in topology.nodes if n.kind == "sink"}
    sources = {(n.name, t) for n in topology.nodes if n.kind == "source" for t in n.topics}
    return {(s, t, r) for s, t in sinks for r, u in sources
            if t == u and t in topology.internal_topics}


@pytest.mark.parametrize("build", BUILDERS, ids=lambda f: f.__name__)
def test_mermaid_shows_what_describe_says(build: Callable[[], Topology]) -> None:
    topology = build()
    picture = Mermaid(topology.to_mermaid())
    expected = described(topology)
    assert [title for title, _ in picture.subgraphs] == [
        f"Sub-topology: {i}" for i in range(len(expected))]
    name_of = {}
    for (_, ids), (labels, edges, links) in zip(picture.subgraphs, expected, strict=True):
        nodes = [i for i in ids if picture.nodes[i][0] != "store"]
        stores = [i for i in ids if picture.nodes[i][0] == "store"]
        # each node's first label line is describe()'s "Kind: name", in describe()'s order
        assert [picture.nodes[i][1][0] for i in nodes] == labels
        for i in nodes:
            name_of[i] = picture.nodes[i][1][0].split(": ", 1)[1]
        for i in stores:
            name_of[i] = picture.nodes[i][1][0]
        assert {name_of[i] for i in stores} == {s for _, s in links}
        in_group = set(ids)
        mine = [(a, arrow, b) for a, arrow, b in picture.edges if a in in_group]
        assert {(name_of[a], name_of[b]) for a, arrow, b in mine if arrow == "-->"} == edges
        assert {(name_of[a], name_of[b]) for a, arrow, b in mine if arrow == "-.-"} == links
        assert all(b in in_group for _, _, b in mine)
    for shape, lines in picture.nodes.values():
        kind = lines[0].split(":")[0]
        assert shape == {"Source": "terminal", "Sink": "terminal",
                         "Processor": "processor"}.get(kind, "store"), lines
    assert {(name_of[a], t, name_of[b]) for a, t, b in picture.topic_edges} == \
        _expected_topic_edges(topology)


@pytest.mark.parametrize("build", BUILDERS, ids=lambda f: f.__name__)
def test_dot_shows_what_mermaid_shows(build: Callable[[], Topology]) -> None:
    topology = build()
    dot = Dot(topology.to_dot())
    mermaid = Mermaid(topology.to_mermaid())
    assert [name for name, _ in dot.clusters] == [
        f"cluster_{i}" for i in range(len(mermaid.subgraphs))]
    assert [members for _, members in dot.clusters] == [ids for _, ids in mermaid.subgraphs]
    for node_id, attrs in dot.nodes.items():
        shape, lines = mermaid.nodes[node_id]
        assert attrs["label"].split("\n") == lines
        assert (attrs.get("shape") == "cylinder") == (shape == "store")
        assert (attrs.get("style") == "rounded") == (shape == "terminal")
    assert set(dot.nodes) == set(mermaid.nodes)
    for a, b, _ in dot.edges:
        assert a in dot.nodes and b in dot.nodes, f"DOT: undeclared endpoint {a} or {b}"
    plain = [(a, b) for a, b, attrs in dot.edges if not attrs]
    dotted = [(a, b) for a, b, attrs in dot.edges if attrs.get("style") == "dotted"]
    bold = [(a, attrs["label"], b) for a, b, attrs in dot.edges if attrs.get("style") == "bold"]
    assert len(plain) + len(dotted) + len(bold) == len(dot.edges)
    assert plain == [(a, b) for a, arrow, b in mermaid.edges if arrow == "-->"]
    assert dotted == [(a, b) for a, arrow, b in mermaid.edges if arrow == "-.-"]
    assert bold == mermaid.topic_edges


@pytest.mark.parametrize("build", BUILDERS, ids=lambda f: f.__name__)
def test_dot_parses_with_pydot(build: Callable[[], Topology]) -> None:
    import pydot  # type: ignore[import-untyped]

    text = build().to_dot()
    graphs = pydot.graph_from_dot_data(text)
    assert graphs is not None and len(graphs) == 1


def test_awkward_names_come_back_exactly() -> None:
    topology = awkward_names()
    mermaid = Mermaid(topology.to_mermaid())
    labels = {line for _, lines in mermaid.nodes.values() for line in lines}
    assert 'topics: [we"ird [in] #1 <x> & `y` | a\\b]' in labels
    assert 'st"ore [a]\\ end' in labels
    assert 'topic: o"ut\nnext' in {"\n".join(lines[1:]) for _, lines in mermaid.nodes.values()}
    dot = Dot(topology.to_dot())
    assert {attrs["label"] for attrs in dot.nodes.values()} >= {'st"ore [a]\\ end'}
    # "a-b" and "a_b" sanitise alike: two ids, in the order the walk meets them
    assert mermaid.nodes["s_a_b"][1] == ["a-b"] and mermaid.nodes["s_a_b_2"][1] == ["a_b"]


@pytest.mark.parametrize("build", BUILDERS, ids=lambda f: f.__name__)
def test_pictures_are_deterministic(build: Callable[[], Topology]) -> None:
    one, two = build(), build()
    assert one.to_mermaid() == two.to_mermaid() == one.to_mermaid()
    assert one.to_dot() == two.to_dot() == one.to_dot()
