"""TopologyTestDriver / TestInputTopic / TestOutputTopic / TestRecord behaviour.

Kafka's test-utils contract (``semantics/testdriver_api.md``) as adapted by DESIGN.md: Python
names, ``EmptyTopicError``/``UnknownTopicError`` instead of Java exceptions, ``ValueError`` for
negative timestamps, headers as a sequence of ``(str, bytes)`` pairs.
"""

from __future__ import annotations

import gc
from datetime import timedelta

import pytest

from suppress import BufferConfig, Suppressed
from topology import (
    Consumed,
    Produced,
    Serdes,
    StreamsBuilder,
    TimeWindows,
    Topology,
    TopologyTestDriver,
    Window,
    Windowed,
)
from topology import TestRecord as Record  # aliased so pytest does not try to collect it
from topology.errors import EmptyTopicError, UnknownTopicError


def _strings() -> Consumed:
    return Consumed(key_serde=Serdes.string(), value_serde=Serdes.string())


def passthrough() -> Topology:
    b = StreamsBuilder()
    b.stream("in", _strings()).to("out")
    return b.build()


def final_results(size: int = 10, grace: int = 0) -> Topology:
    b = StreamsBuilder()
    (
        b.stream("in", _strings())
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(size, grace))
        .count()
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream()
        .to("out")
    )
    return b.build()


def time_limited_table(limit: int) -> Topology:
    b = StreamsBuilder()
    (
        b.table("in", _strings())
        .suppress(Suppressed.until_time_limit(limit, BufferConfig.unbounded()))
        .to_stream()
        .to("out")
    )
    return b.build()


def headers_of(record: Record) -> list[tuple[str, bytes]]:
    """The record's headers as a list of pairs, checking their documented shape."""
    headers = record.headers
    if headers is None:
        return []
    assert isinstance(headers, tuple | list), type(headers)
    pairs = [tuple(h) for h in headers]
    for pair in pairs:
        assert len(pair) == 2, pair
        assert isinstance(pair[0], str), pair
        assert isinstance(pair[1], bytes), pair
    return pairs


# --------------------------------------------------------------------------------------------
# Empty and unknown topics
# --------------------------------------------------------------------------------------------


def test_empty_topic_error_is_a_lookup_error() -> None:
    assert issubclass(EmptyTopicError, LookupError)


@pytest.mark.parametrize("read", ["read_value", "read_key_value", "read_record"])
def test_reading_a_never_written_topic_raises_empty_topic_error(read: str) -> None:
    with TopologyTestDriver(passthrough()) as driver:
        out = driver.create_output_topic("out")
        with pytest.raises(EmptyTopicError):
            getattr(out, read)()
        never = driver.create_output_topic("no-such-output")  # not even a sink
        with pytest.raises(EmptyTopicError):
            getattr(never, read)()


@pytest.mark.parametrize("read", ["read_value", "read_key_value", "read_record"])
def test_reading_a_drained_topic_raises_empty_topic_error(read: str) -> None:
    with TopologyTestDriver(passthrough()) as driver:
        source = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        out = driver.create_output_topic("out")
        source.pipe_input("k", "v", timestamp=1)
        assert out.read_value() == "v"
        with pytest.raises(EmptyTopicError):
            getattr(out, read)()


def test_bulk_reads_of_an_empty_topic_return_empty_collections() -> None:
    with TopologyTestDriver(passthrough()) as driver:
        out = driver.create_output_topic("out")
        assert out.queue_size() == 0
        assert out.is_empty()
        assert out.read_records_to_list() == []
        assert out.read_values_to_list() == []
        assert out.read_key_values_to_list() == []
        assert out.read_key_values_to_map() == {}


def test_piping_to_an_unknown_topic_raises_unknown_topic_error() -> None:
    with TopologyTestDriver(passthrough()) as driver:
        # Kafka checks the topic when a record is piped, not when the input topic is created;
        # either moment is accepted here, the error type is not negotiable.
        with pytest.raises(UnknownTopicError):
            nowhere = driver.create_input_topic("nowhere", Serdes.string(), Serdes.string())
            nowhere.pipe_input("k", "v", timestamp=0)
        # The driver is still usable for known topics afterwards.
        source = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        out = driver.create_output_topic("out")
        source.pipe_input("k", "v", timestamp=0)
        assert out.read_key_value() == ("k", "v")


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


def test_reads_are_fifo_and_consume_the_queue() -> None:
    with TopologyTestDriver(passthrough()) as driver:
        source = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        out = driver.create_output_topic("out")
        for i, (k, v) in enumerate([("a", "1"), ("b", "2"), ("c", "3"), ("d", "4")]):
            source.pipe_input(k, v, timestamp=10 + i)
        assert out.queue_size() == 4
        assert not out.is_empty()

        assert out.read_value() == "1"
        assert out.read_key_value() == ("b", "2")
        record = out.read_record()
        assert (record.key, record.value, record.timestamp) == ("c", "3", 12)
        assert out.queue_size() == 1
        assert out.read_records_to_list() == [Record("d", "4", timestamp=13)]
        assert out.queue_size() == 0
        assert out.is_empty()


def test_bulk_reads_drain_in_order() -> None:
    with TopologyTestDriver(passthrough()) as driver:
        source = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        out = driver.create_output_topic("out")
        source.pipe_input("a", "1", timestamp=0)
        source.pipe_input("b", "2", timestamp=1)
        assert out.read_values_to_list() == ["1", "2"]
        source.pipe_input("c", "3", timestamp=2)
        source.pipe_input("d", "4", timestamp=3)
        assert [tuple(kv) for kv in out.read_key_values_to_list()] == [("c", "3"), ("d", "4")]
        assert out.is_empty()


def test_read_key_values_to_map_last_value_wins() -> None:
    with TopologyTestDriver(passthrough()) as driver:
        source = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        out = driver.create_output_topic("out")
        source.pipe_input("a", "1", timestamp=0)
        source.pipe_input("b", "2", timestamp=1)
        source.pipe_input("a", "3", timestamp=2)
        source.pipe_input("c", "4", timestamp=3)
        source.pipe_input("c", None, timestamp=4)  # a tombstone leaves the key mapped to None
        assert out.read_key_values_to_map() == {"a": "3", "b": "2", "c": None}
        assert out.is_empty()


def test_output_keeps_the_input_timestamp() -> None:
    with TopologyTestDriver(passthrough()) as driver:
        source = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        out = driver.create_output_topic("out")
        for ts in (5, 3, 100, 0):
            source.pipe_input("k", str(ts), timestamp=ts)
        assert [r.timestamp for r in out.read_records_to_list()] == [5, 3, 100, 0]


# --------------------------------------------------------------------------------------------
# Piping records, headers, timestamps
# --------------------------------------------------------------------------------------------


def test_pipe_records_accepts_any_iterable_of_test_records() -> None:
    with TopologyTestDriver(passthrough()) as driver:
        source = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        out = driver.create_output_topic("out")
        records = (Record(f"k{i}", f"v{i}", timestamp=i * 10) for i in range(3))  # a generator
        source.pipe_records(records)
        assert out.read_records_to_list() == [
            Record("k0", "v0", timestamp=0),
            Record("k1", "v1", timestamp=10),
            Record("k2", "v2", timestamp=20),
        ]


def test_headers_pass_through_pipe_records() -> None:
    headers = [("trace", b"abc"), ("empty", b""), ("trace", b"second")]
    with TopologyTestDriver(passthrough()) as driver:
        source = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        out = driver.create_output_topic("out")
        source.pipe_records([Record("k", "v", timestamp=7, headers=headers)])
        record = out.read_record()
        assert (record.key, record.value, record.timestamp) == ("k", "v", 7)
        assert headers_of(record) == headers
        assert record == Record("k", "v", timestamp=7, headers=headers)


def test_headers_pass_through_pipe_input() -> None:
    with TopologyTestDriver(passthrough()) as driver:
        source = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        out = driver.create_output_topic("out")
        source.pipe_input("k", "v", timestamp=3, headers=[("h", b"\x00\xff")])
        source.pipe_input("k", "w", timestamp=4)
        first, second = out.read_records_to_list()
        assert headers_of(first) == [("h", b"\x00\xff")]
        assert headers_of(second) == []


def test_negative_timestamp_in_pipe_input_raises_value_error() -> None:
    with TopologyTestDriver(passthrough()) as driver:
        source = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        out = driver.create_output_topic("out")
        with pytest.raises(ValueError):
            source.pipe_input("k", "v", timestamp=-1)
        assert out.is_empty()


def test_negative_timestamp_in_a_test_record_raises_value_error() -> None:
    with TopologyTestDriver(passthrough()) as driver:
        source = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        out = driver.create_output_topic("out")
        # Kafka's TestRecord refuses it in the constructor; refusing it when piped is accepted.
        with pytest.raises(ValueError):
            source.pipe_records([Record("k", "v", timestamp=-5)])
        assert out.is_empty()


# --------------------------------------------------------------------------------------------
# TestRecord value semantics
# --------------------------------------------------------------------------------------------


def test_test_record_equality_compares_key_value_timestamp_and_headers() -> None:
    base = Record("k", "v", timestamp=1)
    assert base == Record("k", "v", timestamp=1)
    assert base != Record("k2", "v", timestamp=1)
    assert base != Record("k", "v2", timestamp=1)
    assert base != Record("k", "v", timestamp=2)
    assert base != Record("k", "v", timestamp=None)
    assert base != Record("k", "v", timestamp=1, headers=[("h", b"1")])
    assert Record("k", "v", timestamp=1, headers=[("h", b"1")]) == Record(
        "k", "v", timestamp=1, headers=[("h", b"1")]
    )
    # As in Kafka, no headers means empty headers.
    assert Record("k", "v", timestamp=1, headers=None) == Record("k", "v", timestamp=1, headers=[])


def test_test_record_defaults() -> None:
    record = Record("k", "v")
    assert (record.key, record.value, record.timestamp) == ("k", "v", None)
    assert headers_of(record) == []


def test_output_record_equals_an_expectation_built_without_headers() -> None:
    with TopologyTestDriver(passthrough()) as driver:
        source = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        out = driver.create_output_topic("out")
        source.pipe_input("k", "v", timestamp=9)
        assert out.read_record() == Record("k", "v", timestamp=9)


# --------------------------------------------------------------------------------------------
# Wall-clock time never flushes suppression
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("advance", [10**9, timedelta(days=365)], ids=["int-ms", "timedelta"])
def test_advance_wall_clock_time_never_emits_final_results(advance: int | timedelta) -> None:
    with TopologyTestDriver(final_results(size=10, grace=0)) as driver:
        source = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        out = driver.create_output_topic("out")
        source.pipe_input("a", "x", timestamp=0)
        source.pipe_input("a", "x", timestamp=9)
        driver.advance_wall_clock_time(advance)
        driver.advance_wall_clock_time(advance)
        assert out.is_empty()
        # Only a record reaching the suppress node moves its stream time and closes [0,10).
        source.pipe_input("b", "x", timestamp=10)
        assert out.read_key_value() == (Windowed("a", Window(0, 10)), 2)
        assert out.is_empty()


@pytest.mark.parametrize("advance", [10**9, timedelta(hours=1)], ids=["int-ms", "timedelta"])
def test_advance_wall_clock_time_never_emits_time_limited_updates(
    advance: int | timedelta,
) -> None:
    with TopologyTestDriver(time_limited_table(limit=5)) as driver:
        source = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        out = driver.create_output_topic("out")
        source.pipe_input("a", "1", timestamp=0)
        driver.advance_wall_clock_time(advance)
        assert out.is_empty()
        source.pipe_input("b", "2", timestamp=5)
        assert out.read_records_to_list() == [Record("a", "1", timestamp=0)]


# --------------------------------------------------------------------------------------------
# Output serdes
# --------------------------------------------------------------------------------------------


def counts_with_produced_serdes() -> Topology:
    b = StreamsBuilder()
    (
        b.stream("in", _strings())
        .group_by_key()
        .count()
        .to_stream()
        .to("out", Produced(key_serde=Serdes.string(), value_serde=Serdes.long()))
    )
    return b.build()


def _pipe_counts(driver: TopologyTestDriver) -> None:
    source = driver.create_input_topic("in", Serdes.string(), Serdes.string())
    source.pipe_input("a", "x", timestamp=0)
    source.pipe_input("b", "x", timestamp=1)
    source.pipe_input("a", "x", timestamp=2)


def test_output_topic_with_serdes_deserializes_what_the_sink_wrote() -> None:
    with TopologyTestDriver(counts_with_produced_serdes()) as driver:
        out = driver.create_output_topic("out", Serdes.string(), Serdes.long())
        _pipe_counts(driver)
        assert out.read_records_to_list() == [
            Record("a", 1, timestamp=0),
            Record("b", 1, timestamp=1),
            Record("a", 2, timestamp=2),
        ]


def test_output_topic_with_bytes_serdes_sees_the_serialized_record() -> None:
    with TopologyTestDriver(counts_with_produced_serdes()) as driver:
        out = driver.create_output_topic("out", Serdes.bytes(), Serdes.bytes())
        _pipe_counts(driver)
        assert out.read_key_values_to_list() == [
            (b"a", (1).to_bytes(8, "big")),
            (b"b", (1).to_bytes(8, "big")),
            (b"a", (2).to_bytes(8, "big")),
        ]


def test_output_topic_without_serdes_returns_the_produced_objects() -> None:
    with TopologyTestDriver(counts_with_produced_serdes()) as driver:
        out = driver.create_output_topic("out")
        _pipe_counts(driver)
        assert out.read_key_values_to_list() == [("a", 1), ("b", 1), ("a", 2)]


def test_windowed_keys_come_back_as_windowed_without_serdes() -> None:
    with TopologyTestDriver(final_results(size=10, grace=5)) as driver:
        source = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        out = driver.create_output_topic("out")
        source.pipe_input("a", "x", timestamp=3)
        source.pipe_input("a", "x", timestamp=14)
        assert out.is_empty()  # [0,10) closes at stream time 10 + 5
        source.pipe_input("a", "x", timestamp=15)
        record = out.read_record()
        assert isinstance(record.key, Windowed)
        assert (record.key.key, record.key.window.start, record.key.window.end) == ("a", 0, 10)
        assert record.key == Windowed("a", Window(0, 10))
        assert (record.value, record.timestamp) == (1, 3)
        assert out.is_empty()


# --------------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------------


def test_metrics_is_a_dict_with_the_documented_names() -> None:
    with TopologyTestDriver(final_results(size=10, grace=0)) as driver:
        source = driver.create_input_topic("in", Serdes.string(), Serdes.string())
        out = driver.create_output_topic("out")
        source.pipe_input("a", "x", timestamp=0)
        source.pipe_input("a", "x", timestamp=10)  # closes [0,10): one emission
        source.pipe_input("a", "x", timestamp=3)  # late for [0,10): one drop
        assert len(out.read_records_to_list()) == 1
        metrics = driver.metrics()
        assert isinstance(metrics, dict)
        for name in (
            "dropped-records-total",
            "suppression-emit-total",
            "suppression-buffer-size",
            "suppression-buffer-count",
        ):
            assert name in metrics, name
        assert float(metrics["dropped-records-total"]) == 1.0
        assert float(metrics["suppression-emit-total"]) == 1.0


class _OffsetSpy:
    """A user processor recording (topic, offset, key) and failing on value 'boom'."""

    def __init__(self, seen: list) -> None:
        from topology.runtime.api import Processor

        class Spy(Processor):
            def process(self, record) -> None:
                seen.append((self.context.topic, self.context.offset, record.key))
                if record.value == "boom":
                    raise RuntimeError("boom")
                self.context.forward(record)

        self.cls = Spy


def test_a_failure_inside_pipe_records_fails_the_task_at_its_offset() -> None:
    from topology import StreamsBuilder as SB
    from topology import TestRecord as TR
    from topology import TopologyTestDriver as TTD
    from topology.errors import TaskFailedError

    seen: list = []
    spy = _OffsetSpy(seen).cls
    b = SB()
    b.stream("in").process(spy).to("out")
    with TTD(b.build()) as d:
        inp = d.create_input_topic("in")
        inp.pipe_input("a", "ok", 1)
        with pytest.raises(RuntimeError, match="boom"):
            inp.pipe_records([("b", "ok", 2), TR("c", "boom", 3), ("d", "ok", 4)])
        assert d.failure.offset == 2 and d.failure.key == "c"
        with pytest.raises(TaskFailedError):
            inp.pipe_records([("e", "ok", 5)])
    assert [offset for _, offset, _ in seen] == [0, 1, 2]


def test_a_topic_written_by_a_sink_and_piped_shares_one_offset_sequence() -> None:
    from topology import StreamsBuilder as SB
    from topology import TopologyTestDriver as TTD

    seen: list = []
    spy = _OffsetSpy(seen).cls
    b = SB()
    b.stream("a").to("b")
    b.stream("b").process(spy).to("out")
    with TTD(b.build()) as d:
        ta, tb = d.create_input_topic("a"), d.create_input_topic("b")
        ta.pipe_input("x", 1, 1)
        tb.pipe_input("y", 1, 2)
        ta.pipe_records([("z", 1, 3)])
    assert seen == [("b", 0, "x"), ("b", 1, "y"), ("b", 2, "z")]


def test_piping_no_records_is_not_an_error() -> None:
    from topology import StreamsBuilder as SB
    from topology import TopologyTestDriver as TTD

    b = SB()
    b.stream("in").to("out")
    with TTD(b.build()) as d:
        source, out = d.create_input_topic("in"), d.create_output_topic("out")
        source.pipe_records([])
        source.pipe_records(iter(()))
        assert out.is_empty() and d.committed_offsets().get("in", 0) == 0
        assert d.metrics()["dropped-records-total"] == 0
        source.pipe_records([("k", "v", 5)])  # the topic works as before
        assert out.read_key_value() == ("k", "v")
        d.create_input_topic("elsewhere").pipe_records([])


def _windowed_counts() -> Topology:
    b = StreamsBuilder()
    (b.stream("in", _strings()).group_by_key()
     .windowed_by(TimeWindows.of_size_with_no_grace(10)).count().to_stream().to("out"))
    return b.build()


def _pipe_windowed(driver: TopologyTestDriver) -> None:
    source = driver.create_input_topic("in", Serdes.string(), Serdes.string())
    for key, ts in (("a", 0), ("b", 3), ("a", 12)):
        source.pipe_input(key, "x", timestamp=ts)


WINDOWED_COUNTS = [
    (Windowed("a", Window(0, 10)), 1, 0),
    (Windowed("b", Window(0, 10)), 1, 3),
    (Windowed("a", Window(10, 20)), 1, 12),
]


@pytest.mark.parametrize("read", ["list", "one_by_one", "with_serdes"])
def test_windowed_keys_read_back_whole(read: str) -> None:
    """The driver holds windowed keys as plain parts; every way of reading rebuilds them."""
    with TopologyTestDriver(_windowed_counts()) as driver:
        _pipe_windowed(driver)
        if read == "with_serdes":
            out = driver.create_output_topic(
                "out", Serdes.time_windowed(Serdes.string(), 10), Serdes.long())
        else:
            out = driver.create_output_topic("out")
        if read == "one_by_one":
            records = [out.read_record() for _ in range(out.queue_size())]
        else:
            records = out.read_records_to_list()
    assert [(r.key, r.value, r.timestamp) for r in records] == WINDOWED_COUNTS
    assert all(type(r.key) is Windowed and type(r.key.window) is Window for r in records)


def test_waiting_output_records_are_not_tracked_by_the_garbage_collector() -> None:
    """A million waiting outputs must not be rescanned by every full collection."""
    with TopologyTestDriver(_windowed_counts()) as driver:
        _pipe_windowed(driver)
        driver.create_input_topic("in").pipe_records([("c", "x", 13), ("d", "x", 14)])
        gc.collect()
        waiting = list(driver._outputs["out"])
        assert len(waiting) == 5
        assert not any(gc.is_tracked(item) for item in waiting)


@pytest.mark.parametrize("enabled", [True, False])
def test_reading_outputs_leaves_the_garbage_collector_as_it_was(enabled: bool) -> None:
    with TopologyTestDriver(passthrough()) as driver:
        driver.create_input_topic("in").pipe_records([("k", "v", 1)])
        was = gc.isenabled()
        (gc.enable if enabled else gc.disable)()
        try:
            assert len(driver.create_output_topic("out").read_records_to_list()) == 1
            assert gc.isenabled() is enabled
        finally:
            (gc.enable if was else gc.disable)()


def test_one_topic_with_windowed_and_plain_keys_and_headers() -> None:
    b = StreamsBuilder()
    source = b.stream("in")
    (source.group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10)).count()
     .to_stream().to("out"))
    source.to("out")
    headers = [("h", b"1")]
    with TopologyTestDriver(b.build()) as driver:
        driver.create_input_topic("in").pipe_input("a", "x", 3, headers)
        out = driver.create_output_topic("out")
        assert out.read_records_to_list() == [
            Record(Windowed("a", Window(0, 10)), 1, 3, headers), Record("a", "x", 3, headers)]
        driver.create_input_topic("in").pipe_input("a", "y", 4)
        assert out.read_key_values_to_map() == {Windowed("a", Window(0, 10)): 2, "a": "y"}


@pytest.mark.parametrize("window", [None, Window([1], [2]), (0, 10, 99), Window(True, 10)])
def test_unusual_windowed_keys_come_back_as_produced(window) -> None:
    b = StreamsBuilder()
    b.stream("in").map(lambda k, v: (Windowed(k, window), v)).to("out")
    with TopologyTestDriver(b.build()) as driver:
        driver.create_input_topic("in").pipe_input("a", "x", 1)
        (record,) = driver.create_output_topic("out").read_records_to_list()
    assert record.key == Windowed("a", window) and type(record.key.window) is type(window)
