"""Errors raised by the suppression engine."""

from __future__ import annotations

__all__ = ("BufferFullError", "InvalidSuppressionError", "StreamsError", "SuppressError")

LONG_MAX = 2**63 - 1


class StreamsError(Exception):
    """The root of every error the library raises (Kafka's StreamsException).

    Defined here, below ``topology``, so that the engine's errors share it;
    ``topology.errors.StreamsError`` is this same class. Each error also keeps its standard
    base (``ValueError``, ``LookupError``, ``RuntimeError``, ...).
    """


class SuppressError(StreamsError):
    """Base class of every error raised by the ``suppress`` package."""


class InvalidSuppressionError(SuppressError, ValueError):
    """A suppression or buffer configuration that cannot be used.

    Raised when the configuration is built or attached to a topology (definition time),
    never while records flow.
    """


class BufferFullError(SuppressError):
    """A ``shut_down_when_full()`` buffer went over one of its limits.

    The message has Kafka Streams' shape::

        <node> buffer exceeded its max capacity. Currently [<n>/<max n>] records and
        [<bytes>/<max bytes>] bytes.

    An unset limit prints as ``9223372036854775807`` (Kafka's ``Long.MAX_VALUE``). The record
    that overflowed the buffer is already in it when this is raised, so nothing is lost and the
    buffer stays readable.

    >>> print(BufferFullError("testNode", 2, 1, 83, None))  # doctest: +NORMALIZE_WHITESPACE
    testNode buffer exceeded its max capacity. Currently [2/1] records and
    [83/9223372036854775807] bytes.
    """

    def __init__(
        self,
        node_name: str,
        num_records: int,
        max_records: int | None,
        buffer_bytes: int,
        max_bytes: int | None,
    ) -> None:
        self.node_name = node_name
        self.num_records = num_records
        self.max_records = LONG_MAX if max_records is None else max_records
        self.buffer_bytes = buffer_bytes
        self.max_bytes = LONG_MAX if max_bytes is None else max_bytes
        super().__init__(
            f"{node_name} buffer exceeded its max capacity. Currently "
            f"[{num_records}/{self.max_records}] records and "
            f"[{buffer_bytes}/{self.max_bytes}] bytes."
        )
