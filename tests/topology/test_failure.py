"""A failure stops the task, as Kafka stops a stream thread, and nothing is lost silently.

Every way a record can fail (a full ``shut_down_when_full`` buffer, user code, a serde, an
invalid timestamp, a feedback loop) leaves the same failed state: the first exception
propagates once with a note naming the node and the record, what it forwarded before stays
visible, and every later call that pipes input or advances time raises ``TaskFailedError``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from suppress import BufferConfig, BufferFullError, Suppressed
from topology import (
    Consumed,
    Materialized,
    Produced,
    Serdes,
    StreamsBuilder,
    TimeWindows,
    TopologyTestDriver,
)
from topology.errors import (
    FeedbackLoopError,
    InvalidTimestampError,
    TaskFailedError,
    TopologyError,
)
from topology.record import Record
from topology.runtime.api import Processor, PunctuationType
from topology.runtime.processors.stateless import SinkProcessor
from topology.serde import SerdeError


def _shut_down_topology(limit: int) -> Any:
    b = StreamsBuilder()
    (b.table("in", Consumed(Serdes.string(), Serdes.string()))
     .suppress(Suppressed.until_time_limit(1_000, BufferConfig.max_records(limit)
                                           .shut_down_when_full()).with_name("rate"))
     .to_stream().to("out"))
    return b.build()


def _raises_on(value: str) -> type[Processor]:
    class Failing(Processor):
        def process(self, record: Record) -> None:
            if record.value == value:
                raise RuntimeError(f"user code refused {value}")
            self.context.forward(record)

    return Failing


# -- the failed state ---------------------------------------------------------------------------

def test_a_full_buffer_stops_the_task_and_keeps_the_record_that_overflowed() -> None:
    with TopologyTestDriver(_shut_down_topology(2)) as d:
        inp = d.create_input_topic("in")
        inp.pipe_input("k1", "v", 0)
        inp.pipe_input("k2", "v", 1)
        with pytest.raises(BufferFullError) as err:
            inp.pipe_input("k3", "v", 2)
        assert "rate buffer exceeded its max capacity. Currently [3/2] records" in str(err.value)
        assert "task failed at node rate" in "\n".join(err.value.__notes__)
        for key, ts in [("k4", 3), ("k5", 4), ("k6", 5)]:
            with pytest.raises(TaskFailedError) as failed:
                inp.pipe_input(key, "v", ts)
            assert failed.value.node == "rate"
            assert isinstance(failed.value.cause, BufferFullError)
            assert "rate" in str(failed.value) and "BufferFullError" in str(failed.value)
        with pytest.raises(TaskFailedError):
            inp.pipe_records([("k7", "v", 6)])
        with pytest.raises(TaskFailedError):
            d.advance_wall_clock_time(10)
        # the buffer did not grow past the record that overflowed, which it keeps
        assert d.metrics()["suppression-buffer-count"] == 3.0
        buffer = d.get_state_store("rate-store")
        assert [k for k, _, _ in buffer.entries()] == ["k1", "k2", "k3"]
        assert (buffer.num_records, buffer.stream_time) == (3, 2)
        failure = d.failure
        assert (failure.node, failure.topic, failure.offset, failure.key) == ("rate", "in", 2,
                                                                               "k3")


def test_user_code_that_raises_fails_the_task_at_its_node() -> None:
    b = StreamsBuilder()
    b.stream("in").process(_raises_on("bad")).to("out")
    with TopologyTestDriver(b.build()) as d:
        inp, out = d.create_input_topic("in"), d.create_output_topic("out")
        inp.pipe_input("a", "ok", 1)
        with pytest.raises(RuntimeError, match="refused bad"):
            inp.pipe_input("b", "bad", 2)
        assert d.failure.node == "KSTREAM-PROCESSOR-0000000001"
        with pytest.raises(TaskFailedError, match="KSTREAM-PROCESSOR-0000000001"):
            inp.pipe_input("c", "ok", 3)
        assert out.read_values_to_list() == ["ok"]  # outputs stay readable


def test_outputs_a_failing_record_forwarded_before_the_failure_stay_visible() -> None:
    """The documented choice: what was forwarded before the exception went where it went."""
    b = StreamsBuilder()
    stream = b.stream("in")
    stream.to("first")
    stream.process(_raises_on("bad")).to("second")
    with TopologyTestDriver(b.build()) as d:
        inp = d.create_input_topic("in")
        with pytest.raises(RuntimeError):
            inp.pipe_input("a", "bad", 1)
        assert d.create_output_topic("first").read_values_to_list() == ["bad"]
        assert d.create_output_topic("second").read_values_to_list() == []


def test_an_aggregator_that_raises_names_the_aggregation_on_both_paths() -> None:
    def aggregator(k: Any, v: Any, agg: int) -> int:
        if v == "bad":
            raise ValueError("aggregator refused")
        return agg + 1

    for fuse in (True, False):
        b = StreamsBuilder()
        (b.stream("in").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10))
         .aggregate(lambda: 0, aggregator)
         .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
         .to_stream().to("out"))
        with TopologyTestDriver(b.build(), {"fuse_final_results": fuse}) as d:
            inp = d.create_input_topic("in")
            inp.pipe_input("a", "ok", 1)
            with pytest.raises(ValueError):
                inp.pipe_input("a", "bad", 2)
            assert d.failure.node == "KSTREAM-AGGREGATE-0000000002", fuse


def test_a_sink_serde_that_raises_fails_the_task_at_the_sink() -> None:
    b = StreamsBuilder()
    b.stream("in").to("out", Produced(key_serde=Serdes.long(), value_serde=Serdes.string()))
    with TopologyTestDriver(b.build()) as d:
        inp = d.create_input_topic("in")
        with pytest.raises(SerdeError):
            inp.pipe_input("not a long", "v", 1)
        assert d.failure.node == "KSTREAM-SINK-0000000001"


def test_input_the_source_cannot_deserialize_fails_the_task_at_the_source() -> None:
    b = StreamsBuilder()
    b.stream("in", Consumed(Serdes.long(), Serdes.string())).to("out")
    with TopologyTestDriver(b.build()) as d:
        inp = d.create_input_topic("in", Serdes.string(), Serdes.string())
        with pytest.raises(SerdeError):
            inp.pipe_input("abc", "v", 1)  # 3 bytes are no long
        assert (d.failure.node, d.failure.offset) == ("KSTREAM-SOURCE-0000000000", 0)
        with pytest.raises(TaskFailedError):
            inp.pipe_input("abcdefgh", "v", 2)


def test_a_punctuation_that_raises_fails_the_task() -> None:
    class Ticking(Processor):
        def init(self, context: Any) -> None:
            context.schedule(10, PunctuationType.WALL_CLOCK_TIME, self.tick)

        def tick(self, now: int) -> None:
            raise RuntimeError("tick failed")

        def process(self, record: Record) -> None:
            self.context.forward(record)

    b = StreamsBuilder()
    b.stream("in").process(Ticking).to("out")
    with TopologyTestDriver(b.build(), initial_wall_clock_ms=0) as d:
        with pytest.raises(RuntimeError, match="tick failed"):
            d.advance_wall_clock_time(10)
        with pytest.raises(TaskFailedError):
            d.create_input_topic("in").pipe_input("a", "v", 1)


def test_an_unknown_topic_does_not_fail_the_task() -> None:
    b = StreamsBuilder()
    b.stream("in").to("out")
    with TopologyTestDriver(b.build()) as d:
        with pytest.raises(TopologyError, match="Unknown topic: nope"):
            d.create_input_topic("nope").pipe_input("a", "v", 1)
        d.create_input_topic("in").pipe_input("a", "v", 1)
        assert d.failure is None


# -- feedback loops -----------------------------------------------------------------------------

def _self_loop() -> Any:
    b = StreamsBuilder()
    b.stream("loop").to("loop")
    return b.build()


def _two_topic_cycle() -> Any:
    b = StreamsBuilder()
    b.stream("ping").map_values(lambda v: v).to("pong")
    b.stream("pong").to("ping")
    return b.build()


@pytest.mark.parametrize("build, topic, cycle", [
    (_self_loop, "loop", "loop -> KSTREAM-SINK-0000000001 -> loop"),
    (_two_topic_cycle, "ping",
     "ping -> KSTREAM-SINK-0000000002 -> pong -> KSTREAM-SINK-0000000004 -> ping"),
])
def test_a_cycle_through_topics_is_bounded_and_named(build: Callable[[], Any], topic: str,
                                                     cycle: str) -> None:
    with TopologyTestDriver(build(), {"max_feedback_records": 50}) as d:
        with pytest.raises(FeedbackLoopError) as err:
            d.create_input_topic(topic).pipe_input("a", "v", 1)
        assert cycle in str(err.value)
        assert "max_feedback_records=50" in str(err.value)
        with pytest.raises(TaskFailedError):
            d.create_input_topic(topic).pipe_input("a", "v", 2)


def test_an_exploding_cycle_stops_at_the_limit_before_memory_grows() -> None:
    b = StreamsBuilder()
    b.stream("loop").flat_map(lambda k, v: [(k, v), (k, v)]).to("loop")
    with TopologyTestDriver(b.build()) as d:
        with pytest.raises(FeedbackLoopError, match="max_feedback_records=10000"):
            d.create_input_topic("loop").pipe_input("a", "v", 1)
        assert len(d._task._queue) == 0
        assert d.create_output_topic("loop").queue_size() <= 2 * 10_000 + 2


def test_a_terminating_loop_under_the_limit_runs_to_completion() -> None:
    b = StreamsBuilder()
    (b.stream("countdown").filter(lambda k, v: v > 0).map_values(lambda v: v - 1)
     .to("countdown"))
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("countdown").pipe_input("a", 100, 1)
        assert d.create_output_topic("countdown").read_values_to_list() == list(range(99, -1,
                                                                                       -1))


def test_the_feedback_limit_is_validated() -> None:
    with pytest.raises(ValueError, match="max_feedback_records"):
        TopologyTestDriver(_self_loop(), {"max_feedback_records": 0})


# -- timestamps ---------------------------------------------------------------------------------

@pytest.mark.parametrize("timestamp", [-1000, -1, 2**63])
def test_a_record_with_an_invalid_timestamp_is_refused_where_it_is_made(timestamp: int) -> None:
    with pytest.raises(ValueError, match="timestamp"):
        Record("k", "v", timestamp)
    with pytest.raises(ValueError, match="timestamp"):
        Record("k", "v", 0).with_timestamp(timestamp)


def test_a_processor_forwarding_an_invalid_timestamp_fails_at_its_node() -> None:
    class Backwards(Processor):
        def process(self, record: Record) -> None:
            self.context.forward(record.with_timestamp(record.timestamp - 1000))

    b = StreamsBuilder()
    b.stream("in").process(Backwards).to("out")
    with TopologyTestDriver(b.build()) as d:
        with pytest.raises(ValueError, match="may not be negative"):
            d.create_input_topic("in").pipe_input("a", "v", 5)
        assert d.failure.node == "KSTREAM-PROCESSOR-0000000001"
        assert d.create_output_topic("out").read_records_to_list() == []


@pytest.mark.parametrize("serdes", [(None, None), (Serdes.string(), Serdes.string())])
@pytest.mark.parametrize("timestamp", [-1000, 2**63, "12"])
def test_a_sink_refuses_an_invalid_timestamp_naming_itself(serdes: tuple, timestamp: Any) -> None:
    from suppress.entry import RecordContext

    class _Task:
        def producer_for(self, topic: str) -> Callable[..., None]:
            return lambda *args: pytest.fail("an invalid timestamp reached the topic")

        def resolve_topic(self, topic: str) -> str:
            return topic

    sink = SinkProcessor("out", *serdes)
    sink.name = "KSTREAM-SINK-0000000007"
    sink.init(_Task())  # type: ignore[arg-type]
    with pytest.raises(InvalidTimestampError, match=r"KSTREAM-SINK-0000000007.*timestamp"):
        sink.record_entry()("k", "v", RecordContext(timestamp, 0, "in"))  # type: ignore[arg-type]


# -- the processor API --------------------------------------------------------------------------

def test_schedule_refuses_anything_but_a_punctuation_type() -> None:
    class Scheduling(Processor):
        def init(self, context: Any) -> None:
            context.schedule(1000, "stream_time", lambda now: None)

        def process(self, record: Record) -> None:
            pass

    b = StreamsBuilder()
    b.stream("in").process(Scheduling)
    with pytest.raises(TypeError, match="PunctuationType"):
        TopologyTestDriver(b.build())


def test_a_processor_needs_no_call_to_the_base_class() -> None:
    class NoSuper(Processor):
        def __init__(self) -> None:
            self.seen: list[Any] = []

        def init(self, context: Any) -> None:
            self.ready = True  # no super().init(context)

        def process(self, record: Record) -> None:
            self.context.forward(record.with_value(record.value.upper()))

    b = StreamsBuilder()
    b.stream("in").process(NoSuper).to("out")
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in").pipe_input("a", "v", 1)
        assert d.create_output_topic("out").read_values_to_list() == ["V"]


def test_a_source_listing_a_topic_twice_is_refused() -> None:
    with pytest.raises(TopologyError, match="twice"):
        StreamsBuilder().stream(["t", "t"])


def test_a_materialized_store_keeps_working_after_reads_of_a_failed_task() -> None:
    b = StreamsBuilder()
    (b.stream("in").group_by_key().count(Materialized("counts")).to_stream()
     .process(_raises_on(3)).to("out"))
    with TopologyTestDriver(b.build()) as d:
        inp = d.create_input_topic("in")
        for ts in range(3):
            with pytest.raises(RuntimeError) if ts == 2 else _nothing():
                inp.pipe_input("a", "v", ts)
        assert d.get_key_value_store("counts").get("a") == 3  # written before the failure
        assert d.metrics()["dropped-records-total"] == 0.0


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def test_a_failing_serde_in_user_code_leaves_no_half_written_buffer_entry() -> None:
    """A value serde that raises during byte accounting leaves the entry as it was."""
    calls = {"n": 0}

    def to_bytes(value: str) -> bytes:
        calls["n"] += 1
        if value == "bad":
            raise ValueError("refused")
        return value.encode()

    serde = Serdes.serde_from(to_bytes, bytes.decode, "picky")
    b = StreamsBuilder()
    (b.table("in", Consumed(Serdes.string(), serde))
     .suppress(Suppressed.until_time_limit(100, BufferConfig.max_bytes(10_000)))
     .to_stream().to("out"))
    with TopologyTestDriver(b.build()) as d:
        inp = d.create_input_topic("in")
        inp.pipe_input("a", "good", 1)
        before = d.metrics()["suppression-buffer-size"]
        with pytest.raises(SerdeError):
            inp.pipe_input("a", "bad", 2)
        assert d.metrics()["suppression-buffer-size"] == before
        (view,) = d._task.suppressors.values()
        assert view.buffered() == [("a", "good", 1)]
