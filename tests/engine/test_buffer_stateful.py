"""The time-ordered buffer against a naive reference model (hypothesis state machine)."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from hypothesis_profiles import examples

from suppress.buffer import TimeOrderedBuffer
from suppress.entry import RecordContext, context_size, entry_size

KEYS = st.binary(min_size=0, max_size=3)
VALUES = st.none() | st.binary(max_size=4)


class BufferMachine(RuleBasedStateMachine):
    """Model: a dict key -> [time, new, old, prior, ctx]; order = sorted (time, key).

    Two buffers: ``buf`` (one heap, bytes tracked) and ``lazy`` (buckets per time, bytes
    computed on demand); both must evict exactly what the model says.
    """

    def __init__(self) -> None:
        super().__init__()
        self.buf = TimeOrderedBuffer(bytes, bytes, track_bytes=True)
        self.lazy = TimeOrderedBuffer(bytes, bytes, track_bytes=False, few_times=True)
        self.model: dict[bytes, list] = {}

    @rule(time=st.integers(0, 20), key=KEYS, new=VALUES, old=VALUES, ts=st.integers(0, 50),
          topic=st.sampled_from(["", "t", "tópic"]))
    def put(self, time: int, key: bytes, new, old, ts: int, topic: str) -> None:
        ctx = RecordContext(ts, 0, topic, 0, ())
        self.buf.put(time, key, new, old, ctx)
        self.lazy.put(time, key, new, old, ctx)
        if key in self.model:
            entry = self.model[key]
            entry[1], entry[2], entry[4] = new, old, ctx
        else:
            self.model[key] = [time, new, old, old, ctx]

    def _order(self) -> list[bytes]:
        return sorted(self.model, key=lambda k: (self.model[k][0], k))

    @rule(expiry=st.integers(-1, 25))
    def evict_expired(self, expiry: int) -> None:
        got, got_lazy = [], []
        due = expiry.__ge__
        self.buf.evict_due(due, lambda e: got.append((e.key_bytes, e.new, e.old)))
        self.lazy.evict_due(due, lambda e: got_lazy.append((e.key_bytes, e.new, e.old)))
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


TestBufferMachine = BufferMachine.TestCase
TestBufferMachine.settings = settings(max_examples=examples(150), stateful_step_count=40,
                                      deadline=None)


ORDERS = pytest.mark.parametrize("few_times", [False, True], ids=["heap", "buckets"])


@ORDERS
def test_keys_with_equal_bytes_are_one_key(few_times: bool) -> None:
    """A lossy key serializer: keys with equal bytes are one key, as on disk and in Kafka;
    the entry keeps the key that created it and takes the latest change."""
    buf = TimeOrderedBuffer(lambda key: b"same", bytes, few_times=few_times)
    for key, value in (("b", b"1"), ("a", b"2"), ("c", b"3")):
        buf.put(5, key, value, None, RecordContext(5))
    buf._check()
    assert buf.num_records == 1 and "a" in buf
    got: list[tuple[str, bytes]] = []
    buf.evict_due(lambda t: t <= 5, lambda e: got.append((e.key, e.new)))
    assert got == [("b", b"3")]
    buf._check()


@ORDERS
def test_an_entry_stays_buffered_when_its_eviction_callback_raises(few_times: bool) -> None:
    """Every eviction loop hands the head over before removing it (records limit included)."""
    for evict in (lambda b, cb: b.evict_over(1, None, cb),
                  lambda b, cb: b.evict_over(None, 0, cb),
                  lambda b, cb: b.evict_due(lambda t: t <= 10, cb),
                  lambda b, cb: b.evict_while(lambda: True, cb)):
        buf = TimeOrderedBuffer(bytes, bytes, track_bytes=True, few_times=few_times)
        buf.put(1, b"a", b"1", None, RecordContext(1))
        buf.put(2, b"b", b"2", None, RecordContext(2))

        def fail(entry) -> None:
            raise RuntimeError("downstream failed")

        with pytest.raises(RuntimeError):
            evict(buf, fail)
        buf._check()
        assert [e.key for e in buf] == [b"a", b"b"]


@pytest.mark.parametrize("bad", [None, "text", 7])
def test_a_key_serializer_must_give_bytes(bad) -> None:
    buf = TimeOrderedBuffer(lambda key: bad, bytes)
    with pytest.raises(TypeError, match="key serializer gave"):
        buf.put(1, "k", b"v", None, RecordContext(1))
    buf._check()
    assert buf.num_records == 0


def test_bytes_like_key_serializations_are_taken_as_bytes() -> None:
    buf = TimeOrderedBuffer(lambda key: bytearray(key, "ascii"), bytes)
    for key in ("b", "a"):
        buf.put(1, key, b"v", None, RecordContext(1))
    buf._check()
    assert [e.key_bytes for e in buf] == [b"a", b"b"]
