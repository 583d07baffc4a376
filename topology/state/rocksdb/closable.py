"""Closing a RocksDB store: its operations raise once it is closed, its data stays."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...errors import StoreClosedError
from .entry import holds, pack_entry, pack_held, unpack_value
from .keyspace import Keyspace

__all__ = ("ClosableStore",)


class ClosableStore:
    """``close()`` and the open check of a store that reads and writes a keyspace.

    The store goes through ``_get``, ``_put`` and ``_delete`` (set by the subclass), and
    ``_held`` and ``_put_held`` if it holds entries unencoded (:meth:`_hold`); closing replaces
    them with functions that raise, so hot paths need no check of their own.
    """

    name: str
    _get: Callable[..., Any]
    _put: Callable[..., Any]
    _delete: Callable[..., Any]
    _held: Callable[[bytes], tuple[Any, Any, int] | None]
    _put_held: Callable[[bytes, tuple[Any, Any, int]], None]
    is_open = True
    """False once :meth:`close` ran; every public operation then raises ``StoreClosedError``."""

    def close(self) -> None:
        """Close the store (idempotent); its data stays in the keyspace, operations raise.

        The keyspace's database is neither committed nor closed.
        """
        self.is_open = False
        message = f"state store {self.name!r} is closed"

        def closed(*_args: object) -> Any:
            raise StoreClosedError(message)

        self._get = self._put = self._delete = self._held = self._put_held = closed

    def _hold(self, keyspace: Keyspace) -> None:
        """Let the keyspace hold entries that surely encode, unencoded, until the commit.

        Entries are ``(value, key, timestamp)`` (see ``Keyspace.hold``): written by
        ``_put_held``, read back through ``_held``.
        """
        self._held = keyspace.hold(pack_held)
        self._put_held = keyspace.put_held

    def _read_entry(self, key_bytes: bytes) -> tuple[Any, int] | None:
        """``(value, timestamp)`` under ``key_bytes`` (held, else read and decoded), or ``None``.

        For a store that called :meth:`_hold`.
        """
        held = self._held(key_bytes)
        if held is not None:
            return held[0], held[2]
        raw = self._get(key_bytes)
        return None if raw is None else unpack_value(raw)

    def _write_entry(self, key_bytes: bytes, key: Any, value: Any, timestamp: int) -> None:
        """Write ``value`` of ``key`` at ``timestamp`` (ms) under ``key_bytes``; ``None`` deletes.

        An entry that surely encodes is held until the commit; any other is encoded now, so
        that a value the state codec refuses raises here. For a store that called
        :meth:`_hold`.
        """
        if value is None:
            self._delete(key_bytes)
        elif holds(value, key, timestamp):
            self._put_held(key_bytes, (value, key, timestamp))
        else:
            self._put(key_bytes, pack_entry(value, key, timestamp))

    def _check_open(self) -> None:
        if not self.is_open:
            raise StoreClosedError(f"state store {self.name!r} is closed")
