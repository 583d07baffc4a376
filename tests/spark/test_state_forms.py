"""A key group's state in the form before is read as this form's.

The form before (``per-partition-4``) kept a suppression buffer's entries, a windowed
aggregation's open windows and each key's table history in the as-of join as rows of
objects; this form keeps them by column. A query restarted on a checkpoint in the form
before must go on as if nothing had happened: here every micro-batch's state is
turned back into the previous form before the next one (:func:`to_previous_form`, the
earlier layout written out by hand), and the runner's records and drops must be those of a
run that kept its own form throughout.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from suppress.buffer import TimeOrderedBuffer
from suppress.entry import RecordContext
from suppress.final import FinalResultsBuffer
from topology import Topology
from topology.runtime.processors.stateless import LONG_MAX
from topology.spark._aggregations import AggregationBucket
from topology.spark._compile import compile_topology
from topology.spark._stages import buffered, rebuffer, unlongs
from topology.state.codec import decode, encode
from topology.windows import Window, Windowed

from .harness import MapState, ValueState, chunk_table, distributed_run
from .test_distributed import rate_limited_levels
from .test_distributed_aggregations import windowed_clicks
from .test_join_buckets import rated_payments
from .test_partition_time import (
    AGGREGATIONS,
    LEVEL,
    LIMIT_BUFFERS,
    Piece,
    keyed_conversions,
    partitioned,
)

PREVIOUS = "per-partition-4"


def _entry_rows(columns: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """:func:`~topology.spark._stages.buffered`'s columns as the previous form's rows."""
    times, keys, news, olds, priors, stamps, offsets, partitions, names, topics, headers = \
        columns
    contexts = zip(unlongs(stamps), unlongs(offsets), [names[i] for i in unlongs(topics)],
                   unlongs(partitions), headers or ((),) * len(keys), strict=True)
    return [(time, key, new, old, prior, context) for time, key, new, old, prior, context
            in zip(unlongs(times), keys, news, olds, priors, contexts, strict=True)]


def _window_rows(columns: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """An aggregation's open windows by column as the previous form's rows."""
    keys, starts, third, fourth = columns
    if isinstance(third, bytes):  # sessions: ends, then values
        return list(zip(keys, unlongs(starts), unlongs(third), fourth, strict=True))
    return list(zip(keys, unlongs(starts), third, unlongs(fourth), strict=True))


def to_previous_form(converted: list[str]) -> Any:
    """A ``between`` hook for the harness: every group's state in the previous form.

    Appends to ``converted`` the name of each state it turned back (so a test sees that
    there was something to turn back).
    """
    def convert(groups: dict[int, dict[str, Any]]) -> None:
        for states in groups.values():
            for name, state in states.items():
                if isinstance(state, ValueState) and state.value is not None:
                    form, time, kept = decode(state.value[0])
                    if form == PREVIOUS:  # a group the micro-batch did not call
                        continue
                    state.update((encode((PREVIOUS, time, _previous(name, kept))),))
                    if name == "windows" and kept is not None:  # which parts it holds
                        converted.extend(f"windows:{part}" for part, held in
                                         zip(("held", "entries"), kept, strict=True) if held)
                    elif name == "buffer" and kept is not None:
                        converted.append(name)
                elif isinstance(state, MapState) and name == "histories":
                    for row_key, (row,) in list(state.entries.items()):
                        history = decode(row)
                        if len(history) == 2:  # turned back already
                            continue
                        key, values, stamps = history
                        state.entries[row_key] = (encode((key, list(zip(
                            values, unlongs(stamps), strict=True)))),)
                        converted.append(name)
    return convert


def _previous(name: str, kept: Any) -> Any:
    """What a group keeps, as the previous form kept it."""
    if kept is None or name == "history":  # the join's value: its layout did not change
        return kept
    if name == "buffer":  # a time limit: its buffer's entries
        return _entry_rows(kept)
    held, entries = kept  # an aggregation: windows (none without), then its buffer
    return ([] if held is None else _window_rows(held),
            [] if entries is None else _entry_rows(entries))


Outcome = tuple[list[Any], Any]
"""A run's records (in a fixed order) and its drops by reason."""


def _runs(make: Any, batches: list[list[Piece]], seed: int
          ) -> tuple[Outcome, Outcome, list[str]]:
    """A run in this release's form throughout, one turned back to the previous form after
    every micro-batch, and the names of the states turned back."""
    tables = [[chunk_table(part, p) for p, part in batch] for batch in batches]
    converted: list[str] = []
    own, own_drops = distributed_run(make(), tables, seed)
    previous, previous_drops = distributed_run(make(), tables, seed,
                                               between=to_previous_form(converted))
    return ((sorted(own, key=repr), own_drops), (sorted(previous, key=repr), previous_drops),
            converted)


@settings(max_examples=examples(40), deadline=None)
@given(batches=partitioned(), case=st.sampled_from(sorted(AGGREGATIONS)),
       kind=st.sampled_from(["count", "aggregate"]), seed=st.integers(0, 3))
def test_aggregations_go_on_from_the_previous_form(batches: list[list[Piece]], case: str,
                                                   kind: str, seed: int) -> None:
    assume(len(batches) > 1)  # a state is read back
    own, previous, _ = _runs(lambda: AGGREGATIONS[case](kind), batches, seed)
    assert own == previous


@settings(max_examples=examples(40), deadline=None)
@given(batches=partitioned("levels", (LEVEL(3), LEVEL(-7), None)), seed=st.integers(0, 3),
       buffer=st.sampled_from(sorted(LIMIT_BUFFERS)))
def test_time_limits_go_on_from_the_previous_form(batches: list[list[Piece]], seed: int,
                                                  buffer: str) -> None:
    assume(len(batches) > 1)
    own, previous, _ = _runs(lambda: rate_limited_levels(LIMIT_BUFFERS[buffer]), batches, seed)
    assert own == previous


def test_each_kind_of_state_was_turned_back() -> None:
    """The properties above compare something: each state kind is written, and turned back."""
    windows: list[list[Piece]] = [[(0, [("clicks", b"a", b"/x", 1), ("clicks", b"b", b"/y", 3)])],
               [(0, [("clicks", b"a", b"/x", 30), ("clicks", b"b", b"/y", 300)])]]
    levels: list[list[Piece]] = [[(0, [("levels", b"a", LEVEL(3), 1),
                                        ("levels", b"b", LEVEL(4), 2)])],
              [(0, [("levels", b"a", LEVEL(5), 200)])]]
    cases: list[tuple[Any, list[list[Piece]]]] = [
        (lambda: AGGREGATIONS["tumbling-bounded"]("count"), windows),
        (lambda: AGGREGATIONS["session-limit"]("count"), windows),
        (lambda: rate_limited_levels(LIMIT_BUFFERS["records-3-early"]), levels)]
    for make, batches in cases:
        own, previous, converted = _runs(make, batches, 0)
        assert own == previous and own[0]
        assert set(converted) & {"windows:held", "buffer"}
        assert set(converted) & {"windows:entries", "buffer"}


def _payments(rates: Sequence[tuple[bytes, bytes | None, int]],
              payments: Sequence[tuple[bytes, bytes | None, int]]) -> list[Piece]:
    return [(0, [("rates", k, v, ts) for k, v, ts in rates]
             + [("payments", k, v, ts) for k, v, ts in payments])]


@settings(max_examples=examples(30), deadline=None)
@given(data=st.data(), grace=st.booleans())
def test_joins_go_on_from_the_previous_form(data: st.DataObject, grace: bool) -> None:
    """Each key's table history a row of the previous form (values and timestamps paired)."""
    currencies = [b"EUR", b"USD", b"GBP"]
    batches = []
    for _ in range(data.draw(st.integers(2, 4))):
        rates = data.draw(st.lists(st.tuples(st.sampled_from(currencies),
                                             st.sampled_from([b"1.1", b"0.9", None]),
                                             st.integers(0, 300)), max_size=6))
        payments = data.draw(st.lists(st.tuples(st.sampled_from(currencies),
                                                st.sampled_from([b"10", b"20"]),
                                                st.integers(0, 300)), max_size=6))
        batches.append(_payments(rates, payments))

    def make() -> Topology:
        return rated_payments(False, 30 if grace else None)

    own, previous, _ = _runs(make, batches, 0)
    assert own == previous


def test_a_join_history_was_turned_back() -> None:
    batches = [_payments([(b"EUR", b"1.1", 0)], []),
               _payments([(b"EUR", b"1.2", 20)], [(b"EUR", b"10", 10), (b"EUR", b"10", 25)])]
    own, previous, converted = _runs(lambda: rated_payments(False), batches, 0)
    assert own == previous and len(own[0]) == 2
    assert "histories" in converted


def test_a_join_with_grace_of_the_previous_form() -> None:
    batches: list[list[Piece]] = [[(0, [("rates", b"EUR", b"1.1", 0),
                                         ("payments", b"EUR", b"10", 5)])],
               [(0, [("payments", b"EUR", b"20", 300)])]]
    own, previous, converted = _runs(keyed_conversions, batches, 0)
    assert own == previous and own[0]
    assert "histories" in converted


def test_an_empty_buffer_keeps_nothing() -> None:
    assert buffered([]) is None


HEADERS = st.sampled_from([(), (("trace", b"t1"),), (("a", None), ("b", b""))])
VALUES = st.one_of(st.none(), st.integers(-5, 5), st.text(max_size=3))


@settings(max_examples=examples(100), deadline=None)
@given(puts=st.lists(st.tuples(st.integers(0, 50), st.sampled_from(["a", "b", "c", "\x00d"]),
                               VALUES, VALUES, st.integers(0, 60), st.integers(-1, 9),
                               st.sampled_from(["clicks", "taps"]), st.integers(0, 2),
                               HEADERS), max_size=12),
       windowed=st.booleans(), sized=st.booleans())
def test_a_buffer_by_column_comes_back_whole(puts: list[tuple[Any, ...]], windowed: bool,
                                             sized: bool) -> None:
    """Every entry's time, key, new, old and prior value and context, and the byte total,
    after its columns went through the state codec into a fresh buffer."""
    def fresh() -> Any:
        return (FinalResultsBuffer if windowed else TimeOrderedBuffer)(encode, encode, sized)

    buffer = fresh()
    for time, key, new, old, ts, offset, topic, partition, headers in puts:
        if windowed:  # a window per buffer time, as time windows have
            key = Windowed(key, Window(time, time + 10))
        buffer.put(time, key, new, old, RecordContext(ts, offset, topic, partition, headers))
    again = fresh()
    rebuffer(again, decode(encode(buffered(buffer))))
    assert _views(again) == _views(buffer)
    assert again.size_bytes == buffer.size_bytes


@pytest.mark.parametrize("windows", ["session", "sliding"])
def test_a_window_ending_at_the_largest_timestamp_is_kept(windows: str) -> None:
    """Its final result is buffered at its end + 1, 2**63, beyond int64: kept all the same.

    (A timestamp column in epoch milliseconds reaches that end; Spark's Kafka timestamps,
    in microseconds, stop short of it.)
    """
    plan = compile_topology(windowed_clicks("count", windows))
    assert plan.batched is not None
    bucket = AggregationBucket(plan.batched, plan.post, None, MapState())
    bucket.advance(LONG_MAX)
    bucket.process("a", "/y", RecordContext(LONG_MAX, -1, "clicks", 0, ()))
    kept = decode(bucket.state())[2][1]
    assert max(_times(kept[0])) == LONG_MAX + 1
    again = AggregationBucket(plan.batched, plan.post, bucket.state(), MapState())
    assert again.engine is not None and bucket.engine is not None
    assert _views(again.engine.buffer) == _views(bucket.engine.buffer)
    assert again.state() == bucket.state()


def _times(column: Any) -> list[int]:
    return unlongs(column) if isinstance(column, bytes) else list(column)


def _views(buffer: Any) -> list[tuple[Any, ...]]:
    return [(e.time, e.key, e.new, e.old, e.prior, tuple(e.context)) for e in buffer]
