"""The spilling buffer: deterministic cases, each followed by ``_check()``.

A ``SortedByteStore`` stands in for the RocksDB keyspace unless a test says otherwise;
``test_spill_stateful.py`` compares the buffer with the unbounded one on random operations.
"""

from __future__ import annotations

import struct

import pytest

from suppress import BufferConfig, Suppressed
from suppress.buffer import TimeOrderedBuffer
from suppress.entry import RecordContext, context_size, entry_size
from suppress.errors import InvalidSuppressionError
from suppress.processor import SuppressProcessor
from suppress.spill import SpillBackend, SpillingBuffer
from suppress.spill_record import (
    ENTRY_PREFIX,
    FORMAT_VERSION,
    RecordCodec,
    SpillFormatError,
    order_key,
    time_of_order,
)
from topology.state import codec
from topology.state.codec import StateCodecError
from topology.state.rocksdb import StateDB

from .byte_store import SortedByteStore


def spilling(records: int | None = None, size: int | None = None, *, track: bool = False,
             store: SortedByteStore | None = None) -> tuple[SpillingBuffer, SortedByteStore]:
    store = store or SortedByteStore()
    backend = SpillBackend(store.open, store.commit, codec.encode, codec.decode)
    return SpillingBuffer(bytes, bytes, records, size, backend, track_bytes=track), store


def ctx(ts: int, headers: tuple = ()) -> RecordContext:
    return RecordContext(ts, ts, "topic", 0, headers)


def drain(buf) -> list[tuple]:
    out: list[tuple] = []
    buf.evict_while(lambda: True, lambda e: out.append(
        (e.time, e.key, e.new, e.old, e.prior, e.context, e.size)))
    buf._check()
    return out


def test_nothing_touches_the_disk_until_the_memory_tier_overflows() -> None:
    buf, store = spilling(3)
    for i, key in enumerate([b"c", b"a", b"b"]):
        buf.put(5, key, b"v%d" % i, None, ctx(i))
        buf._check()
    assert store.opened == 0 and buf.memory_records == 3
    buf.put(5, b"d", b"v", None, ctx(3))
    buf._check()
    assert store.opened == 1 and (buf.memory_records, buf.disk_records) == (3, 1)


def test_the_newest_entries_go_to_disk_and_the_head_stays_in_memory() -> None:
    buf, _ = spilling(2)
    for key, time in [(b"m", 5), (b"z", 9), (b"a", 1), (b"q", 5)]:
        buf.put(time, key, key, None, ctx(time))
        buf._check()
    # order: (1, a) (5, m) | (5, q) (9, z)
    assert [e.key for e in buf] == [b"a", b"m", b"q", b"z"]
    assert sorted(buf._memory) == [b"a", b"m"]
    assert buf.min_time == 1
    # a new key sorting before the disk tier goes to memory and pushes the tail down
    buf.put(4, b"k", b"k", None, ctx(4))
    buf._check()
    assert sorted(buf._memory) == [b"a", b"k"]
    assert [e.key for e in buf] == [b"a", b"k", b"m", b"q", b"z"]


def test_eviction_merges_the_tiers_in_order_and_refills_memory() -> None:
    buf, _ = spilling(2)
    keys = [(7, b"g"), (1, b"b"), (3, b"x"), (3, b"c"), (9, b"a"), (2, b"z")]
    for time, key in keys:
        buf.put(time, key, key, None, ctx(time))
        buf._check()
    got: list[tuple[int, bytes]] = []
    buf.evict_due(lambda t: t <= 3, lambda e: got.append((e.time, e.key)))
    buf._check()
    assert got == [(1, b"b"), (2, b"z"), (3, b"c"), (3, b"x")]
    assert (buf.memory_records, buf.disk_records, buf.min_time) == (2, 0, 7)
    assert [(e.time, e.key) for e in buf] == [(7, b"g"), (9, b"a")]


def test_updates_to_a_spilled_key_replace_it_in_place_and_keep_time_and_prior() -> None:
    buf, store = spilling(1)
    buf.put(1, b"a", b"a1", None, ctx(1))
    buf.put(2, b"b", b"b1", b"b0", ctx(2))  # spilled at once: it sorts last
    buf.put(50, b"b", b"b2", b"b1", ctx(3, (("h", b"x"),)))  # a later time: kept at 2
    buf._check()
    assert buf.prior_value(b"b") == (True, b"b0")
    assert buf.prior_value(b"nope") == (False, None)
    assert b"b" in buf and b"nope" not in buf
    entry = buf.get(b"b")
    assert entry is not None
    assert (entry.time, entry.new, entry.old, entry.prior) == (2, b"b2", b"b1", b"b0")
    assert entry.context == ctx(3, (("h", b"x"),))
    assert drain(buf) == [
        (1, b"a", b"a1", None, None, ctx(1), 0),
        (2, b"b", b"b2", b"b1", b"b0", ctx(3, (("h", b"x"),)), 0),
    ]
    assert store.data == {}


def test_a_callback_that_raises_leaves_the_entry_in_either_tier() -> None:
    def fail(entry) -> None:
        raise RuntimeError("downstream failed")

    for records in (1, 0):
        buf, _ = spilling(records)
        buf.put(1, b"a", b"1", None, ctx(1))
        buf.put(2, b"b", b"2", None, ctx(2))
        with pytest.raises(RuntimeError):
            buf.evict_while(lambda: True, fail)
        buf._check()
        assert [e.key for e in buf] == [b"a", b"b"]
        assert [e[1] for e in drain(buf)] == [b"a", b"b"]


def test_inside_the_callback_the_entry_is_still_counted() -> None:
    buf, _ = spilling(1, track=True)
    buf.put(1, b"a", b"1", None, ctx(1))
    buf.put(2, b"b", b"2", None, ctx(2))
    seen = []
    buf.evict_while(lambda: True,
                    lambda e: seen.append((e.key, buf.num_records, buf.min_time)))
    assert seen == [(b"a", 2, 1), (b"b", 1, 2)]


def test_max_records_zero_keeps_everything_on_disk() -> None:
    buf, _ = spilling(0)
    for time, key in [(3, b"c"), (1, b"a"), (2, b"b"), (1, b"a")]:
        buf.put(time, key, key + b"!", None, ctx(time))
        buf._check()
    assert (buf.memory_records, buf.disk_records, buf.min_time) == (0, 3, 1)
    assert [e[1] for e in drain(buf)] == [b"a", b"b", b"c"]


def test_a_bytes_bound_smaller_than_any_entry_and_a_growing_update() -> None:
    buf, _ = spilling(None, 60, track=True)
    buf.put(1, b"a", b"x", None, ctx(1))  # 8 + 1 + 1 + 8 + 8 + 5 + 4 = 35 bytes
    buf.put(2, b"b", b"y", None, ctx(2))  # two of them: 70 > 60, b goes to disk
    buf._check()
    assert (buf.memory_records, buf.disk_records, buf.size_bytes) == (1, 1, 70)
    buf.put(1, b"a", b"x" * 40, b"x", ctx(3))  # a grows past the bound: to disk as well
    buf._check()
    assert (buf.memory_records, buf.disk_records) == (0, 2)
    assert buf.size_bytes == 35 + (8 + 1 + 1 + 40 + 25)  # b, then a: old counted, no prior
    # the head does not fit: evicted straight from disk; then b fits and comes up
    got: list[bytes] = []
    buf.evict_while(lambda: not got, lambda e: got.append(e.key))
    buf._check()
    assert got == [b"a"] and (buf.memory_records, buf.disk_records) == (1, 0)


def test_a_new_key_after_the_disk_head_goes_to_disk_even_with_room_in_memory() -> None:
    buf, _ = spilling(None, 100, track=True)
    buf.put(1, b"a", b"x" * 40, None, ctx(1))  # 74 bytes
    buf.put(2, b"b", b"y", None, ctx(2))  # 35 more: over, b goes down
    buf.put(1, b"a", b"", None, ctx(1))  # a shrinks to 34: room for 66 bytes
    buf._check()
    buf.put(9, b"d", b"z", None, ctx(9))  # 35 bytes would fit, but d sorts after b
    buf._check()
    assert sorted(buf._memory) == [b"a"] and buf.disk_records == 2


def test_sizes_are_kafkas_in_both_tiers_tracked_or_not() -> None:
    for track in (True, False):
        buf, _ = spilling(1, track=track)
        buf.put(1, b"asdf", b"23roni", None, ctx(1))
        buf.put(2, b"zxcv", b"qfowin", b"qf", ctx(2, (("h", b"12"),)))
        buf.put(2, b"zxcv", b"qfowin!", b"qfowin", ctx(3, (("h", b"12"),)))
        buf._check()
        first = entry_size(b"asdf", None, None, b"23roni", context_size(ctx(1)))
        second = entry_size(b"zxcv", b"qf", b"qfowin", b"qfowin!",
                            context_size(ctx(3, (("h", b"12"),))))
        assert buf.size_bytes == first + second
        assert buf.num_records == 2


def test_the_prior_read_back_from_disk_counts_once_when_old_equals_it() -> None:
    buf, _ = spilling(0, track=True)
    buf.put(1, b"k", b"1", b"0", ctx(1))
    buf.put(1, b"k", b"0", b"1", ctx(2))  # old differs from the prior
    buf.put(1, b"k", b"2", b"0", ctx(3))  # old equals the prior: counted once
    buf._check()
    assert buf.size_bytes == entry_size(b"k", b"0", b"0", b"2", context_size(ctx(3)))


def test_staged_puts_are_resolved_in_one_batch() -> None:
    buf, store = spilling(1)
    buf.STAGE_LIMIT = 3
    buf.put(1, b"a", b"1", None, ctx(1))
    buf.put(2, b"b", b"1", None, ctx(2))  # spilled: the disk tier starts at (2, b)
    reads: list = []
    store_get, store_multi_get = store.get, store.multi_get
    store.get = lambda key: reads.append(key) or store_get(key)  # type: ignore[method-assign]
    store.multi_get = (  # type: ignore[method-assign]
        lambda keys: reads.append(list(keys)) or store_multi_get(keys))
    buf.put(3, b"c", b"1", None, ctx(3))  # staged
    buf.put(4, b"b", b"2", b"1", ctx(4))  # staged (it sorts after the head: it may be it)
    buf.put(5, b"c", b"2", b"1", ctx(5))  # replaces the staged put, keeps time 3, prior
    buf._check()
    assert buf.staged_records == 2 and reads == []
    buf.put(6, b"d", b"1", None, ctx(6))  # the third: the batch is resolved
    buf._check()
    assert buf.staged_records == 0 and reads == [[b"eb", b"ec", b"ed"]]  # one sorted batch
    assert [(e.time, e.key, e.new, e.prior) for e in buf] == [
        (1, b"a", b"1", None), (2, b"b", b"2", None), (3, b"c", b"2", None),
        (6, b"d", b"1", None)]


def test_a_lookup_or_a_count_resolves_staged_puts_first() -> None:
    buf, _ = spilling(0)
    buf.put(1, b"a", b"1", None, ctx(1))
    buf.put(2, b"b", b"1", b"0", ctx(2))
    assert buf.staged_records == 1
    assert buf.prior_value(b"b") == (True, b"0")
    assert buf.staged_records == 0
    buf.put(3, b"c", b"1", None, ctx(3))
    assert buf.num_records == 3 and buf.staged_records == 0


def test_an_out_of_order_put_to_a_spilled_key_finds_it_on_disk() -> None:
    """A time limit's later update may carry an older timestamp than the key's buffer time."""
    buf, _ = spilling(1)
    buf.put(1, b"a", b"1", None, ctx(1))
    buf.put(9, b"z", b"1", None, ctx(9))  # spilled
    buf.put(0, b"z", b"2", b"1", ctx(0))  # sorts before the disk head, yet is that key
    buf._check()
    assert [(e.time, e.key, e.new) for e in buf] == [(1, b"a", b"1"), (9, b"z", b"2")]


def test_a_value_the_codec_cannot_write_loses_nothing() -> None:
    buf, _ = spilling(1)
    buf.put(1, b"a", b"1", None, ctx(1))
    buf.put(2, b"b", b"2", None, ctx(2))  # spilled
    with pytest.raises(StateCodecError):
        buf.put(2, b"b", complex(1, 2), None, ctx(3))  # no codec type, for a spilled key
    with pytest.raises(StateCodecError):
        buf.put(5, b"c", complex(1, 2), None, ctx(3))  # a new key after the disk head: likewise
    buf.put(0, b"0", complex(3), None, ctx(0))  # a new key, to memory; "a" goes down...
    buf._check()
    assert [(e.key, e.new) for e in buf] == [(b"0", complex(3)), (b"a", b"1"), (b"b", b"2")]
    with pytest.raises(StateCodecError):
        buf.put(-1, b"-", b"x", None, ctx(0))  # ... and now the complex must: it stays put
    assert [(e.key, e.new) for e in buf] == [(b"-", b"x"), (b"0", complex(3)), (b"a", b"1"),
                                             (b"b", b"2")]
    assert buf.memory_records == 2  # over the bound of 1: the task fails, nothing is lost


def test_the_disk_tier_lives_in_a_rocksdb_keyspace(tmp_path) -> None:
    with StateDB.open(tmp_path / "s") as db:
        keyspace = db.keyspace("spill")
        backend = SpillBackend(lambda: keyspace, db.commit, codec.encode, codec.decode)
        buf = SpillingBuffer(bytes, bytes, 2, None, backend)
        buf.COMMIT_EVERY = 5
        for i in range(20):
            buf.put(i % 7, b"k%d" % (i % 11), b"v%d" % i, None, ctx(i))
            buf._check()
        assert buf.num_records == 11 and buf.disk_records == 9
        expected = sorted({(i % 7, b"k%d" % (i % 11)) for i in range(11)})
        assert [(e.time, e.key) for e in buf] == expected
        assert [(t, k) for t, k, *_ in drain(buf)] == expected
        db.commit()
        assert list(keyspace.items()) == []


def test_with_times_a_function_of_the_key_the_disk_tier_is_one_area(tmp_path) -> None:
    def time_of(key: bytes) -> int:
        return key[0] % 3

    store = SortedByteStore()
    backend = SpillBackend(store.open, store.commit, codec.encode, codec.decode)
    buf = SpillingBuffer(bytes, bytes, 1, None, backend, time_of=time_of)
    buf.STAGE_LIMIT = 2
    for i, key in enumerate([b"a", b"b", b"c", b"d", b"b", b"e", b"a", b"c"]):
        buf.put(time_of(key), key, b"%d" % i, b"%d" % (i - 1), ctx(i))
        buf._check()
    assert buf.num_records == 5 and all(k.startswith(b"o") for k in store.data)
    assert len(store.data) == buf.disk_records == 4
    assert buf.prior_value(b"c") == (True, b"1")  # its first put's old value, from disk
    assert [(e.time, e.key, e.new) for e in buf] == [
        (0, b"c", b"7"), (1, b"a", b"6"), (1, b"d", b"3"), (2, b"b", b"4"), (2, b"e", b"5")]
    assert [e[1] for e in drain(buf)] == [b"c", b"a", b"d", b"b", b"e"]
    assert store.data == {}


def test_the_engine_needs_a_disk_tier_for_spill_configs() -> None:
    suppressed = Suppressed.until_window_closes(
        BufferConfig.max_records(2).spill_to_disk_when_full())
    with pytest.raises(InvalidSuppressionError, match="needs a disk tier"):
        SuppressProcessor("node", suppressed, 0, lambda *a: None, bytes, bytes)


def test_spill_configs_are_strict_and_keep_their_limits() -> None:
    cfg = BufferConfig.max_bytes(100).with_max_records(3).spill_to_disk_when_full()
    assert cfg.is_strict and (cfg.records_limit, cfg.bytes_limit) == (3, 100)
    assert Suppressed.until_window_closes(cfg).buffer_config is cfg
    assert cfg.emit_early_when_full().strategy.name == "EMIT"


def test_the_processor_never_reports_a_spilling_buffer_full() -> None:
    store = SortedByteStore()
    emitted: list[tuple] = []
    suppressed = Suppressed.until_time_limit(
        10, BufferConfig.max_records(1).spill_to_disk_when_full())
    proc = SuppressProcessor("node", suppressed, 10, lambda k, n, o, c: emitted.append((k, n)),
                             bytes, bytes,
                             spill=SpillBackend(store.open, store.commit, codec.encode,
                                                codec.decode))
    reference = TimeOrderedBuffer(bytes, bytes)
    for i, key in enumerate([b"a", b"b", b"c", b"a", b"d"]):
        proc.process(key, b"%d" % i, None, ctx(i), i)
        reference.put(i, key, b"%d" % i, None, ctx(i))
        proc.buffer._check()
    assert proc.num_records == 4 and emitted == []
    proc.process(b"e", b"5", None, ctx(12), 12)  # 12 - 10: a, b and c are due
    assert emitted == [(b"a", b"3"), (b"b", b"1"), (b"c", b"2")]
    assert [k for k, _, _ in proc.buffered()] == [b"d", b"e"]


# -- the record format ------------------------------------------------------------------------


RECORD_CODEC = RecordCodec(codec.encode, codec.decode)


@pytest.mark.parametrize("value", [
    None, 0, -1, 2**63 - 1, -(2**63), 2**64, "", "é\ud800", b"", b"\x00\xff", True, 1.5,
    ("t", 1), ["l", None], {"k": b"v"},
])
def test_values_read_back_as_written(value) -> None:
    from suppress.entry import BufferedEntry

    headers = (("a", b"1"), ("é", None), ("", b""))
    entry = BufferedEntry(-5, b"kb", value, value, value, value,
                          RecordContext(-1, 2**40, "tópic", 3, headers))
    entry.size = 77
    back = RECORD_CODEC.entry(b"kb", RECORD_CODEC.record(entry, b"prior"))
    assert (back.time, back.key_bytes, back.size) == (-5, b"kb", 77)
    for got in (back.key, back.new, back.old, back.prior):
        assert got == value and type(got) is type(value)
    assert back.context == entry.context


def test_an_update_rewrites_only_the_latest_part() -> None:
    from suppress.entry import BufferedEntry

    entry = BufferedEntry(3, b"k", ("k", 1), 1, None, None, ctx(1))
    record = RECORD_CODEC.record(entry, None)
    updated = RECORD_CODEC.updated(record, RECORD_CODEC.latest(2, 1, ctx(2, (("h", None),))),
                                   None)
    back = RECORD_CODEC.entry(b"k", updated)
    assert (back.time, back.key, back.new, back.old, back.prior) == (3, ("k", 1), 2, 1, None)
    assert back.context == ctx(2, (("h", None),))
    sized = RECORD_CODEC.updated(record, RECORD_CODEC.latest(2, 1, ctx(2)), 99)
    assert RECORD_CODEC.entry(b"k", sized).size == 99
    assert RECORD_CODEC.prior_bytes(RECORD_CODEC.record(entry, b"pb")) == b"pb"


def test_records_of_another_version_or_corrupt_ones_are_refused() -> None:
    from suppress.entry import BufferedEntry

    record = RECORD_CODEC.record(BufferedEntry(3, b"k", "k", 1, None, None, ctx(1)), None)
    other = bytes([FORMAT_VERSION + 1]) + record[1:]
    with pytest.raises(SpillFormatError, match="format version 2"):
        RECORD_CODEC.entry(b"k", other)
    with pytest.raises(SpillFormatError, match="format version 2"):
        RECORD_CODEC.updated(other, RECORD_CODEC.latest(1, 1, ctx(1)), None)
    for broken in (record[:-1], record + b"x", record[:10]):
        with pytest.raises(SpillFormatError):
            RECORD_CODEC.entry(b"k", broken)


def test_order_keys_sort_by_time_numerically_then_by_key_bytes_unsigned() -> None:
    pairs = [(-(2**63), b""), (-1, b"\xff"), (0, b""), (0, b"\x00"), (0, b"\x7f"),
             (0, b"\x80"), (1, b""), (255, b"a"), (256, b""), (2**63 - 1, b"")]
    keys = [order_key(t, k) for t, k in pairs]
    assert keys == sorted(keys)
    assert [time_of_order(k) for k in keys] == [t for t, _ in pairs]
    assert all(not key.startswith(ENTRY_PREFIX) for key in keys)
    assert struct.unpack(">Q", order_key(0, b"")[1:9])[0] == 1 << 63
