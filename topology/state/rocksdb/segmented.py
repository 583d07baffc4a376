"""What the RocksDB window and session stores share: time segments in one keyspace.

Both stores begin every data key with the 8-byte start of its time segment, so a whole
segment expires with one ``delete_range``. The observed stream time (ms) lives in the same
keyspace under the empty key, which sorts before every data key, so a reopened store resumes
where the last commit left it. A closed store refuses every operation.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from ..._key_identity import key_identity
from .closable import ClosableStore
from .codec import decode_int64, encode_int64
from .keyspace import Keyspace

__all__ = ("OBSERVED_KEY", "SegmentedStore")

OBSERVED_KEY = b""
"""The key of the observed stream time: shorter than, so before, every data key."""


class SegmentedStore(ClosableStore, ABC):
    """A store on a keyspace of time segments: stream time, expiry by segment, close."""

    name: str
    retention_ms: int
    _live_from: int
    """The start (ms) of the oldest live segment; set by the subclass once it can compute it."""

    def _bind(self, name: str, key_serializer: Callable[[Any], bytes | None],
              retention_ms: int, keyspace: Keyspace) -> None:
        """Take the keyspace and read the observed stream time it holds (``-1`` if none)."""
        self.name = name
        self._key_bytes = key_serializer
        self.key_identity = key_identity(key_serializer)
        """Keys with equal bytes are one key (:mod:`topology._key_identity`)."""
        self.retention_ms = retention_ms
        self._keyspace = keyspace
        self._get: Callable[[bytes], bytes | None] = keyspace.get
        self._put: Callable[[bytes, bytes], None] = keyspace.put
        self._delete: Callable[[bytes], None] = keyspace.delete
        raw = keyspace.get(OBSERVED_KEY)
        self._observed = -1 if raw is None else decode_int64(raw)
        self._written = next(keyspace.items(encode_int64(-(2**63))), None) is not None

    @property
    def observed_stream_time(self) -> int:
        """The largest data time written so far (ms): a window's start, a session's end.

        ``-1`` before the first write.
        """
        return self._observed

    @property
    def written(self) -> bool:
        """Whether anything was written or deleted (a write to expired data is not a write).

        Kafka logs every write of a store to its changelog, so this says whether the
        changelog topic exists. A store constructed on a keyspace that holds data counts as
        written.
        """
        return self._written

    @abstractmethod
    def _first_live_segment(self, observed: int) -> int:
        """The start (ms) of the oldest segment still live at stream time ``observed``."""

    def _advance(self, observed: int) -> None:
        """Move the stream time to ``observed`` and drop the segments it expires."""
        self._put(OBSERVED_KEY, encode_int64(observed))
        self._observed = observed
        live_from = self._first_live_segment(observed)
        if live_from > self._live_from:
            self._keyspace.delete_range(encode_int64(self._live_from), encode_int64(live_from))
            self._live_from = live_from

