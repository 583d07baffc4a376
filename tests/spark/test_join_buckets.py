"""The as-of join's batched processor without Spark: micro-batches against one driver.

Each micro-batch is one ``handleInputRows`` call of one bucket (the runner's grouping), its
state (a value, and a row per key's history) kept between calls as Spark's state store
keeps it. A call restores only the histories of the keys its records name: across
micro-batches, with table updates out of order, deletes, and updates too old for the
history retention, the joined records and the drops must be those of one driver fed each
micro-batch in a task's order (the topics merged lowest head timestamp first).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from topology import Consumed, Materialized, Serdes, StreamsBuilder, Topology
from topology.errors import IllegalStateError
from topology.spark._compile import DROPS, compile_topology
from topology.spark._join import AsOfJoinProcessor, _history
from topology.spark._stages import FRAME, pack_rows, records_of_frame, time_and_state
from topology.state.codec import decode, encode

from .harness import Handle, MapState, ValueState
from .helpers import Row, driver_run, task_order

S = Serdes.string()
RETENTION = 40


def rated_payments(left: bool, grace: int | None = None) -> Topology:
    """Payments joined with the rate of their currency as of their time (``grace``: held
    back that long, in ms, for rates that come late)."""
    b = StreamsBuilder()
    rates = b.table("rates", Consumed(key_serde=S, value_serde=S),
                    Materialized.versioned("rates", RETENTION))
    payments = b.stream("payments", Consumed(key_serde=S, value_serde=S))
    joiner = (lambda amount, rate: f"{amount}x{rate}")  # noqa: E731
    joined = (payments.left_join(rates, joiner, grace=grace) if left
              else payments.join(rates, joiner, grace=grace))
    joined.to("out")
    return b.build()


def _states() -> tuple[dict[str, Any], ValueState, MapState]:
    """A bucket's states, kept between calls as Spark's state store keeps them: its value
    and its histories by key."""
    value, rows = ValueState(), MapState()
    return {"history": value, "histories": rows}, value, rows


def _call(states: dict[str, Any], spec: Any, joined: Any, part: list[Row]) -> list[Any]:
    """One ``handleInputRows`` call of the bucket on one micro-batch's rows.

    The rows reach it as one chunk of both topics gives them: packed in a task's order,
    each with the largest timestamp before it.
    """
    records = []
    seen = -1
    read: dict[str, int] = {}
    for seq, (topic, key, value, ts) in enumerate(task_order(part, 1) if part else []):
        read[topic] = max(read.get(topic, -1), ts)
        records.append((None if key is None else key.decode(),
                        None if value is None else value.decode(), ts, (), seq, seen, topic,
                        read[topic], topic))
        seen = max(seen, ts)
    batch = pack_rows({0: records}, 0) if records else pa.RecordBatch.from_pylist(
        [], schema=FRAME)
    processor = AsOfJoinProcessor(spec, joined)
    processor.init(Handle(states))  # type: ignore[arg-type]
    return list(processor.handleInputRows((0,), iter([batch.to_pandas()]), None))


def history_of(row: bytes) -> tuple[Any, list[Any], list[int]]:
    """A history row's key, values and timestamps, oldest first (its columns read back)."""
    key, values, stamps = _history(decode(row))
    return key, list(values), list(stamps)


def _check_rows(value: ValueState, rows: MapState) -> None:
    """Each row is its key's history under the key's bytes; the value's deleted keys are
    exactly the rows whose newest version is a delete."""
    newest_deletes = {}
    for (kb,), (held,) in rows.entries.items():
        assert len(decode(held)) == 3  # this form's row: key, values, timestamps (int64)
        key, values, stamps = history_of(held)
        assert kb == key.encode() and values and len(values) == len(stamps)
        if values[-1] is None:
            newest_deletes[kb] = stamps[-1]
    if value.value is None:
        assert not rows.entries
        return
    _, (deleted, _) = time_and_state(value.value[0], "join")
    assert deleted == newest_deletes


def bucket_run(topology: Topology, parts: list[list[Row]]
               ) -> tuple[list[tuple[Any, Any, int]], Counter[str]]:
    """Records and drops of the join's processor: each part one call of the one bucket."""
    plan = compile_topology(topology)
    spec, joined = plan.join, plan.joined
    assert spec is not None and joined is not None
    states, value, rows = _states()
    out: list[tuple[Any, Any, int]] = []
    drops: Counter[str] = Counter()
    for part in parts:
        for result in _call(states, spec, joined, part):
            table = pa.Table.from_pandas(result, preserve_index=False)
            if table.column("route").to_pylist()[:1] == [DROPS]:  # reason (UTF-8), count
                for reason, count in zip(table.column("k").to_pylist(),
                                         table.column("ts").to_pylist(), strict=True):
                    drops[reason.decode()] += count
                continue
            out += [(key, value, ts) for _, key, value, ts, _ in records_of_frame(table)]
        _check_rows(value, rows)
    return out, drops


@st.composite
def micro_batches(draw: st.DrawFn) -> list[list[Row]]:
    """Rates and payments moving forward with jitter, some far behind (past retention)."""
    n = draw(st.integers(1, 50))
    rows: list[Row] = []
    now = 0
    for _ in range(n):
        now += draw(st.integers(0, 12))
        ts = max(0, now - draw(st.sampled_from([0, 0, 0, 7, 25, 90])))
        key = draw(st.sampled_from([b"EUR", b"USD", b"JPY", b"CHF", None]))
        if draw(st.booleans()):
            value = draw(st.sampled_from([b"1.1", b"0.9", b"150", None]))
            rows.append(("rates", key, value, ts))
        else:
            rows.append(("payments", key, draw(st.sampled_from([b"10", b"25"])), ts))
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=4)))
    return [rows[i:j] for i, j in zip([0, *cuts], [*cuts, n], strict=True)]


@settings(max_examples=examples(150), deadline=None)
@given(parts=micro_batches(), left=st.booleans(), grace=st.sampled_from([None, 10, 30]))
def test_calls_restoring_the_named_keys_give_the_driver_records_and_drops(
        parts: list[list[Row]], left: bool, grace: int | None) -> None:
    got, dropped = bucket_run(rated_payments(left, grace), parts)
    expected, expected_drops = driver_run(rated_payments(left, grace),
                                          [row for part in parts if part
                                           for row in task_order(part, 1)])
    assert Counter(got) == Counter(expected)
    assert dropped == expected_drops


def test_a_held_payment_released_by_another_key_finds_its_rate() -> None:
    """With a grace period, a call restores the keys its held records name."""
    parts = [[("rates", b"EUR", b"1.1", 0), ("payments", b"EUR", b"10", 5)],
             [("payments", b"USD", b"10", 100)]]
    got, _ = bucket_run(rated_payments(True, grace=10), parts)
    assert ("EUR", "10x1.1", 5) in got
    assert sorted(got) == sorted(driver_run(rated_payments(True, grace=10), parts[0] + parts[1])[0])


def test_histories_leave_the_state_once_retention_hides_them() -> None:
    """Deleted keys not named again, and versions retention took from a named key."""
    parts = [[("rates", f"K{i}".encode(), b"1.0", i) for i in range(5)],
             [("rates", f"K{i}".encode(), None, 10 + i) for i in range(5)],
             [("rates", b"EUR", b"1.1", 20), ("rates", b"EUR", b"1.2", 21)],
             [("rates", b"USD", b"0.9", 2_000)],
             [("payments", b"EUR", b"10", 2_001)]]
    states, value, rows = _states()
    plan = compile_topology(rated_payments(False))
    assert plan.join is not None and plan.joined is not None
    for part in parts:
        _call(states, plan.join, plan.joined, part)
        _check_rows(value, rows)
    assert value.value is not None
    observed, (deleted, _) = time_and_state(value.value[0], "join")
    assert observed == 2_000 and deleted == {}
    assert sorted(rows.entries) == [(b"EUR",), (b"USD",)]  # the deleted keys are gone
    assert history_of(rows.entries[(b"EUR",)][0]) == ("EUR", ["1.2"], [21])  # named: 1.1 went


def test_a_key_untouched_for_batches_keeps_its_history_and_reads_as_of_its_time() -> None:
    """A call files again only the histories its table updates changed."""
    first = [("rates", b"EUR", b"1.1", 0), ("rates", b"USD", b"0.9", 1)]
    second = [("rates", b"USD", b"0.8", 30)]
    third = [("payments", b"EUR", b"10", 35), ("payments", b"USD", b"10", 29)]
    got, _ = bucket_run(rated_payments(False), [first, second, third])
    assert sorted(got) == [("EUR", "10x1.1", 35), ("USD", "10x0.9", 29)]
    plan = compile_topology(rated_payments(False))
    assert plan.join is not None and plan.joined is not None
    states, value, rows = _states()
    observed = []
    for part in (first, second):
        _call(states, plan.join, plan.joined, part)
        assert value.value is not None
        observed.append(time_and_state(value.value[0], "join")[0])
    assert observed == [1, 30]
    assert rows.writes == 3  # EUR and USD, then USD alone
    assert history_of(rows.entries[(b"EUR",)][0]) == ("EUR", ["1.1"], [0])
    assert history_of(rows.entries[(b"USD",)][0]) == ("USD", ["0.9", "0.8"], [1, 30])


def test_a_bucket_of_an_earlier_release_is_refused() -> None:
    """The state of earlier releases: before partitions had key groups of their own (all
    keys' versions, oldest first), with every key's history in the group's value, and with
    keys grouped by another hash: refused, never read as this release's."""
    plan = compile_topology(rated_payments(False))
    assert plan.join is not None and plan.joined is not None
    payment: list[Row] = [("payments", b"EUR", b"10", 3)]
    histories = {b"EUR": (0, False, encode(("EUR", [("1.1", 0)])))}
    for earlier in (encode(([("EUR", "1.1", 0), ("USD", "0.9", 1), ("EUR", "1.2", 5)], None)),
                    encode(("per-partition-1", 0, (histories, None))),
                    encode(("per-partition-2", 0, (histories, None))),
                    encode(("per-partition-3", 0, ({}, None)))):
        states, value, _ = _states()
        value.update((earlier,))
        with pytest.raises(IllegalStateError, match="new checkpoint_dir"):
            _call(states, plan.join, plan.joined, payment)
