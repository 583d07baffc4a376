"""StateDB against a dict model: random put/delete/delete_range/commit/rollback/reopen sequences.

After every step, reads and both iteration directions (any bounds, open ones included) must
equal the model: the committed dicts with the pending operations applied, in unsigned byte
order, the reverse exactly the reversed forward sequence.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from itertools import islice
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)
from hypothesis_profiles import examples

from topology.state.rocksdb import StateDB
from topology.state.rocksdb.keyspace import BACKWARD_BLOCK, BACKWARD_STEPS

#: Keys where unsigned byte order, prefixes and the extremes matter, plus arbitrary short ones.
KEYS = st.sampled_from(
    [b"", b"\x00", b"\x00\x00", b"\x01", b"a", b"ab", b"b", b"\x7f", b"\x80", b"\xff",
     b"\xff\x00", b"\xff\xff"]
) | st.binary(max_size=2)
BOUNDS = st.none() | KEYS
VALUES = st.binary(max_size=3)
NAMES = st.sampled_from(["a", "b"])

#: Reopening costs a RocksDB open (tens of ms on disk): at most once per this many steps.
STEPS_BETWEEN_REOPENS = 6
HELD_STEPS = ["put_held", "put_held", "put", "delete", "delete_range", "get"]
"""The operations of a held-values rule: held puts twice as often as each other one."""
#: This test checks logic, not durability (the crash tests do that, on disk): a memory file
#: system, where there is one, spares it RocksDB's fsyncs on every open.
SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def _unwrap(held: tuple[str, bytes]) -> bytes:
    """The encoding of a held test value: its bytes."""
    return held[1]


def _in(key: bytes, lo: bytes | None, hi: bytes | None) -> bool:
    return (lo is None or key >= lo) and (hi is None or key < hi)


class StateDBMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="statedb-model-", dir=SCRATCH))
        self.db = StateDB.open(self.tmp / "state")
        self.committed: dict[str, dict[bytes, bytes]] = {"a": {}, "b": {}}
        self.view: dict[str, dict[bytes, bytes]] = {"a": {}, "b": {}}
        self.steps_since_reopen = 0

    def teardown(self) -> None:
        self.db.close()
        shutil.rmtree(self.tmp)

    def _step(self) -> None:
        self.steps_since_reopen += 1

    @rule(name=NAMES, key=KEYS, value=VALUES)
    def put(self, name: str, key: bytes, value: bytes) -> None:
        self.db.keyspace(name).put(key, value)
        self.view[name][key] = value
        self._step()

    @rule(name=NAMES, key=KEYS)
    def delete(self, name: str, key: bytes) -> None:
        self.db.keyspace(name).delete(key)
        self.view[name].pop(key, None)
        self._step()

    @rule(name=NAMES, lo=KEYS, hi=KEYS)
    def delete_range(self, name: str, lo: bytes, hi: bytes) -> None:
        if lo > hi:
            with pytest.raises(ValueError):
                self.db.keyspace(name).delete_range(lo, hi)
            return
        self.db.keyspace(name).delete_range(lo, hi)
        self.view[name] = {k: v for k, v in self.view[name].items() if not lo <= k < hi}
        self._step()

    @rule()
    def commit(self) -> None:
        self.db.commit()
        self.committed = {name: dict(kv) for name, kv in self.view.items()}
        self._step()

    @rule()
    def rollback(self) -> None:
        self.db.rollback()
        self.view = {name: dict(kv) for name, kv in self.committed.items()}
        self._step()

    @precondition(lambda self: self.steps_since_reopen >= STEPS_BETWEEN_REOPENS)
    @rule()
    def reopen(self) -> None:
        self.db.close()
        self.db = StateDB.open(self.tmp / "state")
        self.view = {name: dict(kv) for name, kv in self.committed.items()}
        self.steps_since_reopen = 0

    @rule(name=NAMES, lo=BOUNDS, hi=BOUNDS)
    def iterate(self, name: str, lo: bytes | None, hi: bytes | None) -> None:
        keyspace = self.db.keyspace(name)
        expected = sorted((k, v) for k, v in self.view[name].items() if _in(k, lo, hi))
        forward = list(keyspace.items(lo, hi))
        assert forward == expected
        assert list(keyspace.items(lo, hi, reverse=True)) == forward[::-1]

    @rule(name=NAMES, lo=BOUNDS, hi=BOUNDS, block=st.integers(1, 3))
    def iterate_backwards_past_the_first_block(self, name: str, lo: bytes | None,
                                               hi: bytes | None, block: int) -> None:
        """A backward read longer than its block reads the range block by block."""
        keyspace = self.db.keyspace(name)
        expected = sorted((k, v) for k, v in self.view[name].items() if _in(k, lo, hi))
        keyspace._backward_block = keyspace._backward_steps = block
        try:
            backward = list(keyspace.items(lo, hi, reverse=True))
        finally:
            keyspace._backward_block = BACKWARD_BLOCK
            keyspace._backward_steps = BACKWARD_STEPS
        assert backward == expected[::-1]

    @rule(name=NAMES, lo=BOUNDS, hi=BOUNDS, block=st.integers(1, 3), taken=st.integers(0, 4))
    def commit_during_a_backward_read(self, name: str, lo: bytes | None, hi: bytes | None,
                                      block: int, taken: int) -> None:
        """A commit after ``taken`` items of a backward read changes nothing it yields."""
        keyspace = self.db.keyspace(name)
        expected = sorted((k, v) for k, v in self.view[name].items() if _in(k, lo, hi))
        keyspace._backward_block = keyspace._backward_steps = block
        try:
            reading = keyspace.items(lo, hi, reverse=True)
            backward = list(islice(reading, taken))
            keyspace.put(b"\x80", b"after the call")
            keyspace.delete_range(b"", b"\x80")
            kept = {k: v for k, v in self.view[name].items() if k >= b"\x80"}
            self.view[name] = {**kept, b"\x80": b"after the call"}
            self.commit()
            backward += reading
        finally:
            keyspace._backward_block = BACKWARD_BLOCK
            keyspace._backward_steps = BACKWARD_STEPS
        assert backward == expected[::-1]

    @rule(name=NAMES, steps=st.lists(st.tuples(st.sampled_from(HELD_STEPS), KEYS, VALUES),
                                     max_size=8),
          end=st.sampled_from(["go on", "commit", "rollback"]))
    def held_values(self, name: str, steps: list[tuple[str, bytes, bytes]], end: str) -> None:
        """Values held unencoded read and commit as if put encoded, mixed with every write.

        The invariant reads every keyspace in order, which encodes what is held: the steps
        run in one rule so that held values meet the other operations first.
        """
        keyspace = self.db.keyspace(name)
        held = keyspace.hold(_unwrap)
        view = self.view[name]
        for step, key, value in steps:
            if step == "put_held":
                keyspace.put_held(key, ("held", value))
                view[key] = value
                assert held(key) == ("held", value)
            elif step == "put":
                keyspace.put(key, value)
                view[key] = value
                assert held(key) is None
            elif step == "delete":
                keyspace.delete(key)
                view.pop(key, None)
            elif step == "delete_range":
                keyspace.delete_range(min(key, value), max(key, value))
                for gone in [k for k in view if _in(k, min(key, value), max(key, value))]:
                    del view[gone]
            else:
                assert keyspace.get(key) == view.get(key)
            keyspace._check()
        if end == "commit":
            self.commit()
        elif end == "rollback":
            self.rollback()

    @rule(name=NAMES, keys=st.lists(KEYS, max_size=4))
    def read(self, name: str, keys: list[bytes]) -> None:
        keyspace = self.db.keyspace(name)
        expected = [self.view[name].get(k) for k in keys]
        assert [keyspace.get(k) for k in keys] == expected
        assert keyspace.multi_get(keys) == expected

    @invariant()
    def whole_view_and_internals(self) -> None:
        for name in ("a", "b"):
            keyspace = self.db.keyspace(name)
            keyspace._check()
            assert list(keyspace.items()) == sorted(self.view[name].items())


StateDBMachine.TestCase.settings = settings(
    max_examples=examples(60), stateful_step_count=40, deadline=None
)
test_statedb_matches_a_dict_model = StateDBMachine.TestCase


@pytest.mark.parametrize("block", [1, 2, 3, 9, 10, 11])
def test_backward_reads_past_the_first_block(tmp_path: Path, block: int) -> None:
    """Ten committed keys read backwards in blocks of ``block``, with and without pending
    writes and bounds: exactly the reversed forward sequence."""
    with StateDB.open(tmp_path / "state") as db:
        keyspace = db.keyspace("a")
        keyspace._backward_block = keyspace._backward_steps = block
        for i in range(10):
            keyspace.put(b"k%d" % i, b"v%d" % i)
        db.commit()
        for lo, hi in [(None, None), (b"k2", None), (None, b"k7"), (b"k1", b"k8")]:
            forward = list(keyspace.items(lo, hi))
            assert list(keyspace.items(lo, hi, reverse=True)) == forward[::-1]
        keyspace.put(b"k45", b"new")
        keyspace.delete(b"k8")
        forward = list(keyspace.items())
        assert len(forward) == 10
        assert list(keyspace.items(reverse=True)) == forward[::-1]
