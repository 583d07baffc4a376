"""The bulk path (``pipe_records``) is the per-record path (``pipe_input``), run faster.

Same outputs, errors, failures, offsets and metrics, through topics with and without serdes,
with keys and values a serde may refuse.
"""

from __future__ import annotations

from typing import Any
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from suppress import BufferConfig, Suppressed
from topology import Consumed, Produced, Serdes, StreamsBuilder, TimeWindows, TopologyTestDriver
from topology.runtime import task as task_module

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


@settings(max_examples=examples(300), deadline=None)
@given(rows=st.lists(st.tuples(KEYS, KEYS, st.integers(0, 40)), max_size=25),
       topic_serdes=st.tuples(st.sampled_from(sorted(SERDES)), st.sampled_from(sorted(SERDES))),
       source_serdes=st.tuples(st.sampled_from(sorted(SERDES)), st.sampled_from(sorted(SERDES))))
def test_bulk_equals_per_record(rows: list, topic_serdes: tuple[str, str],
                                source_serdes: tuple[str, str]) -> None:
    assert _outcome(rows, topic_serdes, source_serdes, True) == _outcome(
        rows, topic_serdes, source_serdes, False)


@settings(max_examples=examples(100), deadline=None)
@given(rows=st.lists(st.tuples(KEYS, KEYS, st.integers(0, 40)), max_size=25),
       serdes=st.sampled_from([("string", "string"), ("long", "long"), ("string", "long"),
                               ("none", "string")]))
def test_bulk_through_a_round_trip_in_small_slices_equals_per_record(
        rows: list, serdes: tuple[str, str]) -> None:
    """Slices the round-trip check keeps skip the codec, the others go through it."""
    with patch.object(task_module, "CODEC_CHECK_RECORDS", 3):
        bulk = _outcome(rows, serdes, serdes, True)
    assert bulk == _outcome(rows, serdes, serdes, False)


def test_a_piped_iterator_is_not_read_ahead_of_processing() -> None:
    """Only a list or tuple is checked in slices: a generator sees each record processed
    before it yields the next."""
    seen = []
    with TopologyTestDriver(_topology((Serdes.string(), Serdes.string()))) as d:
        inp = d.create_input_topic("in", Serdes.string(), Serdes.string())
        out = d.create_output_topic("raw")

        def rows():
            for i in range(3):
                yield ("k", "v", i)
                seen.append(out.queue_size())

        inp.pipe_records(rows())
    assert seen == [1, 2, 3]


OUT_SERDES = {"none": None, "string": Serdes.string(), "long": Serdes.long(),
              "windowed": Serdes.time_windowed(Serdes.string(), 10)}


def _read(rows: list, produced: tuple[str, str], read: tuple[str, str], bulk: bool) -> tuple:
    b = StreamsBuilder()
    (b.stream("in", Consumed(Serdes.string(), Serdes.string())).group_by_key()
     .windowed_by(TimeWindows.of_size_and_grace(10, 2)).count()
     .to_stream().to("out", Produced(OUT_SERDES[produced[0]], OUT_SERDES[produced[1]])))
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("in").pipe_records(rows)
        out = d.create_output_topic("out", OUT_SERDES[read[0]], OUT_SERDES[read[1]])
        written = out.queue_size()
        try:
            if bulk:
                records = out.read_records_to_list()
            else:
                records = []
                while not out.is_empty():
                    records.append(out.read_record())
            got: Any = [(r.key, r.value, r.timestamp, r.headers) for r in records]
        except Exception as err:  # noqa: BLE001 - the error itself is compared
            got = (type(err).__name__, str(err))
        return got, written, out.queue_size()


@settings(max_examples=examples(150), deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from(["a", "b", "é", ""]), st.just("v"),
                               st.integers(0, 40)), max_size=20),
       produced=st.tuples(st.sampled_from(["none", "windowed"]),
                          st.sampled_from(["none", "long"])),
       read=st.tuples(st.sampled_from(sorted(OUT_SERDES)), st.sampled_from(sorted(OUT_SERDES))))
def test_reading_a_list_with_serdes_is_reading_each_record(
        rows: list, produced: tuple[str, str], read: tuple[str, str]) -> None:
    """``read_records_to_list`` reads each part with its serde at once where it can: the
    same records, or (on an error) the first record's error with nothing consumed."""
    bulk, written, bulk_left = _read(rows, produced, read, True)
    each, _, each_left = _read(rows, produced, read, False)
    if isinstance(bulk, tuple):  # an error: the same one, and nothing was read
        assert isinstance(each, tuple) and bulk == each
        assert bulk_left == written
    else:
        assert bulk == each and bulk_left == each_left == 0
