"""Backward reads of ranges longer than their block: the forward sequence reversed, in the view
of the call (pending writes then, committed data then), and released by closing the database.

A keyspace's ``_backward_block`` and ``_backward_steps`` are set small here, so that a few
keys span many blocks.
"""

from __future__ import annotations

from itertools import islice
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from topology.state.rocksdb import Keyspace, StateDB, StateStoreError

KEYS = st.binary(max_size=2)
BOUNDS = st.none() | KEYS
EVERYTHING = (b"", b"\xff" * 3)
"""A range holding every key of at most two bytes."""

#: ``("put", key, value)``, ``("delete", key)`` or ``("delete_range", lo, hi)``.
OPS = st.lists(
    st.tuples(st.just("put"), KEYS, st.binary(max_size=2))
    | st.tuples(st.just("delete"), KEYS)
    | st.tuples(st.just("delete_range"), KEYS, KEYS).map(
        lambda op: (op[0], min(op[1], op[2]), max(op[1], op[2]))),
    max_size=12,
)
COMMITTED = st.dictionaries(KEYS, st.binary(max_size=2), max_size=40)


def apply(keyspace: Keyspace, view: dict[bytes, bytes], ops: list[tuple[object, ...]]) -> None:
    """Apply ``ops`` to ``keyspace`` (pending) and to the model ``view``."""
    for op in ops:
        if op[0] == "put":
            _, key, value = op
            assert isinstance(key, bytes) and isinstance(value, bytes)
            keyspace.put(key, value)
            view[key] = value
        elif op[0] == "delete":
            key = op[1]
            assert isinstance(key, bytes)
            keyspace.delete(key)
            view.pop(key, None)
        else:
            _, lo, hi = op
            assert isinstance(lo, bytes) and isinstance(hi, bytes)
            keyspace.delete_range(lo, hi)
            for key in [key for key in view if lo <= key < hi]:
                del view[key]


def fresh(db: StateDB, committed: dict[bytes, bytes], block: int, steps: int) -> Keyspace:
    """Keyspace ``a`` holding exactly ``committed``, committed, read backwards in blocks of
    ``block`` below ``steps`` backward steps."""
    keyspace = db.keyspace("a")
    keyspace.delete_range(*EVERYTHING)
    for key, value in committed.items():
        keyspace.put(key, value)
    db.commit()
    keyspace._backward_block = block
    keyspace._backward_steps = steps
    return keyspace


def expected(view: dict[bytes, bytes], lo: bytes | None, hi: bytes | None
             ) -> list[tuple[bytes, bytes]]:
    """The model's items in ``[lo, hi)``, in descending order."""
    return sorted(((key, value) for key, value in view.items()
                   if (lo is None or key >= lo) and (hi is None or key < hi)), reverse=True)


def test_backward_is_forward_reversed_across_blocks(tmp_path: Path) -> None:
    """Any committed data, pending writes, deletes and deleted ranges, bounds and block size:
    backward is the forward sequence reversed, and both are the model's."""
    with StateDB.open(tmp_path / "state") as db:

        @settings(max_examples=examples(150), deadline=None)
        @given(committed=COMMITTED, ops=OPS, lo=BOUNDS, hi=BOUNDS, block=st.integers(1, 5),
               steps=st.integers(1, 6))
        def check(committed: dict[bytes, bytes], ops: list[tuple[object, ...]],
                  lo: bytes | None, hi: bytes | None, block: int, steps: int) -> None:
            keyspace = fresh(db, committed, block, steps)
            view = dict(committed)
            apply(keyspace, view, ops)
            forward = list(keyspace.items(lo, hi))
            assert forward == expected(view, lo, hi)[::-1]
            assert list(keyspace.items(lo, hi, reverse=True)) == forward[::-1]
            keyspace._check()

        check()


def test_backward_read_keeps_the_view_of_its_call(tmp_path: Path) -> None:
    """Writes after the call, committed or not, while a backward read is under way (unstarted
    too), do not show in what it yields."""
    with StateDB.open(tmp_path / "state") as db:

        @settings(max_examples=examples(150), deadline=None)
        @given(committed=COMMITTED, ops=OPS, later=OPS, lo=BOUNDS, hi=BOUNDS,
               block=st.integers(1, 5), steps=st.integers(1, 6), taken=st.integers(0, 12),
               commits=st.integers(0, 2))
        def check(committed: dict[bytes, bytes], ops: list[tuple[object, ...]],
                  later: list[tuple[object, ...]], lo: bytes | None, hi: bytes | None,
                  block: int, steps: int, taken: int, commits: int) -> None:
            keyspace = fresh(db, committed, block, steps)
            view = dict(committed)
            apply(keyspace, view, ops)
            reading = keyspace.items(lo, hi, reverse=True)
            read = list(islice(reading, taken))
            for _ in range(commits):
                apply(keyspace, dict(view), later)
                db.commit()
                read += islice(reading, 1)
            apply(keyspace, dict(view), later)
            read += reading
            assert read == expected(view, lo, hi)

        check()


@pytest.mark.parametrize("steps", [1, 3])
@pytest.mark.parametrize("block", [1, 2, 3, 4])
def test_commits_after_each_item_of_a_backward_read_do_not_show(tmp_path: Path, block: int,
                                                                steps: int) -> None:
    """Ten committed keys read backwards in blocks of ``block`` after ``steps`` backward steps,
    with a commit before the first step and after every item, each replacing the keyspace."""
    with StateDB.open(tmp_path / "state") as db:
        keyspace = fresh(db, {b"%02d" % i: b"old" for i in range(10)}, block, steps)
        reading = keyspace.items(b"01", reverse=True)
        read = []
        for step in range(10):
            keyspace.delete_range(*EVERYTHING)
            keyspace.put(b"%02d" % step + b"new", b"new")
            db.commit()
            read += islice(reading, 1)
        assert read == [(b"%02d" % i, b"old") for i in range(9, 0, -1)]


def test_a_commit_deleting_everything_does_not_cut_a_long_read(tmp_path: Path) -> None:
    """The real block and step counts: a commit that deletes the whole range after the
    first item of a backward read over 3.5 blocks; the read still yields every item of its
    call."""
    with StateDB.open(tmp_path / "state") as db:
        keyspace = db.keyspace("a")
        count = keyspace._backward_block * 7 // 2
        for i in range(count):
            keyspace.put(b"%08d" % i, b"v%d" % i)
        db.commit()
        reading = keyspace.items(b"00000001", reverse=True)
        assert next(reading) == (b"%08d" % (count - 1), b"v%d" % (count - 1))
        keyspace.delete_range(*EVERYTHING)
        db.commit()
        assert list(keyspace.items()) == []
        rest = list(reading)
        assert [key for key, _ in rest] == [b"%08d" % i for i in range(count - 2, 0, -1)]


@pytest.mark.parametrize("commit_first", [False, True], ids=["opened", "pinned by a commit"])
@pytest.mark.parametrize("block", [4, None], ids=["block 4", "real block"])
def test_close_during_a_long_backward_read_releases_rocksdb(
        tmp_path: Path, commit_first: bool, block: int | None) -> None:
    """Closing the database in the middle of a long backward read (after a commit made it
    keep its view, or not) releases RocksDB: the same process reopens the directory while the
    read is alive, and the read's next step raises."""
    path = tmp_path / "state"
    db = StateDB.open(path)
    keyspace = db.keyspace("a")
    if block is not None:
        keyspace._backward_block = block
        keyspace._backward_steps = 2
    count = keyspace._backward_block * 5 // 2 + 3
    for i in range(count):
        keyspace.put(b"%08d" % i, b"v")
    db.commit()
    reading = keyspace.items(reverse=True)
    unstarted = keyspace.items(reverse=True)
    assert next(reading)[0] == b"%08d" % (count - 1)
    if commit_first:
        keyspace.put(b"new", b"v")
        db.commit()
    db.close()
    with StateDB.open(path) as again:  # while both reads are alive, untouched since the close
        assert sum(1 for _ in again.keyspace("a").items(reverse=True)) == count + commit_first
    for iterator in (reading, unstarted):
        with pytest.raises(StateStoreError, match="closed"):
            next(iterator)
