"""How a task fails: the first exception, the node and record it names, and what comes after.

An exception raised while a record is processed (by user code, a serde, a suppression's full
buffer, an invalid timestamp) fails the task, as Kafka stops a stream thread. The exception
propagates once, with a note naming the node and the record; what the record had already
forwarded before the exception stays where it went (outputs written, stores updated, the
overflowing entry kept in its buffer), records it had fed back and not yet processed are
discarded, and every later call that would process input or advance time raises
:class:`~topology.errors.TaskFailedError`. Outputs, stores and metrics stay readable.

:class:`TaskFailures` is the part of :class:`~topology.runtime.task.Task` that records the
failure (:class:`TaskFailure`) and refuses work after it.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, NamedTuple

from suppress.entry import Headers
from suppress.processor import SuppressProcessor

from ..errors import TaskFailedError
from .processor import InternalProcessor

if TYPE_CHECKING:
    from .graph import GraphNode

__all__ = ("TaskFailure", "TaskFailures", "failing_node")


class TaskFailure(NamedTuple):
    """Why a task stopped: the first exception, where, and the record being processed."""

    node: str | None
    """The node whose code raised (``None`` when outside any node, e.g. a punctuation)."""
    topic: str | None
    offset: int | None
    key: Any
    value: Any
    timestamp: int | None
    cause: BaseException


class TaskFailures:
    """The failure of a :class:`~topology.runtime.task.Task`: recorded once, then refused.

    A part of ``Task`` (its base class), with the attributes ``Task`` sets.
    """

    if TYPE_CHECKING:
        failure: TaskFailure | None
        sources: dict[str, GraphNode]
        _offsets: dict[str, int]
        _queue: deque[tuple[str, Any, Any, int, Headers]]

    def fail_on_input(self, exc: BaseException, topic: str, key: Any, value: Any,
                      timestamp: int) -> None:
        """Fail the task for an input record its source could not read (deserialization).

        The record takes its offset, as it would in a partition.
        """
        self._check_alive()
        offset = self._offsets.get(topic, 0)
        self._offsets[topic] = offset + 1
        source = self.sources.get(topic)
        self._fail(exc, topic, offset, key, value, timestamp,
                   node=None if source is None else source.name)

    def _check_alive(self) -> None:
        failure = self.failure
        if failure is not None:
            cause = failure.cause
            where = f"at node {failure.node}" if failure.node else "outside any node"
            raise TaskFailedError(
                f"the task failed earlier {where} (first cause: {type(cause).__name__}: "
                f"{cause}); it processes no more input and does not advance time: close the "
                f"driver", failure.node, cause) from cause

    def _fail(self, exc: BaseException, topic: str | None, offset: int | None, key: Any,
              value: Any, timestamp: int | None, node: str | None = None) -> None:
        """Record the first failure (the innermost record and node) and stop the task."""
        if self.failure is not None or isinstance(exc, TaskFailedError):
            return
        if node is None:
            node = failing_node(exc)
        self.failure = TaskFailure(node, topic, offset, key, value, timestamp, exc)
        self._queue.clear()
        record = ("" if topic is None else
                  f" while processing the record at offset {offset} of topic {topic!r} "
                  f"(timestamp {timestamp})")
        exc.add_note(f"task failed at node {node}{record}; the task processes nothing more: "
                     f"close the driver")


def failing_node(exc: BaseException) -> str | None:
    """The node whose code raised ``exc``: the innermost node frame of its traceback.

    A suppression's full buffer names its own node. Looking at the traceback costs nothing
    while records flow; it runs once, when the task fails.
    """
    node_name = getattr(exc, "node_name", None)
    if isinstance(node_name, str):
        return node_name
    node = None
    tb = exc.__traceback__
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        if isinstance(owner, InternalProcessor | SuppressProcessor):
            node = owner.name
        tb = tb.tb_next
    return node
