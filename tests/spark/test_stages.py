"""The record frame's packed rows: what a batched processor packs is what the sinks get."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from topology.spark._stages import (
    FRAME,
    drop_frame,
    frame,
    outputs_frame,
    records_of_frame,
    unpacked,
)

headers = st.lists(st.tuples(st.text(max_size=3), st.none() | st.binary(max_size=3)),
                   max_size=2).map(tuple)
records = st.lists(st.tuples(st.integers(0, 3), st.text(max_size=4) | st.none(),
                             st.integers() | st.none(), st.integers(0, 2**63 - 1), headers),
                   max_size=20)


@settings(deadline=None)
@given(first=records, packed=records, last=records)
def test_packed_results_unpack_in_place_between_plain_rows(first: list[Any], packed: list[Any],
                                                            last: list[Any]) -> None:
    """Plain rows, a packed row (possibly none) and plain rows again: the records in order."""
    table = pa.Table.from_batches([frame(first, None, 0)[0], outputs_frame(packed),
                                   frame(last, None, 0)[0]], schema=FRAME)
    assert records_of_frame(table) == first + packed + last


def test_no_results_make_no_row() -> None:
    assert outputs_frame([]).num_rows == 0
    assert drop_frame({}).num_rows == 0


@settings(deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(), st.integers(), st.integers(0, 100),
                                   st.just(()), st.integers(0, 50), st.integers(-1, 100),
                                   st.just("t")), max_size=5), max_size=4))
def test_unpacked_records_come_in_arrival_order(packs: list[list[Any]]) -> None:
    """By ``seq``, stably: records of one pack with one ``seq`` keep their order."""
    import pandas as pd  # type: ignore[import-untyped]

    from topology.state.codec import encode

    frames = [pd.DataFrame({"k": [encode(pack) for pack in packs]})]
    flat = [record for pack in packs for record in pack]
    assert unpacked(frames) == sorted(flat, key=lambda record: record[4])
