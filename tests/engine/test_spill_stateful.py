"""The spilling buffer against the unbounded buffer (hypothesis state machine).

Every operation runs on both; whatever comes out (evicted entries in order, with their time,
change, prior, context and size) and every figure (count, bytes, smallest time, prior
values, the entries in order) must be equal. The bounds, the batch sizes and whether bytes
are tracked are drawn, small, so that entries move between the tiers all the time; after
each step ``_check()`` holds (memory within its bounds, a prefix of the order, the disk areas
consistent). Machines run over a ``SortedByteStore`` and over a RocksDB keyspace, with buffer
times drawn per put (time limits: two disk areas) or a function of the key (final results:
one area).
"""

from __future__ import annotations

import tempfile

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

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

    @initialize(records=st.none() | st.integers(0, 3), size=st.none() | st.integers(0, 150),
                track=st.booleans(), stage=st.integers(1, 4), batch=st.integers(1, 3),
                commit_every=st.integers(1, 7))
    def start(self, records, size, track, stage, batch, commit_every) -> None:
        if self.rocksdb:
            self._directory = tempfile.TemporaryDirectory()
            self._db = StateDB.open(self._directory.name + "/s")
            keyspace = self._db.keyspace("spill")
            backend = SpillBackend(lambda: keyspace, self._db.commit, codec.encode, codec.decode)
        else:
            store = SortedByteStore()
            backend = SpillBackend(store.open, store.commit, codec.encode, codec.decode)
        self.track = track or size is not None
        self.spill = SpillingBuffer(bytes, bytes, records, size, backend, track_bytes=track,
                                    time_of=key_time if self.keyed else None)
        self.spill.STAGE_LIMIT = stage
        self.spill.REFILL_BATCH = batch
        self.spill.COMMIT_EVERY = commit_every
        self.ref = TimeOrderedBuffer(bytes, bytes, track_bytes=True)

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

    @rule(expiry=st.integers(-1, 25))
    def evict_due(self, expiry) -> None:
        got: list = []
        want: list = []
        n = self.spill.evict_due(expiry.__ge__, got.append)
        m = self.ref.evict_due(expiry.__ge__, want.append)
        assert n == m
        self._same_entries(got, want)

    @rule(keep=st.integers(0, 6))
    def evict_to_count(self, keep) -> None:
        got: list = []
        want: list = []
        self.spill.evict_while(lambda: self.spill.num_records > keep, got.append)
        self.ref.evict_while(lambda: self.ref.num_records > keep, want.append)
        self._same_entries(got, want)

    @rule(key=KEYS)
    def prior(self, key) -> None:
        assert self.spill.prior_value(key) == self.ref.prior_value(key)

    @rule()
    def compare(self) -> None:
        """Figures that resolve staged puts first, so not checked after every step."""
        assert self.spill.num_records == self.ref.num_records
        assert self.spill.size_bytes == self.ref.size_bytes
        self._same_entries(list(self.spill), list(self.ref))

    @precondition(lambda self: self._db is not None)
    @rule()
    def commit(self) -> None:
        """The task commits between records too."""
        assert self._db is not None
        self._db.commit()

    @invariant()
    def consistent(self) -> None:
        if hasattr(self, "spill"):
            self.spill._check()
            assert self.spill.min_time == self.ref.min_time


TestSpillMachine = SpillMachine.TestCase
TestSpillMachine.settings = settings(max_examples=200, stateful_step_count=40, deadline=None)


class RocksDBSpillMachine(SpillMachine):
    rocksdb = True


TestRocksDBSpillMachine = RocksDBSpillMachine.TestCase
TestRocksDBSpillMachine.settings = settings(max_examples=20, stateful_step_count=40,
                                            deadline=None)


class KeyedSpillMachine(SpillMachine):
    keyed = True


TestKeyedSpillMachine = KeyedSpillMachine.TestCase
TestKeyedSpillMachine.settings = settings(max_examples=200, stateful_step_count=40,
                                          deadline=None)


class KeyedRocksDBSpillMachine(SpillMachine):
    keyed = True
    rocksdb = True


TestKeyedRocksDBSpillMachine = KeyedRocksDBSpillMachine.TestCase
TestKeyedRocksDBSpillMachine.settings = settings(max_examples=20, stateful_step_count=40,
                                                 deadline=None)
