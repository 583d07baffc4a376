"""Every error the library defines derives from one root, ``topology.errors.StreamsError``.

DESIGN.md, "Public API contract": the existing types keep their names and their standard
bases, so ``except ValueError`` (or ``LookupError``, ``RuntimeError``) code keeps working.
"""

from __future__ import annotations

import importlib
import pkgutil
import types

import pytest

import suppress
import suppress.errors
import topology
import topology.errors
from suppress.errors import BufferFullError, InvalidSuppressionError, SuppressError
from topology.errors import (
    EmptyTopicError,
    FeedbackLoopError,
    IllegalStateError,
    InvalidTimestampError,
    StateCorruptedError,
    StoreClosedError,
    StoreError,
    StreamsError,
    TaskFailedError,
    TopologyError,
    UnknownTopicError,
)
from topology.serde import SerdeError
from topology.state.codec import StateCodecError
from topology.state.rocksdb.errors import (
    StateCorruptedDirectoryError,
    StateCorruptedStoreError,
    StateStoreError,
)


def _modules() -> list[types.ModuleType]:
    found: list[types.ModuleType] = []
    for package in (suppress, topology):
        found.append(package)
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}."):
            found.append(importlib.import_module(info.name))
    return found


def _library_exceptions() -> set[type[BaseException]]:
    found: set[type[BaseException]] = set()
    for module in _modules():
        for value in vars(module).values():
            if (isinstance(value, type) and issubclass(value, BaseException)
                    and not issubclass(value, Warning)
                    and value.__module__.split(".")[0] in {"suppress", "topology"}):
                found.add(value)
    return found


def test_one_root_shared_by_both_packages() -> None:
    assert topology.errors.StreamsError is suppress.errors.StreamsError
    assert issubclass(SuppressError, StreamsError)


def test_every_library_error_derives_from_the_root() -> None:
    errors = _library_exceptions()
    assert {TopologyError, SerdeError, SuppressError, StateStoreError} <= errors
    offenders = sorted(f"{e.__module__}.{e.__qualname__}" for e in errors
                       if not issubclass(e, StreamsError))
    assert offenders == []


@pytest.mark.parametrize(("error", "standard"), [
    (EmptyTopicError, LookupError),
    (StoreError, LookupError),
    (SerdeError, ValueError),
    (TopologyError, ValueError),
    (UnknownTopicError, ValueError),
    (InvalidTimestampError, ValueError),
    (InvalidTimestampError, RuntimeError),
    (InvalidSuppressionError, ValueError),
    (StateCodecError, ValueError),
    (StateCodecError, RuntimeError),
    (TaskFailedError, RuntimeError),
    (FeedbackLoopError, RuntimeError),
    (IllegalStateError, RuntimeError),
    (StoreClosedError, RuntimeError),
    (StateCorruptedError, RuntimeError),
    (StateCorruptedError, StreamsError),
    (StateCorruptedStoreError, StateCorruptedError),
    (StateCorruptedDirectoryError, StateCorruptedError),
])
def test_standard_bases_are_kept(error: type[BaseException], standard: type[BaseException]) -> None:
    assert issubclass(error, standard)


def test_the_root_adds_no_standard_base() -> None:
    """``except RuntimeError`` must not catch a ``SerdeError`` (nor ``except ValueError`` a
    ``TaskFailedError``): the root is a plain ``Exception``."""
    assert StreamsError.__bases__ == (Exception,)
    assert not issubclass(SerdeError, RuntimeError)
    assert not issubclass(EmptyTopicError, (RuntimeError, ValueError))
    assert not issubclass(TaskFailedError, (ValueError, LookupError))
    assert BufferFullError.__mro__[1:] == (SuppressError, StreamsError, Exception, BaseException,
                                           object)


def test_a_call_the_state_does_not_allow_raises_illegal_state() -> None:
    from topology import StreamsBuilder, TopologyTestDriver
    from topology.state.memory import InMemoryVersionedKeyValueStore

    b = StreamsBuilder()
    b.stream("in").to("out")
    driver = TopologyTestDriver(b.build())
    with pytest.raises(IllegalStateError, match="records no timeline"):
        driver.timeline()
    topic = driver.create_input_topic("in")
    driver.close()
    with pytest.raises(IllegalStateError, match="the driver is closed"):
        topic.pipe_input("k", "v", 0)
    store = InMemoryVersionedKeyValueStore("v", str.encode, 100)
    with pytest.raises(IllegalStateError, match="nothing to drain"):
        store.watch(lambda entry: None).drain()
    store.watch(lambda entry: store.put("other", 1, 2))
    with pytest.raises(IllegalStateError, match="tried to write to it"):
        store.put("k", 1, 1)
