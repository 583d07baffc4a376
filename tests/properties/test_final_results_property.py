"""Property tests: suppression output equals a plain-Python reference model of the semantics.

Each property pipes a random, mildly out-of-order stream through a topology in the
``TopologyTestDriver`` one record at a time, reads the output after every record, and compares
the exact ordered output -- and the input index after which each record appeared -- with a
reference model written here from ``semantics/suppress_spec.md`` and DESIGN.md:

* final results (``until_window_closes``) of a windowed count over tumbling/hopping windows;
* rate limiting (``until_time_limit``) of a table, unbounded buffer;
* rate limiting with an emit-early ``max_records(n)`` buffer, plus the "never loses an update"
  invariants that hold whatever the eviction order.

Everything is driven by record timestamps only (no wall-clock time), so runs are deterministic.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from suppress import BufferConfig, Suppressed
from topology import (
    Consumed,
    Serdes,
    StreamsBuilder,
    TimeWindows,
    TopologyTestDriver,
    Windowed,
)

#: A small alphabet whose UTF-8 byte order differs from naive expectations:
#: "B" < "a" < "aa" < "b" < "é" (0xC3 0xA9), and "a" is a prefix of "aa".
KEYS = ("a", "aa", "b", "B", "é")
#: The flush record's key, outside the alphabet, and its huge timestamp.
TICK_KEY = "~tick"
TICK_TS = 10**9
MAX_TS = 500

PROPERTY_SETTINGS = settings(max_examples=examples(150), deadline=None)


def _strings() -> Consumed:
    return Consumed(key_serde=Serdes.string(), value_serde=Serdes.string())


# --------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------


@st.composite
def disordered_timestamps(draw: st.DrawFn, max_len: int = 40) -> list[int]:
    """Timestamps in 0..500: a non-decreasing base with a bounded step back per record."""
    disorder = draw(st.integers(0, 60))
    steps = draw(
        st.lists(st.tuples(st.integers(0, 25), st.integers(0, disorder)), max_size=max_len)
    )
    base = 0
    out = []
    for step, back in steps:
        base = min(MAX_TS, base + step)
        out.append(max(0, base - back))
    return out


@st.composite
def keyed_stream(draw: st.DrawFn) -> list[tuple[str, int]]:
    timestamps = draw(disordered_timestamps())
    keys = draw(st.lists(st.sampled_from(KEYS), min_size=len(timestamps), max_size=len(timestamps)))
    return list(zip(keys, timestamps, strict=True))


@st.composite
def time_windows(draw: st.DrawFn) -> tuple[int, int, int]:
    """(size, advance, grace): tumbling (advance == size) or hopping (1 <= advance <= size)."""
    size = draw(st.integers(1, 50))
    grace = draw(st.integers(0, 30))
    hopping = draw(st.booleans())
    advance = draw(st.integers(1, size)) if hopping else size
    return size, advance, grace


@st.composite
def table_updates(draw: st.DrawFn, tombstones: bool) -> list[tuple[str, str | None, int]]:
    """Table updates with unique values ("v<index>"), optionally with some tombstones."""
    timestamps = draw(disordered_timestamps())
    n = len(timestamps)
    keys = draw(st.lists(st.sampled_from(KEYS), min_size=n, max_size=n))
    if tombstones:
        deletes = draw(st.lists(st.integers(0, 5).map(lambda x: x == 0), min_size=n, max_size=n))
    else:
        deletes = [False] * n
    return [
        (k, None if dead else f"v{i}", ts)
        for i, (k, dead, ts) in enumerate(zip(keys, deletes, timestamps, strict=True))
    ]


# --------------------------------------------------------------------------------------------
# Reference models
# --------------------------------------------------------------------------------------------


def key_bytes(key: str) -> bytes:
    return key.encode("utf-8")


def windows_for(ts: int, size: int, advance: int) -> Iterator[int]:
    """Window starts containing ts (suppress_spec.md, TimeWindows ``windowsFor``)."""
    start = max(0, ts - size + advance) // advance * advance
    while start <= ts:
        yield start
        start += advance


@dataclass(frozen=True)
class FinalResult:
    after_input: int
    key: str
    start: int
    end: int
    count: int
    timestamp: int


def reference_final_results(
    records: list[tuple[str, int]], size: int, advance: int, grace: int
) -> tuple[list[FinalResult], int]:
    """Windowed count + until_window_closes, as specified; returns (emissions, dropped)."""
    stream_time = -1
    windows: dict[tuple[str, int], list[int]] = {}  # (key, start) -> [count, max ts]
    emitted: set[tuple[str, int]] = set()
    out: list[FinalResult] = []
    dropped = 0
    for index, (key, ts) in enumerate(records):
        stream_time = max(stream_time, ts)
        for start in windows_for(ts, size, advance):
            if start + size <= stream_time - grace:  # closed: dropped for this window
                dropped += 1
                continue
            window = windows.setdefault((key, start), [0, ts])
            window[0] += 1
            window[1] = max(window[1], ts)
        due = sorted(
            (start + size, key_bytes(k) + start.to_bytes(8, "big"), k, start)
            for (k, start) in windows
            if (k, start) not in emitted and start + size <= stream_time - grace
        )
        for end, _, k, start in due:
            emitted.add((k, start))
            count, max_ts = windows[(k, start)]
            out.append(FinalResult(index, k, start, end, count, max_ts))
    return out, dropped


@dataclass(frozen=True)
class Emission:
    after_input: int
    key: str
    value: str | None
    timestamp: int


def reference_time_limit(
    records: list[tuple[str, str | None, int]], limit: int, max_records: int | None = None
) -> list[Emission]:
    """Table -> until_time_limit(limit, unbounded or max_records(n).emit_early_when_full()).

    A key's buffer time is the timestamp of the update that first buffered it (the timer is
    not restarted by later updates, which replace value and timestamp in place). Per record:
    time eviction of every entry with buffer time <= T - limit, then, for a bounded buffer,
    evict while more than ``max_records`` keys are buffered; both in (buffer time, key bytes)
    order.
    """
    stream_time = -1
    buffer: dict[str, tuple[int, str | None, int]] = {}  # key -> (buffer time, value, ts)
    out: list[Emission] = []

    def head() -> str:
        return min(buffer, key=lambda k: (buffer[k][0], key_bytes(k)))

    def evict(index: int, k: str) -> None:
        _, value, ts = buffer.pop(k)
        out.append(Emission(index, k, value, ts))

    for index, (key, value, ts) in enumerate(records):
        stream_time = max(stream_time, ts)
        first = buffer[key][0] if key in buffer else ts
        buffer[key] = (first, value, ts)
        while buffer and buffer[head()][0] <= stream_time - limit:
            evict(index, head())
        if max_records is not None:
            while len(buffer) > max_records:
                evict(index, head())
    return out


# --------------------------------------------------------------------------------------------
# Drivers
# --------------------------------------------------------------------------------------------


def run_final_results(
    records: list[tuple[str, int]], size: int, advance: int, grace: int
) -> tuple[list[FinalResult], float]:
    b = StreamsBuilder()
    windows = TimeWindows.of_size_and_grace(size, grace)
    if advance != size:
        windows = windows.advance_by(advance)
    (
        b.stream("in", _strings())
        .group_by_key()
        .windowed_by(windows)
        .count()
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream()
        .to("out")
    )
    out: list[FinalResult] = []
    with TopologyTestDriver(b.build()) as driver:
        source = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        sink = driver.create_output_topic("out")
        for index, (key, ts) in enumerate(records):
            source.pipe_input(key, "x", timestamp=ts)
            for rec in sink.read_records_to_list():
                assert isinstance(rec.key, Windowed), rec.key
                out.append(
                    FinalResult(
                        index,
                        rec.key.key,
                        rec.key.window.start,
                        rec.key.window.end,
                        rec.value,
                        rec.timestamp,
                    )
                )
        dropped = float(driver.metrics()["dropped-records-total"])
    return out, dropped


def run_time_limit(
    records: list[tuple[str, str | None, int]], limit: int, config: BufferConfig
) -> list[Emission]:
    b = StreamsBuilder()
    (
        b.table("in", _strings())
        .suppress(Suppressed.until_time_limit(limit, config))
        .to_stream()
        .to("out")
    )
    out: list[Emission] = []
    with TopologyTestDriver(b.build()) as driver:
        source = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        sink = driver.create_output_topic("out")
        for index, (key, value, ts) in enumerate(records):
            source.pipe_input(key, value, timestamp=ts)
            out.extend(
                Emission(index, rec.key, rec.value, rec.timestamp)
                for rec in sink.read_records_to_list()
            )
    return out


# --------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(stream=keyed_stream(), windows=time_windows())
def test_final_results_match_reference_model(
    stream: list[tuple[str, int]], windows: tuple[int, int, int]
) -> None:
    size, advance, grace = windows
    records = [*stream, (TICK_KEY, TICK_TS)]

    expected, expected_dropped = reference_final_results(records, size, advance, grace)
    actual, dropped = run_final_results(records, size, advance, grace)

    assert actual == expected
    assert dropped == expected_dropped

    # The tick closed every window of the real keys: each accepted record is in exactly one
    # emitted final count per window it fell in, and nothing else was emitted.
    assert all(r.key != TICK_KEY for r in actual)
    pairs = sum(len(list(windows_for(ts, size, advance))) for _, ts in stream)
    assert sum(r.count for r in actual) + expected_dropped == pairs
    assert len({(r.key, r.start) for r in actual}) == len(actual)


@PROPERTY_SETTINGS
@given(updates=table_updates(tombstones=True), limit=st.integers(0, 50))
def test_time_limit_matches_reference_model(
    updates: list[tuple[str, str | None, int]], limit: int
) -> None:
    records = [*updates, (TICK_KEY, "tick", TICK_TS)]
    expected = reference_time_limit(records, limit)
    actual = run_time_limit(records, limit, BufferConfig.unbounded())
    assert actual == expected
    if limit == 0:  # a zero time limit is a pass-through
        assert [(e.key, e.value, e.timestamp) for e in actual] == records
        assert [e.after_input for e in actual] == list(range(len(records)))


@PROPERTY_SETTINGS
@given(
    updates=table_updates(tombstones=False),
    limit=st.integers(1, 50),
    max_records=st.integers(0, 4),
)
def test_emit_early_never_loses_an_update(
    updates: list[tuple[str, str | None, int]], limit: int, max_records: int
) -> None:
    records = [*updates, (TICK_KEY, "tick", TICK_TS)]
    config = BufferConfig.max_records(max_records).emit_early_when_full()
    actual = run_time_limit(records, limit, config)

    # Model-free invariants: per key, the output is a subsequence of that key's updates in
    # order, and after the flushing tick the key's last update has been emitted last.
    for key in KEYS:
        history = [(v, ts) for k, v, ts in updates if k == key]
        seen = [(e.value, e.timestamp) for e in actual if e.key == key]
        assert _is_subsequence(seen, history), (key, seen, history)
        if history:
            assert seen and seen[-1] == history[-1], (key, seen, history)

    assert actual == reference_time_limit(records, limit, max_records=max_records)


def _is_subsequence(candidate: list[object], sequence: list[object]) -> bool:
    remaining = iter(sequence)
    return all(any(item == other for other in remaining) for item in candidate)


# --------------------------------------------------------------------------------------------
# The reference models themselves, against hand-checked Kafka scenarios
# --------------------------------------------------------------------------------------------


def test_reference_final_results_reproduces_kafka_scenarios() -> None:
    # SuppressScenarioTest.shouldSupportFinalResultsForTimeWindows (size 2, grace 1)
    records = [("k1", ts) for ts in (0, 1, 2, 1, 0, 5, 0)]
    out, dropped = reference_final_results(records, size=2, advance=2, grace=1)
    assert out == [FinalResult(5, "k1", 0, 2, 4, 1), FinalResult(5, "k1", 2, 4, 1, 2)]
    assert dropped == 1
    out, _ = reference_final_results([*records, ("k1", 30)], size=2, advance=2, grace=1)
    assert out[2:] == [FinalResult(7, "k1", 4, 6, 1, 5)]
    # ...WithLargeJump (size 2, grace 2)
    records = [("k1", ts) for ts in (0, 1, 2, 0, 3, 0, 4, 0, 30)]
    out, dropped = reference_final_results(records, size=2, advance=2, grace=2)
    assert out == [
        FinalResult(6, "k1", 0, 2, 4, 1),
        FinalResult(8, "k1", 2, 4, 2, 3),
        FinalResult(8, "k1", 4, 6, 1, 4),
    ]
    assert dropped == 1
    # KStreamWindowAggregateTest hopping case: size 10, advance 5, grace 90 -> 7 drops
    records = [("k", ts) for ts in (100, 0, 1, 2, 3, 4, 5, 6, 105, 106)]
    assert reference_final_results(records, size=10, advance=5, grace=90)[1] == 7
    # Several windows closing at once come out by (end, key bytes): B, a, aa, b.
    records = [("b", 1), ("aa", 2), ("a", 3), ("B", 4), ("a", 12), ("c", 13), ("x", 100)]
    out, _ = reference_final_results(records, size=10, advance=10, grace=0)
    assert [(r.key, r.start) for r in out] == [
        ("B", 0),
        ("a", 0),
        ("aa", 0),
        ("b", 0),
        ("a", 10),
        ("c", 10),
    ]


def test_reference_time_limit_reproduces_kafka_scenarios() -> None:
    # shouldWorkBeforeGroupBy, suppress stage: (A, a, 0) is emitted when tick@10 arrives.
    out = reference_time_limit([("A", "a", 0), ("tick", "tick", 10)], 10)
    assert out == [Emission(1, "A", "a", 0)]
    # Timer not restarted: first buffered at 0, updated at 1 and 2, emitted at T=2 (limit 2).
    records = [("v1", "1", 0), ("v1", "0", 1), ("v1", "1", 2), ("tick", "t", 3), ("tick", "u", 4)]
    assert reference_time_limit(records, 2) == [Emission(2, "v1", "1", 2)]
    # maxRecords(1) emit early: a second distinct key pushes out the oldest by buffer time.
    records = [("x", "1", 5), ("y", "2", 3)]
    assert reference_time_limit(records, 2**63 - 1, max_records=1) == [Emission(1, "y", "2", 3)]
