"""Deterministic tests of the versioned store's API details and the in-memory backend.

The semantics every backend shares are in the contract checker and the model tests; this
module covers error messages, key serializers, watch error handling, physical expiry and
memory of the in-memory backend, and the user documentation's examples.
"""

from __future__ import annotations

import datetime as dt
import doctest
from pathlib import Path
from typing import Any

import pytest

from topology.state.api import (
    PUT_RETURN_CODE_NOT_PUT,
    PUT_RETURN_CODE_VALID_TO_UNDEFINED,
    Operation,
    StoreClosedError,
    StoreWatcher,
    VersionedKeyValueStore,
    VersionedRecord,
    VersionEntry,
)
from topology.state.memory import InMemoryVersionedKeyValueStore

DOCS = Path(__file__).parent.parent.parent / "docs" / "versioned.md"


def store(**options: Any) -> InMemoryVersionedKeyValueStore:
    options.setdefault("history_retention_ms", 100)
    return InMemoryVersionedKeyValueStore("s", str.encode, **options)


def test_constants_and_protocols() -> None:
    assert PUT_RETURN_CODE_VALID_TO_UNDEFINED == -1
    assert PUT_RETURN_CODE_NOT_PUT == -(2**63)
    s = store()
    assert isinstance(s, VersionedKeyValueStore)
    assert isinstance(s.watch(), StoreWatcher)
    assert s.persistent is False and s.name == "s"
    assert repr(s) == ("InMemoryVersionedKeyValueStore('s', history_retention_ms=100, "
                       "segment_interval_ms=2000, max_versions=None)")
    entry = VersionEntry("k", None, 5, 7, Operation.PURGE)
    assert (entry.is_latest, entry.is_delete, Operation.PURGE == "purge") == (False, True, True)


@pytest.mark.parametrize(("options", "error", "message"), [
    ({"history_retention_ms": -1}, ValueError, "history_retention_ms must not be negative"),
    ({"history_retention_ms": "1"}, TypeError, "history_retention_ms must be an int"),
    ({"history_retention_ms": 2**63}, ValueError, "history_retention_ms must be at most"),
    ({"segment_interval_ms": 0}, ValueError, "segment_interval_ms must be at least 1"),
    ({"segment_interval_ms": 1.0}, TypeError, "segment_interval_ms must be an int"),
    ({"max_versions": 0}, ValueError, "max_versions must be at least 1"),
    ({"max_versions": True}, TypeError, "max_versions must be an int"),
])
def test_configuration_errors_name_the_option(options: dict[str, Any], error: type[Exception],
                                              message: str) -> None:
    with pytest.raises(error, match=message):
        store(**options)


def test_name_and_serializer_are_checked() -> None:
    with pytest.raises(ValueError, match="name must be a non-empty str"):
        InMemoryVersionedKeyValueStore("", str.encode, 10)
    with pytest.raises(TypeError, match="key_serializer must be callable"):
        InMemoryVersionedKeyValueStore("s", b"k", 10)  # type: ignore[arg-type]
    s = InMemoryVersionedKeyValueStore("s", str.encode, dt.timedelta(minutes=1))
    assert (s.history_retention_ms, s.segment_interval_ms) == (60_000, 20_000)


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda s: s.put("k", "v", 1.5), TypeError, "timestamp must be an int of milliseconds"),
    (lambda s: s.put("k", "v", -3), ValueError, "timestamp must be a non-negative int"),
    (lambda s: s.get("k", as_of=-1), ValueError, "as_of must be a non-negative"),
    (lambda s: s.get("k", as_of="5"), TypeError, "as_of must be an int"),
    (lambda s: s.get_versions("k", 3, 2), ValueError, r"from_time \(3\) must not be greater"),
    (lambda s: s.get_versions("k", to_time=-1), ValueError, "to_time must be a non-negative"),
    (lambda s: s.get_versions("k", descending=1), TypeError, "descending must be a bool"),
    (lambda s: s.update("k", "v", 5, -1), ValueError, "expected_timestamp must be"),
    (lambda s: s.scan_versions(since=-1), ValueError, "since must be"),
    (lambda s: s.scan_versions(limit_per_key=True), TypeError, "limit_per_key must be an int"),
    (lambda s: s.history("k", newest_first=None), TypeError, "newest_first must be a bool"),
    (lambda s: s.watch(callback=5), TypeError, "callback must be callable"),
    (lambda s: s.watch(key_prefix="a"), TypeError, "key_prefix must be bytes"),
    (lambda s: s.watch(from_key="b", to_key="a"), ValueError, "serializes after to_key"),
    (lambda s: s.restore([("k", "v", 1, 2)]), TypeError, r"\(key, value, timestamp\) triples"),
    (lambda s: s.restore([(None, "v", 1)]), ValueError, "restored key must not be None"),
    (lambda s: s.put(None, "v", 1), ValueError, "key must not be None"),
    (lambda s: s.get(["unhashable"]), TypeError, "unhashable"),
])
def test_argument_errors_name_the_argument(call: Any, error: type[Exception],
                                           message: str) -> None:
    s = store()
    with pytest.raises(error, match=message):
        call(s)
    assert (s.observed_stream_time, s.dropped_records, s.keys()) == (-1, 0, [])


def test_closed_store_refuses_every_call() -> None:
    s = store()
    watcher = s.watch()
    s.put("k", "v", 1)
    s.close()
    assert watcher.closed and not s.is_open
    assert [e.value for e in watcher.drain()] == ["v"]
    with pytest.raises(StoreClosedError, match="versioned store 's' is closed"):
        s.get("k", as_of=1)
    with pytest.raises(StoreClosedError):
        s.watch()
    with pytest.raises(StoreClosedError):
        s.restore([])
    with InMemoryVersionedKeyValueStore("t", str.encode, 1) as t:
        t.put("k", "v", 1)
    assert not t.is_open


# -- key serializers ---------------------------------------------------------------------------


def test_a_serializer_that_returns_no_bytes_fails_before_any_change() -> None:
    s = InMemoryVersionedKeyValueStore("s", lambda k: k, 100)
    with pytest.raises(TypeError, match="key_serializer must return bytes, got str for key 'k'"):
        s.put("k", "v", 10)
    assert (s.get("k"), s.observed_stream_time, s.keys()) == (None, -1, [])
    with pytest.raises(TypeError, match="key_serializer must return bytes"):
        s.purge("k", 10)


def test_distinct_keys_with_the_same_bytes_are_refused() -> None:
    s = InMemoryVersionedKeyValueStore("s", lambda k: str(k).encode(), 100)
    s.put(1, "one", 10)
    with pytest.raises(ValueError, match="keys 1 and '1' the same bytes b'1'"):
        s.put("1", "other", 11)
    assert s.range() == [(1, VersionedRecord("one", 10))]
    assert s.observed_stream_time == 10


def test_keys_of_a_user_serializer_are_found_by_their_bytes_and_bytearrays_accepted() -> None:
    calls: list[Any] = []

    def serializer(key: Any) -> bytearray:
        calls.append(key)
        return bytearray(key.to_bytes(4, "big"))

    s = InMemoryVersionedKeyValueStore("s", serializer, 100)
    for t in range(5):
        s.put(256, t, t)
        s.put(1, t, t)
    s.range()
    s.watch(from_key=1, to_key=256, updates_only=True)
    s.put(1, "x", 9)
    assert set(calls) == {256, 1}
    assert s.keys() == [1, 256] and s.get(1) == VersionedRecord("x", 9)
    s._check()


# -- in-memory physical expiry ----------------------------------------------------------------


def test_expired_history_is_dropped_physically_and_reads_do_not_change() -> None:
    s = store(history_retention_ms=100, segment_interval_ms=10)
    for t in range(0, 1000, 5):
        s.put("k", t, t)
        s.put(f"gone-{t}", "x", t)
        s.delete(f"gone-{t}", t + 1)
    s._check()
    timestamps, _ = s._data[s._id("k")]
    assert timestamps[0] >= 1000 - 5 - 100 - 10 - 5, "old versions were dropped"
    assert len([k for k in s._order.values() if k.startswith("gone-")]) <= 24, \
        "expired tombstones"
    assert s.observed_stream_time - s.history_retention_ms == 896
    assert s.get("k", 896) == VersionedRecord(895, 895, 900)
    assert s.get("k", 895) is None, "before the cutoff only the latest value could answer"
    assert s.get("k") == VersionedRecord(995, 995)
    assert s.keys() == ["k"]


def test_a_latest_value_never_expires() -> None:
    s = store(history_retention_ms=0, segment_interval_ms=1)
    s.put("old", "v", 0)
    s.put("clock", "t", 10**9)
    s._check()
    assert s.get("old") == VersionedRecord("v", 0) == s.get("old", 5)
    assert s.range() == [("clock", VersionedRecord("t", 10**9)), ("old", VersionedRecord("v", 0))]


def test_restore_skips_silently_and_leaves_watchers_alone() -> None:
    s = store(history_retention_ms=10)
    watcher = s.watch(updates_only=True)
    s.restore(iter([("k", "a", 100), ("k", "b", 89), ("k", None, 95), ("j", "c", 90)]))
    assert (s.get("k"), s.get("k", 94), s.get("j")) == (
        VersionedRecord("a", 100), None, VersionedRecord("c", 90))
    assert (s.dropped_records, watcher.drain()) == (0, [])


def test_max_versions_discarding_a_delete_returns_none_and_counts() -> None:
    s = store(max_versions=1)
    s.put("k", "a", 10)
    assert s.delete("k", 5) is None
    assert s.dropped_records == 1 and s.get("k") == VersionedRecord("a", 10)


# -- watch ------------------------------------------------------------------------------------


def test_watchers_all_get_the_event_before_a_callback_error_propagates() -> None:
    s = store()
    got: list[VersionEntry] = []

    def failing(entry: VersionEntry) -> None:
        raise RuntimeError(f"boom {entry.value}")

    s.watch(failing, updates_only=True)
    s.watch(got.append, updates_only=True)
    with pytest.raises(RuntimeError, match="boom v"):
        s.put("k", "v", 1)
    assert [e.value for e in got] == ["v"] and s.get("k") == VersionedRecord("v", 1)
    s.watch(failing, updates_only=True)
    with pytest.raises(ExceptionGroup, match="2 watch callbacks of store 's' failed"):
        s.put("k", "w", 2)
    assert [e.value for e in got] == ["v", "w"]


def test_a_callback_may_read_and_close_its_watcher() -> None:
    s = store()
    seen: list[Any] = []

    def callback(entry: VersionEntry) -> None:
        seen.append(s.get(entry.key))
        watcher.close()

    watcher = s.watch(callback, updates_only=True)
    s.put("k", "v", 1)
    s.put("k", "w", 2)
    assert seen == [VersionedRecord("v", 1)] and watcher.closed


def test_watch_initial_state_follows_the_filters() -> None:
    s = store()
    for key in ("a1", "a2", "b1"):
        s.put(key, key, 1)
    s.put("a2", "a2'", 2)
    s.delete("a1", 3)
    with s.watch(key_prefix=b"a") as w:
        assert [(e.key, e.value, e.operation) for e in w.drain()] == [
            ("a1", None, Operation.DELETE), ("a2", "a2'", Operation.PUT)]
    with s.watch(key_prefix=b"a", include_history=True, ignore_deletes=True) as w:
        assert [(e.key, e.value, e.valid_to) for e in w.drain()] == [
            ("a1", "a1", 3), ("a2", "a2", 2), ("a2", "a2'", None)]
    with s.watch(key="zz") as w:
        assert w.drain() == []
    with s.watch(key="a1", ignore_deletes=True) as w:
        assert w.drain() == []
    assert s._watchers == []


def test_watch_events_report_whether_the_write_is_latest() -> None:
    s = store()
    with s.watch(updates_only=True) as w:
        s.put("k", "new", 10)
        s.put("k", "old", 5)
        s.update("k", "newer", 12, 10)
        s.delete("k", 12)
        s.create("k", "again", 15)
        assert [(e.value, e.timestamp, e.valid_to, e.operation.value) for e in w.drain()] == [
            ("new", 10, None, "put"), ("old", 5, 10, "put"), ("newer", 12, None, "put"),
            (None, 12, None, "delete"), ("again", 15, None, "put")]


# -- documentation --------------------------------------------------------------------------


def test_the_user_guide_examples_run() -> None:
    failures, tried = doctest.testfile(str(DOCS), module_relative=False,
                                       optionflags=doctest.ELLIPSIS)
    assert tried > 40 and failures == 0
