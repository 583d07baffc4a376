"""The spilling buffer against the unbounded buffer (hypothesis state machine).

Every operation runs on both; whatever comes out (evicted entries in order, with their time,
change, prior, context and size) and every figure (count, bytes, smallest time, prior
values, the entries in order) must be equal. The bounds, the batch sizes and whether bytes
are tracked are drawn, small, so that entries move between the tiers all the time; after
each step ``_check()`` holds (memory within its bounds, a prefix of the order, the disk areas
consistent). Machines run over a ``SortedByteStore`` and over a RocksDB keyspace, with buffer
times drawn per put (time limits: two disk areas) or a function of the key (final results:
one area).

Some machines keep the buffer across restarts (``durable``): a commit is a checkpoint and a
commit of the store (the buffer's own commits commit nothing), and a restart drops the store's
uncommitted writes, restores a new buffer from it and replays the operations since the commit,
as a task does from its committed offsets: the restored buffer must give exactly what the
uninterrupted one gave, and go on as the unbounded one.
"""

from __future__ import annotations

import tempfile

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from hypothesis_profiles import examples
from sortedcontainers import SortedDict

from suppress.buffer import TimeOrderedBuffer
from suppress.entry import RecordContext
from suppress.spill import SpillBackend, SpillingBuffer
from topology.state import codec
from topology.state.rocksdb import StateDB

from .byte_store import SortedByteStore

KEYS = st.binary(min_size=0, max_size=2)
VALUES = st.none() | st.binary(max_size=6)
HEADERS = st.sampled_from([(), (("h", b"1"),), (("h", None), ("é", b"xyz"))])


def key_time(key: bytes) -> int:
    """A buffer time that is a function of the key, as a window's end is."""
    return (len(key) * 7 + (key[0] if key else 0)) % 21


def _seen(entry) -> tuple:
    return (entry.time, entry.key, entry.new, entry.old, entry.prior, entry.context)


class SpillMachine(RuleBasedStateMachine):
    rocksdb = False
    keyed = False  # times are key_time(key): the one-area layout

    def __init__(self) -> None:
        super().__init__()
        self._directory: tempfile.TemporaryDirectory | None = None
        self._db: StateDB | None = None
        self.durable = False
        self._log: list[tuple] = []  # operations since the last commit (durable)
        self._committed: SortedDict = SortedDict()  # the SortedByteStore as last committed

    @initialize(records=st.none() | st.integers(0, 3), size=st.none() | st.integers(0, 150),
                track=st.booleans(), stage=st.integers(1, 4), batch=st.integers(1, 3),
                commit_every=st.integers(1, 7), durable=st.booleans())
    def start(self, records, size, track, stage, batch, commit_every, durable) -> None:
        self.durable = durable
        self._params = (records, size, track, stage, batch, commit_every)
        if self.rocksdb:
            self._directory = tempfile.TemporaryDirectory()
        self.track = track or size is not None
        self.spill = self._buffer()
        self.ref = TimeOrderedBuffer(bytes, bytes, track_bytes=True)

    def _buffer(self, data: SortedDict | None = None) -> SpillingBuffer:
        """A new spilling buffer: over a fresh store, or (``data``) a restored one."""
        records, size, track, stage, batch, commit_every = self._params
        if self.rocksdb:
            assert self._directory is not None
            if self._db is not None:
                self._db.close()  # drops what was not committed
            db = self._db = StateDB.open(self._directory.name + "/s")
            keyspace = db.keyspace("spill")
            commit = (lambda: None) if self.durable else db.commit
            backend = SpillBackend(lambda: keyspace, commit, codec.encode, codec.decode)
        else:
            store = SortedByteStore()
            if data is not None:
                store.data = SortedDict(data)
            backend = SpillBackend(store.open, store.commit, codec.encode, codec.decode)
        buffer = SpillingBuffer(bytes, bytes, records, size, backend, track_bytes=track,
                                time_of=key_time if self.keyed else None)
        buffer.STAGE_LIMIT = stage
        buffer.REFILL_BATCH = batch
        buffer.COMMIT_EVERY = commit_every
        if data is not None or (self.rocksdb and self.durable):
            buffer.restore()
        return buffer

    def teardown(self) -> None:
        if self._db is not None:
            self._db.close()
        if self._directory is not None:
            self._directory.cleanup()

    def _same_entries(self, got: list, want: list) -> None:
        assert [_seen(e) for e in got] == [_seen(e) for e in want]
        if self.track:
            assert [e.size for e in got] == [e.size for e in want]

    @rule(time=st.integers(0, 20), key=KEYS, new=VALUES, old=VALUES, ts=st.integers(0, 50),
          topic=st.sampled_from(["", "t", "tópic"]), headers=HEADERS)
    def put(self, time, key, new, old, ts, topic, headers) -> None:
        if self.keyed:
            time = key_time(key)
        ctx = RecordContext(ts, ts, topic, 0, headers)
        self.spill.put(time, key, new, old, ctx)
        self.ref.put(time, key, new, old, ctx)
        if self.durable:
            self._log.append(("put", time, key, new, old, ctx))

    @rule(expiry=st.integers(-1, 25))
    def evict_due(self, expiry) -> None:
        got: list = []
        want: list = []
        n = self.spill.evict_due(expiry.__ge__, got.append)
        m = self.ref.evict_due(expiry.__ge__, want.append)
        assert n == m
        self._same_entries(got, want)
        if self.durable:
            self._log.append(("due", expiry, got))

    @rule(keep=st.integers(0, 6))
    def evict_to_count(self, keep) -> None:
        got: list = []
        want: list = []
        self.spill.evict_while(lambda: self.spill.num_records > keep, got.append)
        self.ref.evict_while(lambda: self.ref.num_records > keep, want.append)
        self._same_entries(got, want)
        if self.durable:
            self._log.append(("count", keep, got))

    @rule(key=KEYS)
    def prior(self, key) -> None:
        assert self.spill.prior_value(key) == self.ref.prior_value(key)

    @rule()
    def compare(self) -> None:
        """Figures that resolve staged puts first, so not checked after every step."""
        assert self.spill.num_records == self.ref.num_records
        assert self.spill.size_bytes == self.ref.size_bytes
        self._same_entries(list(self.spill), list(self.ref))

    @precondition(lambda self: self._db is not None or self.durable)
    @rule()
    def commit(self) -> None:
        """The task commits between records too; a durable one checkpoints its buffer first."""
        if self.durable:
            self.spill.checkpoint()
            self._log.clear()
        if self._db is not None:
            self._db.commit()
        else:
            self._committed = SortedDict(self.spill._store.data)

    @precondition(lambda self: self.durable)
    @rule()
    def restart(self) -> None:
        """Restore a new buffer from the last commit, and replay what came since."""
        self.spill = self._buffer(None if self.rocksdb else self._committed)
        self.spill._check()
        for op in self._log:
            if op[0] == "put":
                self.spill.put(*op[1:])
            else:
                got: list = []
                if op[0] == "due":
                    self.spill.evict_due(op[1].__ge__, got.append)
                else:
                    keep = op[1]
                    self.spill.evict_while(lambda: self.spill.num_records > keep,  # noqa: B023
                                           got.append)
                self._same_entries(got, op[2])
            self.spill._check()

    @invariant()
    def consistent(self) -> None:
        if hasattr(self, "spill"):
            self.spill._check()
            assert self.spill.min_time == self.ref.min_time


TestSpillMachine = SpillMachine.TestCase
TestSpillMachine.settings = settings(max_examples=examples(200), stateful_step_count=40,
                                     deadline=None)


class RocksDBSpillMachine(SpillMachine):
    rocksdb = True


TestRocksDBSpillMachine = RocksDBSpillMachine.TestCase
TestRocksDBSpillMachine.settings = settings(max_examples=examples(20), stateful_step_count=40,
                                            deadline=None)


class KeyedSpillMachine(SpillMachine):
    keyed = True


TestKeyedSpillMachine = KeyedSpillMachine.TestCase
TestKeyedSpillMachine.settings = settings(max_examples=examples(200), stateful_step_count=40,
                                          deadline=None)


class KeyedRocksDBSpillMachine(SpillMachine):
    keyed = True
    rocksdb = True


TestKeyedRocksDBSpillMachine = KeyedRocksDBSpillMachine.TestCase
TestKeyedRocksDBSpillMachine.settings = settings(max_examples=examples(20), stateful_step_count=40,
                                                 deadline=None)
