"""Property tests: every backend against the naive reference model, and feature properties.

The model (``topology.testing.contracts._versioned_model.VersionedModel``) is a dict of
sorted lists with the rules written out plainly, sharing no code with the stores. Backends
come from the registry in ``backends.py``; the in-memory store's ``_check()`` runs after
every operation.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from hypothesis_profiles import examples

from topology.state.api import PUT_RETURN_CODE_NOT_PUT, Operation
from topology.testing.contracts._versioned_model import VersionedModel

from .backends import VERSIONED_BACKENDS, check_internals

BACKENDS = sorted(VERSIONED_BACKENDS)
KEY_LIST = ["a", "b", "ab", "é"]
KEYS = st.sampled_from(KEY_LIST)
TIMES = st.integers(0, 40)
INTERVALS = st.sampled_from([1, 2, 3, 5, 20])
VALUES = st.sampled_from(["x", "y", ""])


def _bounds() -> st.SearchStrategy[tuple[int | None, int | None]]:
    return st.tuples(st.none() | TIMES, st.none() | st.integers(0, 40)).map(
        lambda b: (b[0], None if b[1] is None else (b[0] or 0) + b[1]))


KAFKA_OPS = st.one_of(
    st.tuples(st.just("put"), KEYS, st.none() | VALUES, TIMES),
    st.tuples(st.just("delete"), KEYS, TIMES),
    st.tuples(st.just("get"), KEYS),
    st.tuples(st.just("get"), KEYS, TIMES),
    st.tuples(st.just("get_versions"), KEYS, _bounds(), st.booleans()).map(
        lambda t: (t[0], t[1], t[2][0], t[2][1], t[3])),
)
CONFIGS = st.fixed_dictionaries(
    {"history_retention_ms": st.integers(0, 30)},
    optional={"segment_interval_ms": INTERVALS},
)


def _replay(backend: str, config: dict[str, Any], ops: list[tuple[Any, ...]]) -> None:
    model = VersionedModel(config["history_retention_ms"], config.get("max_versions"))
    store = VERSIONED_BACKENDS[backend](**config)
    try:
        for step, (name, *args) in enumerate(ops):
            got = getattr(store, name)(*args)
            assert got == getattr(model, name)(*args), f"step {step}: {name}{tuple(args)}"
            check_internals(store)
            for key in KEY_LIST:
                assert store.history(key, include_deletes=True) == model.history(
                    key, include_deletes=True), f"history of {key!r} after step {step}"
        assert store.dropped_records == model.dropped
        assert store.observed_stream_time == model.observed
        _sweep(store, model)
    finally:
        store.close()


def _sweep(store: Any, model: VersionedModel) -> None:
    """Every point read and every time window (step 3 ms) agree with the model."""
    points = range(0, 46, 3)
    for key in KEY_LIST:
        assert store.get(key) == model.get(key), key
        for t in points:
            assert store.get(key, t) == model.get(key, t), (key, t)
            for u in points[points.index(t):]:
                assert store.get_versions(key, t, u) == model.get_versions(key, t, u), (key, t, u)


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=examples(500), deadline=None)
@given(config=CONFIGS, ops=st.lists(KAFKA_OPS, min_size=1, max_size=50))
def test_kafka_operations_match_the_model(backend: str, config: dict[str, Any],
                                          ops: list[tuple[Any, ...]]) -> None:
    _replay(backend, config, ops)


ALL_OPS = st.one_of(
    KAFKA_OPS,
    st.tuples(st.just("purge"), KEYS, TIMES),
    st.tuples(st.just("create"), KEYS, VALUES, TIMES),
    st.tuples(st.just("update"), KEYS, VALUES, TIMES, TIMES),
    st.tuples(st.just("restore"), st.lists(st.tuples(KEYS, st.none() | VALUES, TIMES),
                                           max_size=4)),
    st.tuples(st.just("history"), KEYS, st.booleans(), st.booleans()),
    st.tuples(st.just("keys")),
    st.tuples(st.just("range"), st.none() | KEYS, st.none() | KEYS).filter(
        lambda t: t[1] is None or t[2] is None or t[1].encode() <= t[2].encode()),
    st.tuples(st.just("scan_versions"), st.just(None), st.none() | KEYS, st.none() | TIMES,
              st.none() | st.integers(1, 3), st.booleans()),
)
FULL_CONFIGS = st.fixed_dictionaries(
    {"history_retention_ms": st.integers(0, 30)},
    optional={"segment_interval_ms": INTERVALS, "max_versions": st.integers(1, 4)},
)


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=examples(300), deadline=None)
@given(config=FULL_CONFIGS, ops=st.lists(ALL_OPS, min_size=1, max_size=50))
def test_every_operation_matches_the_model(backend: str, config: dict[str, Any],
                                           ops: list[tuple[Any, ...]]) -> None:
    _replay(backend, config, ops)


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=examples(200), deadline=None)
@given(retention=st.integers(0, 10), interval=INTERVALS,
       writes=st.lists(st.tuples(KEYS, st.none() | VALUES, TIMES), min_size=1, max_size=20))
def test_reads_stay_exact_while_the_cutoff_sweeps(backend: str, retention: int, interval: int,
                                                 writes: list[tuple[str, Any, int]]) -> None:
    """Move the cutoff one ms at a time past every version: physical expiry never shows."""
    store = VERSIONED_BACKENDS[backend](history_retention_ms=retention,
                                        segment_interval_ms=interval)
    model = VersionedModel(retention)
    for key, value, timestamp in writes:
        assert store.put(key, value, timestamp) == model.put(key, value, timestamp)
    for cutoff in range(0, 45):
        assert store.put("clock", "t", cutoff + retention) == model.put(
            "clock", "t", cutoff + retention)
        check_internals(store)
        for key in KEY_LIST:
            assert store.get(key, cutoff) == model.get(key, cutoff), (key, cutoff)
            assert store.history(key, include_deletes=True) == model.history(
                key, include_deletes=True), (key, cutoff)
    store.close()


WRITES = st.one_of(
    st.tuples(st.just("put"), KEYS, st.none() | VALUES, TIMES),
    st.tuples(st.just("delete"), KEYS, TIMES),
    st.tuples(st.just("purge"), KEYS, TIMES),
)


def _fill(store: Any, writes: list[tuple[Any, ...]]) -> None:
    for name, *args in writes:
        getattr(store, name)(*args)


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=examples(200), deadline=None)
@given(config=CONFIGS, writes=st.lists(WRITES.filter(lambda w: w[0] != "purge"), max_size=30),
       keys=st.sets(KEYS), later=st.lists(st.tuples(KEYS, st.none() | VALUES, TIMES),
                                          max_size=6),
       others=st.lists(st.tuples(KEYS, st.none() | VALUES, st.integers(0, 90)), max_size=6))
def test_a_restore_of_some_keys_reads_as_the_store_they_came_from(
        backend: str, config: dict[str, Any], writes: list[tuple[Any, ...]], keys: set[str],
        later: list[tuple[str, Any, int]], others: list[tuple[str, Any, int]]) -> None:
    """Each key's history (deletes included), merged by timestamp, and the observed stream
    time: the keys read as in the full store, and later writes to them do the same there.
    The histories may be older than the time: taken before writes of other keys moved it."""
    full = VERSIONED_BACKENDS[backend](**config)
    part = VERSIONED_BACKENDS[backend](**config)
    try:
        _fill(full, writes)
        records = sorted(((key, e.value, e.timestamp) for key in keys
                          for e in full.history(key, newest_first=False, include_deletes=True)),
                         key=lambda r: r[2])
        for key, value, timestamp in others:
            if key not in keys:
                full.put(key, value, timestamp)
        part.restore(records, observed_stream_time=full.observed_stream_time)
        check_internals(part)
        assert part.observed_stream_time == full.observed_stream_time
        dropped = full.dropped_records  # restore counts nothing: later writes only
        for key, value, timestamp in later:
            if key in keys:
                assert part.put(key, value, timestamp) == full.put(key, value, timestamp)
        assert part.dropped_records == full.dropped_records - dropped
        points = range(0, 46, 3)
        for key in KEY_LIST:
            if key not in keys:
                assert part.history(key, include_deletes=True) == []
                continue
            assert part.history(key, include_deletes=True) == full.history(
                key, include_deletes=True), key
            for t in points:
                assert part.get(key, t) == full.get(key, t), (key, t)
                for u in points[points.index(t):]:
                    assert part.get_versions(key, t, u) == full.get_versions(key, t, u)
    finally:
        full.close()
        part.close()


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=examples(200), deadline=None)
@given(config=CONFIGS, writes=st.lists(WRITES, max_size=30),
       lo=st.none() | KEYS, hi=st.none() | KEYS)
def test_reverse_range_is_reversed_forward(backend: str, config: dict[str, Any],
                                           writes: list[tuple[Any, ...]], lo: Any, hi: Any
                                           ) -> None:
    store = VERSIONED_BACKENDS[backend](**config)
    _fill(store, writes)
    if lo is not None and hi is not None and lo.encode() > hi.encode():
        with pytest.raises(ValueError, match="serializes after"):
            store.range(lo, hi)
        return
    forward = store.range(lo, hi)
    assert store.reverse_range(lo, hi) == forward[::-1]
    assert [k.encode() for k, _ in forward] == sorted(k.encode() for k, _ in forward)
    assert [k for k, _ in store.range()] == store.keys()
    store.close()


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=examples(200), deadline=None)
@given(config=CONFIGS, max_versions=st.integers(1, 4),
       writes=st.lists(st.tuples(st.just("put"), KEYS, st.none() | VALUES, TIMES)
                       | st.tuples(st.just("delete"), KEYS, TIMES), max_size=40))
def test_max_versions_never_drops_the_latest(backend: str, config: dict[str, Any],
                                             max_versions: int,
                                             writes: list[tuple[Any, ...]]) -> None:
    store = VERSIONED_BACKENDS[backend](**config, max_versions=max_versions)
    newest: dict[str, tuple[int, Any]] = {}
    for name, key, *rest in writes:
        timestamp = rest[-1]
        value = rest[0] if name == "put" else None
        dropped = store.dropped_records
        if name == "put":
            accepted = store.put(key, value, timestamp) != PUT_RETURN_CODE_NOT_PUT
        else:
            store.delete(key, timestamp)
            accepted = store.dropped_records == dropped
        assert accepted == (store.dropped_records == dropped)
        if accepted and timestamp >= newest.get(key, (-1, None))[0]:
            newest[key] = (timestamp, value)
        entries = store.history(key, include_deletes=True)
        assert len(entries) <= max_versions
        record = store.get(key)
        if newest.get(key, (None, None))[1] is None:
            assert record is None
        else:
            assert record is not None and (record.timestamp, record.value) == newest[key]
        check_internals(store)
    store.close()


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=examples(200), deadline=None)
@given(config=CONFIGS, writes=st.lists(WRITES, max_size=30), key=KEYS, at=TIMES)
def test_purge_hides_all_history(backend: str, config: dict[str, Any],
                                 writes: list[tuple[Any, ...]], key: str, at: int) -> None:
    store = VERSIONED_BACKENDS[backend](**config)
    _fill(store, writes)
    if not store.purge(key, at):
        assert at < store.observed_stream_time - store.history_retention_ms
        return
    assert all(store.get(key, t) is None for t in range(0, 42))
    assert store.get(key) is None and store.get_versions(key) == []
    marker = store.history(key, include_deletes=True)
    assert [(e.operation, e.timestamp, e.valid_to) for e in marker] == [
        (Operation.PURGE, at, None)]
    assert key not in store.keys()
    # other keys change only as any write at that time (moving stream time) changes them
    twin = VERSIONED_BACKENDS[backend](**config)
    _fill(twin, writes)
    twin.put("zz", "x", at)
    others = [k for k in KEY_LIST if k != key]
    assert ([store.history(k, include_deletes=True) for k in others]
            == [twin.history(k, include_deletes=True) for k in others])
    store.close()
    twin.close()


class VersionedStoreMachine(RuleBasedStateMachine):
    """One store and the model, driven by every operation; state compared after each step."""

    backend = BACKENDS[0]

    def __init__(self) -> None:
        super().__init__()
        self.store: Any = None
        self.model: VersionedModel | None = None

    @precondition(lambda self: self.store is None)
    @rule(retention=st.integers(0, 25), interval=st.integers(1, 15),
          max_versions=st.none() | st.integers(1, 3))
    def open(self, retention: int, interval: int, max_versions: int | None) -> None:
        self.store = VERSIONED_BACKENDS[self.backend](
            history_retention_ms=retention, segment_interval_ms=interval,
            max_versions=max_versions)
        self.model = VersionedModel(retention, max_versions)
        self.watcher = self.store.watch(updates_only=True)

    def _both(self, name: str, *args: Any) -> None:
        got = getattr(self.store, name)(*args)
        assert got == getattr(self.model, name)(*args), (name, args)

    @precondition(lambda self: self.store is not None)
    @rule(key=KEYS, value=st.none() | VALUES, timestamp=TIMES)
    def put(self, key: str, value: Any, timestamp: int) -> None:
        self._both("put", key, value, timestamp)

    @precondition(lambda self: self.store is not None)
    @rule(key=KEYS, timestamp=TIMES)
    def delete(self, key: str, timestamp: int) -> None:
        self._both("delete", key, timestamp)

    @precondition(lambda self: self.store is not None)
    @rule(key=KEYS, timestamp=TIMES)
    def purge(self, key: str, timestamp: int) -> None:
        self._both("purge", key, timestamp)

    @precondition(lambda self: self.store is not None)
    @rule(key=KEYS, value=VALUES, timestamp=TIMES, expected=st.none() | TIMES)
    def guarded(self, key: str, value: str, timestamp: int, expected: int | None) -> None:
        if expected is None:
            self._both("create", key, value, timestamp)
        else:
            self._both("update", key, value, timestamp, expected)

    @precondition(lambda self: self.store is not None)
    @rule(records=st.lists(st.tuples(KEYS, st.none() | VALUES, TIMES), max_size=3))
    def restore(self, records: list[tuple[str, Any, int]]) -> None:
        self._both("restore", records)

    @precondition(lambda self: self.store is not None)
    @rule(key=KEYS, as_of=st.none() | TIMES, bounds=_bounds(), descending=st.booleans())
    def read(self, key: str, as_of: int | None, bounds: tuple[Any, Any],
             descending: bool) -> None:
        self._both("get", key, as_of)
        self._both("get_versions", key, bounds[0], bounds[1], descending)

    @invariant()
    def same_state(self) -> None:
        if self.store is None:
            return
        assert self.model is not None
        check_internals(self.store)
        model_state = self.model.state()
        assert self.store.keys() == model_state["keys"]
        assert self.store.range() == model_state["range"]
        for key in self.model.sorted_keys():
            assert self.store.history(key, include_deletes=True) == model_state[
                "history"].get(key, [])
        assert self.watcher.drain() == self.model.events
        self.model.events.clear()

    def teardown(self) -> None:
        if self.store is not None:
            self.store.close()


for _name in BACKENDS:
    _machine = type(f"{_name.title()}Machine", (VersionedStoreMachine,), {"backend": _name})
    globals()[f"Test{_name.title()}StoreMachine"] = _machine.TestCase
    _machine.TestCase.settings = settings(max_examples=examples(150), stateful_step_count=30,
                                          deadline=None)
