"""Durable output topics: what the driver produced and how far each topic was read.

With a ``state_dir`` the driver's output topics behave as Kafka topics read by a consumer
that commits its position: every record a sink writes is logged, and committed with the
task's state (stores, buffers, input offsets) in one atomic step; reading a topic moves its
read position, committed at the next commit (and at a clean close). A restarted driver
returns exactly the records not yet read as of the last commit, so a run that crashes and
continues from the committed input offsets produces every output record exactly once.

Layout in the keyspace ``driver.outputs``: ``topic bytes + 0x00 + 8-byte sequence`` -> the
held record (the driver's flat tuple) through the state codec. The meta entry
``driver.outputs`` holds, per topic, ``[records produced, records read]``. Records read and
committed are deleted from the keyspace at the commit that records the read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..state.codec import StateCodecError, decode, encode

if TYPE_CHECKING:
    from ..state.rocksdb import Keyspace

__all__ = ("KEYSPACE", "META_KEY", "OutputLog")

KEYSPACE = "driver.outputs"
"""The keyspace of logged output records."""
META_KEY = b"driver.outputs"
"""The meta entry of produced and read counts per topic."""

_SEQ = 8


def _log_key(topic: bytes, seq: int) -> bytes:
    return topic + b"\x00" + seq.to_bytes(_SEQ, "big")


class OutputLog:
    """Output records and read positions of every topic, logged for the next commit.

    :param keyspace: where records are logged (pending until the state database commits).
    :param meta: the committed meta entry (``None`` for a fresh state directory).
    :raises StateCodecError: for a meta entry this version did not write.
    """

    def __init__(self, keyspace: Keyspace, meta: bytes | None) -> None:
        self._keyspace = keyspace
        counts = {} if meta is None else decode(meta)
        if not isinstance(counts, dict):
            raise StateCodecError("the driver's output log meta entry is not a mapping")
        self._produced: dict[str, int] = {t: int(c[0]) for t, c in counts.items()}
        self._read: dict[str, int] = {t: int(c[1]) for t, c in counts.items()}
        self._pending: dict[str, list[Any]] = {}

    def restore(self) -> dict[str, list[Any]]:
        """The records not yet read, per topic, as committed (the held flat tuples)."""
        out: dict[str, list[Any]] = {}
        for topic, produced in self._produced.items():
            name = topic.encode()
            first = self._read[topic]
            if produced > first:
                items = self._keyspace.items(_log_key(name, first), _log_key(name, produced))
                out[topic] = [decode(value) for _, value in items]
        return out

    def produced(self, topic: str, record: Any) -> None:
        """Log one record a sink wrote to ``topic`` (written at the next commit)."""
        self._pending.setdefault(topic, []).append(record)

    def flush(self, unread: Mapping[str, int]) -> bytes:
        """Write the pending records and deletions; return the meta entry to commit with them.

        ``unread`` gives, per topic, how many records are still waiting to be read (the
        oldest produced are the ones read).

        :raises StateCodecError: for a record the state codec cannot write, naming the topic
            (give the sink ``Produced`` serdes, or use codec types).
        """
        keyspace = self._keyspace
        for topic, records in self._pending.items():
            name = topic.encode()
            seq = self._produced.get(topic, 0)
            for record in records:
                try:
                    keyspace.put(_log_key(name, seq), encode(record))
                except StateCodecError as exc:
                    raise StateCodecError(
                        f"output topic {topic!r}: a record cannot be kept in the state "
                        f"directory ({exc}); give its sink Produced serdes or use plain "
                        "types") from exc
                seq += 1
            self._produced[topic] = seq
        self._pending.clear()
        for topic, produced in self._produced.items():
            committed = self._read.get(topic, 0)
            read = produced - unread.get(topic, 0)
            if read > committed:
                name = topic.encode()
                keyspace.delete_range(_log_key(name, committed), _log_key(name, read))
            self._read[topic] = read
        return encode({t: [n, self._read[t]] for t, n in self._produced.items()})
