"""Records with and without headers in one key group of the batched aggregation.

A record without headers takes the aggregation's entry for records a task reads without
headers (no context built); one with headers goes through the aggregation's ``process``
with its context. Either way a window's result leaves with its latest record's headers and
timestamp, as one driver per input partition gives it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from topology import Topology, TopologyTestDriver
from topology.serde import Serdes

from .harness import Headers, chunk_table, distributed_run
from .test_distributed_aggregations import windowed_clicks
from .test_partition_time import Piece, partitioned

HEADERS: list[Headers] = [(), (("trace", b"t1"),), (("a", None), ("b", b""))]
WINDOWS = ["tumbling", "hopping", "session", "sliding"]


def _with_headers(batches: list[list[Piece]], picks: list[int]
                  ) -> list[list[tuple[int, list[Any], list[Headers]]]]:
    """Each row of each piece with headers picked from :data:`HEADERS` in turn."""
    at = 0
    out = []
    for batch in batches:
        pieces = []
        for partition, rows in batch:
            headers = []
            for _ in rows:
                headers.append(HEADERS[picks[at % len(picks)]])
                at += 1
            pieces.append((partition, list(rows), headers))
        out.append(pieces)
    return out


def _drivers(make: Any, batches: list[list[tuple[int, list[Any], list[Headers]]]]
             ) -> Counter[Any]:
    """What one driver per input partition gives: ``(key, value, timestamp, headers)``."""
    rows: dict[int, list[tuple[Any, Headers]]] = {}
    for batch in batches:
        for partition, part, headers in batch:
            rows.setdefault(partition, []).extend(zip(part, headers, strict=True))
    got: Counter[Any] = Counter()
    for mine in rows.values():
        with TopologyTestDriver(make()) as driver:
            clicks = driver.create_input_topic("clicks", Serdes.bytes(), Serdes.bytes())
            for (_, key, value, ts), headers in mine:
                clicks.pipe_input(key, value, timestamp=ts, headers=headers or None)
            got.update((r.key, r.value, r.timestamp, tuple(r.headers))
                       for r in driver.create_output_topic("out").read_records_to_list())
    return got


@settings(max_examples=examples(60), deadline=None)
@given(batches=partitioned(), picks=st.lists(st.sampled_from([0, 0, 1, 2]), min_size=1,
                                             max_size=7),
       windows=st.sampled_from(WINDOWS), seed=st.integers(0, 3))
def test_headers_leave_with_their_windows_as_in_the_driver(
        batches: list[list[Piece]], picks: list[int], windows: str, seed: int) -> None:
    def make() -> Topology:
        return windowed_clicks("count", windows)

    pieces = _with_headers(batches, picks)
    got, _ = distributed_run(make(), [[chunk_table(part, p, headers)
                                       for p, part, headers in batch] for batch in pieces],
                             seed, headers=True)
    assert Counter((k, v, ts, tuple(h)) for t, k, v, ts, h in got if t == "out") == \
        _drivers(make, pieces)


def test_a_window_of_records_with_and_without_headers() -> None:
    """The window's last record has headers, the one before none, and the reverse."""
    rows = [("clicks", b"a", b"/x", 1), ("clicks", b"a", b"/y", 2), ("clicks", b"b", b"/x", 3),
            ("clicks", b"b", b"/y", 4), ("clicks", b"c", b"/x", 200)]
    headers: list[Headers] = [(), (("trace", b"t1"),), (("trace", b"t2"),), (), ()]
    pieces = [[(0, rows, headers)]]

    def make() -> Topology:
        return windowed_clicks("count", "tumbling")

    got, _ = distributed_run(make(), [[chunk_table(rows, 0, headers)]], headers=True)
    expected = _drivers(make, pieces)
    assert Counter((k, v, ts, tuple(h)) for t, k, v, ts, h in got if t == "out") == expected
    assert {(k.key, h) for k, _, _, h in expected} == {("a", (("trace", b"t1"),)), ("b", ())}
