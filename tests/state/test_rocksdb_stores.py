"""Persistent key-value and window stores: durability, segments, and the in-memory behaviour.

The contracts (tests/state/test_store_contracts.py) cover the API; here: contents survive a
commit, close and reopen; expiry drops whole segments; and seeded differential runs against
the in-memory stores, with commits, rollbacks and reopens in between, calling ``_check()``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from topology.errors import StoreClosedError
from topology.serde import Serdes, serializer_of
from topology.state.codec import StateCodecError
from topology.state.memory import InMemoryKeyValueStore, InMemoryWindowStore
from topology.state.rocksdb import (
    RocksDBKeyValueStore,
    RocksDBWindowStore,
    StateDB,
    decode_int64,
    encode_int64,
)
from topology.state.rocksdb.segmented import OBSERVED_KEY
from topology.state.segments import window_segment_interval
from topology.windows import Window, Windowed

_STR = serializer_of(Serdes.string())


def test_key_value_store_contents_survive_a_reopen(tmp_path: Path) -> None:
    with StateDB.open(tmp_path / "state") as db:
        store = RocksDBKeyValueStore("kv", _STR, db.keyspace("kv"))
        assert not store.written
        store.put("b", {"n": [1, 2.5, None]})
        store.put_with_timestamp("a", ("t", b"\x00"), 42)
        store.put("gone", 1)
        store.delete("gone")
        db.commit()
        store.put("pending", 1)  # never committed: dropped by close
        before = list(store.all())
        store.close()
    with StateDB.open(tmp_path / "state") as db:
        store = RocksDBKeyValueStore("kv", _STR, db.keyspace("kv"))
        assert store.written
        assert list(store.all()) == [kv for kv in before if kv[0] != "pending"]
        assert store.get_with_timestamp("a") == (("t", b"\x00"), 42)
        assert store.get_with_timestamp("b") == ({"n": [1, 2.5, None]}, -1)
        store._check()


def test_window_store_contents_and_stream_time_survive_a_reopen(tmp_path: Path) -> None:
    with StateDB.open(tmp_path / "state") as db:
        store = RocksDBWindowStore("w", _STR, 10, 100, db.keyspace("w"))
        store.put("a", 1, 0)
        store.put_with_timestamp("b", "x", 50, 57)
        store.put("a", 2, 60)
        store.put("a", None, 60)  # observed stays 60 although the window is gone
        db.commit()
        before = list(store.all())
    with StateDB.open(tmp_path / "state") as db:
        store = RocksDBWindowStore("w", _STR, 10, 100, db.keyspace("w"))
        assert store.observed_stream_time == 60
        assert list(store.all()) == before == [
            (Windowed("a", Window(0, 10)), 1), (Windowed("b", Window(50, 60)), "x")]
        assert store.get_with_timestamp("b", 50) == ("x", 57)
        store.put("c", 3, 100)  # observed 100: the window at 0 expires, as it would have
        assert store.fetch("a", 0) is None
        store._check()


def test_window_expiry_drops_whole_segments(tmp_path: Path) -> None:
    interval = window_segment_interval(1_000)
    with StateDB.open(tmp_path / "state") as db:
        keyspace = db.keyspace("w")
        store = RocksDBWindowStore("w", _STR, 10, 1_000, keyspace)
        assert store.segment_interval_ms == interval == 60_000
        for start in range(0, 3 * interval, 500):
            store.put("k", start, start)
            store._check()
            if start % 7_000 == 0:
                db.commit()
        db.commit()
        starts = [decode_int64(k[:8]) for k, _ in keyspace.items() if k != OBSERVED_KEY]
        observed = 3 * interval - 500
        assert min(starts) == 2 * interval  # earlier segments are physically gone
        # windows past retention in the live segment are still on disk, never read
        assert [s for s, _ in store.fetch("k", 0, observed)] == list(
            range(observed - 1_000 + 500, observed + 1, 500))
        assert [w.window.start for w, _ in store.all()] == [observed - 500, observed]


@pytest.mark.parametrize("commit", [False, True])
def test_a_segment_is_dropped_only_once_its_last_window_expired(tmp_path: Path,
                                                                commit: bool) -> None:
    with StateDB.open(tmp_path / "state") as db:
        store = RocksDBWindowStore("w", _STR, 1, 1_000, db.keyspace("w"))
        store.put("old", 1, 59_999)  # the last ms of segment 0
        store.put("k", 2, 60_998)  # 59_999 is the oldest live start: segment 0 stays
        if commit:
            db.commit()
        assert store.fetch("old", 59_999) == 1
        store._check()
        store.put("k", 3, 60_999)  # now 59_999 expired: segment 0 goes
        if commit:
            db.commit()
        assert store.fetch("old", 59_999) is None
        assert [k for k, _ in db.keyspace("w").items() if k[:8] < encode_int64(60_000)] == [
            OBSERVED_KEY]
        store._check()


def test_closed_stores_refuse_the_runtime_calls_too(tmp_path: Path) -> None:
    with StateDB.open(tmp_path / "state") as db:
        kv = RocksDBKeyValueStore("kv", _STR, db.keyspace("kv"))
        w = RocksDBWindowStore("w", _STR, 10, 100, db.keyspace("w"))
        kv.close()
        w.close()
        for call in (lambda: kv.get_with_timestamp("a"), lambda: kv.put_with_timestamp("a", 1, 0),
                     lambda: kv.upsert("a", 1, 0), lambda: w.get_with_timestamp("a", 0),
                     lambda: w.put_with_timestamp("a", 1, 0, 0)):
            with pytest.raises(StoreClosedError, match="closed"):
                call()
        db.commit()
        assert list(db.keyspace("kv").items()) == []


def test_values_without_a_codec_type_are_refused_when_written(tmp_path: Path) -> None:
    with StateDB.open(tmp_path / "state") as db:
        kv = RocksDBKeyValueStore("kv", _STR, db.keyspace("kv"))
        w = RocksDBWindowStore("w", _STR, 10, 100, db.keyspace("w"))
        with pytest.raises(StateCodecError, match="serde"):
            kv.put("a", complex(1, 2))
        with pytest.raises(StateCodecError, match="serde"):
            w.put_with_timestamp("a", [complex(1, 2)], 0, 0)
        assert kv.get("a") is None and not kv.written and not w.written
        db.commit()


def test_counts_are_held_unencoded_until_the_commit_writes_them(tmp_path: Path) -> None:
    """A value written many times per commit is encoded once, at the commit, and reopens."""
    with StateDB.open(tmp_path / "state") as db:
        w = RocksDBWindowStore("w", _STR, 10, 100, db.keyspace("w"))
        for count in range(1, 4):
            w.put_with_timestamp("a", count, 0, count)
        assert w.get_with_timestamp("a", 0) == (3, 3)
        assert list(db.keyspace("w")._held.values()) == [(3, "a", 3)]
        db.commit()
    with StateDB.open(tmp_path / "state") as db:
        assert RocksDBWindowStore("w", _STR, 10, 100, db.keyspace("w")).fetch("a", 0) == 3


def test_window_store_arguments_are_checked(tmp_path: Path) -> None:
    with StateDB.open(tmp_path / "state") as db:
        keyspace = db.keyspace("w")
        with pytest.raises(ValueError, match="window_size_ms"):
            RocksDBWindowStore("w", _STR, -1, 100, keyspace)
        with pytest.raises(ValueError, match="retention_ms"):
            RocksDBWindowStore("w", _STR, 10, -1, keyspace)
        with pytest.raises(TypeError, match="retention_ms"):
            RocksDBWindowStore("w", _STR, 10, 1.5, keyspace)  # type: ignore[arg-type]


# -- differential runs against the in-memory stores ---------------------------------------------

KEYS = st.text(alphabet="aAbé\x00", max_size=3)
VALUES = st.one_of(st.none(), st.integers(0, 9), st.text(alphabet="xy", max_size=2))
LIFECYCLE = st.sampled_from(["commit", "rollback", "reopen"])
"""Between writes: commit; rollback (then the store is constructed again, as the runtime
does after a failed step, and the reference forgets what was not committed); reopen (commit,
close the StateDB, open it and construct the store again)."""


class _Persistent:
    """A persistent store with its StateDB, committed, rolled back and reopened on demand."""

    def __init__(self, path: Path, db: StateDB, make: Any) -> None:
        self.path = path
        self.make = make
        self.db = db
        self.store = make(self.db.keyspace("s"))

    def lifecycle(self, op: str) -> None:
        if op == "commit":
            self.db.commit()
        elif op == "rollback":
            self.db.rollback()
            self.store = self.make(self.db.keyspace("s"))
        else:
            self.db.commit()
            self.db.close()
            self.db = StateDB.open(self.path)
            self.store = self.make(self.db.keyspace("s"))


def _kv_state(store: Any, lo: Any, hi: Any) -> Any:
    return (list(store.all()), list(store.reverse_all()), list(store.range(lo, hi)),
            list(store.reverse_range(lo, hi)), store.approximate_num_entries())


@settings(max_examples=examples(150), deadline=None)
@given(ops=st.lists(st.one_of(
    st.tuples(st.sampled_from(["put", "delete", "put_if_absent", "upsert"]), KEYS, VALUES,
              st.integers(-1, 5)),
    LIFECYCLE), max_size=40), lo=st.one_of(st.none(), KEYS), hi=st.one_of(st.none(), KEYS))
def test_key_value_store_matches_the_in_memory_store(pool: Any, ops: list, lo: Any,
                                                     hi: Any) -> None:
    databases = pool("kv")
    ours = _Persistent(*databases.take(), lambda ks: RocksDBKeyValueStore("s", _STR, ks))
    failed = True
    committed: dict[Any, tuple[Any, int]] = {}
    ref = InMemoryKeyValueStore("s", _STR)
    try:
        for op in ops:
            if isinstance(op, str):
                ours.lifecycle(op)
                if op == "rollback":
                    ref = InMemoryKeyValueStore("s", _STR)
                    for key, (value, ts) in committed.items():
                        ref.put_with_timestamp(key, value, ts)
                else:
                    committed = {k: ref.get_with_timestamp(k) for k, _ in ref.all()}
                continue
            name, key, value, ts = op
            args = {"upsert": (key, value, ts), "delete": (key,)}.get(name, (key, value))
            assert getattr(ours.store, name)(*args) == getattr(ref, name)(*args), op
            assert ours.store.get_with_timestamp(key) == ref.get_with_timestamp(key)
            ours.store._check()
        assert _kv_state(ours.store, lo, hi) == _kv_state(ref, lo, hi)
        failed = False
    finally:
        databases.give_back(ours.db, failed)


STARTS = st.sampled_from([0, 10, 20, 500, 59_990, 60_000, 60_010, 119_990, 120_000, 180_000,
                          250_000])


def _window_state(store: Any, key: Any, lo: int, hi: int, interval: int | None = None) -> Any:
    """The store's answers; with ``interval``, scans re-sorted into Kafka's RocksDB order
    (segments ``interval`` wide, then key bytes, then start), the persistent store's order."""
    state = [list(store.all()), list(store.backward_all()), list(store.fetch_all(lo, hi)),
             list(store.backward_fetch_all(lo, hi)), list(store.fetch(key, lo, hi)),
             list(store.backward_fetch(key, lo, hi))]
    if interval is not None:
        for i in (0, 2):
            state[i].sort(key=lambda r: (r[0].window.start // interval, _STR(r[0].key),
                                         r[0].window.start))
            state[i + 1] = state[i][::-1]
    return state


@settings(max_examples=examples(150), deadline=None)
@given(ops=st.lists(st.one_of(st.tuples(KEYS, VALUES, STARTS), LIFECYCLE), max_size=40),
       retention=st.sampled_from([0, 15, 30_000, 70_000, 200_000]), key=KEYS,
       lo=st.integers(-10, 260_000), hi=st.integers(-10, 260_000))
def test_window_store_matches_the_in_memory_store(pool: Any, ops: list,
                                                  retention: int, key: Any, lo: int,
                                                  hi: int) -> None:
    databases = pool("w")
    ours = _Persistent(*databases.take(),
                       lambda ks: RocksDBWindowStore("s", _STR, 10, retention, ks))
    failed = True
    ref = InMemoryWindowStore("s", _STR, 10, retention)
    writes: list[tuple[Any, Any, int]] = []
    committed = 0
    fresh = True  # no reopen or rollback yet: ``written`` is comparable
    try:
        for op in ops:
            if isinstance(op, str):
                ours.lifecycle(op)
                fresh = fresh and op == "commit"
                if op == "rollback":  # replay the committed writes into a fresh reference
                    del writes[committed:]
                    ref = InMemoryWindowStore("s", _STR, 10, retention)
                    for w_key, w_value, w_start in writes:
                        ref.put(w_key, w_value, w_start)
                committed = len(writes)
                continue
            w_key, value, start = op
            writes.append(op)
            ours.store.put(w_key, value, start)
            ref.put(w_key, value, start)
            assert ours.store.fetch(w_key, start) == ref.fetch(w_key, start)
            assert ours.store.written == ref.written or not fresh
            ours.store._check()
        assert _window_state(ours.store, key, lo, hi) == _window_state(
            ref, key, lo, hi, ours.store.segment_interval_ms)
        failed = False
    finally:
        databases.give_back(ours.db, failed)


def test_in_memory_window_store_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="window_size_ms"):
        InMemoryWindowStore("w", _STR, -1, 100)
    with pytest.raises(ValueError, match="retention_ms"):
        InMemoryWindowStore("w", _STR, 10, -1)
    with pytest.raises(TypeError, match="window_size_ms"):
        InMemoryWindowStore("w", _STR, 1.5, 100)  # type: ignore[arg-type]
