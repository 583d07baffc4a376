"""Valid user code type-checks against the shipped annotations (mypy, with py.typed).

The snippet is what a user writes: a topology through the DSL, suppression configs, a custom
processor, the test driver. mypy must accept it; a deliberately wrong call must be rejected,
so the check cannot pass vacuously.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api")

ROOT = Path(__file__).resolve().parent.parent
MYPY_CACHE = ROOT / ".mypy_cache" / "user-code"
"""mypy's cache of what the snippets import (ignored), kept between runs: mypy validates it."""

VALID = textwrap.dedent('''
    from datetime import timedelta

    from suppress import BufferConfig, Suppressed
    from topology import (Consumed, Materialized, Processor, ProcessorContext, Produced,
                          PunctuationType, Record, Serdes, SessionWindowedKStream,
                          SessionWindows, SlidingWindows, StreamsBuilder, TimeWindows,
                          TopologyTestDriver, KStream, KTable)

    class Upper(Processor):
        def init(self, context: ProcessorContext) -> None:
            context.schedule(1_000, PunctuationType.STREAM_TIME, self.tick)

        def tick(self, now: int) -> None:
            pass

        def process(self, record: Record) -> None:
            self.context.forward(record.with_value(str(record.value).upper()))

    strict = BufferConfig.unbounded().with_max_records(10).with_max_bytes(1_000)
    final = Suppressed.until_window_closes(strict).with_name("final")
    limited = Suppressed.until_time_limit(timedelta(seconds=5),
                                          BufferConfig.max_records(100).emit_early_when_full())

    b = StreamsBuilder()
    clicks: KStream = b.stream("clicks", Consumed(Serdes.string(), Serdes.string()))
    counts: KTable = (clicks.group_by_key()
                      .windowed_by(TimeWindows.of_size_and_grace(60_000, 10_000)).count())
    counts.suppress(final).to_stream().to("alerts")
    sliding: KTable = (clicks.group_by_key()
                       .windowed_by(SlidingWindows.of_time_difference_and_grace(5_000, 1_000))
                       .reduce(lambda agg, v: agg + v, late_records_to="late"))
    sessions: SessionWindowedKStream = clicks.group_by_key().windowed_by(
        SessionWindows.of_inactivity_gap_with_no_grace(timedelta(minutes=5)))
    sessions.aggregate(lambda: "", lambda k, v, agg: agg + v, lambda k, a, b: a + b) \
        .suppress(final.with_idle_close(timedelta(minutes=1))).to_stream().to("sessions")
    b.table("rates", materialized=Materialized("rates")).suppress(limited).to_stream().to("r")
    clicks.process(Upper).to("upper", Produced(Serdes.string(), Serdes.string()))

    with TopologyTestDriver(b.build()) as driver:
        topic = driver.create_input_topic("clicks", Serdes.string(), Serdes.string())
        topic.pipe_input("a", "x", timestamp=0)
        topic.pipe_records([("a", "x", 1), ("b", "y", 2)])
        records = driver.create_output_topic("alerts").read_records_to_list()
        count: float = driver.metrics()["dropped-records-total"]
''')

INVALID = textwrap.dedent('''
    from suppress import BufferConfig, Suppressed

    Suppressed.until_window_closes(BufferConfig.max_records(10))  # eager: not a final result
''')


def _mypy(code: str) -> tuple[str, int]:
    out, err, status = mypy_api.run(["--cache-dir", str(MYPY_CACHE), "-c", code])
    return out + err, status


def test_valid_user_code_type_checks() -> None:
    report, status = _mypy(VALID)
    assert status == 0, report


def test_an_eager_config_for_final_results_is_a_type_error() -> None:
    report, status = _mypy(INVALID)
    assert status == 1 and "until_window_closes" in report, report
