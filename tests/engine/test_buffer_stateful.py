"""The suppression buffers against a naive reference model (hypothesis state machines)."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from hypothesis_profiles import examples

from suppress.buffer import TimeOrderedBuffer
from suppress.entry import RecordContext, context_size, entry_size
from suppress.final import FinalResultsBuffer

KEYS = st.binary(min_size=0, max_size=3)
VALUES = st.none() | st.binary(max_size=4)


def _key_time(key: bytes) -> int:
    """A final-results key's buffer time: a function of the key, as a window's end is."""
    return sum(key) % 7 * 3


class BufferMachine(RuleBasedStateMachine):
    """Model: a dict key -> [time, new, old, prior, ctx]; order = sorted (time, key).

    Two buffers: ``buf`` (bytes tracked) and ``lazy`` (bytes computed on demand); both must
    evict exactly what the model says. Here both are time-limit buffers (one heap), and a
    key's time is drawn: a key already buffered keeps its first time.
    """

    time_of = None

    def buffers(self) -> tuple:
        return (TimeOrderedBuffer(bytes, bytes, track_bytes=True),
                TimeOrderedBuffer(bytes, bytes, track_bytes=False))

    def __init__(self) -> None:
        super().__init__()
        self.buf, self.lazy = self.buffers()
        self.model: dict[bytes, list] = {}

    @rule(time=st.integers(0, 20), key=KEYS, new=VALUES, old=VALUES, ts=st.integers(0, 50),
          topic=st.sampled_from(["", "t", "tópic"]))
    def put(self, time: int, key: bytes, new, old, ts: int, topic: str) -> None:
        ctx = RecordContext(ts, 0, topic, 0, ())
        if self.time_of is not None:
            time = self.time_of(key)
        self.buf.put(time, key, new, old, ctx)
        self.lazy.put(time, key, new, old, ctx)
        if key in self.model:
            entry = self.model[key]
            entry[1], entry[2], entry[4] = new, old, ctx
        else:
            self.model[key] = [time, new, old, old, ctx]

    def _order(self) -> list[bytes]:
        return sorted(self.model, key=lambda k: (self.model[k][0], k))

    def evict_lazy_due(self, expiry: int, got: list) -> None:
        self.lazy.evict_due(expiry.__ge__, lambda e: got.append((e.key_bytes, e.new, e.old)))

    @rule(expiry=st.integers(-1, 25))
    def evict_expired(self, expiry: int) -> None:
        got, got_lazy = [], []
        self.buf.evict_due(expiry.__ge__, lambda e: got.append((e.key_bytes, e.new, e.old)))
        self.evict_lazy_due(expiry, got_lazy)
        want = [k for k in self._order() if self.model[k][0] <= expiry]
        assert got == got_lazy == [(k, self.model[k][1], self.model[k][2]) for k in want]
        for k in want:
            del self.model[k]

    @rule(keep=st.integers(0, 5))
    def evict_to_count(self, keep: int) -> None:
        got, got_lazy = [], []
        self.buf.evict_while(lambda: self.buf.num_records > keep,
                             lambda e: got.append(e.key_bytes))
        self.lazy.evict_while(lambda: self.lazy.num_records > keep,
                              lambda e: got_lazy.append(e.key_bytes))
        want = self._order()[: max(0, len(self.model) - keep)]
        assert got == got_lazy == want
        for k in want:
            del self.model[k]

    @rule(records=st.integers(0, 5) | st.none(), size=st.integers(0, 200) | st.none())
    def evict_over(self, records: int | None, size: int | None) -> None:
        order = self._order()
        total = sum(entry_size(k, e[3], e[2], e[1], context_size(e[4]))
                    for k, e in self.model.items())
        want = []
        while order and ((records is not None and len(order) > records)
                         or (size is not None and total > size)):
            k = order.pop(0)
            e = self.model[k]
            total -= entry_size(k, e[3], e[2], e[1], context_size(e[4]))
            want.append(k)
        got: list[bytes] = []
        self.buf.evict_over(records, size, lambda e: got.append(e.key_bytes))
        assert got == want
        # the lazy buffer cannot enforce bytes; the same keys go by count
        got_lazy: list[bytes] = []
        self.lazy.evict_over(len(self.model) - len(want), None,
                             lambda e: got_lazy.append(e.key_bytes))
        assert got_lazy == want
        for k in want:
            del self.model[k]

    @rule(key=KEYS)
    def prior(self, key: bytes) -> None:
        defined, value = self.buf.prior_value(key)
        assert defined == (key in self.model)
        assert self.lazy.prior_value(key) == (defined, value)
        if defined:
            assert value == self.model[key][3]

    @invariant()
    def consistent(self) -> None:
        self.buf._check()
        self.lazy._check()
        assert self.lazy.size_bytes == self.buf.size_bytes
        assert self.buf.num_records == len(self.model)
        assert self.buf.min_time == min((e[0] for e in self.model.values()), default=2**63 - 1)
        assert self.buf.size_bytes == sum(
            entry_size(k, e[3], e[2], e[1], context_size(e[4])) for k, e in self.model.items())
        assert [e.key_bytes for e in self.buf] == self._order()
        assert [e.key_bytes for e in self.lazy] == self._order()
        assert self.lazy.min_time == self.buf.min_time


class FinalBufferMachine(BufferMachine):
    """The final-results buffers (a bucket per time), a key's time following from the key.

    ``lazy`` finds keys through their time (``time_of``) and emits closed windows through
    ``emit_closed``; ``buf`` searches the times and evicts one entry at a time.
    """

    time_of = staticmethod(_key_time)

    def buffers(self) -> tuple:
        return (FinalResultsBuffer(bytes, bytes, track_bytes=True),
                FinalResultsBuffer(bytes, bytes, time_of=_key_time))

    def evict_lazy_due(self, expiry: int, got: list) -> None:
        """Closed windows leave through ``emit_closed`` (keys are their bytes here)."""
        self.lazy.emit_closed(expiry, lambda key, new, old, ctx: got.append((key, new, old)))


TestBufferMachine = BufferMachine.TestCase
TestFinalBufferMachine = FinalBufferMachine.TestCase
for machine in (TestBufferMachine, TestFinalBufferMachine):
    machine.settings = settings(max_examples=examples(150), stateful_step_count=40,
                                deadline=None)


def _heap(key_serializer, value_serializer, track_bytes=False):
    return TimeOrderedBuffer(key_serializer, value_serializer, track_bytes=track_bytes)


def _buckets(key_serializer, value_serializer, track_bytes=False):
    return FinalResultsBuffer(key_serializer, value_serializer, track_bytes=track_bytes)


BUFFERS = pytest.mark.parametrize("make", [_heap, _buckets], ids=["heap", "buckets"])


@BUFFERS
def test_keys_with_equal_bytes_are_one_key(make) -> None:
    """A lossy key serializer: keys with equal bytes are one key, as on disk and in Kafka;
    the entry keeps the key that created it and takes the latest change."""
    buf = make(lambda key: b"same", bytes)
    for key, value in (("b", b"1"), ("a", b"2"), ("c", b"3")):
        buf.put(5, key, value, None, RecordContext(5))
    buf._check()
    assert buf.num_records == 1 and "a" in buf
    got: list[tuple[str, bytes]] = []
    buf.evict_due(lambda t: t <= 5, lambda e: got.append((e.key, e.new)))
    assert got == [("b", b"3")]
    buf._check()


@BUFFERS
def test_an_entry_stays_buffered_when_its_eviction_callback_raises(make) -> None:
    """Every eviction loop hands the head over before removing it (records limit included)."""
    for evict in (lambda b, cb: b.evict_over(1, None, cb),
                  lambda b, cb: b.evict_over(None, 0, cb),
                  lambda b, cb: b.evict_due(lambda t: t <= 10, cb),
                  lambda b, cb: b.evict_while(lambda: True, cb)):
        buf = make(bytes, bytes, track_bytes=True)
        buf.put(1, b"a", b"1", None, RecordContext(1))
        buf.put(2, b"b", b"2", None, RecordContext(2))

        def fail(entry) -> None:
            raise RuntimeError("downstream failed")

        with pytest.raises(RuntimeError):
            evict(buf, fail)
        buf._check()
        assert [e.key for e in buf] == [b"a", b"b"]


@BUFFERS
@pytest.mark.parametrize("bad", [None, "text", 7])
def test_a_key_serializer_must_give_bytes(make, bad) -> None:
    buf = make(lambda key: bad, bytes)
    with pytest.raises(TypeError, match="key serializer gave"):
        buf.put(1, "k", b"v", None, RecordContext(1))
    buf._check()
    assert buf.num_records == 0


@BUFFERS
def test_bytes_like_key_serializations_are_taken_as_bytes(make) -> None:
    buf = make(lambda key: bytearray(key, "ascii"), bytes)
    for key in ("b", "a"):
        buf.put(1, key, b"v", None, RecordContext(1))
    buf._check()
    assert [e.key_bytes for e in buf] == [b"a", b"b"]
