"""Kafka's default partitioner: which partition a record with a given serialized key goes to.

Kafka's producer sends a keyed record to ``toPositive(murmur2(key bytes)) % partitions``
(``Utils.murmur2``, seed ``0x9747b28c``). A step that re-keys a stream on Spark sends each
record to the task of the partition Kafka would have chosen, so the same key always meets
the same state, whichever partition it came from.
"""

from __future__ import annotations

__all__ = ("murmur2", "partition_for")

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_SEED = 0x9747B28C


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` of ``data``, as the signed 32-bit int Java returns.

    >>> murmur2(b"21"), murmur2(b"foobar"), murmur2(b"abc")
    (-973932308, -790332482, 479470107)
    """
    length = len(data)
    h = (_SEED ^ length) & _MASK
    tail = length & ~3
    for i in range(0, tail, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key_bytes: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner gives a record with ``key_bytes``.

    >>> [partition_for(key, 3) for key in (b"k0", b"k2", b"k3")]
    [2, 0, 1]
    """
    return (murmur2(key_bytes) & 0x7FFFFFFF) % partitions
