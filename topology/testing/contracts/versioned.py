"""The contract every versioned key-value store backend must pass.

``check_versioned_store(factory)`` runs named checks against stores made by ``factory`` and
raises ``AssertionError`` naming the first check that fails. The checks cover argument
validation, Kafka's semantics (KIP-889/KIP-968: return codes, grace, retention edge cases,
overlap queries across segments, restore), the extras (history, purge, guarded writes, key
scans, versions since a time, ``max_versions``, watch), and a seeded differential run of random
operations against a naive reference model.
"""

from __future__ import annotations

import datetime as _dt
import random
from collections.abc import Callable
from functools import partial
from typing import Any

from ...state.api import (
    PUT_RETURN_CODE_NOT_PUT,
    PUT_RETURN_CODE_VALID_TO_UNDEFINED,
    Operation,
    StoreClosedError,
    VersionedKeyValueStore,
    VersionedRecord,
    VersionEntry,
)
from ...state.versioned import default_segment_interval
from ._versioned_model import VersionedModel

__all__ = ("VersionedStoreFactory", "check_versioned_store")

VersionedStoreFactory = Callable[..., VersionedKeyValueStore]
"""``factory(**options)`` -> a new, empty store (see :func:`check_versioned_store`)."""

NOT_PUT = PUT_RETURN_CODE_NOT_PUT
LATEST = PUT_RETURN_CODE_VALID_TO_UNDEFINED
R = VersionedRecord
_CHECKS: list[Callable[[VersionedStoreFactory], None]] = []


def _check(fn: Callable[[VersionedStoreFactory], None]) -> Callable[[VersionedStoreFactory], None]:
    _CHECKS.append(fn)
    return fn


def _expect_error(error: type[BaseException], call: Callable[[], Any], what: str) -> None:
    try:
        call()
    except error:
        return
    except Exception as other:  # noqa: BLE001 - reported as a contract failure
        raise AssertionError(f"{what}: expected {error.__name__}, got {other!r}") from other
    raise AssertionError(f"{what}: expected {error.__name__}, nothing was raised")


def _same(got: Any, expected: Any, what: str) -> None:
    if got != expected:
        raise AssertionError(f"{what}: got {got!r}, expected {expected!r}")


class _Store:
    """A store made by the factory, closed on exit."""

    def __init__(self, factory: VersionedStoreFactory, **options: Any) -> None:
        self.store = factory(**options)

    def __enter__(self) -> Any:
        return self.store

    def __exit__(self, *exc_info: object) -> None:
        self.store.close()


# -- configuration and arguments ---------------------------------------------------------------


@_check
def configuration_is_validated(factory: VersionedStoreFactory) -> None:
    """Bad options raise naming the option; defaults follow Kafka."""
    for options, error in (({"history_retention_ms": -1}, ValueError),
                           ({"history_retention_ms": 1.5}, TypeError),
                           ({"history_retention_ms": 10, "segment_interval_ms": 0}, ValueError),
                           ({"history_retention_ms": 10, "max_versions": 0}, ValueError),
                           ({"history_retention_ms": 10, "max_versions": 1.0}, TypeError)):
        _expect_error(error, lambda options=options: factory(**options),  # type: ignore[misc]
                      f"factory({options})")
    for hr in (0, 59_999, 300_000, 3_600_000, 86_400_000):
        with _Store(factory, history_retention_ms=hr) as s:
            _same(s.segment_interval_ms, default_segment_interval(hr),
                  f"default segment interval for history retention {hr}")
            _same(s.history_retention_ms, hr, "history_retention_ms")
    with _Store(factory, history_retention_ms=_dt.timedelta(seconds=2),
                segment_interval_ms=_dt.timedelta(milliseconds=500), max_versions=3) as s:
        _same((s.history_retention_ms, s.segment_interval_ms, s.max_versions), (2000, 500, 3),
              "timedelta durations")
        _same((s.observed_stream_time, s.dropped_records), (-1, 0), "fresh store")


@_check
def arguments_are_validated(factory: VersionedStoreFactory) -> None:
    """None keys, non-int or negative timestamps and empty time ranges raise at once."""
    with _Store(factory, history_retention_ms=100) as s:
        for name, call in (("put", lambda: s.put(None, "v", 1)),
                           ("get", lambda: s.get(None)),
                           ("delete", lambda: s.delete(None, 1)),
                           ("get_versions", lambda: s.get_versions(None)),
                           ("history", lambda: s.history(None)),
                           ("purge", lambda: s.purge(None, 1)),
                           ("create", lambda: s.create(None, "v", 1)),
                           ("update", lambda: s.update(None, "v", 1, 1))):
            _expect_error(ValueError, call, f"{name} with a None key")
        bad_times: list[tuple[Any, type[Exception]]] = [
            (1.0, TypeError), ("1", TypeError), (True, TypeError), (-1, ValueError),
            (2**63, ValueError)]
        for bad, error in bad_times:
            calls: list[tuple[str, Callable[[], Any]]] = [
                ("put at", partial(s.put, "k", "v", bad)), ("get as of", partial(s.get, "k", bad)),
                ("delete at", partial(s.delete, "k", bad)),
                ("get_versions from", partial(s.get_versions, "k", bad))]
            for what, call in calls:
                _expect_error(error, call, f"{what} {bad!r}")
        _expect_error(ValueError, lambda: s.get_versions("k", 5, 4), "from_time > to_time")
        _expect_error(ValueError, lambda: s.create("k", None, 1), "create with None")
        _expect_error(ValueError, lambda: s.update("k", None, 1, 1), "update with None")
        _expect_error(ValueError, lambda: s.range("b", "a"), "range from > to")
        _expect_error(ValueError, lambda: s.scan_versions(limit_per_key=0), "limit 0")
        _expect_error(ValueError, lambda: s.watch(include_history=True, updates_only=True),
                      "watch(include_history, updates_only)")
        _expect_error(ValueError, lambda: s.watch(key="a", key_prefix=b"a"), "two key filters")
        _same((s.observed_stream_time, s.dropped_records), (-1, 0),
              "state after refused calls")
    s = factory(history_retention_ms=100)
    s.close()
    s.close()
    _same(s.is_open, False, "is_open after close")
    for name, call in (("put", lambda: s.put("k", "v", 1)), ("get", lambda: s.get("k")),
                       ("get_versions", lambda: s.get_versions("k")), ("keys", s.keys)):
        _expect_error(StoreClosedError, call, f"{name} after close")


# -- Kafka's semantics -----------------------------------------------------------------------


@_check
def put_return_codes_and_reads(factory: VersionedStoreFactory) -> None:
    """Put returns -1 for a latest version, else its valid_to; tombstones are never read."""
    with _Store(factory, history_retention_ms=300_000, segment_interval_ms=100_000) as s:
        _same([s.put("k", "v1", 10), s.put("k", "v3", 30), s.put("k", "v2", 20),
               s.put("k", None, 25), s.put("k", "v2b", 20), s.put("k", "", 40)],
              [LATEST, LATEST, 30, 30, 25, LATEST], "put return codes")
        _same(s.get("k"), R("", 40), "empty value is a value")
        _same([s.get("k", t) for t in (9, 10, 24, 25, 29, 35, 10**12)],
              [None, R("v1", 10, 20), R("v2b", 20, 25), None, None, R("v3", 30, 40),
               R("", 40)], "get as of")
        _same(s.put("k", None, 50), LATEST, "latest tombstone")
        _same((s.get("k"), s.get("k", 50), s.get("k", 45)), (None, None, R("", 40, 50)),
              "reads after a latest tombstone")
        _same(s.put("fresh", None, 5), LATEST, "tombstone for an absent key")
        _same(s.put("fresh", "old", 1), 5, "put below a lone tombstone gets valid_to")


@_check
def grace_and_dropped_records(factory: VersionedStoreFactory) -> None:
    """Writes older than stream time - retention are rejected, counted; the boundary passes."""
    with _Store(factory, history_retention_ms=100) as s:
        s.put("k", "a", 1000)
        _same(s.put("k", "b", 900), 1000, "boundary write accepted")
        _same(s.put("k", "c", 899), NOT_PUT, "write before the boundary")
        _same(s.delete("k", 899), None, "delete before the boundary")
        _same(s.purge("k", 899), False, "purge before the boundary")
        _same(s.create("new", "v", 899), False, "create before the boundary")
        _same(s.update("k", "v", 899, 1000), False, "update before the boundary")
        _same(s.dropped_records, 5, "dropped_records")
        _same(s.observed_stream_time, 1000, "rejected writes leave stream time alone")
        s.get("k", 5000)
        _same(s.observed_stream_time, 1000, "reads leave stream time alone")
        _same(s.get("k", 950), R("b", 900, 1000), "history kept after rejections")
    with _Store(factory, history_retention_ms=0) as s:
        _same([s.put("k", "v", 10), s.put("k", "w", 10), s.put("k", "x", 9)],
              [LATEST, LATEST, NOT_PUT], "zero retention: same timestamp replaces")
        _same((s.get("k", 10), s.get("k", 9)), (R("w", 10), None), "zero retention reads")


@_check
def delete_returns_the_record_as_of_its_time(factory: VersionedStoreFactory) -> None:
    """Delete returns what get(key, ts) gave before it, and records a tombstone regardless."""
    with _Store(factory, history_retention_ms=1000) as s:
        s.put("k", "a", 10)
        s.put("k", "b", 30)
        _same(s.delete("k", 20), R("a", 10, 30), "delete between versions")
        _same(s.delete("k", 20), None, "second delete at the same time")
        _same(s.get("k", 25), None, "tombstone hides the earlier value")
        _same(s.delete("k", 30), R("b", 30), "delete replacing the latest value")
        _same(s.delete("absent", 40), None, "delete of an absent key")
        _same(s.put("absent", "x", 35), 40, "its tombstone still bounds an earlier put")


@_check
def retention_edge_of_as_of_reads(factory: VersionedStoreFactory) -> None:
    """Before the cutoff only the latest value answers; the cutoff itself is kept."""
    with _Store(factory, history_retention_ms=100, segment_interval_ms=1_000_000) as s:
        s.put("k", "a", 0)
        s.put("k", "b", 50)
        s.put("other", "x", 200)
        _same(s.get("k", 100), R("b", 50), "as of the cutoff")
        _same(s.get("k", 99), R("b", 50), "as of before the cutoff: latest qualifies")
        _same(s.get("k", 49), None, "history hidden though physically kept")
        s.put("k", "c", 150)
        _same((s.get("k", 100), s.get("k", 99)), (R("b", 50, 150), None), "latest too new")
        _same(s.get_versions("k", 0, 99), [], "query ending before the cutoff")
        _same(s.get_versions("k", 0, 100), [R("b", 50, 150)], "query ending at the cutoff")
        _same(s.get("k"), R("c", 150), "latest never expires")


@_check
def expiry_never_hides_visible_history(factory: VersionedStoreFactory) -> None:
    """Whatever physical expiry does, reads at the cutoff see what was current then."""
    with _Store(factory, history_retention_ms=10, segment_interval_ms=1) as s:
        s.put("k", "a", 0)
        s.put("k", "b", 11)
        s.put("k", "c", 13)
        s.put("m", "x", 0)
        s.delete("m", 15)
        s.put("clock", "t", 20)
        _same(s.get("k", 10), R("a", 0, 11), "value current at the cutoff")
        _same([e.value for e in s.history("k")], ["c", "b", "a"], "history at the cutoff")
        s.restore([("k", "late", 9)])
        _same(s.get("k", 9), None, "restore below the cutoff is skipped")
        s.put("clock", "t", 22)
        _same((s.get("k", 12), s.get("k", 10)), (R("b", 11, 13), None), "cutoff at 12")
        _same([e.value for e in s.history("k")], ["c", "b"], "history with the cutoff at 12")
        s.put("clock", "t", 23)
        _same([e.value for e in s.history("k")], ["c"], "history with the cutoff at 13")
        s.put("clock", "t", 25)
        _same([(e.timestamp, e.operation) for e in s.history("m", include_deletes=True)],
              [(15, Operation.DELETE)], "a marker at the cutoff is visible")
        s.put("clock", "t", 26)
        _same(s.history("m", include_deletes=True), [], "a marker before the cutoff is not")
        _same(s.scan_versions(include_deletes=True, from_key="m", to_key="m"), [],
              "nor in scans")
        _same(s.create("m", "y", 16), True, "create over an expired marker")
        _same(s.get_versions("m"), [R("y", 16)], "the key is new again")


@_check
def multi_version_queries_overlap(factory: VersionedStoreFactory) -> None:
    """get_versions returns every version overlapping [from, to], across segments."""
    with _Store(factory, history_retention_ms=1000, segment_interval_ms=100) as s:
        s.put("k", "v1", 90)
        s.put("k", "v2", 150)
        s.put("k", "v3", 250)
        v1, v2, v3 = R("v1", 90, 150), R("v2", 150, 250), R("v3", 250)
        _same(s.get("k", 95), v1, "as of 95")
        _same(s.get_versions("k", 80, 95), [v1], "version whose valid_to is a later segment")
        _same(s.get_versions("k", 80, 150), [v1, v2], "inclusive upper bound")
        _same(s.get_versions("k", 150, 150), [v2], "single instant")
        _same(s.get_versions("k", 149, 150, descending=True), [v2, v1], "descending")
        _same(s.get_versions("k"), [v1, v2, v3], "unbounded")
        _same(s.get_versions("k", 251), [v3], "latest overlaps the future")
        _same(s.get_versions("k", to_time=89), [], "before the first version")
        s.put("k", None, 300)
        _same(s.get_versions("k", 260, 400), [R("v3", 250, 300)], "tombstones never returned")
        _same(s.get_versions("nobody"), [], "absent key")


@_check
def restore_replays_with_kafka_rules(factory: VersionedStoreFactory) -> None:
    """Restore skips records older than grace without counting; the rest are puts."""
    with _Store(factory, history_retention_ms=300_000) as s:
        s.restore([("k", "v", 300_010), ("k1", "v1", 10), ("k2", "v2", 9), ("k", None, 300_020),
                   ("k", "w", 300_015)])
        _same((s.get("k1"), s.get("k2"), s.get("k"), s.get("k", 300_016)),
              (R("v1", 10), None, None, R("w", 300_015, 300_020)), "restored state")
        _same(s.dropped_records, 0, "restore never counts")
        _same(s.observed_stream_time, 300_020, "restore moves stream time")
        _expect_error(TypeError, lambda: s.restore([("k", "v")]), "restore of a pair")
    with _Store(factory, history_retention_ms=100) as s:  # part of a store's keys
        s.restore([("k", "a", 10), ("k", "b", 50)], observed_stream_time=400)
        _same(s.observed_stream_time, 400, "restore moves stream time to the one given")
        _same((s.get("k", 310), s.get("k", 40)), (R("b", 50), None), "reads at the time given")
        _same(s.put("k", "c", 250), PUT_RETURN_CODE_NOT_PUT, "writes judged at the time given")
        _expect_error(ValueError, lambda: s.restore([], observed_stream_time=-2),
                      "a negative observed stream time")


# -- the extras -------------------------------------------------------------------------------


@_check
def history_and_purge(factory: VersionedStoreFactory) -> None:
    """History lists visible versions; purge keeps only its marker, delete keeps history."""
    with _Store(factory, history_retention_ms=1000) as s:
        s.put("k", "a", 10)
        s.delete("k", 20)
        s.put("k", "b", 30)
        entries = s.history("k", include_deletes=True)
        _same([(e.value, e.timestamp, e.valid_to, e.operation) for e in entries],
              [("b", 30, None, Operation.PUT), (None, 20, 30, Operation.DELETE),
               ("a", 10, 20, Operation.PUT)], "history newest first with deletes")
        _same([e.value for e in s.history("k", newest_first=False)], ["a", "b"],
              "history oldest first, values only")
        _same(s.purge("k", 25), True, "purge")
        _same((s.get("k"), s.get("k", 15), s.get("k", 40), s.get_versions("k")),
              (None, None, None, []), "a purged key reads as absent")
        _same([(e.operation, e.timestamp) for e in s.history("k", include_deletes=True)],
              [(Operation.PURGE, 25)], "only the purge marker remains")
        _same(s.keys(), [], "purged key not listed")
        _same(s.put("k", "c", 24), 25, "a write below the marker ends at it")
        _same(s.get("k"), None, "the marker stays latest")


@_check
def guarded_writes(factory: VersionedStoreFactory) -> None:
    """Create needs no current value; update needs the current value's timestamp."""
    with _Store(factory, history_retention_ms=1000) as s:
        _same(s.create("k", "a", 10), True, "create on an absent key")
        _same(s.create("k", "b", 20), False, "create on a present key")
        _same(s.update("k", "b", 20, 11), False, "update with a stale timestamp")
        _same(s.update("k", "b", 5, 10), False, "update that would not be the latest")
        _same(s.update("k", "b", 20, 10), True, "update with the current timestamp")
        _same(s.update("k", "c", 20, 20), True, "update at the same timestamp replaces")
        s.delete("k", 30)
        _same(s.update("k", "d", 40, 30), False, "update of a deleted key")
        _same(s.create("k", "d", 25), False, "create older than the delete")
        _same(s.create("k", "d", 40), True, "create after a delete")
        _same(s.dropped_records, 0, "failed guards are not dropped records")
        _same(s.get("k"), R("d", 40), "state after guarded writes")


@_check
def key_ordered_scans(factory: VersionedStoreFactory) -> None:
    """keys/range/reverse_range by key bytes, latest values only; reverse == reversed."""
    with _Store(factory, history_retention_ms=1000) as s:
        for i, key in enumerate(["b", "a", "d", "c", "é", "B"]):
            s.put(key, key.upper(), i)
        s.delete("c", 10)
        _same(s.keys(), ["B", "a", "b", "d", "é"], "keys in byte order without deleted")
        _same([k for k, _ in s.range("a", "d")], ["a", "b", "d"], "inclusive range")
        _same([k for k, _ in s.range(None, "b")], ["B", "a", "b"], "open lower bound")
        _same([k for k, _ in s.range("c")], ["d", "é"], "open upper bound")
        for lo, hi in ((None, None), ("a", "d"), ("b", None), ("zz", None)):
            _same(s.reverse_range(lo, hi), s.range(lo, hi)[::-1], f"reverse_range({lo}, {hi})")
        _same(s.range("a", "a"), [("a", R("A", 1))], "single-key range")


@_check
def versions_since_a_time(factory: VersionedStoreFactory) -> None:
    """scan_versions: per key in byte order, versions with timestamp >= since, newest first."""
    with _Store(factory, history_retention_ms=1000) as s:
        s.put("a", 1, 10)
        s.put("a", 2, 20)
        s.put("a", 3, 30)
        s.put("b", 4, 5)
        s.delete("b", 25)
        got = [(e.key, e.value, e.timestamp) for e in s.scan_versions(since=20)]
        _same(got, [("a", 3, 30), ("a", 2, 20)], "since 20")
        ops = [(e.key, e.operation) for e in s.scan_versions(since=20, include_deletes=True)]
        _same(ops, [("a", Operation.PUT), ("a", Operation.PUT), ("b", Operation.DELETE)],
              "with deletes")
        pairs = [(e.key, e.value) for e in s.scan_versions("a", "b", limit_per_key=1)]
        _same(pairs, [("a", 3), ("b", 4)], "newest per key")


@_check
def max_versions_policy(factory: VersionedStoreFactory) -> None:
    """The oldest versions beyond max_versions go; the latest stays; markers count."""
    with _Store(factory, history_retention_ms=10_000, max_versions=2) as s:
        for t in (10, 20, 30):
            s.put("k", f"v{t}", t)
        _same([r.timestamp for r in s.get_versions("k")], [20, 30], "oldest dropped")
        _same(s.get("k", 15), None, "dropped history reads as absent")
        _same(s.put("k", "old", 5), NOT_PUT, "a write that would be dropped at once")
        _same(s.dropped_records, 1, "counted")
        _same(s.put("k", "mid", 25), 30, "a write between kept versions")
        _same([r.timestamp for r in s.get_versions("k")], [25, 30], "after the middle write")
        s.delete("k", 40)
        _same([e.timestamp for e in s.history("k", include_deletes=True)], [40, 30],
              "a delete marker counts as a version")
    with _Store(factory, history_retention_ms=10_000, max_versions=1) as s:
        s.put("k", "a", 10)
        s.put("k", "b", 20)
        _same((s.get("k"), s.get_versions("k")), (R("b", 20), [R("b", 20)]), "latest only")


@_check
def watch_delivers_changes(factory: VersionedStoreFactory) -> None:
    """Synchronous events for accepted writes only; filters; initial state; close."""
    with _Store(factory, history_retention_ms=10) as s:
        s.put("a", "a0", 10)
        s.put("b", "b0", 10)
        s.delete("b", 20)
        every = s.watch()
        _same([(e.key, e.operation) for e in every.drain()],
              [("a", Operation.PUT), ("b", Operation.DELETE)], "initial latest state")
        history = s.watch(include_history=True, ignore_deletes=True)
        _same([(e.key, e.value) for e in history.drain()], [("a", "a0"), ("b", "b0")],
              "initial history without deletes")
        seen: list[VersionEntry] = []
        only_b = s.watch(seen.append, key="b", updates_only=True)
        prefix = s.watch(key_prefix=b"a", updates_only=True)
        ranged = s.watch(from_key="b", to_key="c", updates_only=True)
        s.put("b", "b1", 15)
        s.put("a", "a1", 30)
        s.put("a", "late", 5)
        s.purge("b", 40)
        s.create("a", "nope", 50)
        _same([(e.value, e.timestamp, e.valid_to, e.operation) for e in seen],
              [("b1", 15, 20, Operation.PUT), (None, 40, None, Operation.PURGE)],
              "single-key callback events")
        _same([(e.key, e.value) for e in prefix.drain()], [("a", "a1")],
              "prefix watcher (a rejected write delivers nothing)")
        _same([e.key for e in ranged.drain()], ["b", "b"], "range watcher")
        _same([e.key for e in every.drain()], ["b", "a", "b"], "watch-all events")
        _same([e.value for e in history.drain()], ["b1", "a1"], "ignore_deletes skips purge")
        every.close()
        s.put("a", "a2", 60)
        _same(every.drain(), [], "closed watcher gets nothing")
        _same([e.value for e in prefix.drain()], ["a2"], "other watchers unaffected")
        _expect_error(RuntimeError, only_b.drain, "drain on a callback watcher")
        writer = s.watch(lambda e: s.put("x", "y", 70), updates_only=True)
        _expect_error(RuntimeError, lambda: s.put("a", "a3", 70), "write from a callback")
        writer.close()


@_check
def matches_the_reference_model(factory: VersionedStoreFactory) -> None:
    """Seeded random operation sequences give the same results and state as the model."""
    for seed in range(60):
        rng = random.Random(seed)
        options: dict[str, Any] = {"history_retention_ms": rng.choice([0, 5, 20, 60])}
        if rng.random() < 0.5:
            options["segment_interval_ms"] = rng.choice([1, 3, 10, 50])
        if rng.random() < 0.3:
            options["max_versions"] = rng.choice([1, 2, 3])
        model = VersionedModel(options["history_retention_ms"], options.get("max_versions"))
        with _Store(factory, **options) as store:
            watcher = store.watch(updates_only=True)
            for step in range(80):
                name, args = _random_op(rng)
                got = getattr(store, name)(*args)
                expected = getattr(model, name)(*args)
                _same(got, expected, f"seed {seed} step {step}: {name}{args} with {options}")
            _same(watcher.drain(), model.events, f"seed {seed}: watch events")
            _same(_state(store, model), model.state(), f"seed {seed}: final state")


_KEYS = ["a", "b", "c", "ab"]


def _random_op(rng: random.Random) -> tuple[str, tuple[Any, ...]]:
    key = rng.choice(_KEYS)
    t = rng.randrange(0, 120)
    kind = rng.random()
    if kind < 0.35:
        return "put", (key, rng.choice(["x", "y", "", None]), t)
    if kind < 0.45:
        return "delete", (key, t)
    if kind < 0.6:
        return "get", (key, rng.choice([None, t]))
    if kind < 0.7:
        lo = rng.choice([None, t])
        hi = rng.choice([None, t + rng.randrange(0, 40)])
        return "get_versions", (key, lo, hi, rng.random() < 0.5)
    if kind < 0.74:
        return "purge", (key, t)
    if kind < 0.8:
        return "create", (key, "c", t)
    if kind < 0.86:
        return "update", (key, "u", t, rng.randrange(0, 120))
    if kind < 0.9:
        return "restore", ([(rng.choice(_KEYS), rng.choice(["r", None]), rng.randrange(0, 120))
                            for _ in range(rng.randrange(0, 4))],)
    if kind < 0.95:
        return "scan_versions", (rng.choice([None, "a"]), rng.choice([None, "b"]),
                                 rng.choice([None, t]), rng.choice([None, 1, 2]),
                                 rng.random() < 0.5)
    return "history", (key, rng.random() < 0.5, rng.random() < 0.5)


def _state(store: Any, model: VersionedModel) -> dict[str, Any]:
    keys = model.sorted_keys()
    return {
        "keys": store.keys(),
        "range": store.range(),
        "history": {k: store.history(k, include_deletes=True) for k in keys
                    if store.history(k, include_deletes=True)},
        "versions": {k: store.get_versions(k) for k in keys},
        "dropped": store.dropped_records,
        "observed": store.observed_stream_time,
    }


def check_versioned_store(factory: VersionedStoreFactory) -> list[str]:
    """Check a versioned store backend against the contract; return the checks' names.

    ``factory(**options)`` must return a new, empty store each call, for ``str`` keys
    serialized as UTF-8 and ``str`` values (``""`` included). ``options`` are the store's
    keyword options: ``history_retention_ms`` (always given), ``segment_interval_ms`` and
    ``max_versions`` (given only when a check sets them); invalid options must raise from
    the factory. The checks close every store they make.

    Runtime complexity: a few seconds for an in-memory backend (the differential run makes
    60 stores of 80 random operations each).

    :raises AssertionError: naming the first failing check, the operation and both results.

    >>> from topology.state.memory import InMemoryVersionedKeyValueStore
    >>> names = check_versioned_store(
    ...     lambda **o: InMemoryVersionedKeyValueStore("s", str.encode, **o))
    >>> "multi_version_queries_overlap" in names
    True
    """
    names = []
    for check in _CHECKS:
        try:
            check(factory)
        except AssertionError as failure:
            raise AssertionError(f"check_versioned_store: {check.__name__}: {failure}") from None
        names.append(check.__name__)
    return names
