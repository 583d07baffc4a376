"""Driver conveniences as Kafka's TopologyTestDriver and TestInputTopic have them."""

import datetime as dt
import time

import pytest

from suppress import BufferConfig, Suppressed
from topology import (
    Grouped,
    Materialized,
    StreamsBuilder,
    TestRecord,
    TimeWindows,
    TopologyTestDriver,
)
from topology.testing.driver import SuppressionBuffer

APP = {"application_id": "app"}


def test_changelogs_of_written_stores_are_produced_topics() -> None:
    # TopologyTestDriverTest.shouldCaptureInternalTopicNamesIfWrittenInto: changelogs
    # <application id>-<store>-changelog, the suppression buffer's included
    b = StreamsBuilder()
    (b.stream("in").group_by_key().count(Materialized("counts"))
     .suppress(Suppressed.until_time_limit(0, BufferConfig.unbounded())).to_stream().to("out"))
    with TopologyTestDriver(b.build(), APP) as d:
        assert d.produced_topic_names() == set()
        d.create_input_topic("in").pipe_input("k", "v", 0)
        assert d.produced_topic_names() == {
            "out", "app-counts-changelog", "app-KTABLE-SUPPRESS-STATE-STORE-0000000003-changelog"}


@pytest.mark.parametrize("level", ["INFO", "DEBUG"])  # fused and separate final results
def test_final_results_buffer_changelog_before_any_emission(level: str) -> None:
    b = StreamsBuilder()
    (b.stream("in").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10))
     .count(Materialized("w"))
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()).with_name("final"))
     .to_stream().to("out"))
    with TopologyTestDriver(b.build(), {**APP, "metrics_recording_level": level}) as d:
        assert d.produced_topic_names() == set()
        d.create_input_topic("in").pipe_input("k", "v", 0)
        assert d.produced_topic_names() == {"app-w-changelog", "app-final-store-changelog"}
        buffer = d.get_state_store("final-store")
        assert isinstance(buffer, SuppressionBuffer) and buffer.num_records == 1
        assert buffer.size_bytes > 0


def test_table_changelogs() -> None:
    b = StreamsBuilder()
    b.table("plain").to_stream().to("out")  # not materialized: no store, no changelog
    b.table("named", materialized=Materialized("named-store"))
    with TopologyTestDriver(b.build(), APP) as d:
        d.create_input_topic("plain").pipe_input("k", "v", 0)
        assert d.produced_topic_names() == {"out"}
        d.create_input_topic("named").pipe_input("absent", None, 0)  # a delete is a write
        assert d.produced_topic_names() == {"out", "app-named-store-changelog"}


def test_repartition_filter_passes_none_keys_to_the_aggregation() -> None:
    # Kafka 3.7+: the repartition filter's predicate is always true; the aggregation drops
    b = StreamsBuilder()
    b.stream("in").group_by(lambda k, v: v, Grouped(name="g")).count()
    with TopologyTestDriver(b.build(), APP) as d:
        d.create_input_topic("in").pipe_input("k", None, 0)
        assert "app-g-repartition" in d.produced_topic_names()
        assert d.metrics()["dropped-records-total{reason=null-key}"] == 1
        assert d.metrics()["dropped-records-total"] == 1


def test_get_state_store_points_built_in_stores_to_their_getter() -> None:
    # TopologyTestDriverTest.shouldThrowIfInMemoryBuiltInStoreIsAccessedWithUntypedMethod
    b = StreamsBuilder()
    grouped = b.stream("in").group_by_key()
    grouped.count(Materialized("kv"))
    grouped.windowed_by(TimeWindows.of_size_with_no_grace(10)).count(Materialized("win"))
    with TopologyTestDriver(b.build()) as d:
        with pytest.raises(ValueError) as e:
            d.get_state_store("kv")
        assert str(e.value) == ("Store kv is a key-value store and should be accessed via "
                                "`get_key_value_store()`")
        with pytest.raises(ValueError, match=r"^Store win is a window store and should be "
                                             r"accessed via `get_window_store\(\)`$"):
            d.get_state_store("win")
        assert d.get_state_store("unknown") is None
        assert d.get_key_value_store("kv") is not None


def test_suppression_buffer_through_get_state_store() -> None:
    b = StreamsBuilder()
    (b.stream("in").group_by_key().count()
     .suppress(Suppressed.until_time_limit(100, BufferConfig.unbounded())))
    with TopologyTestDriver(b.build()) as d:
        buffer = d.get_state_store("KTABLE-SUPPRESS-STATE-STORE-0000000004")
        assert buffer.name == "KTABLE-SUPPRESS-STATE-STORE-0000000004"
        assert buffer.num_records == 0
        t = d.create_input_topic("in")
        t.pipe_input("a", "x", 0)
        t.pipe_input("b", "x", 1)
        assert buffer.num_records == 2


def test_input_topic_time_starts_at_system_time() -> None:
    # TopologyTestDriver.createInputTopic(topic, k, v): start Instant.now(), not the mock clock
    b = StreamsBuilder()
    b.stream("in").to("out")
    with TopologyTestDriver(b.build(), initial_wall_clock_ms=0) as d:
        before = time.time_ns() // 1_000_000
        d.create_input_topic("in").pipe_input("k", "v")
        after = time.time_ns() // 1_000_000
        assert before <= d.create_output_topic("out").read_record().timestamp <= after


def _driver():
    b = StreamsBuilder()
    b.stream("in").to("out")
    return TopologyTestDriver(b.build())


def test_pipe_value_has_a_none_key() -> None:
    with _driver() as d:
        t = d.create_input_topic("in", start_timestamp_ms=7, auto_advance_ms=3)
        t.pipe_value("a")
        t.pipe_value("b", timestamp=100, headers=[("h", b"1")])
        t.pipe_value("c")
        assert d.create_output_topic("out").read_records_to_list() == [
            TestRecord(None, "a", 7), TestRecord(None, "b", 100, [("h", b"1")]),
            TestRecord(None, "c", 10)]


def test_pipe_lists_with_start_and_advance() -> None:
    # TestTopicsTest.testKeyValueListDuration: start, start + advance, ...; topic time kept
    with _driver() as d:
        t = d.create_input_topic("in", start_timestamp_ms=1000, auto_advance_ms=1)
        t.pipe_key_value_list([(0, "This"), (1, "is")], start=5, advance=dt.timedelta(seconds=15))
        t.pipe_value_list(["an", "example"], start=50, advance=2)
        t.pipe_value_list(["same"], start=9)
        t.pipe_value("topic time")
        assert [(r.key, r.value, r.timestamp)
                for r in d.create_output_topic("out").read_records_to_list()] == [
            (0, "This", 5), (1, "is", 15_005), (None, "an", 50), (None, "example", 52),
            (None, "same", 9), (None, "topic time", 1000)]


def test_pipe_lists_with_topic_time() -> None:
    # TestTopicsTest.testKeyValueList / testValueList: topic time with auto-advance
    with _driver() as d:
        t = d.create_input_topic("in", start_timestamp_ms=10, auto_advance_ms=5)
        t.pipe_key_value_list([("a", 1), ("b", 2)])
        t.pipe_value_list([3])
        assert [(r.key, r.value, r.timestamp)
                for r in d.create_output_topic("out").read_records_to_list()] == [
            ("a", 1, 10), ("b", 2, 15), (None, 3, 20)]


def test_pipe_list_errors() -> None:
    with _driver() as d:
        t = d.create_input_topic("in")
        with pytest.raises(ValueError, match="advance needs start"):
            t.pipe_value_list([], advance=1)
        with pytest.raises(TypeError):
            t.pipe_value_list(["x"], start=1.5)
        with pytest.raises(ValueError, match="Invalid timestamp: -1"):
            t.pipe_value_list(["x", "y"], start=1, advance=-2)
        assert d.create_output_topic("out").read_values_to_list() == ["x"]
