"""The bulk path (``pipe_records``) is the per-record path (``pipe_input``), run faster.

Same outputs, errors, failures, offsets and metrics, through topics with and without serdes,
with keys and values a serde may refuse.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from suppress import BufferConfig, Suppressed
from topology import Consumed, Produced, Serdes, StreamsBuilder, TimeWindows, TopologyTestDriver

SERDES = {"none": None, "string": Serdes.string(), "long": Serdes.long()}


def _topology(consumed: tuple[Any, Any]) -> Any:
    b = StreamsBuilder()
    counts = (b.stream("in", Consumed(*consumed)).group_by_key()
              .windowed_by(TimeWindows.of_size_and_grace(10, 2)).count())
    counts.to_stream().to("raw")
    (counts.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
     .to_stream().to("out", Produced(None, Serdes.long())))
    return b.build()


def _outcome(rows: list, topic_serdes: tuple[str, str], source_serdes: tuple[str, str],
             bulk: bool) -> tuple:
    consumed = (SERDES[source_serdes[0]], SERDES[source_serdes[1]])
    with TopologyTestDriver(_topology(consumed)) as d:
        inp = d.create_input_topic("in", SERDES[topic_serdes[0]], SERDES[topic_serdes[1]])
        errors = []
        try:
            if bulk:
                inp.pipe_records(rows)
            else:
                for row in rows:
                    inp.pipe_input(*row)
        except Exception as err:  # noqa: BLE001 - the error itself is compared
            errors.append((type(err).__name__, str(err)))
        failure = d.failure
        outputs = {t: [(r.key, r.value, r.timestamp)
                       for r in d.create_output_topic(t).read_records_to_list()]
                   for t in ("raw", "out")}
        return (outputs, errors, None if failure is None else
                (failure.node, failure.offset, failure.key), d.metrics(),
                d._task._offsets.get("in", 0))


KEYS = st.one_of(st.sampled_from(["a", "b", "\ud800", ""]), st.integers(-3, 3), st.none(),
                 st.just(b"x"))


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(st.tuples(KEYS, KEYS, st.integers(0, 40)), max_size=25),
       topic_serdes=st.tuples(st.sampled_from(sorted(SERDES)), st.sampled_from(sorted(SERDES))),
       source_serdes=st.tuples(st.sampled_from(sorted(SERDES)), st.sampled_from(sorted(SERDES))))
def test_bulk_equals_per_record(rows: list, topic_serdes: tuple[str, str],
                                source_serdes: tuple[str, str]) -> None:
    assert _outcome(rows, topic_serdes, source_serdes, True) == _outcome(
        rows, topic_serdes, source_serdes, False)
