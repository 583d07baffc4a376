"""Spill to disk, end to end: a spilling suppression is the unbounded one, record for record.

Random streams (late and out-of-order records, null keys, deletes, headers) go through the
same topology twice or three times in ``TopologyTestDriver``: with a small
``...spill_to_disk_when_full()`` bound (``max_records`` 0 to 3, a ``max_bytes`` smaller than
one entry or a few, or both), and with ``BufferConfig.unbounded()``, fused with its windowed
aggregation (the default) and not. After every record the outputs (keys, values,
timestamps, headers), errors, metrics, and the buffer as ``get_state_store`` shows it must be
equal, and the spilling buffer's ``_check()`` must hold. Final results
(``until_window_closes`` over count, reduce and an aggregate that deletes windows) and rate
limiting (``until_time_limit`` over a table) both run, at the INFO and DEBUG metrics levels
(DEBUG tracks bytes on every put, which takes the buffer's unstaged path).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from suppress import BufferConfig, Suppressed
from topology import StreamsBuilder, TimeWindows, TopologyTestDriver

SPILL_CONFIGS = st.one_of(
    st.integers(0, 3).map(lambda n: BufferConfig.max_records(n).spill_to_disk_when_full()),
    st.integers(0, 200).map(lambda n: BufferConfig.max_bytes(n).spill_to_disk_when_full()),
    st.tuples(st.integers(1, 3), st.integers(40, 200)).map(
        lambda t: BufferConfig.max_records(t[0]).with_max_bytes(t[1])
        .spill_to_disk_when_full()),
)
HEADERS = st.sampled_from([None, [("h", b"1")], [("h", b"22"), ("x", None)]])


def final_results(kind: str, size: int, advance: int, grace: int, cfg: Any):
    b = StreamsBuilder()
    windowed = b.stream("in").group_by_key().windowed_by(
        TimeWindows.of_size_and_grace(size, grace).advance_by(advance))
    if kind == "count":
        table = windowed.count()
    elif kind == "reduce":
        table = windowed.reduce(lambda agg, v: agg + v)
    else:  # deletes the window (None) on 13, so some windows end without a final result
        table = windowed.aggregate(lambda: 0, lambda k, v, agg: None if v == 13 else agg + v)
    (table.suppress(Suppressed.until_window_closes(cfg).with_name("final"))
     .to_stream().to("out"))
    return b.build()


def rate_limited(limit: int, cfg: Any):
    b = StreamsBuilder()
    (b.table("in").suppress(Suppressed.until_time_limit(limit, cfg).with_name("final"))
     .to_stream().to("out"))
    return b.build()


def run(topology, rows, *, fuse: bool = True, debug: bool = False, every: int = 1) -> list:
    """Pipe ``rows`` one by one; the outputs after each, everything else after every
    ``every``-th (reading counts and sizes resolves a spilling buffer's staged puts, so
    that staged puts last across records only when they are not read)."""
    config = {"fuse_final_results": fuse, "metrics_recording_level": "DEBUG" if debug else "INFO"}
    steps = []
    with TopologyTestDriver(topology, config) as d:
        topic, out = d.create_input_topic("in"), d.create_output_topic("out")
        view = d.get_state_store("final-store")
        engine = d._task.suppressors["final"]
        buffer = getattr(engine, "buffer", None)
        for i, (key, value, ts, headers) in enumerate(rows, 1):
            error = None
            try:
                topic.pipe_input(key, value, ts, headers)
            except Exception as err:  # noqa: BLE001 - the error itself is compared
                error = (type(err).__name__, str(err))
            if buffer is not None and hasattr(buffer, "disk_records"):
                buffer._check()
            outputs = [(r.key, r.value, r.timestamp, r.headers)
                       for r in out.read_records_to_list()]
            if i % every and i != len(rows):
                steps.append((outputs, error))
                continue
            steps.append((
                outputs, error, {k: v for k, v in d.metrics().items() if "lateness" not in k},
                view.entries(), view.num_records, view.size_bytes, view.stream_time,
            ))
    return steps


def spilled_at_some_point(topology, rows) -> bool:
    with TopologyTestDriver(topology) as d:
        topic = d.create_input_topic("in")
        spilled = False
        for key, value, ts, headers in rows:
            topic.pipe_input(key, value, ts, headers)
            spilled = spilled or d._task.suppressors["final"].buffer.disk_records > 0
        return spilled


FINAL_ROWS = st.lists(st.tuples(
    st.sampled_from(["a", "b", "aa", "B", "é", None]), st.integers(0, 20),
    st.integers(0, 150), HEADERS), max_size=40)


@settings(max_examples=examples(80), deadline=None)
@given(rows=FINAL_ROWS, kind=st.sampled_from(["count", "reduce", "aggregate"]),
       size=st.integers(1, 30), advance_div=st.integers(1, 3), grace=st.integers(0, 20),
       cfg=SPILL_CONFIGS, debug=st.booleans(), every=st.sampled_from([1, 4, 1000]))
def test_final_results_spilled_equal_unbounded(rows, kind, size, advance_div, grace, cfg,
                                               debug, every) -> None:
    advance = max(1, size // advance_div)
    spill = run(final_results(kind, size, advance, grace, cfg), rows, debug=debug, every=every)
    unbounded = final_results(kind, size, advance, grace, BufferConfig.unbounded())
    assert spill == run(unbounded, rows, debug=debug, every=every)  # fused: the default
    assert spill == run(unbounded, rows, fuse=False, debug=debug, every=every)


RATE_ROWS = st.lists(st.tuples(
    st.sampled_from(["a", "b", "aa", "B", "é", "k1", "k2", None]),
    st.one_of(st.none(), st.integers(0, 10**6), st.text(max_size=5)),
    st.integers(0, 100), HEADERS), max_size=40)


@settings(max_examples=examples(80), deadline=None)
@given(rows=RATE_ROWS, limit=st.integers(0, 40), cfg=SPILL_CONFIGS, debug=st.booleans(),
       every=st.sampled_from([1, 4, 1000]))
def test_rate_limits_spilled_equal_unbounded(rows, limit, cfg, debug, every) -> None:
    spill = run(rate_limited(limit, cfg), rows, debug=debug, every=every)
    assert spill == run(rate_limited(limit, BufferConfig.unbounded()), rows, debug=debug,
                        every=every)


def test_the_properties_exercise_the_disk_tier() -> None:
    """The generated cases do spill (a guard against a strategy that never reaches disk)."""
    rows = [(k, 1, ts, None) for ts, k in enumerate(["a", "b", "c", "a", "d", "b"])]
    cfg = BufferConfig.max_records(1).spill_to_disk_when_full()
    assert spilled_at_some_point(final_results("count", 100, 100, 0, cfg), rows)
    assert spilled_at_some_point(rate_limited(50, cfg), rows)


@settings(max_examples=examples(30), deadline=None)
@given(rows=FINAL_ROWS, size=st.integers(1, 30), grace=st.integers(0, 20), cfg=SPILL_CONFIGS)
def test_bulk_pipes_spilled_equal_unbounded(rows, size, grace, cfg) -> None:
    """``pipe_records`` (the batch path, one commit at the end) gives the same records."""
    def bulk(topology) -> tuple:
        with TopologyTestDriver(topology) as d:
            d.create_input_topic("in").pipe_records(
                [(k, v, ts) if h is None else (k, v, ts, h) for k, v, ts, h in rows])
            out = d.create_output_topic("out").read_records_to_list()
            view = d.get_state_store("final-store")
            return ([(r.key, r.value, r.timestamp, r.headers) for r in out], view.entries(),
                    d.metrics()["suppression-buffer-count"])

    assert bulk(final_results("count", size, size, grace, cfg)) == bulk(
        final_results("count", size, size, grace, BufferConfig.unbounded()))
