"""The record frame's packed rows: what a batched processor packs is what the sinks get."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from topology.spark._stages import (
    CHUNK_BITS,
    FRAME,
    drop_frame,
    frame,
    outputs_frame,
    pack_rows,
    records_of_frame,
    tick_rows,
    unpacked,
)
from topology.state.codec import decode, encode

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
    table = pa.Table.from_batches([frame(first), outputs_frame(packed),
                                   frame(last)], schema=FRAME)
    assert records_of_frame(table) == first + packed + last


def pack(chunk: int, records: list[Any]) -> bytes:
    """The packed row's bytes of ``records`` (not empty), as a pre stage sends them."""
    data: bytes = pack_rows({0: records}, chunk).column("k")[0].as_py()
    return data


def tick(chunk: int, top: dict[str, int]) -> bytes:
    """A tick row's bytes: the chunk's largest timestamp per topic, routed and read."""
    data: bytes = tick_rows({0: top}, 1, chunk, {0: top}).column("k")[0].as_py()
    return data


@settings(deadline=None)
@given(st.lists(st.tuples(st.integers() | st.text(max_size=3) | st.none() | st.binary(max_size=2)
                          | st.lists(st.integers(), max_size=2)
                          | st.tuples(st.text(max_size=2), st.integers()),
                          st.integers() | st.none() | st.lists(st.text(max_size=2), max_size=2),
                          st.integers(0, 2**63 - 1), headers | st.just(None),
                          st.integers(0, 2**63 - 1), st.integers(-1, 2**63 - 1),
                          st.sampled_from(["a", "b", "c"]), st.integers(-1, 2**63 - 1),
                          st.sampled_from(["a", "", "s"])), min_size=1, max_size=20))
def test_a_pack_gives_back_its_records(records: list[Any]) -> None:
    """Packed by column and read back: the records as they were, headers and topics too."""
    from topology.spark._stages import _columns, _records

    got = _records(decode(encode(_columns(records))))
    assert list(map(repr, got)) == list(map(repr, records))  # types too: a list stays one


def test_no_results_make_no_row() -> None:
    assert outputs_frame([]).num_rows == 0
    assert drop_frame({}).num_rows == 0


@settings(deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(), st.integers(), st.integers(0, 100),
                                   st.just(()), st.integers(0, 50), st.integers(-1, 100),
                                   st.just("t"), st.integers(-1, 100), st.just("")),
                         max_size=5), max_size=4))
def test_unpacked_records_come_in_arrival_order(packs: list[list[Any]]) -> None:
    """By ``seq``, stably: records of one pack with one ``seq`` keep their order."""
    import pandas as pd

    frames = [pd.DataFrame({"k": [pack(0, records) for records in packs if records]})]
    flat = [record[:7] for pack in packs for record in pack]
    assert unpacked(frames) == (sorted(flat, key=lambda record: record[4]), -1, {})


@settings(deadline=None)
@given(st.dictionaries(st.integers(0, 5), st.lists(st.integers(0, 100), min_size=1,
                                                   max_size=4), max_size=4))
def test_a_record_takes_the_time_of_its_partitions_earlier_chunks(
        chunks: dict[int, list[int]]) -> None:
    """Each chunk's records carry their running maximum; the ticks give each record the
    largest timestamp of the chunks before its own, and the call the largest of all."""
    import pandas as pd

    packs, ticks, records, expected = [], [], [], []
    time = -1
    for chunk in sorted(chunks):
        seen = -1
        for i, ts in enumerate(chunks[chunk]):
            record = ("k", "v", ts, (), (chunk << CHUNK_BITS) + i, seen, "t", -1, "")
            records.append(record)
            expected.append(record[:5] + (max(seen, time), "t"))
            seen = max(seen, ts)
        ticks.append(tick(chunk, {"t": seen}))
        time = max(time, seen)
    packs = [pack(chunk, [r for r in records if r[4] >> CHUNK_BITS == chunk])
             for chunk in chunks]
    frames = [pd.DataFrame({"k": packs[::-1] + ticks})]
    assert unpacked(frames) == (expected, time, {c: {"t": max(chunks[c])} for c in chunks})


def test_chunks_of_different_topics_are_read_side_by_side() -> None:
    """A chunk counts the earlier chunks' records of its own topic only; the topics merge
    by head timestamp (topic b's record at 5 before topic a's, whose head is 100)."""
    import pandas as pd

    first = ("k", "v", 100, (), 0 << CHUNK_BITS, -1, "a", 100, "a")
    second = ("k", "v", 5, (), 1 << CHUNK_BITS, -1, "b", 5, "b")
    third = ("k", "v", 6, (), 2 << CHUNK_BITS, -1, "a", 6, "a")
    frames = [pd.DataFrame({"k": [pack(c, [r]) for c, r in enumerate((first, second, third))]
                            + [tick(0, {"a": 100}), tick(1, {"b": 5}), tick(2, {"a": 6})]})]
    records, time, _ = unpacked(frames)
    assert [(r[2], r[5]) for r in records] == [(5, -1), (100, -1), (6, 100)]
    assert time == 100


def test_a_chunk_number_out_of_range_is_refused() -> None:
    import pytest

    from topology.spark._stages import MAX_SOURCES, MAX_SPARK_PARTITIONS, chunk_of

    assert chunk_of(MAX_SOURCES - 1, MAX_SPARK_PARTITIONS - 1) < 1 << (63 - CHUNK_BITS)
    with pytest.raises(ValueError, match="Spark partition"):
        chunk_of(0, MAX_SPARK_PARTITIONS)
    with pytest.raises(ValueError, match="source"):
        chunk_of(MAX_SOURCES, 0)
