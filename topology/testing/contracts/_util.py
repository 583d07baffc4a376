"""Helpers shared by the store contract checkers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

__all__ = ("ScanOrder", "check_scan_order", "closed_store_refuses", "expect", "ordered_keys")

ScanOrder = Literal["memory", "rocksdb"]
"""Which of Kafka's stores a window or session store's scans follow: ``"memory"`` (Kafka's
in-memory stores: by time, then key) or ``"rocksdb"`` (Kafka's RocksDB stores: by time
segment, then key, then time)."""


def check_scan_order(order: str) -> ScanOrder:
    """``order``, checked to be a :data:`ScanOrder`.

    :raises ValueError: ``order`` is neither ``"memory"`` nor ``"rocksdb"``.
    """
    if order == "memory":
        return "memory"
    if order == "rocksdb":
        return "rocksdb"
    raise ValueError(f"scan order is 'memory' or 'rocksdb', not {order!r}")


def expect(condition: bool, what: str) -> None:
    """Fail the contract with ``what`` unless ``condition`` holds.

    :raises AssertionError: ``store contract: <what>``.
    """
    if not condition:
        raise AssertionError(f"store contract: {what}")


def ordered_keys(keys: Iterable[str]) -> list[str]:
    """``str`` keys in the order of their UTF-8 bytes (unsigned), as stores order them."""
    return sorted(keys, key=lambda k: k.encode("utf-8"))


def closed_store_refuses(store: Any, calls: list[tuple[str, tuple[Any, ...]]]) -> None:
    """Close ``store``; then each ``(method, args)`` must raise ``StoreClosedError``."""
    from ...errors import StoreClosedError

    expect(store.is_open, "a new store is open")
    store.close()
    expect(not store.is_open, "a closed store says so")
    store.close()  # closing twice is harmless
    for method, args in calls:
        try:
            result = getattr(store, method)(*args)
            if hasattr(result, "__next__"):
                next(result, None)
        except StoreClosedError as err:
            expect("closed" in str(err), f"{method}() on a closed store says it is closed")
            continue
        raise AssertionError(f"store contract: {method}() on a closed store must raise "
                             "StoreClosedError")
