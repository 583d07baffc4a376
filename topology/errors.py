"""Errors raised by the ``topology`` package."""

from __future__ import annotations

__all__ = (
    "EmptyTopicError",
    "StoreError",
    "TopologyError",
    "UnknownTopicError",
)


class TopologyError(ValueError):
    """A topology that cannot be built or run: raised at definition or build time."""


class EmptyTopicError(LookupError):
    """Reading a record from an output topic that has none (Kafka's NoSuchElementException).

    The message says whether the topic was never written (``Uninitialized topic: t``) or has
    been read to the end (``Empty topic: t``).
    """


class UnknownTopicError(TopologyError):
    """Piping a record to a topic no source of the topology reads (``Unknown topic: t``)."""


class StoreError(LookupError):
    """A state store that does not exist, or was asked for as the wrong kind."""
