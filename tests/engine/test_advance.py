"""advance_stream_time: moving stream time without a record is a record nobody sees."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from suppress import BufferConfig, Suppressed
from suppress.entry import RecordContext
from suppress.processor import SuppressProcessor

SENTINEL = "\x00clock"


def _processor(out: list[Any], limit: int) -> SuppressProcessor:
    return SuppressProcessor(
        "KTABLE-SUPPRESS-0000000001",
        Suppressed.until_time_limit(limit, BufferConfig.unbounded()), limit,
        lambda key, new, old, ctx: out.append((key, new, ctx.timestamp)),
        lambda key: key.encode(), lambda value: None)


steps = st.lists(st.one_of(
    st.tuples(st.just("put"), st.sampled_from("abc"), st.integers(0, 200)),
    st.tuples(st.just("advance"), st.just(""), st.integers(0, 200)),
), max_size=40)


@given(steps, st.integers(0, 60))
def test_advance_emits_as_a_record_of_another_key_at_that_time(ops: list[Any], limit: int
                                                               ) -> None:
    got: list[Any] = []
    reference: list[Any] = []
    engine, ref = _processor(got, limit), _processor(reference, limit)
    for n, (op, key, ts) in enumerate(ops):
        if op == "put":
            engine.process_change(key, n, None, RecordContext(ts))
            ref.process_change(key, n, None, RecordContext(ts))
        else:
            engine.advance_stream_time(ts)
            ref.process_change(SENTINEL, n, None, RecordContext(ts))
        assert engine.stream_time == ref.stream_time
    assert got == [r for r in reference if r[0] != SENTINEL]
