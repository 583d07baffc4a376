"""The RocksDB versioned store on real StateDBs: commits, restarts and its physical layout.

The shared semantics run against it through the registry (``backends.py``), where its
writes are never committed; here its data goes through RocksDB: committed, reopened,
expired by ``delete_range``, compared with the in-memory backend step by step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from topology.state.api import PUT_RETURN_CODE_NOT_PUT, VersionedRecord
from topology.state.codec import StateCodecError
from topology.state.memory import InMemoryVersionedKeyValueStore
from topology.state.rocksdb import RocksDBVersionedKeyValueStore, StateDB

KEYS = ["a", "b", "ab", "é"]


def open_store(db: StateDB, **options: Any) -> RocksDBVersionedKeyValueStore:
    options.setdefault("history_retention_ms", 100)
    options.setdefault("segment_interval_ms", 10)
    return RocksDBVersionedKeyValueStore("s", str.encode, db.keyspace("versions"), **options)


def state(store: Any, keys: list[str] = KEYS) -> dict[str, Any]:
    """Everything a reader can see, for comparing two stores."""
    return {
        "observed": store.observed_stream_time,
        "range": store.range(),
        "history": {k: store.history(k, include_deletes=True) for k in keys},
        "versions": {k: store.get_versions(k) for k in keys},
        "as_of": {k: [store.get(k, t) for t in range(0, 200, 7)] for k in keys},
    }


def entries(db: StateDB, prefix: bytes) -> list[bytes]:
    return [key for key, _ in db.keyspace("versions").items() if key.startswith(prefix)]


# -- restart ----------------------------------------------------------------------------------


def test_a_reopened_store_sees_the_committed_state_and_stream_time(tmp_path: Path) -> None:
    with StateDB.open(tmp_path) as db:
        store = open_store(db, max_versions=3)
        for t in (5, 25, 15, 40):
            store.put("a", f"a{t}", t)
        store.put("b", ("tuple", 1), 30)
        store.delete("b", 35)
        store.put("ab", 1.5, 10)
        store.purge("ab", 20)
        store.put("é", None, 38)
        before = state(store)
        store._check()
        store.close()
        db.commit()
    with StateDB.open(tmp_path) as db:
        store = open_store(db, max_versions=3)
        store._check()
        assert state(store) == before
        assert store.observed_stream_time == 40 and store.dropped_records == 0
        # grace comes from the restored stream time: 40 - 100 < 0, so anything goes; move on
        assert store.put("a", "late", 150) == -1
    with StateDB.open(tmp_path) as db:  # that write was not committed
        store = open_store(db, max_versions=3)
        assert state(store) == before


def test_uncommitted_writes_and_stream_time_are_lost_on_reopen(tmp_path: Path) -> None:
    with StateDB.open(tmp_path) as db:
        store = open_store(db)
        store.put("a", "x", 10)
        db.commit()
        store.put("a", "y", 500)
        store.put("b", "z", 20)
    with StateDB.open(tmp_path) as db:
        store = open_store(db)
        assert store.observed_stream_time == 10
        assert (store.get("a"), store.get("b")) == (VersionedRecord("x", 10), None)
        store._check()


def test_a_restored_stream_time_rejects_late_writes(tmp_path: Path) -> None:
    with StateDB.open(tmp_path) as db:
        open_store(db).put("a", "x", 1_000)
        db.commit()
    with StateDB.open(tmp_path) as db:
        store = open_store(db)
        assert store.put("a", "late", 899) == PUT_RETURN_CODE_NOT_PUT
        assert store.dropped_records == 1
        assert store.put("a", "in grace", 900) == 1_000


def test_another_segment_interval_is_refused(tmp_path: Path) -> None:
    with StateDB.open(tmp_path) as db:
        open_store(db, segment_interval_ms=10).put("a", "x", 1)
        db.commit()
        with pytest.raises(ValueError, match="segment_interval_ms=10; open it with that"):
            open_store(db, segment_interval_ms=20)


def test_a_shorter_retention_on_reopen_drops_what_it_expires(tmp_path: Path) -> None:
    with StateDB.open(tmp_path) as db:
        store = open_store(db, history_retention_ms=1_000)
        for t in range(0, 200, 5):
            store.put("a", t, t)
        store.delete("b", 3)
        db.commit()
        assert len(entries(db, b"S")) == 39
    with StateDB.open(tmp_path) as db:
        store = open_store(db, history_retention_ms=50)
        store._check()
        assert entries(db, b"S")[0][1:9] == (14).to_bytes(8, "big"), "segments < 145 // 10"
        assert entries(db, b"Lb") == [], "an expired latest delete marker is forgotten"
        assert store.get("a", 150) == VersionedRecord(150, 150, 155)
        assert store.get("a", 144) is None and store.get("a") == VersionedRecord(195, 195)


# -- physical layout --------------------------------------------------------------------------


def test_expiry_drops_segments_and_forgotten_markers(tmp_path: Path) -> None:
    with StateDB.open(tmp_path) as db:
        store = open_store(db, history_retention_ms=20, segment_interval_ms=10)
        for t in range(0, 1_000, 3):
            store.put("a", t, t)
            store.put(f"gone-{t}", "x", t)
            store.delete(f"gone-{t}", t + 1)
            if t % 30 == 0:
                db.commit()
                store._check()
        db.commit()
        store._check()
        assert len(entries(db, b"S")) <= 3 * 10 + 3, "history beyond retention is gone"
        assert len(entries(db, b"Lgone-")) <= 3 * 4, "keys deleted long ago are forgotten"
        assert store.observed_stream_time - store.history_retention_ms == 980
        assert store.get("a", 980) == VersionedRecord(978, 978, 981)
        assert store.get("a", 979) is None and store.get("a") == VersionedRecord(999, 999)


def test_an_out_of_order_write_leaves_its_predecessor_in_place(tmp_path: Path) -> None:
    with StateDB.open(tmp_path) as db:
        store = open_store(db, history_retention_ms=1_000, segment_interval_ms=10)
        store.put("a", "v1", 1)
        store.put("a", "v3", 95)  # v1 now ends at 95: segment 9
        assert store.put("a", "v2", 42) == 95  # v1 ends at 42, still in segment 9
        db.commit()
        assert [key[1:9] for key in entries(db, b"S")] == [(9).to_bytes(8, "big")] * 2
        assert store.get_versions("a") == [VersionedRecord("v1", 1, 42),
                                            VersionedRecord("v2", 42, 95),
                                            VersionedRecord("v3", 95)]
        store._check()


def test_keys_of_any_codec_type_come_back_from_scans(tmp_path: Path) -> None:
    def serializer(key: Any) -> bytes:
        return repr(key).encode()

    with StateDB.open(tmp_path) as db:
        store = RocksDBVersionedKeyValueStore("s", serializer, db.keyspace("k"), 100)
        store.put(("user", 7), {"name": "x"}, 1)
        store.put(3, [1, None], 2)
        store.put(b"raw", True, 3)
        db.commit()
        assert store.keys() == [("user", 7), 3, b"raw"]  # by bytes: "(" < "3" < "b"
        assert store.get(("user", 7)) == VersionedRecord({"name": "x"}, 1)
        with pytest.raises(StateCodecError, match="type complex"):
            store.put(3, complex(1), 4)
        with pytest.raises(StateCodecError, match="type complex"):
            store.put(complex(0), "v", 4)
        assert store.get(3) == VersionedRecord([1, None], 2) and store.observed_stream_time == 3
        store._check()


def test_distinct_keys_with_the_same_bytes_are_refused(tmp_path: Path) -> None:
    with StateDB.open(tmp_path) as db:
        store = RocksDBVersionedKeyValueStore("s", lambda k: str(k).encode(),
                                              db.keyspace("k"), 100)
        store.put(1, "one", 10)
        with pytest.raises(ValueError, match="keys 1 and '1' the same bytes b'1'"):
            store.put("1", "other", 11)
        with pytest.raises(ValueError, match="the same bytes"):
            store.purge("1", 11)
        assert store.range() == [(1, VersionedRecord("one", 10))]


def test_constructor_checks_and_on_close(tmp_path: Path) -> None:
    calls = []
    with StateDB.open(tmp_path) as db:
        with pytest.raises(TypeError, match="keyspace must be a Keyspace"):
            RocksDBVersionedKeyValueStore("s", str.encode, db, 100)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="on_close must be callable"):
            open_store(db, on_close=42)
        store = open_store(db, on_close=lambda: calls.append(1))
        assert store.persistent is True
        assert repr(store) == ("RocksDBVersionedKeyValueStore('s', history_retention_ms=100, "
                               "segment_interval_ms=10, max_versions=None)")
        store.close()
        store.close()
        assert calls == [1] and not db.closed


# -- committed and reopened, against the in-memory backend --------------------------------------

OPS = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(KEYS), st.none() | st.sampled_from(["x", ""]),
              st.integers(0, 60)),
    st.tuples(st.just("delete"), st.sampled_from(KEYS), st.integers(0, 60)),
    st.tuples(st.just("purge"), st.sampled_from(KEYS), st.integers(0, 60)),
    st.tuples(st.just("create"), st.sampled_from(KEYS), st.just("c"), st.integers(0, 60)),
    st.tuples(st.just("update"), st.sampled_from(KEYS), st.just("u"), st.integers(0, 60),
              st.integers(0, 60)),
    st.tuples(st.just("restore"), st.lists(st.tuples(st.sampled_from(KEYS),
                                                     st.none() | st.just("r"),
                                                     st.integers(0, 60)), max_size=3)),
    st.tuples(st.just("commit")),
    st.tuples(st.just("reopen")),
)


@settings(max_examples=examples(60), deadline=None)  # each reopen costs milliseconds of fsync
@given(retention=st.integers(0, 30), interval=st.sampled_from([1, 3, 10]),
       max_versions=st.none() | st.integers(1, 3), ops=st.lists(OPS, max_size=40))
def test_committed_and_reopened_state_matches_the_memory_backend(
        pool: Any, retention: int, interval: int, max_versions: int | None,
        ops: list[tuple[Any, ...]]) -> None:
    options = {"history_retention_ms": retention, "segment_interval_ms": interval,
               "max_versions": max_versions}
    twin = InMemoryVersionedKeyValueStore("s", str.encode, **options)
    databases = pool("versioned")
    tmp, db = databases.take("versions")  # empty, its meta (interval, stream time) included
    failed = True
    try:
        store = open_store(db, **options)
        for step, (name, *args) in enumerate(ops):
            if name == "commit":
                db.commit()
            elif name == "reopen":
                db.commit()
                db.close()
                db = StateDB.open(tmp)
                store = open_store(db, **options)
            else:
                assert getattr(store, name)(*args) == getattr(twin, name)(*args), step
            store._check()
            assert state(store) == state(twin), f"after step {step}: {name}{tuple(args)}"
        failed = False
    finally:
        databases.give_back(db, failed)
