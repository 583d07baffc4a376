"""The fused final-results path gives exactly what the separate processors give.

DEBUG metrics turn fusion off, so the same topology runs both ways on the same random streams;
outputs (keys, values, timestamps, headers, order), drops, store contents and suppression
metrics must agree after every record.
"""

from __future__ import annotations

import gc

from hypothesis import given, settings
from hypothesis import strategies as st

from suppress import BufferConfig, BufferFullError, Suppressed
from topology import StreamsBuilder, TimeWindows, TopologyTestDriver
from topology.runtime.processors.fused import FusedFinalResults

AGGREGATIONS = {
    "count": lambda w: w.count(),
    "reduce": lambda w: w.reduce(lambda agg, v: agg + v),
    # deletes the window (returns None) on a 13; often returns to the initializer's 0, so an
    # old value can equal the prior one (byte accounting counts it once)
    "aggregate": lambda w: w.aggregate(
        lambda: 0, lambda k, v, agg: None if v == 13 else (agg + (v or 0)) % 4),
}


def build(kind: str, size: int, advance: int, grace: int, buffer=None):
    b = StreamsBuilder()
    windows = TimeWindows.of_size_and_grace(size, grace).advance_by(advance)
    table = AGGREGATIONS[kind](b.stream("in").group_by_key().windowed_by(windows))
    (table.suppress(Suppressed.until_window_closes(buffer or BufferConfig.unbounded()))
     .to_stream().to("out"))
    return b.build()


BUFFERS = st.one_of(
    st.just(BufferConfig.unbounded()),
    st.integers(0, 6).map(lambda n: BufferConfig.max_records(n).shut_down_when_full()),
    st.integers(0, 400).map(lambda n: BufferConfig.max_bytes(n).shut_down_when_full()),
)


def run(topology, rows, debug: bool):
    level = "DEBUG" if debug else "INFO"
    steps = []
    with TopologyTestDriver(topology, {"metrics_recording_level": level}) as d:
        fused = any(isinstance(f, FusedFinalResults) for f in d._task.fused.values())
        assert fused is not debug
        topic = d.create_input_topic("in")
        out = d.create_output_topic("out")
        store = next(iter(s for s in d._task.stores.values()))
        for key, value, ts, headers in rows:
            try:
                topic.pipe_input(key, value, ts, headers)
            except BufferFullError as err:
                steps.append((str(err), [(r.key, r.value, r.timestamp)
                                         for r in out.read_records_to_list()]))
                break
            m = d.metrics()
            steps.append((
                [(r.key, r.value, r.timestamp, r.headers) for r in out.read_records_to_list()],
                m["dropped-records-total"], m["suppression-emit-total"],
                m["suppression-buffer-count"], m["suppression-buffer-size"],
                list(store.all()), list(store.backward_all()),
            ))
    return steps


ROWS = st.lists(st.tuples(
    st.sampled_from(["a", "b", "aa", "B", None]),
    st.one_of(st.none(), st.integers(0, 20)),
    st.integers(0, 120),
    st.sampled_from([None, [("h", b"1")], [("h", b"22"), ("x", None)]]),
), max_size=40)


@settings(max_examples=200, deadline=None)
@given(rows=ROWS, kind=st.sampled_from(sorted(AGGREGATIONS)), size=st.integers(1, 30),
       advance_div=st.integers(1, 3), grace=st.integers(0, 20), buffer=BUFFERS)
def test_fused_equals_separate(rows, kind, size, advance_div, grace, buffer) -> None:
    advance = max(1, size // advance_div)
    if kind == "count":
        rows = [r for r in rows]
    if kind == "reduce":
        rows = [(k, 1 if v is None else v, ts, h) for k, v, ts, h in rows]
    topology = build(kind, size, advance, grace, buffer)
    assert run(topology, rows, debug=False) == run(topology, rows, debug=True)


def test_fusion_needs_the_suppression_as_only_child() -> None:
    b = StreamsBuilder()
    table = b.stream("in").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10))
    counts = table.count()
    counts.to_stream().to("raw")
    (counts.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream().to("out"))
    with TopologyTestDriver(b.build()) as d:
        assert not d._task.fused


def test_byte_accounting_counts_an_old_value_equal_to_the_prior_once() -> None:
    # the window goes 0 -> 1 -> 0 -> 2: at the third update old (1) differs from the prior (0),
    # at the fourth old (0) equals the prior and is counted once
    rows = [("k", 4, 1, None), ("k", 1, 2, None), ("k", 3, 3, None), ("k", 2, 4, None),
            ("k", 2, 5, [("h", b"x")])]
    buffer = BufferConfig.max_bytes(10_000).shut_down_when_full()
    topology = build("aggregate", 100, 100, 0, buffer)
    fused, separate = run(topology, rows, debug=False), run(topology, rows, debug=True)
    assert fused == separate
    assert len({step[4] for step in fused}) > 1  # the size really changed along the way


def _final_count_topology(store_name: str = "S", peek=None):
    from topology import Materialized

    b = StreamsBuilder()
    stream = (b.stream("in").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10))
              .count(Materialized(store_name))
              .suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream())
    if peek is not None:
        stream = stream.peek(peek)
    stream.to("out")
    return b.build()


def _both_ways(script):
    """Run ``script(driver)`` fused (INFO) and separate (DEBUG); return both results."""
    results = []
    for level in ("INFO", "DEBUG"):
        with TopologyTestDriver(_final_count_topology(), {"metrics_recording_level": level}) as d:
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


def test_a_failure_downstream_during_emission_loses_nothing() -> None:
    def run_case(level):
        failed = []

        def flaky(key, value):
            if key.key == "b" and not failed:
                failed.append(1)
                raise RuntimeError("transient")

        topology = _final_count_topology(peek=flaky)
        with TopologyTestDriver(topology, {"metrics_recording_level": level}) as d:
            inp, out = d.create_input_topic("in"), d.create_output_topic("out")
            for key, ts in [("a", 1), ("b", 2), ("c", 3), ("z", 30), ("y", 30), ("x", 55)]:
                try:
                    inp.pipe_input(key, "v", ts)
                except RuntimeError:
                    pass
            return [(r.key.key, r.key.window.start, r.value) for r in out.read_records_to_list()]

    assert run_case("INFO") == run_case("DEBUG") == [
        ("a", 0, 1), ("b", 0, 1), ("c", 0, 1), ("y", 30, 1), ("z", 30, 1)]


def test_keys_with_equal_bytes_keep_their_buffering_order() -> None:
    def script(d):
        inp, out = d.create_input_topic("in"), d.create_output_topic("out")
        for key, ts in [("a", 1), (b"a", 2), ("z", 30)]:
            inp.pipe_input(key, 1, ts)
        return [(r.key.key, r.value) for r in out.read_records_to_list()]

    fused, separate = _both_ways(script)
    assert fused == separate == [("a", 1), (b"a", 1)]


@settings(max_examples=150, deadline=None)
@given(rows=ROWS, kind=st.sampled_from(sorted(AGGREGATIONS)), size=st.integers(1, 30),
       grace=st.integers(0, 20), buffer=BUFFERS)
def test_bulk_fused_equals_separate_per_record(rows, kind, size, grace, buffer) -> None:
    """pipe_records (plain tuples take the context-free path) vs pipe_input, unfused."""
    if kind == "reduce":
        rows = [(k, 1 if v is None else v, ts, h) for k, v, ts, h in rows]
    topology = build(kind, size, size, grace, buffer)
    # rows without headers as plain tuples, the others with their headers
    records = [(k, v, ts) if h is None else (k, v, ts, h) for k, v, ts, h in rows]

    def outcome(bulk: bool):
        level = "INFO" if bulk else "DEBUG"
        with TopologyTestDriver(topology, {"metrics_recording_level": level}) as d:
            topic, out = d.create_input_topic("in"), d.create_output_topic("out")
            error = None
            try:
                if bulk:
                    topic.pipe_records(records)
                else:
                    for record in records:
                        topic.pipe_input(*record)
            except BufferFullError as err:
                error = str(err)
            m = d.metrics()
            store = next(iter(d._task.stores.values()))
            return ([(r.key, r.value, r.timestamp, r.headers)
                     for r in out.read_records_to_list()], error,
                    m["dropped-records-total"], m["suppression-emit-total"],
                    m["suppression-buffer-count"], m["suppression-buffer-size"],
                    list(store.all()))

    assert outcome(True) == outcome(False)


def test_emitted_records_carry_the_offset_and_topic_of_their_latest_update() -> None:
    from topology.runtime.api import Processor

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
        level = "INFO" if bulk else "DEBUG"
        rows = [("a", "v", 3), ("b", "v", 1), ("a", "v", 2), ("c", "v", 12),
                ("c", "v", 25, [("h", b"1")]), ("d", "v", 40)]
        with TopologyTestDriver(b.build(), {"metrics_recording_level": level}) as d:
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
            (fused,) = d._task.fused.values()
            gc.collect()
            entries = [e for window in fused._buffer.values() for e in window.values()]
            assert len(entries) == 3
            assert not any(gc.is_tracked(e) for e in entries)
