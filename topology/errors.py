"""Errors raised by the ``topology`` package.

Definition-time problems raise :class:`TopologyError`. While records flow, an exception from
user code, a serde or a suppression's buffer fails the task: the exception that caused it
propagates once (with a note naming the node and the record), and every later call that would
process input or advance time raises :class:`TaskFailedError` until the driver is closed.
"""

from __future__ import annotations

from suppress.errors import StreamsError as StreamsError

__all__ = (
    "EmptyTopicError",
    "FeedbackLoopError",
    "IllegalStateError",
    "InvalidTimestampError",
    "StateCorruptedError",
    "StoreClosedError",
    "StoreError",
    "StreamsError",
    "TaskFailedError",
    "TopologyError",
    "UnknownTopicError",
)


class TopologyError(StreamsError, ValueError):
    """A topology that cannot be built or run: raised at definition or build time."""


class EmptyTopicError(StreamsError, LookupError):
    """Reading a record from an output topic that has none (Kafka's NoSuchElementException).

    The message says whether the topic was never written (``Uninitialized topic: t``) or has
    been read to the end (``Empty topic: t``).
    """


class UnknownTopicError(TopologyError):
    """Piping a record to a topic no source of the topology reads (``Unknown topic: t``)."""


class StoreError(StreamsError, LookupError):
    """A state store that does not exist, or was asked for as the wrong kind."""


class TaskFailedError(StreamsError, RuntimeError):
    """The task failed earlier and processes nothing more; close the driver.

    ``node`` names the node where the first failure happened and ``cause`` is that first
    exception (also chained as ``__cause__``).
    """

    def __init__(self, message: str, node: str | None, cause: BaseException) -> None:
        super().__init__(message)
        self.node = node
        self.cause = cause


class FeedbackLoopError(StreamsError, RuntimeError):
    """One input record made the topology feed back more records than the configured limit.

    Raised when sinks write to topics the topology reads (directly or through a cycle) and
    the records keep coming back; the message names the cycle of topics and nodes.
    """


class IllegalStateError(StreamsError, RuntimeError):
    """A call the object's state does not allow (Kafka's ``IllegalStateException``).

    A driver used after ``close()``, a timeline asked of a driver that records none, a watcher
    with a callback asked to drain, a store written from its own watch callback, a Spark
    feature used without an active SparkSession. The message says what to do instead.
    """


class InvalidTimestampError(StreamsError, RuntimeError, ValueError):
    """A record reached a sink with a timestamp outside ``[0, 2**63 - 1]`` ms."""


class StoreClosedError(StreamsError, RuntimeError):
    """A state store used after ``close()`` (Kafka's ``InvalidStateStoreException``)."""


class StateCorruptedError(StreamsError, RuntimeError):
    """Damage to a state directory, found reading it: never half-read, never skipped.

    A checksum or I/O error, or a commit whose keyspaces or steps are missing. The message
    names the directory and what is damaged. Restore the state from a copy, or start a new
    state directory with a new query checkpoint (the committed input offsets live in the
    damaged state).
    """
