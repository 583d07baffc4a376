"""A time-windowed aggregation handing its changes to final results by window is the same
two processors as forwarding windowed keys, not a second semantics.

The driver's ``fuse_final_results`` config switches the handing over (the aggregation's raw
entry, the suppression's window entry); DEBUG metrics work either way. The same topology runs
both ways (each at both metrics levels) on the same random
streams, with user code that raises (initializer, aggregator, key selector, serdes), null keys,
late and out-of-order records; after every record, outputs, errors, the failure's node, drops,
metrics, store contents, the suppression's stream time and its buffer must agree.
"""

from __future__ import annotations

import gc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from suppress import BufferConfig, BufferFullError, Suppressed
from topology import Grouped, Materialized, StreamsBuilder, TimeWindows, TopologyTestDriver
from topology.runtime.api import Processor
from topology.serde import Serde, Serdes

BOOM = "boom"


def _checked_serde(inner: Serde, bad: Any) -> Serde:
    """``inner`` that refuses to serialize ``bad``, as a user's serde might."""

    def to_bytes(value: Any) -> bytes:
        if value == bad or getattr(value, "key", None) == bad:
            raise ValueError(f"cannot encode {value!r}")
        return inner.serialize(value)

    return Serdes.serde_from(to_bytes, inner.deserialize, f"checked({inner.name})")


class _Initializer:
    """Returns 0, but raises on its ``fail_at``-th call (never if ``fail_at`` is 0)."""

    def __init__(self, fail_at: int) -> None:
        self.calls = 0
        self.fail_at = fail_at

    def __call__(self) -> int:
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("initializer failed")
        return 0


def build(kind: str, size: int, advance: int, grace: int, buffer: Any = None, *,
          init_fail_at: int = 0, regroup: bool = False, bad_key: Any = None,
          bad_value: Any = None):
    b = StreamsBuilder()
    windows = TimeWindows.of_size_and_grace(size, grace).advance_by(advance)
    stream = b.stream("in")
    if regroup:  # a key selector that raises on BOOM values, through a repartition topic
        grouped = stream.group_by(lambda k, v: (_ for _ in ()).throw(ValueError("selector"))
                                  if v == BOOM else k, Grouped(name="regroup"))
    else:
        grouped = stream.group_by_key()
    key_serde = None if bad_key is None else _checked_serde(Serdes.string(), bad_key)
    value_serde = None if bad_value is None else _checked_serde(Serdes.long(), bad_value)
    m = Materialized("S", key_serde=key_serde, value_serde=value_serde)
    w = grouped.windowed_by(windows)
    if kind == "count":
        table = w.count(m)
    elif kind == "reduce":
        table = w.reduce(lambda agg, v: agg + v, m)
    else:
        # raises on BOOM; deletes the window (None) on 13; often returns to the initializer's
        # 0, so an old value can equal the prior one (byte accounting counts it once)
        def aggregator(k, v, agg):
            if v == BOOM:
                raise ValueError("aggregator failed")
            return None if v == 13 else (agg + (v or 0)) % 4

        table = w.aggregate(_Initializer(init_fail_at), aggregator, m)
    (table.suppress(Suppressed.until_window_closes(buffer or BufferConfig.unbounded())
                    .with_name("final"))
     .to_stream().to("out"))
    return b.build()


BUFFERS = st.one_of(
    st.just(BufferConfig.unbounded()),
    st.integers(0, 6).map(lambda n: BufferConfig.max_records(n).shut_down_when_full()),
    st.integers(0, 400).map(lambda n: BufferConfig.max_bytes(n).shut_down_when_full()),
)


def _safely(read) -> Any:
    """What ``read()`` returns, or the error it raises (a store whose serde refuses a key)."""
    try:
        return read()
    except Exception as err:  # noqa: BLE001 - the error itself is compared
        return (type(err).__name__, str(err))


def pipe_and_measure(d, topic, chunk: list, bulk: bool) -> tuple[Any, dict]:
    """Pipe ``chunk`` (in bulk, or its one row); the error raised (or ``None``) and metrics."""
    error = None
    try:
        if bulk:
            topic.pipe_records(chunk)
        else:
            topic.pipe_input(*chunk[0])
    except Exception as err:  # noqa: BLE001 - the error itself is compared
        error = (type(err).__name__, str(err))
    try:
        m = d.metrics()
    except Exception as err:  # noqa: BLE001 - a size computed on demand can fail
        m = {"metrics-error": (type(err).__name__, str(err))}
    return error, m


def run(topology, rows, *, fuse: bool, debug: bool, bulk: bool = False) -> list:
    """Pipe ``rows`` and record everything observable after each one.

    ``topology`` is a topology, or a function building a fresh one (its user code may keep
    state, such as an initializer that fails at its n-th call).
    """
    if callable(topology):
        topology = topology()
    config = {"fuse_final_results": fuse, "metrics_recording_level": "DEBUG" if debug else "INFO"}
    steps: list = []
    with TopologyTestDriver(topology, config) as d:
        assert bool(d._task.handing) is fuse
        topic, out = d.create_input_topic("in"), d.create_output_topic("out")
        store = d.get_window_store("S")
        if bulk:  # plain tuples take the context-free path, the others go one by one
            batch = [(k, v, ts) if h is None else (k, v, ts, h) for k, v, ts, h in rows]
            chunks: list = [batch]
        else:
            chunks = [[row] for row in rows]
        for chunk in chunks:
            error, m = pipe_and_measure(d, topic, chunk, bulk)
            failure = d.failure
            steps.append((
                [(r.key, r.value, r.timestamp, r.headers) for r in out.read_records_to_list()],
                error, None if failure is None else (failure.node, failure.offset),
                {k: v for k, v in m.items() if "lateness" not in k},
                _safely(lambda: list(store.all())), _safely(lambda: list(store.backward_all())),
                d._task.suppressors["final"].stream_time,
                _safely(d._task.suppressors["final"].buffered),
            ))
    return steps


def outcomes(topology, rows) -> list:
    """Fused and separate, each at both metrics levels: they must all agree."""
    runs = [run(topology, rows, fuse=fuse, debug=debug)
            for fuse in (True, False) for debug in (False, True)]
    return runs


ROWS = st.lists(st.tuples(
    st.sampled_from(["a", "b", "aa", "B", "bad", None]),
    st.one_of(st.none(), st.integers(0, 20), st.just(BOOM)),
    st.integers(0, 120),
    st.sampled_from([None, [("h", b"1")], [("h", b"22"), ("x", None)]]),
), max_size=40)


def _strip_metric_levels(steps: list) -> list:
    """A run's steps without DEBUG-only metrics (INFO runs do not report them)."""
    return [(o, e, f, {k: v for k, v in m.items() if "-avg" not in k and "-max" not in k},
             *rest) for o, e, f, m, *rest in steps]


@settings(max_examples=examples(500), deadline=None)
@given(rows=ROWS, kind=st.sampled_from(["count", "reduce", "aggregate"]),
       size=st.integers(1, 30), advance_div=st.integers(1, 3), grace=st.integers(0, 20),
       buffer=BUFFERS, init_fail_at=st.integers(0, 8), regroup=st.booleans(),
       bad_key=st.sampled_from([None, "bad"]), bad_value=st.sampled_from([None, 3]))
def test_fused_equals_separate(rows, kind, size, advance_div, grace, buffer, init_fail_at,
                               regroup, bad_key, bad_value) -> None:
    advance = max(1, size // advance_div)
    if kind == "reduce":  # values a reducer can add
        rows = [(k, 1 if v is None or v == BOOM else v, ts, h) for k, v, ts, h in rows]
    if kind == "count":
        rows = [(k, 0 if v == BOOM and not regroup else v, ts, h) for k, v, ts, h in rows]
    def topology():
        return build(kind, size, advance, grace, buffer, init_fail_at=init_fail_at,
                     regroup=regroup, bad_key=bad_key, bad_value=bad_value)

    fused_info, fused_debug, separate_info, separate_debug = outcomes(topology, rows)
    assert fused_debug == separate_debug
    assert fused_info == separate_info
    if bad_value is None:  # at INFO, values are serialized only when a size is needed
        assert _strip_metric_levels(fused_debug) == fused_info


@settings(max_examples=examples(150), deadline=None)
@given(rows=ROWS, kind=st.sampled_from(["count", "reduce", "aggregate"]),
       size=st.integers(1, 30), grace=st.integers(0, 20), buffer=BUFFERS)
def test_bulk_fused_equals_separate_per_record(rows, kind, size, grace, buffer) -> None:
    """pipe_records (plain tuples take the context-free path) vs pipe_input, unfused."""
    if kind == "reduce":
        rows = [(k, 1 if v is None or v == BOOM else v, ts, h) for k, v, ts, h in rows]
    topology = build(kind, size, size, grace, buffer)
    bulk = run(topology, rows, fuse=True, debug=False, bulk=True)
    per_record = run(topology, rows, fuse=False, debug=False)
    # the bulk run has one step; compare it with the per-record run's cumulative view
    outputs = [r for step in per_record for r in step[0]]
    last = per_record[-1] if per_record else None
    if last is None:
        assert bulk[0][0] == []
        return
    first_error = next((step[1] for step in per_record if step[1] is not None), None)
    if first_error is not None and first_error[0] == "TaskFailedError":
        first_error = None
    assert bulk[0][0] == outputs
    assert bulk[0][1] == first_error
    assert bulk[0][2:] == last[2:]


def test_the_suppression_keeps_its_own_stream_time_on_both_paths() -> None:
    """A record that fails in the aggregator moves the aggregation's time, not the
    suppression's: c@12 must not close [0, 10) (size 10, grace 5)."""
    for fuse in (True, False):
        topology = build("aggregate", 10, 10, 5)
        with TopologyTestDriver(topology, {"fuse_final_results": fuse}) as d:
            inp, out = d.create_input_topic("in"), d.create_output_topic("out")
            inp.pipe_input("a", 1, 5)
            try:
                inp.pipe_input("b", BOOM, 20)
            except ValueError:
                pass
            assert d._task.suppressors["final"].stream_time == 5
            assert out.read_records_to_list() == []


def test_the_repro_with_a_raising_aggregator_emits_nothing_on_either_path() -> None:
    """Each path gets a fresh driver for c@12: nothing may be emitted."""
    for fuse in (True, False):
        b = StreamsBuilder()

        def aggregator(k, v, agg):
            if v == "boom":
                raise ValueError("boom")
            return agg + 1

        (b.stream("in").group_by_key().windowed_by(TimeWindows.of_size_and_grace(10, 5))
         .aggregate(lambda: 0, aggregator)
         .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
         .to_stream().to("out"))
        with TopologyTestDriver(b.build(), {"fuse_final_results": fuse}) as d:
            inp, out = d.create_input_topic("in"), d.create_output_topic("out")
            inp.pipe_input("a", "x", 5)
            try:
                inp.pipe_input("b", "boom", 20)
            except ValueError:
                pass
            assert out.read_records_to_list() == []
            (suppression,) = d._task.suppressors.values()
            assert suppression.stream_time == 5


def test_fusion_is_its_own_switch_and_debug_metrics_work_with_it() -> None:
    topology = build("count", 10, 10, 0)
    with TopologyTestDriver(topology, {"metrics_recording_level": "DEBUG"}) as d:
        assert d._task.handing
        inp = d.create_input_topic("in")
        inp.pipe_input("a", 1, 1)
        inp.pipe_input("b", 1, 25)
        m = d.metrics()
        assert m["suppression-buffer-count-max"] == 2.0
        assert m["suppression-emit-total"] == 1.0
    with TopologyTestDriver(topology, {"fuse_final_results": False}) as d:
        assert not d._task.handing
        assert d._task.suppressors["final"].stream_time == -1


def test_fusion_needs_the_suppression_as_only_child() -> None:
    b = StreamsBuilder()
    table = b.stream("in").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10))
    counts = table.count()
    counts.to_stream().to("raw")
    (counts.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream().to("out"))
    with TopologyTestDriver(b.build()) as d:
        assert not d._task.handing


def test_byte_accounting_counts_an_old_value_equal_to_the_prior_once() -> None:
    # the window goes 0 -> 1 -> 0 -> 2: at the third update old (1) differs from the prior (0),
    # at the fourth old (0) equals the prior and is counted once
    rows = [("k", 4, 1, None), ("k", 1, 2, None), ("k", 3, 3, None), ("k", 2, 4, None),
            ("k", 2, 5, [("h", b"x")])]
    buffer = BufferConfig.max_bytes(10_000).shut_down_when_full()
    topology = build("aggregate", 100, 100, 0, buffer)
    fused = run(topology, rows, fuse=True, debug=False)
    assert fused == run(topology, rows, fuse=False, debug=False)
    assert len({step[3]["suppression-buffer-size"] for step in fused}) > 1  # it changed


def _final_count_topology(peek=None):
    b = StreamsBuilder()
    stream = (b.stream("in").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10))
              .count(Materialized("S"))
              .suppress(Suppressed.until_window_closes(BufferConfig.unbounded())
                        .with_name("final"))
              .to_stream())
    if peek is not None:
        stream = stream.peek(peek)
    stream.to("out")
    return b.build()


def _both_ways(script):
    """Run ``script(driver)`` fused and separate; return both results."""
    results = []
    for fuse in (True, False):
        with TopologyTestDriver(_final_count_topology(), {"fuse_final_results": fuse}) as d:
            results.append(script(d))
    return results


def test_store_writes_between_records_behave_as_without_fusion() -> None:
    def script(case):
        def run_case(d):
            inp, out, store = (d.create_input_topic("in"), d.create_output_topic("out"),
                               d.get_window_store("S"))
            inp.pipe_input("a", "v", 1)
            if case == "put-existing":
                store.put("a", 99, 0)
            elif case == "delete":
                store.put("a", None, 0)
            elif case == "put-future":
                store.put("x", 5, 1000)
            inp.pipe_input("a", "v", 2)
            inp.pipe_input("z", "v", 3000)
            m = d.metrics()
            return ([(r.key, r.value, r.timestamp) for r in out.read_records_to_list()],
                    m["suppression-buffer-count"], m["suppression-buffer-size"],
                    list(store.all()))
        return run_case

    for case in ("put-existing", "delete", "put-future"):
        fused, separate = _both_ways(script(case))
        assert fused == separate, case


def test_a_failure_downstream_during_emission_keeps_the_entry_buffered() -> None:
    def run_case(fuse):
        def flaky(key, value):
            if key.key == "b":
                raise RuntimeError("downstream failed")

        with TopologyTestDriver(_final_count_topology(peek=flaky),
                                {"fuse_final_results": fuse}) as d:
            inp, out = d.create_input_topic("in"), d.create_output_topic("out")
            for key, ts in [("a", 1), ("b", 2), ("c", 3)]:
                inp.pipe_input(key, "v", ts)
            try:
                inp.pipe_input("z", "v", 30)
            except RuntimeError as err:
                error = str(err)
            return ([(r.key.key, r.value) for r in out.read_records_to_list()], error,
                    [(k.key, v) for k, v, _ in d._task.suppressors["final"].buffered()],
                    d.failure.node)

    fused, separate = run_case(True), run_case(False)
    assert fused == separate
    assert fused[0] == [("a", 1)]  # emitted before the failure
    assert fused[2] == [("b", 1), ("c", 1), ("z", 1)]  # the failing entry is kept
    assert fused[3].startswith("KSTREAM-PEEK")


def test_keys_with_equal_bytes_are_one_key() -> None:
    def script(d):
        inp, out = d.create_input_topic("in"), d.create_output_topic("out")
        for key, ts in [("a", 1), (b"a", 2), ("z", 30)]:
            inp.pipe_input(key, 1, ts)
        return [(r.key.key, r.value) for r in out.read_records_to_list()]

    fused, separate = _both_ways(script)
    # "a" and b"a" have the same bytes: one key, counted twice, as on disk and in Kafka
    assert fused == separate
    ((key, count),) = fused
    assert key in ("a", b"a") and count == 2


def test_emitted_records_carry_the_offset_and_topic_of_their_latest_update() -> None:
    def outcome(bulk: bool):
        seen: list = []

        class Spy(Processor):
            def process(self, record) -> None:
                seen.append((record.key, record.value, record.timestamp,
                             self.context.topic, self.context.offset))

        b = StreamsBuilder()
        (b.stream("in").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10))
         .count().suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
         .to_stream().process(Spy))
        rows = [("a", "v", 3), ("b", "v", 1), ("a", "v", 2), ("c", "v", 12),
                ("c", "v", 25, [("h", b"1")]), ("d", "v", 40)]
        with TopologyTestDriver(b.build(), {"fuse_final_results": bulk}) as d:
            topic = d.create_input_topic("in")
            if bulk:
                topic.pipe_records(rows)
            else:
                for row in rows:
                    topic.pipe_input(*row)
        return seen

    bulk, separate = outcome(True), outcome(False)
    assert bulk == separate
    assert [(r[0].key, r[3], r[4]) for r in bulk] == [
        ("a", "in", 2), ("b", "in", 1), ("c", "in", 3), ("c", "in", 4)]


def test_buffered_windows_are_not_tracked_by_the_garbage_collector() -> None:
    """Entries of plain values are tuples the collector stops scanning (bulk and per record)."""
    for buffer in (BufferConfig.unbounded(), BufferConfig.max_bytes(10**9).shut_down_when_full()):
        with TopologyTestDriver(build("count", 10, 10, 5, buffer)) as d:
            topic = d.create_input_topic("in")
            topic.pipe_records([("a", 1, 1), ("b", 1, 2), ("a", 1, 3)])
            topic.pipe_input("c", 1, 4)
            buffer = d._task.suppressors["final"].buffer
            gc.collect()
            entries = [e for bucket in buffer._buckets.values() for e in bucket.entries.values()]
            assert len(entries) == 3
            assert not any(gc.is_tracked(e) for e in entries)


def test_window_key_bytes_agree_with_the_key_serializer_on_odd_results() -> None:
    """A key serializer giving a bytearray, None, or text a suppression cannot order: the
    buffer packs each window's start once and must give the same bytes, order, errors and
    failing node as the separate path."""

    def odd(value: Any) -> Any:
        if value == "ba":
            return bytearray(b"ba")
        if value == "none":
            return None
        if value == "text":
            return "not bytes"
        return value.encode()

    serde = Serdes.serde_from(odd, bytes.decode, "odd")
    b = StreamsBuilder()
    (b.stream("in").group_by_key(Grouped(key_serde=serde))
     .windowed_by(TimeWindows.of_size_with_no_grace(10)).count(Materialized("S"))
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()).with_name("final"))
     .to_stream().to("out"))
    topology = b.build()
    rows = [("b", 1, 1, None), ("ba", 1, 2, None), ("a", 1, 3, None), ("none", 1, 4, None),
            ("ba", 1, 5, None), ("a", 1, 30, None), ("text", 1, 31, None), ("z", 1, 90, None)]
    for bulk in (False, True):
        fused = run(topology, rows, fuse=True, debug=False, bulk=bulk)
        assert fused == run(topology, rows, fuse=False, debug=False, bulk=bulk)
    per_record = run(topology, rows, fuse=True, debug=False)
    assert [r[0].key for r in per_record[5][0]] == ["none", "a", "b", "ba"]  # b"" first
    assert per_record[6][1][0] == "TypeError" and per_record[6][2] == ("final", 6)


def test_built_in_value_serializers_fail_at_the_suppression_on_both_paths() -> None:
    """With byte accounting, a built-in value serializer (long, or no serde) is called
    through the buffer whichever path hands it the change; a value it refuses (a bool, a
    float, a set) must raise the same error, located at the same node, on both paths."""
    def build_with(value_serde: Any, bad: Any):
        b = StreamsBuilder()
        (b.stream("in").group_by_key()
         .windowed_by(TimeWindows.of_size_with_no_grace(10))
         .aggregate(lambda: 0, lambda k, v, agg: bad if v == "bad" else agg + 1,
                    Materialized("S", value_serde=value_serde))
         .suppress(Suppressed.until_window_closes(
             BufferConfig.max_bytes(10**9).shut_down_when_full()).with_name("final"))
         .to_stream().to("out"))
        return b.build()

    rows = [("a", "v", 1, None), ("a", "v", 2, None), ("b", "v", 3, None),
            ("a", "bad", 4, None), ("c", "v", 30, None)]
    for value_serde, bad in ((Serdes.long(), True), (Serdes.long(), 1.5), (None, {1})):
        topology = build_with(value_serde, bad)
        for bulk in (False, True):
            fused = run(topology, rows, fuse=True, debug=False, bulk=bulk)
            assert fused == run(topology, rows, fuse=False, debug=False, bulk=bulk)
        per_record = run(topology, rows, fuse=True, debug=False)
        assert per_record[3][1] is not None and per_record[3][2][0] == "final"


def test_windows_whose_end_is_capped_stay_apart_and_count_against_the_bound() -> None:
    """Hopping windows near the largest timestamp all end at 2**63 - 1 (capped, as Kafka
    does): each is its own buffered entry on both paths, so a bound of 3 is exceeded."""
    b = StreamsBuilder()
    (b.stream("in").group_by_key()
     .windowed_by(TimeWindows.of_size_and_grace(100, 0).advance_by(10)).count()
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()).with_name("final"))
     .to_stream().to("out"))
    bounded = BufferConfig.max_records(3).shut_down_when_full()
    c = StreamsBuilder()
    (c.stream("in").group_by_key()
     .windowed_by(TimeWindows.of_size_and_grace(100, 0).advance_by(10)).count()
     .suppress(Suppressed.until_window_closes(bounded).with_name("final"))
     .to_stream().to("out"))
    both = []
    for fuse in (True, False):
        with TopologyTestDriver(b.build(), {"fuse_final_results": fuse}) as d:
            for key, ts in (("k", 2**63 - 6), ("j", 2**63 - 20), ("k", 2**63 - 5)):
                d.create_input_topic("in").pipe_input(key, 1, ts)
            buffered = d._task.suppressors["final"].buffered()
            d._task.suppressors["final"].buffer._check()
            assert len({key.window for key, _, _ in buffered if key.key == "k"}) == 10
            assert {value for key, value, _ in buffered if key.key == "k"} == {2}
            both.append(buffered)
        with TopologyTestDriver(c.build(), {"fuse_final_results": fuse}) as d:
            with pytest.raises(BufferFullError):
                d.create_input_topic("in").pipe_input("k", 1, 2**63 - 6)
    assert both[0] == both[1]


@settings(max_examples=examples(25), deadline=None)
@given(rows=ROWS, size=st.integers(1, 30), grace=st.integers(0, 20),
       cut=st.integers(0, 40), first=st.booleans())
def test_a_state_directory_written_either_way_restores_either_way(
        tmp_path_factory, rows, size, grace, cut, first) -> None:
    """With a state directory: stop after ``cut`` records with the handing over on or off,
    restart with it the other way; the outputs, drops and the buffer equal one run's."""
    rows = [(k, v, ts) for k, v, ts, _ in rows if v != BOOM]

    def run_in(state_dir, fuse, part):
        with TopologyTestDriver(build("count", size, size, grace), {"fuse_final_results": fuse},
                                state_dir=state_dir) as d:
            d.create_input_topic("in").pipe_records(part)
            final = d._task.suppressors["final"]
            final.buffer._check()
            return (d.create_output_topic("out").read_records_to_list(),
                    d.metrics()["dropped-records-total"], final.buffered(), final.stream_time)

    whole = run_in(tmp_path_factory.mktemp("one"), first, rows)
    state_dir = tmp_path_factory.mktemp("two")
    head = run_in(state_dir, first, rows[:cut])
    tail = run_in(state_dir, not first, rows[cut:])
    assert head[0] + tail[0] == whole[0]
    assert head[1] + tail[1] == whole[1]  # each driver counts its own drops
    assert tail[2:] == whole[2:]
