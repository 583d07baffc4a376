"""A keyspace: one column family of a state database, read through its uncommitted writes.

Writes stay in memory until ``StateDB.commit`` puts every keyspace's writes in one RocksDB
write batch; reads see them at once (read-your-own-writes). Pending writes are a dict of
``key -> value`` (``None`` for a delete), the keys of that dict in sorted order (sorted lazily:
new keys are appended to a list that is merged in when an ordered view is needed), and a
sorted list of disjoint deleted ranges. A ``delete_range`` drops the pending writes it covers,
so a write in the dict is always newer than every range and the commit writes the ranges first.

Write-behind: the store that owns a keyspace may also hold values unencoded
(:meth:`Keyspace.hold`), newest write per key, and read them back as objects. They are encoded
into pending writes at the latest moment: before the commit, before any read or write that could
see them in bytes, and never more than once per key between two commits. A store whose values
change many times per commit (a running count) so encodes each once per commit, not per record.
"""

from __future__ import annotations

import weakref
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from itertools import chain, islice, takewhile
from operator import itemgetter
from pathlib import Path
from typing import Any

from rocksdict import ColumnFamily, Rdict, ReadOptions, WriteBatch

from .errors import (
    StateCorruptedStoreError,
    StateStoreError,
    describe_rocksdb_error,
    is_damage,
)

__all__ = ("Keyspace",)

Item = tuple[bytes, bytes]

_range_start = _first = itemgetter(0)

BACKWARD_BLOCK = 1 << 15
"""A backward read goes through its range in blocks of this many items, each read forward and
yielded reversed: RocksDB's memtable is a skip list without backward links, so each backward
step there is a search from the top (measured on 200 k committed keys: 3.1x the forward time,
1.3x once flushed to a table file). A range of up to this many items is one forward read,
reversed. In a longer one, the first block (in key order) is kept, to be yielded last; the
top :data:`BACKWARD_STEPS` items are read backwards, so that the first items come at once;
if the reader goes on, one pass over the keys in between notes the first key of every block
of them, and each block, from the last one down, is read forward from its key. Reading a
keyspace of 200 k memtable keys backwards so takes 1.3x the forward time instead of 2.4x
(``benchmarks/iteration.py`` measures the stores both ways). Memory: at most two blocks and
one key per block."""

BACKWARD_STEPS = 1 << 10
"""How many items at the top of a range longer than :data:`BACKWARD_BLOCK` a backward read
steps through backwards before it reads the rest in blocks: its first item costs a forward
read of one block and a backward step, not a pass over the whole range."""

INSORT_MAX = 32
"""Up to this many keys written since the last ordered read are inserted one by one into the
sorted pending keys; more are merged by a sort. A sort compares every pending key (a store
that reads after each write, as the session aggregation does, then pays O(pending) per read:
``benchmarks/iteration.py``, the session aggregate on RocksDB); an insertion compares
O(log pending) keys and moves pointers."""


class _Pin:
    """Keeps the view of a backward read that has RocksDB iterators still to open.

    A long backward read opens RocksDB iterators as it goes (see :data:`BACKWARD_BLOCK`);
    each sees the view of the call as long as nothing was committed since, since only
    ``StateDB.commit`` writes to the database. Before it writes, the commit calls the pin of
    every live backward read: the pin opens one raw RocksDB iterator on the data as it still
    is, and the read uses that one (seeking to each block) instead of opening new iterators.
    A read that needs no further iterator clears ``open``.
    """

    __slots__ = ("iterator", "open")

    def __init__(self, open_iterator: Callable[[], Any]) -> None:
        self.open: Callable[[], Any] | None = open_iterator
        self.iterator: Any = None

    def __call__(self) -> None:
        """Open the iterator of the current view, unless the read needs none."""
        if self.open is not None and self.iterator is None:
            self.iterator = self.open()


class _Cursor:
    """Holds the ``__next__`` of a RocksDB iterator, so closing the database can drop it.

    ``StateDB.close`` replaces ``next`` with a function that raises: the RocksDB iterator is
    released (RocksDB keeps its lock while any iterator lives), and a merged iterator still in
    a caller's hands raises a clear error instead of stopping early.

    It also holds the iterator's ``ReadOptions``: rocksdict's iterator does not keep them
    alive, and RocksDB reads the upper bound from their memory at every step, so once they
    were freed the iterator would stop at whatever bytes took their place. ``pin`` is the
    :class:`_Pin` of a backward read (``None`` for a forward one, or once a commit called it).
    """

    __slots__ = ("__weakref__", "next", "options", "pin")

    def __init__(self, next_item: Callable[[], Any], options: ReadOptions,
                 pin: _Pin | None) -> None:
        self.next = next_item
        self.options = options
        self.pin = pin


class Keyspace:
    """One named keyspace of a :class:`~topology.state.rocksdb.StateDB`: ordered bytes to bytes.

    Obtain it with ``db.keyspace(name)``. Reads see the committed data merged with this
    keyspace's pending writes; writes are pending until ``db.commit()``, dropped by
    ``db.rollback()`` or ``db.close()``. Keys order as unsigned bytes (``codec`` encodes numbers
    that way). Not thread-safe: one task uses it at a time.

    Methods: looking up (:meth:`get`, :meth:`multi_get`), writing (:meth:`put`,
    :meth:`delete`, :meth:`delete_range`, :meth:`hold` and :meth:`put_held` for values
    encoded once per commit), iterating (:meth:`items`).

    Runtime complexity: a ``get`` without pending writes is one RocksDB point lookup plus one
    flag test; with pending writes, plus a dict lookup and, if ranges were deleted, a bisection
    over them. ``put`` and ``delete`` are O(1) in memory. Iteration: see :meth:`items`.

    >>> import tempfile
    >>> from topology.state.rocksdb import StateDB
    >>> with tempfile.TemporaryDirectory() as tmp, StateDB.open(tmp + "/s") as db:
    ...     ks = db.keyspace("counts")
    ...     ks.put(b"b", b"2"); ks.put(b"a", b"1"); ks.put(b"c", b"3")
    ...     ks.delete_range(b"c", b"d")
    ...     before = list(ks.items())
    ...     db.commit()
    ...     [ks.get(b"a"), ks.get(b"c")], before, list(ks.items(hi=b"b", reverse=True))
    ([b'1', None], [(b'a', b'1'), (b'b', b'2')], [(b'a', b'1')])
    """

    __slots__ = (
        "_backward_block", "_backward_steps", "_cursors", "_directory", "_dirty", "_encode",
        "_fresh", "_get", "_handle", "_held", "_items", "_iter", "_keys", "_ranges", "_sorted",
        "_unusable", "_writes", "name",
    )

    def __init__(
        self,
        name: str,
        column: Rdict,
        handle: ColumnFamily,
        cursors: weakref.WeakSet[_Cursor],
        directory: Path,
    ) -> None:
        """Wrap an open column family; ``StateDB.keyspace`` is the way to get one."""
        self.name = name
        self._directory = directory
        self._backward_block = BACKWARD_BLOCK  # tests set both small, on one keyspace
        self._backward_steps = BACKWARD_STEPS
        self._handle: ColumnFamily | None = handle
        self._get: Callable[..., Any] = column.get
        self._iter: Callable[..., Any] = column.iter
        self._items: Callable[..., Any] = partial(_checked, self, column.items, _first)
        self._keys: Callable[..., Any] = partial(_checked, self, column.keys, None)
        self._cursors = cursors
        self._writes: dict[bytes, bytes | None] = {}
        self._sorted: list[bytes] = []
        self._fresh: list[bytes] = []
        self._ranges: list[tuple[bytes, bytes]] = []
        self._held: dict[bytes, Any] = {}
        self._encode: Callable[[Any], bytes] | None = None
        self._dirty = False
        self._unusable: str | None = None

    def __repr__(self) -> str:
        return f"Keyspace({self.name!r})"

    # -- looking up ------------------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key`` as this keyspace's pending writes leave it, or ``None``.

        Runtime complexity: O(1) plus one RocksDB lookup (none if ``key`` has a pending write).

        :raises TypeError: ``key`` is not bytes.
        :raises StateStoreError: RocksDB fails to read, or the database is closed or failed.
        """
        if not isinstance(key, bytes):
            raise TypeError(f"get in keyspace {self.name!r}: keys are bytes, got "
                            f"{type(key).__name__}")
        if self._dirty:
            if key in self._held:
                self._encode_held()
            writes = self._writes
            if key in writes:
                return writes[key]
            if self._ranges and self._covered(key):
                return None
        try:
            value: bytes | None = self._get(key)
            return value
        except StateStoreError:
            raise
        except Exception as exc:
            raise self._read_error("get", exc, ()) from exc

    def multi_get(self, keys: Iterable[bytes]) -> list[bytes | None]:
        """The values of ``keys``, in order (``None`` for an absent key), in one RocksDB call.

        Runtime complexity: O(n) plus one batched RocksDB lookup of the keys without pending
        writes.

        :raises TypeError: a key is not bytes.
        :raises StateStoreError: RocksDB fails to read, or the database is closed or failed.
        """
        keys = list(keys)
        if self._held:
            self._encode_held()
        try:
            if not self._dirty:
                found: list[bytes | None] = self._get(keys)
                return found
            writes = self._writes
            ranges = self._ranges
            values: list[bytes | None] = [None] * len(keys)
            positions = []
            stored = []
            for position, key in enumerate(keys):
                if key in writes:
                    values[position] = writes[key]
                elif not (ranges and self._covered(key)):
                    positions.append(position)
                    stored.append(key)
            if stored:
                for position, value in zip(positions, self._get(stored), strict=True):
                    values[position] = value
            return values
        except StateStoreError:
            raise
        except Exception as exc:
            raise self._read_error("multi_get", exc, keys) from exc

    # -- writing ---------------------------------------------------------------------------

    def put(self, key: bytes, value: bytes) -> None:
        """Set ``key`` to ``value`` (pending until the next commit).

        Runtime complexity: O(1), in memory.

        :raises TypeError: ``key`` or ``value`` is not bytes (use :meth:`delete` to remove).
        :raises StateStoreError: the database is closed or failed.
        """
        if self._unusable is not None or not (isinstance(key, bytes)
                                              and isinstance(value, bytes)):
            self._refuse("put", key, value)
        if self._held:
            self._held.pop(key, None)
        writes = self._writes
        if key not in writes:
            self._fresh.append(key)
        writes[key] = value
        self._dirty = True

    def delete(self, key: bytes) -> None:
        """Remove ``key`` (pending until the next commit); removing an absent key is fine.

        Runtime complexity: O(1), in memory.

        :raises TypeError: ``key`` is not bytes.
        :raises StateStoreError: the database is closed or failed.
        """
        if self._unusable is not None or not isinstance(key, bytes):
            self._refuse("delete", key)
        if self._held:
            self._held.pop(key, None)
        writes = self._writes
        if key not in writes:
            self._fresh.append(key)
        writes[key] = None
        self._dirty = True

    def hold(self, encode: Callable[[Any], bytes]) -> Callable[[bytes], Any]:
        """Let the owning store write values unencoded with :meth:`put_held`.

        ``encode`` turns a held value into the bytes to write; it must not fail for a value
        the store holds (the store encodes any value it cannot vouch for itself and writes the
        bytes with :meth:`put`). Returns the lookup of held values: the value held for a key,
        or ``None``. A key's newest write is its held value when it has one.

        :raises StateStoreError: the database is closed or failed.
        """
        if self._unusable is not None:
            self._unusable_error(self._unusable)()
        self._encode_held()
        self._encode = encode
        return self._held.get

    def put_held(self, key: bytes, value: Any) -> None:
        """Set ``key`` to ``value``, held unencoded until it must be bytes (see :meth:`hold`).

        Runtime complexity: O(1), in memory; the encoding happens once per key and commit.

        :raises TypeError: ``key`` is not bytes.
        :raises ValueError: no :meth:`hold` was called on this keyspace.
        :raises StateStoreError: the database is closed or failed.
        """
        if self._unusable is not None or key.__class__ is not bytes:
            self._refuse("put_held", key)
        if self._encode is None:
            raise ValueError(f"put_held in keyspace {self.name!r} before hold()")
        self._held[key] = value
        self._dirty = True

    def delete_range(self, lo: bytes, hi: bytes) -> None:
        """Remove every key in ``[lo, hi)`` (pending until the next commit), e.g. a time segment.

        Committed keys in the range are hidden at once and deleted by one RocksDB range
        tombstone at commit; pending writes in the range are dropped. ``lo == hi`` deletes
        nothing.

        Runtime complexity: O(p + r log r) for p pending writes and r pending ranges (a sort of
        the pending keys first if new keys were written since the last ordered read).

        :raises TypeError: ``lo`` or ``hi`` is not bytes.
        :raises ValueError: ``lo > hi``.
        :raises StateStoreError: the database is closed or failed.
        """
        if self._unusable is not None or not (isinstance(lo, bytes) and isinstance(hi, bytes)):
            self._refuse("delete_range", lo, hi)
        if lo > hi:
            raise ValueError(f"delete_range needs lo <= hi, got lo={lo!r} > hi={hi!r}")
        if lo == hi:
            return
        if self._held:
            self._encode_held()
        keys = self._sorted_keys()
        start = bisect_left(keys, lo)
        stop = bisect_left(keys, hi, start)
        writes = self._writes
        for key in keys[start:stop]:
            del writes[key]
        del keys[start:stop]
        merged: list[tuple[bytes, bytes]] = []
        for low, high in sorted([*self._ranges, (lo, hi)]):
            if merged and low <= merged[-1][1]:
                if high > merged[-1][1]:
                    merged[-1] = (merged[-1][0], high)
            else:
                merged.append((low, high))
        self._ranges = merged
        self._dirty = True

    # -- iterating -------------------------------------------------------------------------

    def items(
        self, lo: bytes | None = None, hi: bytes | None = None, reverse: bool = False
    ) -> Iterator[Item]:
        """Iterate ``(key, value)`` for the keys in ``[lo, hi)``, in unsigned byte order.

        ``None`` leaves a bound open; ``lo >= hi`` gives nothing. ``reverse=True`` gives exactly
        the reverse of the forward sequence. The view is the one at the call: committed data
        (a RocksDB snapshot) merged with the pending writes of that moment; later writes and
        commits do not show. Closing the database makes the iterator raise
        :class:`StateStoreError` on its next step.

        Runtime complexity: O(log p + k) for p pending writes and k keys read, plus the sort of
        pending keys written since the last ordered read; committed keys under a pending
        deleted range are read and skipped. A backward read of more than
        :data:`BACKWARD_BLOCK` committed items reads most of its keys twice (keys, then
        items); its first item costs a forward read of :data:`BACKWARD_BLOCK` items.

        :raises TypeError: a bound is neither bytes nor ``None``.
        :raises StateStoreError: RocksDB fails to read, or the database is closed or failed.
        """
        if self._unusable is not None:
            self._refuse("items")
        if not ((lo is None or isinstance(lo, bytes)) and (hi is None or isinstance(hi, bytes))):
            raise TypeError(
                f"items bounds are bytes or None, got {type(lo).__name__} and "
                f"{type(hi).__name__}"
            )
        if lo is not None and hi is not None and lo >= hi:
            return iter(())
        if self._held:
            self._encode_held()
        read_options = ReadOptions()
        if hi is not None:
            read_options.set_iterate_upper_bound(hi)
        pin = None
        try:
            if reverse:
                pin = _Pin(partial(self._iter, read_options))
                source = chain.from_iterable(_descending(
                    self._items(from_key=lo, read_opt=read_options), pin, self._items,
                    self._keys, read_options, self._backward_block, self._backward_steps))
            else:
                source = self._items(from_key=lo, read_opt=read_options)
        except Exception as exc:
            raise self._read_error("items", exc, ()) from exc
        cursor = _Cursor(source.__next__, read_options, pin)
        self._cursors.add(cursor)
        pending: list[tuple[bytes, bytes | None]] = []
        if self._dirty:
            keys = self._sorted_keys()
            start = 0 if lo is None else bisect_left(keys, lo)
            stop = len(keys) if hi is None else bisect_left(keys, hi, start)
            writes = self._writes
            pending = [(key, writes[key]) for key in keys[start:stop]]
        if not pending and not self._ranges:
            return _forward(cursor, self)  # either way: the cursor's order is the result's
        if reverse:
            pending.reverse()
            return _backward(cursor, pending, self._ranges[::-1], self)
        return _merge_forward(cursor, pending, list(self._ranges), self)

    # -- used by StateDB -------------------------------------------------------------------

    def _write_pending(self, batch: WriteBatch) -> None:
        """Add the pending ranges, then the pending writes, to ``batch``."""
        handle = self._handle
        for lo, hi in self._ranges:
            batch.delete_range(lo, hi, handle)
        put = batch.put
        delete = batch.delete
        for key, value in self._writes.items():
            if value is None:
                delete(key, handle)
            else:
                put(key, value, handle)

    def _encode_held(self) -> None:
        """Turn every held value into a pending write (see :meth:`hold`)."""
        held = self._held
        if not held:
            return
        encode = self._encode
        assert encode is not None, "values are held only after hold()"
        writes = self._writes
        fresh = self._fresh
        for key, value in held.items():
            if key not in writes:
                fresh.append(key)
            writes[key] = encode(value)
        held.clear()

    def _clear_pending(self) -> None:
        """Forget the pending writes (after a commit wrote them, or on rollback)."""
        if self._dirty:
            self._held.clear()
            self._writes = {}
            self._sorted = []
            self._fresh = []
            self._ranges = []
            self._dirty = False

    def _detach(self, reason: str) -> None:
        """Drop every RocksDB object and pending write; every later call raises ``reason``."""
        self._clear_pending()
        self._unusable = reason
        unusable = self._unusable_error(reason)
        self._get = self._items = self._keys = self._iter = unusable
        self._handle = None

    def _check(self) -> None:
        """Assert the pending-write invariants (tests call it after each operation)."""
        keys = sorted(self._sorted + self._fresh)
        assert keys == sorted(self._writes), "sorted and fresh keys are the pending keys"
        assert len(keys) == len(set(keys)), "no key is listed twice"
        assert self._sorted == sorted(self._sorted), "sorted keys are sorted"
        assert all(lo < hi for lo, hi in self._ranges), "ranges are not empty"
        ranges = self._ranges
        assert all(a[1] < b[0] for a, b in zip(ranges, ranges[1:], strict=False)), "disjoint"
        assert self._dirty == bool(self._writes or self._ranges or self._held), "dirty flag"
        assert self._encode is not None or not self._held, "values are held only after hold()"

    # -- helpers ---------------------------------------------------------------------------

    def _sorted_keys(self) -> list[bytes]:
        """The pending keys in order, merging in the keys written since the last call."""
        keys = self._sorted
        fresh = self._fresh
        if fresh:
            if len(fresh) <= INSORT_MAX:
                for key in fresh:  # a bisect and a pointer move each, not a pass over all
                    insort(keys, key)
            else:
                keys += fresh
                keys.sort()  # Timsort merges the sorted run and the new keys
            self._fresh = []
        return keys

    def _covered(self, key: bytes) -> bool:
        """Whether a pending deleted range holds ``key``."""
        ranges = self._ranges
        index = bisect_right(ranges, key, key=_range_start) - 1
        return index >= 0 and key < ranges[index][1]

    def _refuse(self, operation: str, *arguments: object) -> None:
        """Raise the error that explains why a write or an iteration is refused."""
        if self._unusable is not None:
            self._unusable_error(self._unusable)()
        wrong = next(argument for argument in arguments if not isinstance(argument, bytes))
        raise TypeError(
            f"{operation} in keyspace {self.name!r}: keys and values are bytes, got "
            f"{type(wrong).__name__}"
        )

    def _unusable_error(self, reason: str) -> Callable[..., Any]:
        """A function that raises :class:`StateStoreError` for an unusable keyspace."""
        directory = self._directory
        operation = f"use of keyspace {self.name!r}"

        def unusable(*_args: object, **_kwargs: object) -> Any:
            raise StateStoreError(directory, operation, reason)

        return unusable

    def _read_error(self, operation: str, exc: Exception, keys: Iterable[object]) -> Exception:
        """The error to raise for a failed read: a TypeError for a non-bytes key."""
        for key in keys:
            if not isinstance(key, bytes):
                return TypeError(
                    f"{operation} in keyspace {self.name!r}: keys are bytes, got "
                    f"{type(key).__name__}"
                )
        detail = describe_rocksdb_error(exc)
        error = StateCorruptedStoreError if is_damage(detail) else StateStoreError
        return error(self._directory, f"{operation} in keyspace {self.name!r}", detail)

def _checked(keyspace: Keyspace, make: Callable[..., Iterator[Any]],
             key_of: Callable[[Any], bytes] | None, backwards: bool = False,
             from_key: bytes | None = None, read_opt: ReadOptions | None = None
             ) -> Iterator[Any]:
    """A rocksdict ``items``/``keys`` iterator that raises where it would stop on damage.

    Rocksdict's iterators end quietly on a checksum or I/O error. When one ends, a raw
    iterator placed just past the last key read (same direction, same bounds) tells: invalid
    with a clean status is the true end; a status error is damage, raised as
    :class:`StateCorruptedStoreError`. (A valid one sees keys a later commit wrote, which the
    read, a view of its own moment, rightly did not show.) One seek per read that runs to its
    end; a read abandoned earlier costs nothing more. The rocksdict iterator is opened at
    the call (its view is the call's), not at the first step.
    """
    return _ends_checked(keyspace, make(backwards=backwards, from_key=from_key,
                                        read_opt=read_opt), key_of, backwards, from_key, read_opt)


def _ends_checked(keyspace: Keyspace, source: Iterator[Any],
                  key_of: Callable[[Any], bytes] | None, backwards: bool,
                  from_key: bytes | None, read_opt: ReadOptions | None) -> Iterator[Any]:
    """The items of ``source``, then :func:`_checked`'s check where it ended."""
    last: Any = None
    for last in source:
        yield last
    key = None if last is None else (last if key_of is None else key_of(last))
    iterator = keyspace._iter(read_opt)
    if key is None:
        if from_key is None:
            iterator.seek_to_last() if backwards else iterator.seek_to_first()
        elif backwards:
            iterator.seek_for_prev(from_key)
        else:
            iterator.seek(from_key)
    elif backwards:
        iterator.seek_for_prev(key)
        if iterator.valid() and iterator.key() == key:
            iterator.prev()
    else:
        iterator.seek(key)
        if iterator.valid() and iterator.key() == key:
            iterator.next()
    if not iterator.valid():
        try:
            iterator.status()
        except Exception as exc:
            raise StateCorruptedStoreError(
                keyspace._directory, f"items in keyspace {keyspace.name!r}",
                f"the read stopped on damage after key {key!r}: "
                f"{describe_rocksdb_error(exc)}") from exc


def _step(cursor: _Cursor, keyspace: Keyspace) -> Item | None:
    """The next committed item of ``cursor``, ``None`` at the end; errors are wrapped."""
    try:
        item: Item | None = cursor.next()
        return item
    except StopIteration:
        return None
    except StateStoreError:
        raise
    except Exception as exc:
        raise keyspace._read_error("items", exc, ()) from exc


def _forward(cursor: _Cursor, keyspace: Keyspace) -> Iterator[Item]:
    """Committed items in order (the keyspace had no pending writes)."""
    while True:
        try:
            item = cursor.next()
        except StopIteration:
            return
        except StateStoreError:
            raise
        except Exception as exc:
            raise keyspace._read_error("items", exc, ()) from exc
        yield item


def _descending(
    head: Iterator[Item],
    pin: _Pin,
    items: Callable[..., Any],
    keys: Callable[..., Any],
    options: ReadOptions,
    block: int,
    steps: int,
) -> Iterator[Iterator[Item]]:
    """The committed items of a range, descending, in blocks: chained, the backward read.

    See :data:`BACKWARD_BLOCK`. ``head`` iterates the range forward, opened at the query: up
    to ``block`` items are read from it. If the range holds more, the top ``steps`` items
    above them are read backwards; below those, a pass over the keys notes the first key of
    every ``block`` items, and each such block, from the last one down, is read forward from
    its key and yielded reversed; the first block comes last. The reads open their iterators
    with ``items`` and ``keys`` (``options`` holds the range's upper bound), or, once a commit
    has called ``pin``, use the pinned iterator of the query's view.
    """
    first = list(islice(head, block + 1))
    del head  # its RocksDB iterator is released
    if len(first) <= block:
        pin.open = pin.iterator = None
        yield reversed(first)
        return
    start = first.pop()[0]  # the first key above the first block
    if pin.iterator is None:
        top = list(islice(items(backwards=True, read_opt=options), steps))
    else:
        top = _pinned_top(pin.iterator, steps)
    while top[-1][0] < start:  # top[0] is the range's last key: at least start
        top.pop()
    end = top[-1][0]  # the items in [start, end) are still to read
    if len(top) < steps or end == start:  # none are
        pin.open = pin.iterator = None  # every read is done: no commit can matter now
        yield iter(top)
        yield reversed(first)
        return
    yield iter(top)
    del top
    marks = [start]
    if pin.iterator is None:
        marks += takewhile(end.__gt__, islice(keys(from_key=start, read_opt=options),
                                              block, None, block))
    else:
        marks += _pinned_marks(pin.iterator, start, block, end)
    while marks:
        mark = marks.pop()
        if pin.iterator is None:
            chunk = list(islice(items(from_key=mark, read_opt=options), block))
        else:
            chunk = _pinned_block(pin.iterator, mark, block)
        while chunk[-1][0] >= end:  # the last block ends where the backward steps ended
            chunk.pop()
        if not marks:
            pin.open = pin.iterator = None
        yield reversed(chunk)
    yield reversed(first)


def _pinned_top(iterator: Any, steps: int) -> list[Item]:
    """Up to ``steps`` items of ``iterator`` from its last one down."""
    iterator.seek_to_last()
    return _pinned_items(iterator, steps, iterator.prev)


def _pinned_marks(iterator: Any, start: bytes, block: int, end: bytes) -> list[bytes]:
    """The keys below ``end`` at ``block``, ``2 * block``, ... items after ``start``.

    ``start`` is a key of ``iterator``.
    """
    marks: list[bytes] = []
    iterator.seek(start)
    step = iterator.next
    valid = iterator.valid
    while True:
        for _ in range(block):
            step()
            if not valid():
                iterator.status()
                return marks
        key = iterator.key()
        if key >= end:
            return marks
        marks.append(key)


def _pinned_block(iterator: Any, start: bytes, block: int) -> list[Item]:
    """Up to ``block`` items of ``iterator`` from ``start`` (one of its keys) on, ascending."""
    iterator.seek(start)
    return _pinned_items(iterator, block, iterator.next)


def _pinned_items(iterator: Any, count: int, step: Callable[[], Any]) -> list[Item]:
    """Up to ``count`` items of ``iterator`` from where it stands, moving by ``step``."""
    key = iterator.key
    value = iterator.value
    valid = iterator.valid
    items = []
    for _ in range(count):
        if not valid():
            iterator.status()  # raises if the iterator stopped on an error
            break
        items.append((key(), value()))
        step()
    return items


def _merge_forward(
    cursor: _Cursor,
    pending: list[tuple[bytes, bytes | None]],
    ranges: list[tuple[bytes, bytes]],
    keyspace: Keyspace,
) -> Iterator[Item]:
    """Committed items merged with pending writes and ranges, in ascending key order."""
    position = 0
    count = len(pending)
    range_index = 0
    range_count = len(ranges)
    while (item := _step(cursor, keyspace)) is not None:
        key = item[0]
        while position < count and pending[position][0] < key:
            written, value = pending[position]
            position += 1
            if value is not None:
                yield written, value
        if position < count and pending[position][0] == key:
            value = pending[position][1]
            position += 1
            if value is not None:
                yield key, value
            continue
        if range_count:
            while range_index < range_count and ranges[range_index][1] <= key:
                range_index += 1
            if range_index < range_count and ranges[range_index][0] <= key:
                continue
        yield item
    for written, value in pending[position:]:
        if value is not None:
            yield written, value


def _backward(
    cursor: _Cursor,
    pending: list[tuple[bytes, bytes | None]] | tuple[()],
    ranges: list[tuple[bytes, bytes]] | tuple[()],
    keyspace: Keyspace,
) -> Iterator[Item]:
    """Committed items merged with pending writes and ranges, in descending key order.

    ``pending`` and ``ranges`` are in descending order.
    """
    position = 0
    count = len(pending)
    range_index = 0
    range_count = len(ranges)
    while (item := _step(cursor, keyspace)) is not None:
        key = item[0]
        while position < count and pending[position][0] > key:
            written, value = pending[position]
            position += 1
            if value is not None:
                yield written, value
        if position < count and pending[position][0] == key:
            value = pending[position][1]
            position += 1
            if value is not None:
                yield key, value
            continue
        if range_count:
            while range_index < range_count and ranges[range_index][0] > key:
                range_index += 1
            if range_index < range_count and key < ranges[range_index][1]:
                continue
        yield item
    for written, value in pending[position:]:
        if value is not None:
            yield written, value
