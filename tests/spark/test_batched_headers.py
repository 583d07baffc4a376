"""Records with and without headers in one key group of the batched aggregation.

A record without headers takes the aggregation's entry for records a task reads without
headers (no context built); one with headers goes through the aggregation's ``process``
with its context. Either way a window's result leaves with its latest record's headers and
timestamp, as one driver per input partition gives it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from topology import Topology, TopologyTestDriver
from topology.serde import Serdes
from topology.spark._aggregations import AggregationBucket
from topology.spark._compile import compile_topology

from .harness import Headers, MapState, chunk_table, distributed_run
from .test_distributed_aggregations import SUPPRESSIONS, windowed_clicks
from .test_partition_time import AGGREGATIONS, Piece, partitioned

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
    """In one key group (a bounded buffer's): a window whose last record has headers after
    two without (the second taken by the step's fast path), and one whose last has none."""
    rows = [("clicks", b"a", b"/x", 1), ("clicks", b"a", b"/x", 2), ("clicks", b"a", b"/y", 3),
            ("clicks", b"b", b"/x", 4), ("clicks", b"b", b"/y", 5), ("clicks", b"c", b"/x", 200)]
    headers: list[Headers] = [(), (), (("trace", b"t1"),), (("trace", b"t2"),), (), ()]
    pieces = [[(0, rows, headers)]]

    def make() -> Topology:
        return AGGREGATIONS["tumbling-bounded"]("count")

    got, _ = distributed_run(make(), [[chunk_table(rows, 0, headers)]], headers=True)
    expected = _drivers(make, pieces)
    assert Counter((k, v, ts, tuple(h)) for t, k, v, ts, h in got if t == "out") == expected
    assert {(k.key, h) for k, _, _, h in expected} == {("a", (("trace", b"t1"),)), ("b", ())}


@pytest.mark.parametrize(("windows", "takes_raw"), [("tumbling", True), ("session", True),
                                                    ("hopping", False), ("sliding", False),
                                                    ("none", False)])
def test_which_aggregations_take_records_without_a_context(windows: str, takes_raw: bool
                                                           ) -> None:
    plan = compile_topology(windowed_clicks("count", windows, suppressed=(
        "final" if windows != "none" else SUPPRESSIONS["limit-30"])))
    assert plan.batched is not None
    bucket = AggregationBucket(plan.batched, plan.post, None, MapState())
    assert (bucket.raw is not None) is takes_raw
