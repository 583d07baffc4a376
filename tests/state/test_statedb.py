"""StateDB and Keyspace: read-your-writes, ranges, merged iteration, commit, rollback, reopen."""

from __future__ import annotations

import gc
import pickle

import pytest

from topology.state.rocksdb import (
    StateDB,
    StateLockedError,
    StateStoreError,
    decode_int64,
    decode_uint64,
    encode_int64,
    encode_uint64,
    prefix_end,
)

KEYS = [b"", b"\x00", b"a", b"ab", b"b", b"\x7f", b"\x80", b"\xff", b"\xff\xff"]


@pytest.fixture
def db(tmp_path):
    with StateDB.open(tmp_path / "state") as opened:
        yield opened


def items(ks, lo=None, hi=None):
    forward = list(ks.items(lo, hi))
    backward = list(ks.items(lo, hi, reverse=True))
    assert backward == forward[::-1]
    ks._check()
    return forward


def test_read_your_writes_before_commit_and_after(db):
    ks = db.keyspace("kv")
    assert ks.get(b"a") is None
    ks.put(b"a", b"1")
    ks.put(b"b", b"2")
    assert ks.get(b"a") == b"1"
    assert ks.multi_get([b"b", b"zz", b"a"]) == [b"2", None, b"1"]
    db.commit()
    assert ks.get(b"a") == b"1"
    ks.put(b"a", b"3")
    ks.delete(b"b")
    assert (ks.get(b"a"), ks.get(b"b")) == (b"3", None)
    assert ks.multi_get([b"a", b"b"]) == [b"3", None]
    assert items(ks) == [(b"a", b"3")]
    db.rollback()
    assert items(ks) == [(b"a", b"1"), (b"b", b"2")]


def test_keyspaces_are_separate_and_same_object(db):
    a, b = db.keyspace("a"), db.keyspace("b")
    assert db.keyspace("a") is a
    a.put(b"k", b"from a")
    db.commit()
    assert b.get(b"k") is None
    assert items(b) == []


def test_unsigned_byte_order_and_bounds(db):
    ks = db.keyspace("kv")
    committed, pending = KEYS[::2], KEYS[1::2]
    for key in committed:
        ks.put(key, b"c" + key)
    db.commit()
    for key in pending:
        ks.put(key, b"p" + key)
    expected = sorted((key, (b"c" if key in committed else b"p") + key) for key in KEYS)
    assert items(ks) == expected
    for lo in [None, *KEYS, b"\x00\x00", b"zz"]:
        for hi in [None, *KEYS, b"\x00\x00", b"zz"]:
            want = [kv for kv in expected
                    if (lo is None or kv[0] >= lo) and (hi is None or kv[0] < hi)]
            assert items(ks, lo, hi) == want, (lo, hi)


def test_iteration_sees_deletes_and_overwrites(db):
    ks = db.keyspace("kv")
    for key in KEYS:
        ks.put(key, b"old")
    db.commit()
    ks.delete(b"a")
    ks.delete(b"never-written")
    ks.put(b"b", b"new")
    ks.put(b"c", b"added")
    got = dict(items(ks))
    assert b"a" not in got and b"never-written" not in got
    assert got[b"b"] == b"new" and got[b"c"] == b"added"
    assert items(ks, b"a", b"b") == [(b"ab", b"old")]


def test_delete_range_hides_committed_and_drops_pending(db):
    ks = db.keyspace("kv")
    for key in [b"a", b"b", b"c", b"d"]:
        ks.put(key, b"1")
    db.commit()
    ks.put(b"bb", b"pending")
    ks.delete_range(b"b", b"d")
    assert ks.get(b"b") is None and ks.get(b"bb") is None and ks.get(b"d") == b"1"
    assert ks.multi_get([b"a", b"c", b"d"]) == [b"1", None, b"1"]
    ks.put(b"c", b"after the range")
    assert items(ks) == [(b"a", b"1"), (b"c", b"after the range"), (b"d", b"1")]
    db.commit()
    assert items(ks) == [(b"a", b"1"), (b"c", b"after the range"), (b"d", b"1")]


def test_delete_range_merges_ranges_and_checks_bounds(db):
    ks = db.keyspace("kv")
    for key in KEYS:
        ks.put(key, b"v")
    db.commit()
    ks.delete_range(b"a", b"b")
    ks.delete_range(b"\x80", b"\xff")
    ks.delete_range(b"ab", b"\x7f")
    ks.delete_range(b"x", b"x")
    assert ks._ranges == [(b"a", b"\x7f"), (b"\x80", b"\xff")]
    assert [k for k, _ in items(ks)] == [b"", b"\x00", b"\x7f", b"\xff", b"\xff\xff"]
    with pytest.raises(ValueError, match="lo <= hi"):
        ks.delete_range(b"b", b"a")
    db.commit()
    assert [k for k, _ in items(ks)] == [b"", b"\x00", b"\x7f", b"\xff", b"\xff\xff"]


def test_commit_and_meta_survive_reopen(tmp_path):
    path = tmp_path / "state"
    with StateDB.open(path) as db:
        db.keyspace("a").put(b"k", b"1")
        db.keyspace("b").put(b"k", b"2")
        db.commit({b"offset": b"10", b"batch": b"3"})
        db.keyspace("a").put(b"uncommitted", b"x")
        db.commit({b"batch": None})
        db.keyspace("a").put(b"dropped by close", b"x")
    with StateDB.open(path) as db:
        assert items(db.keyspace("a")) == [(b"k", b"1"), (b"uncommitted", b"x")]
        assert items(db.keyspace("b")) == [(b"k", b"2")]
        assert db.read_meta(b"offset") == b"10" and db.read_meta(b"batch") is None


def test_meta_and_values_must_be_bytes(db):
    ks = db.keyspace("kv")
    ks.put(b"k", b"v")
    with pytest.raises(TypeError, match="bytes to bytes or None"):
        db.commit({b"k": 1})
    with pytest.raises(TypeError, match="bytes to bytes or None"):
        db.commit({"k": b"v"})
    db.commit()  # the pending write stayed
    assert ks.get(b"k") == b"v"
    for call in (lambda: ks.put("k", b"v"), lambda: ks.put(b"k", None), lambda: ks.delete(1),
                 lambda: ks.delete_range(b"a", None)):
        with pytest.raises(TypeError, match="bytes"):
            call()
    with pytest.raises(TypeError, match="keys are bytes, got str"):
        ks.get("k")
    with pytest.raises(TypeError, match="keys are bytes, got int"):
        ks.multi_get([b"k", 1])
    with pytest.raises(TypeError, match="bounds"):
        ks.items("a")
    with pytest.raises(TypeError, match="keys are bytes"):
        db.read_meta("k")
    with pytest.raises(TypeError, match="keys are bytes, got list"):
        ks.get([b"k"])


def test_keyspace_names(db):
    for bad in ["", "a/b", "a b", "x" * 250, 3]:
        with pytest.raises(ValueError, match="keyspace names"):
            db.keyspace(bad)
    assert db.keyspace("Kafka-store.name_01").name == "Kafka-store.name_01"
    db.keyspace("meta").put(b"k", b"v")  # no clash with the meta family
    db.commit()
    assert db.read_meta(b"k") is None


def test_iterator_is_a_snapshot_of_the_call(db):
    ks = db.keyspace("kv")
    ks.put(b"a", b"1")
    db.commit()
    ks.put(b"b", b"2")
    iterator = ks.items()
    ks.put(b"c", b"3")
    db.commit()
    ks.delete(b"a")
    assert list(iterator) == [(b"a", b"1"), (b"b", b"2")]


def test_upper_bound_holds_while_the_iterator_lives(db):
    # RocksDB reads the upper bound from the ReadOptions at every step; rocksdict's iterator
    # does not keep them alive, so the keyspace must (freed, their memory gets reused).
    ks = db.keyspace("kv")
    for key in (b"AA", b"AAA", b"AAB"):
        ks.put(key, b"v")
    db.commit()
    iterators = [ks.items(None, b"AAA" + bytes(1)) for _ in range(20)]
    other = [ks.items(None, bytes(4)) for _ in range(200)]  # reuse freed memory, if any
    assert [[k for k, _ in it] for it in iterators] == [[b"AA", b"AAA"]] * 20
    del other


def test_close_makes_everything_raise_and_releases_rocksdb(tmp_path):
    path = tmp_path / "state"
    db = StateDB.open(path)
    ks = db.keyspace("kv")
    ks.put(b"a", b"1")
    ks.put(b"b", b"2")
    db.commit()
    started = ks.items()
    assert next(started) == (b"a", b"1")
    unstarted = ks.items(reverse=True)
    db.close()
    db.close()  # idempotent
    assert db.closed
    with pytest.raises(StateStoreError, match="closed"):
        next(started)
    with pytest.raises(StateStoreError, match="closed"):
        next(unstarted)
    for call in (lambda: ks.get(b"a"), lambda: ks.put(b"a", b"1"), lambda: ks.items(),
                 lambda: db.commit(), lambda: db.keyspace("kv"), lambda: db.read_meta(b"a")):
        with pytest.raises(StateStoreError, match="closed"):
            call()
    # the live keyspace and iterators hold no RocksDB object: the same process reopens
    with StateDB.open(path) as again:
        assert again.keyspace("kv").get(b"b") == b"2"


def test_forgotten_db_is_released_by_garbage_collection(tmp_path):
    path = tmp_path / "state"
    StateDB.open(path).keyspace("kv").put(b"a", b"1")
    gc.collect()
    with StateDB.open(path) as db:
        assert db.keyspace("kv").get(b"a") is None


def test_same_process_second_open_is_refused(tmp_path):
    with StateDB.open(tmp_path / "state"):
        with pytest.raises(StateLockedError, match="this process") as refused:
            StateDB.open(tmp_path / "state")
    import os

    assert refused.value.holder_pid == os.getpid()
    copy = pickle.loads(pickle.dumps(refused.value))
    assert (type(copy), str(copy), copy.holder_pid) == (StateLockedError, str(refused.value),
                                                        os.getpid())


def test_checkpoint_is_a_state_directory_of_the_committed_state(tmp_path):
    with StateDB.open(tmp_path / "state") as db:
        db.keyspace("kv").put(b"a", b"1")
        db.commit({b"offset": b"1"})
        db.keyspace("kv").put(b"pending", b"x")
        db.checkpoint(tmp_path / "copy")
        with pytest.raises(StateStoreError, match="already exists"):
            db.checkpoint(tmp_path / "copy")
    with StateDB.open(tmp_path / "copy") as copy:
        assert items(copy.keyspace("kv")) == [(b"a", b"1")]
        assert copy.read_meta(b"offset") == b"1"


def test_empty_commit_and_sync_option(tmp_path):
    with StateDB.open(tmp_path / "state", sync=True) as db:
        assert db.sync and "sync=True" in repr(db)
        db.commit()
        db.keyspace("kv").put(b"a", b"1")
        db.commit()
    with StateDB.open(tmp_path / "state") as db:
        assert db.keyspace("kv").get(b"a") == b"1"


def test_int_codecs_sort_numerically():
    values = [-(2**63), -(2**40), -1, 0, 1, 2**40, 2**63 - 1]
    encoded = [encode_int64(v) for v in values]
    assert encoded == sorted(encoded) and all(len(e) == 8 for e in encoded)
    assert [decode_int64(e) for e in encoded] == values
    assert decode_uint64(encode_uint64(2**64 - 1)) == 2**64 - 1
    assert encode_uint64(1) < encode_uint64(256)
    for bad in (2**63, -(2**63) - 1):
        with pytest.raises(ValueError, match="outside"):
            encode_int64(bad)
    with pytest.raises(ValueError, match="outside"):
        encode_uint64(-1)
    with pytest.raises(TypeError, match="int"):
        encode_int64(1.5)
    with pytest.raises(ValueError, match="8 bytes"):
        decode_int64(b"\x00")
    with pytest.raises(ValueError, match="8 bytes"):
        decode_uint64(b"")


def test_prefix_end_bounds_exactly_the_prefix(db):
    ks = db.keyspace("kv")
    keys = [b"a", b"a\x00", b"a\xff", b"a\xff\xff", b"b", b"\xff", b"\xff\x01"]
    for key in keys:
        ks.put(key, b"v")
    for prefix in [b"a", b"a\xff", b"\xff", b""]:
        got = [k for k, _ in items(ks, prefix, prefix_end(prefix))]
        assert got == [k for k in sorted(keys) if k.startswith(prefix)]
