"""Sliding and session windows handing changes to final results by part equal forwarding.

A sliding or session aggregation whose only child is a final-results suppression hands each
change to the suppression's heap of parts (``fuse_final_results``, the default) instead of
forwarding windowed keys. The same topology runs both ways (each at both metrics levels) on
the same random streams, with user code that raises (initializer, aggregator, merger, key and
value serdes), null keys and values, late and out-of-order records routed to a late-records
topic, and bounded buffers; after every record, outputs, late records, errors, the failure's node,
drops, metrics, store contents, the suppression's stream time and its buffer must agree.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from test_fusion import (  # the time windows' fusion test: its helpers and buffers
    BUFFERS,
    _checked_serde,
    _safely,
    pipe_and_measure,
)

from suppress import BufferConfig, Suppressed
from suppress.final_heap import FinalResultsHeap
from topology import (
    Materialized,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    TopologyTestDriver,
)
from topology.serde import Serdes

BOOM = "boom"


class _Counting:
    """Wraps a function; raises on its ``fail_at``-th call (never if ``fail_at`` is 0)."""

    def __init__(self, fn: Any, fail_at: int, what: str) -> None:
        self.fn, self.fail_at, self.what, self.calls = fn, fail_at, what, 0

    def __call__(self, *args: Any) -> Any:
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError(f"{self.what} failed")
        return self.fn(*args)


def _aggregator(k: Any, v: Any, agg: Any) -> Any:
    """Raises on BOOM; often returns to 0, so an old value can equal the prior one."""
    if v == BOOM:
        raise ValueError("aggregator failed")
    return (agg + (v or 0)) % 4


def build(windowing: str, kind: str, span: int, grace: int, buffer: Any = None, *,
          fail_at: int = 0, merge_fail_at: int = 0, bad_key: Any = None,
          bad_value: Any = None) -> Any:
    b = StreamsBuilder()
    if windowing == "session":
        windows: Any = SessionWindows.of_inactivity_gap_and_grace(span, grace)
    else:
        windows = SlidingWindows.of_time_difference_and_grace(span, grace)
    key_serde = None if bad_key is None else _checked_serde(Serdes.string(), bad_key)
    value_serde = None if bad_value is None else _checked_serde(Serdes.long(), bad_value)
    m = Materialized("S", key_serde=key_serde, value_serde=value_serde)
    w = b.stream("in").group_by_key().windowed_by(windows)
    if kind == "count":
        table = w.count(m, late_records_to="late")
    elif kind == "reduce":
        table = w.reduce(lambda agg, v: agg + v, m, late_records_to="late")
    elif windowing == "session":
        merger = _Counting(lambda k, a, c: (a + c) % 4, merge_fail_at, "merger")
        table = w.aggregate(_Counting(lambda: 0, fail_at, "initializer"), _aggregator, merger,
                            m, late_records_to="late")
    else:
        table = w.aggregate(_Counting(lambda: 0, fail_at, "initializer"), _aggregator, m,
                            late_records_to="late")
    (table.suppress(Suppressed.until_window_closes(buffer or BufferConfig.unbounded())
                    .with_name("final"))
     .to_stream().to("out"))
    return b.build()


ROWS = st.lists(st.tuples(
    st.sampled_from(["a", "b", "aa", "B", "bad", None]),
    st.one_of(st.none(), st.integers(0, 20), st.just(BOOM)),
    st.integers(0, 80),
    st.sampled_from([None, [("h", b"1")]]),
), max_size=40)


def run(topology: Any, rows: list, windowing: str, *, fuse: bool, debug: bool,
        bulk: bool = False, state_dir: Any = None) -> list:
    """Pipe ``rows`` and record everything observable after each one (or the whole batch)."""
    if callable(topology):
        topology = topology()
    config = {"fuse_final_results": fuse, "metrics_recording_level": "DEBUG" if debug else "INFO"}
    steps: list = []
    with TopologyTestDriver(topology, config, state_dir=state_dir) as d:
        assert bool(d._task.handing) is fuse
        topic = d.create_input_topic("in")
        out, late = d.create_output_topic("out"), d.create_output_topic("late")
        store = (d.get_session_store("S") if windowing == "session"
                 else d.get_window_store("S"))
        chunks = ([[(k, v, ts) if h is None else (k, v, ts, h) for k, v, ts, h in rows]]
                  if bulk else [[row] for row in rows])
        for chunk in chunks:
            error, m = pipe_and_measure(d, topic, chunk, bulk)
            failure = d.failure
            suppression = d._task.suppressors["final"]
            suppression.buffer._check()
            steps.append((
                [(r.key, r.value, r.timestamp, r.headers) for r in out.read_records_to_list()],
                [(r.key, r.value, r.timestamp, r.headers) for r in late.read_records_to_list()],
                error, None if failure is None else (failure.node, failure.offset),
                {k: v for k, v in m.items() if "lateness" not in k},
                _safely(lambda: list(store.all())), _safely(lambda: list(store.backward_all())),
                suppression.stream_time, _safely(suppression.buffered),
            ))
    return steps


def _strip_metric_levels(steps: list) -> list:
    """A run's steps without DEBUG-only metrics (INFO runs do not report them)."""
    return [(o, la, e, f, {k: v for k, v in m.items() if "-avg" not in k and "-max" not in k},
             *rest) for o, la, e, f, m, *rest in steps]


def _values_for(kind: str, rows: list) -> list:
    if kind == "reduce":  # values a reducer can add
        return [(k, 1 if v is None or v == BOOM else v, ts, h) for k, v, ts, h in rows]
    if kind == "count":
        return [(k, 0 if v == BOOM else v, ts, h) for k, v, ts, h in rows]
    return rows


@settings(max_examples=examples(400), deadline=None)
@given(rows=ROWS, windowing=st.sampled_from(["session", "sliding"]),
       kind=st.sampled_from(["count", "reduce", "aggregate"]),
       span=st.integers(0, 25), grace=st.integers(0, 20), buffer=BUFFERS,
       fail_at=st.integers(0, 8), merge_fail_at=st.integers(0, 4),
       bad_key=st.sampled_from([None, "bad"]), bad_value=st.sampled_from([None, 3]))
def test_handing_equals_forwarding(rows, windowing, kind, span, grace, buffer, fail_at,
                               merge_fail_at, bad_key, bad_value) -> None:
    if windowing == "session":
        span = max(1, span)  # a session gap is at least 1 ms
    rows = _values_for(kind, rows)

    def topology() -> Any:
        return build(windowing, kind, span, grace, buffer, fail_at=fail_at,
                     merge_fail_at=merge_fail_at, bad_key=bad_key, bad_value=bad_value)

    fused_info, fused_debug, separate_info, separate_debug = (
        run(topology, rows, windowing, fuse=fuse, debug=debug)
        for fuse in (True, False) for debug in (False, True))
    assert fused_debug == separate_debug
    assert fused_info == separate_info
    if bad_value is None:  # at INFO, values are serialized only when a size is needed
        assert _strip_metric_levels(fused_debug) == fused_info


@settings(max_examples=examples(100), deadline=None)
@given(rows=ROWS, windowing=st.sampled_from(["session", "sliding"]),
       kind=st.sampled_from(["count", "reduce", "aggregate"]),
       span=st.integers(1, 25), grace=st.integers(0, 20), buffer=BUFFERS)
def test_bulk_handing_equals_forwarding_per_record(rows, windowing, kind, span, grace,
                                               buffer) -> None:
    """pipe_records (plain tuples take the context-free entry) vs pipe_input, unfused."""
    rows = _values_for(kind, rows)
    topology = build(windowing, kind, span, grace, buffer)
    bulk = run(topology, rows, windowing, fuse=True, debug=False, bulk=True)
    per_record = run(topology, rows, windowing, fuse=False, debug=False)
    if not per_record:
        assert bulk[0][0] == [] and bulk[0][1] == []
        return
    first_error = next((step[2] for step in per_record if step[2] is not None), None)
    if first_error is not None and first_error[0] == "TaskFailedError":
        first_error = None
    if first_error is not None:  # the batch stops at the first failure, with its error
        assert bulk[0][2] == first_error
        return
    assert bulk[0][0] == [r for step in per_record for r in step[0]]
    assert bulk[0][1] == [r for step in per_record for r in step[1]]
    assert bulk[0][3:] == per_record[-1][3:]


@settings(max_examples=examples(40), deadline=None)
@given(rows=ROWS, windowing=st.sampled_from(["session", "sliding"]),
       kind=st.sampled_from(["count", "aggregate"]), span=st.integers(1, 25),
       grace=st.integers(0, 20), fail_at=st.integers(0, 8),
       bad_key=st.sampled_from([None, "bad"]))
def test_handing_equals_forwarding_on_rocksdb(tmp_path_factory, rows, windowing, kind, span,
                                              grace, fail_at, bad_key) -> None:
    """With a state directory (RocksDB stores, whose reads and writes serialize keys at other
    points than in memory), user code and key serdes that raise: the same both ways."""
    rows = _values_for(kind, rows)

    def topology() -> Any:
        return build(windowing, kind, span, grace, fail_at=fail_at, bad_key=bad_key)

    handing, forwarding = (
        run(topology, rows, windowing, fuse=fuse, debug=False,
            state_dir=tmp_path_factory.mktemp("state"))
        for fuse in (True, False))
    assert handing == forwarding


@pytest.mark.parametrize("value", [1, BOOM])
def test_a_refused_key_fails_at_the_same_point_both_ways_on_rocksdb(tmp_path, value) -> None:
    """A session of a key the serde refuses, whose record moves the store's time: the store
    expires what it would either way and the error is the forwarding path's (the key's
    identity is taken after the store wrote it, where forwarding takes it)."""
    rows = [("b", 1, 0, None), ("bad", value, 100, None)]
    steps = [run(build("session", "aggregate", 5, 0, bad_key="bad"), rows, "session",
                 fuse=fuse, debug=False, state_dir=tmp_path / str(fuse))
             for fuse in (True, False)]
    assert steps[0] == steps[1]
    error = steps[0][1][2]
    assert error is not None and ("aggregator failed" in error[1]) is (value == BOOM), error


def test_an_aggregate_of_none_removes_the_session_and_later_records_start_anew(
        tmp_path) -> None:
    """A session whose aggregate becomes ``None`` is removed from the store (Kafka); the next
    record of its key finds no session, both ways, in memory and on RocksDB."""
    def topology() -> Any:
        b = StreamsBuilder()
        (b.stream("in").group_by_key()
         .windowed_by(SessionWindows.of_inactivity_gap_and_grace(5, 0))
         .aggregate(lambda: 0, lambda k, v, agg: None if v == 0 else (agg or 0) + v,
                    lambda k, a, c: (a or 0) + (c or 0), Materialized("S"))
         .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()).with_name("final"))
         .to_stream().to("out"))
        return b.build()

    rows = [("a", 1, 0, None), ("a", 0, 1, None), ("a", 1, 2, None), ("b", 1, 50, None)]
    for state_dir in (None, "rocksdb"):
        results = []
        for fuse in (True, False):
            with TopologyTestDriver(topology(), {"fuse_final_results": fuse},
                                    state_dir=None if state_dir is None else
                                    tmp_path / str(fuse)) as d:
                topic = d.create_input_topic("in")
                for key, value, ts, _ in rows:
                    topic.pipe_input(key, value, ts)
                results.append([(str(r.key), r.value)
                                for r in d.create_output_topic("out").read_records_to_list()])
        # a@1 merges [0, 0] into [0, 1] with the aggregate None: both leave the store, and
        # a@2 starts a session of its own
        assert results[0] == results[1] == [("[a@2/2]", 1)], (state_dir, results)


def test_handing_of_inclusive_windows_is_switched_with_the_others() -> None:
    topology = build("session", "count", 5, 0)
    with TopologyTestDriver(topology) as d:
        assert len(d._task.handing) == 1
        engine = d._task.suppressors["final"]
        assert isinstance(engine.buffer, FinalResultsHeap)
        inp, out = d.create_input_topic("in"), d.create_output_topic("out")
        inp.pipe_input("a", 1, 1)
        inp.pipe_input("a", 1, 4)  # merges into [1, 4]: a tombstone for [1, 1] is buffered
        inp.pipe_input("b", 1, 20)  # closes [1, 4] (20 >= 4 + 1 + 5)
        records = out.read_records_to_list()
        assert [(r.key.key, tuple(r.key.window), r.value, r.timestamp) for r in records] == [
            ("a", (1, 4), 2, 4)]
        assert engine.num_records == 1  # b; [1, 1] ended deleted and left without a result
        engine.buffer._check()
    with TopologyTestDriver(topology, {"fuse_final_results": False}) as d:
        assert not d._task.handing
        assert isinstance(d._task.suppressors["final"].buffer, FinalResultsHeap)


def test_a_gap_near_the_largest_time_runs_the_same_both_ways() -> None:
    """``t + gap`` beyond the largest timestamp saturates: every session is near, none fails."""
    rows = [("a", 1, 5, None), ("a", 1, 100, None), ("b", 2, 7, None), ("a", None, 3, None)]
    stored = {"session": [1, 1, 2, 2], "sliding": [1, 2, 3, 3]}  # sessions / windows after each
    for windowing in ("session", "sliding"):
        topology = build(windowing, "count", 2**63 - 10, 0)
        fused = run(topology, rows, windowing, fuse=True, debug=False)
        separate = run(topology, rows, windowing, fuse=False, debug=False)
        assert fused == separate
        assert all(step[2] is None for step in fused), fused  # no errors
        assert [len(step[5]) for step in fused] == stored[windowing]


def test_a_closed_session_takes_no_part_in_a_later_merge() -> None:
    """[0, 0] is closed (and out) when a@4 arrives: a@4 merges with [9, 9] only, both ways."""
    rows = [("a", 1, 0, None), ("a", 1, 9, None), ("a", 1, 4, None), ("b", 1, 30, None)]
    for fuse in (True, False):
        steps = run(build("session", "count", 5, 0), rows, "session", fuse=fuse, debug=False)
        out = [(r[0], r[1]) for step in steps for r in step[0]]
        assert [(str(k), v) for k, v in out] == [("[a@0/0]", 1), ("[a@4/9]", 2)], fuse


@settings(max_examples=examples(25), deadline=None)
@given(rows=ROWS, windowing=st.sampled_from(["session", "sliding"]), span=st.integers(1, 25),
       grace=st.integers(0, 20), cut=st.integers(0, 40), first=st.booleans())
def test_a_state_directory_written_either_way_restores_either_way(
        tmp_path_factory, rows, windowing, span, grace, cut, first) -> None:
    """With a state directory (RocksDB stores): stop after ``cut`` records handing changes on
    or forwarding them, restart the other way; outputs, drops and the buffer equal one run's."""
    rows = [(k, 1 if v is None or v == BOOM else v, ts) for k, v, ts, _ in rows]

    def run_in(state_dir, fuse, part):
        with TopologyTestDriver(build(windowing, "reduce", span, grace),
                                {"fuse_final_results": fuse}, state_dir=state_dir) as d:
            assert bool(d._task.handing) is fuse
            d.create_input_topic("in").pipe_records(part)
            final = d._task.suppressors["final"]
            final.buffer._check()
            return ([(r.key, r.value, r.timestamp)
                     for r in d.create_output_topic("out").read_records_to_list()],
                    [(r.key, r.value, r.timestamp)
                     for r in d.create_output_topic("late").read_records_to_list()],
                    d.metrics()["dropped-records-total"], final.buffered(), final.stream_time)

    whole = run_in(tmp_path_factory.mktemp("one"), first, rows)
    state_dir = tmp_path_factory.mktemp("two")
    head = run_in(state_dir, first, rows[:cut])
    tail = run_in(state_dir, not first, rows[cut:])
    assert head[0] + tail[0] == whole[0]
    assert head[1] + tail[1] == whole[1]
    assert head[2] + tail[2] == whole[2]  # each driver counts its own drops
    assert tail[3:] == whole[3:]
