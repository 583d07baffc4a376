"""The on-disk layout of a state directory, its format marker, and its crash-safe creation.

A state directory holds::

    STATEDB        format marker, JSON: {"format": "topology-statedb", "version": 1}
    STATEDB.lock   the advisory lock (see ``lock.py``); holds the holder's pid
    STATEDB.commit the number of the last commit (see ``StateDB.commit``), once there is one
    db/            the RocksDB database (0o700): one column family per keyspace plus "meta"

and nothing else. The directory is created 0o700 when missing; the marker, lock file and
commit file are 0o600. A directory is used only if it is empty, holds exactly this layout, or
holds the leftovers of a creation that a crash interrupted; anything else is refused before
anything in it is opened for writing.

Owner-only: once a directory is accepted and locked, :func:`make_private` strips the group
and other permission bits of the directory, ``db/``, the marker and the commit file (the lock
file's are stripped through its descriptor), so a directory reused with looser modes (copied,
restored from a backup, made by hand) ends up 0o700 and its files 0o600. An entry that is
looser and belongs to another user cannot be fixed by this process and is refused
(:func:`ensure_directory` refuses such a directory before anything in it is touched).
Permission bits are only ever removed: an owner who took its own write bit keeps it off.
RocksDB creates its files inside ``db/`` with the process's umask; ``db/`` being 0o700 is what
keeps other users out of them.

Creation happens under the lock, in an order that a crash at any point leaves recognisable:

1. remove leftovers of an earlier interrupted creation (``STATEDB.tmp``, ``db.creating/``);
2. build the database in ``db.creating/`` and close it;
3. write the marker to ``STATEDB.tmp``, fsync, rename it to ``STATEDB``, fsync the directory;
4. rename ``db.creating/`` to ``db/``, fsync the directory.

Before step 3 completes there is no marker and only leftovers, which step 1 of the next open
removes (nothing was ever committed there: ``StateDB.open`` had not returned). After step 3 a
marker with ``db.creating/`` and no ``db/`` means step 4 is left, and the next open does it. A
marker without any database, or a database without a marker, is never produced by this
sequence, so it is refused rather than guessed at.
"""

from __future__ import annotations

import enum
import json
import os
import shutil
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

from .errors import StateDirectoryError, StateFormatError, describe_os_error

__all__ = (
    "DB_DIR",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "LOCK",
    "MARKER",
    "Layout",
    "create",
    "ensure_directory",
    "finish",
    "inspect",
    "make_private",
    "restrict_descriptor",
    "restrict_directory",
    "symlink_error",
)

MARKER = "STATEDB"
MARKER_TMP = "STATEDB.tmp"
LOCK = "STATEDB.lock"
COMMITTED = "STATEDB.commit"
"""The number of the last commit, written after each commit (see ``StateDB.commit``)."""
DB_DIR = "db"
DB_CREATING = "db.creating"

FORMAT_NAME = "topology-statedb"
FORMAT_VERSION = 1
"""The version this library writes and the newest it reads."""

_MAX_MARKER_BYTES = 4096
_LEFTOVERS = {LOCK: "file", MARKER_TMP: "file", DB_CREATING: "directory"}
_ENTRIES = {MARKER: "file", LOCK: "file", COMMITTED: "file", DB_DIR: "directory",
            DB_CREATING: "directory"}


class Layout(enum.Enum):
    """What :func:`inspect` found in a directory it accepts."""

    FRESH = "fresh"
    """Empty, or only the leftovers of an interrupted creation: create a state directory."""
    UNFINISHED = "unfinished"
    """A creation interrupted after its marker was written: :func:`finish` it."""
    READY = "ready"
    """A complete state directory."""


def ensure_directory(path: Path, operation: str) -> None:
    """Create ``path`` (mode 0o700, missing parents with the default mode) unless it exists.

    An existing directory is not changed here (:func:`make_private` does that once it is
    accepted), but one that is looser than owner-only and belongs to another user is refused
    now, untouched: this process could not make it owner-only.

    Runtime complexity: O(depth) system calls.

    :raises StateDirectoryError: ``path`` exists and is not a directory, it cannot be reached
        or created (permissions, a file in place of a parent, a full disk ...), or it is
        looser than owner-only and owned by another user.
    """
    try:
        try:
            info = os.stat(path)
        except FileNotFoundError:
            os.makedirs(path, mode=0o700, exist_ok=True)
            info = os.stat(path)
    except OSError as exc:
        raise StateDirectoryError(
            path, operation, f"cannot reach or create the directory: {describe_os_error(exc)}"
        ) from exc
    if not stat.S_ISDIR(info.st_mode):
        raise StateDirectoryError(path, operation, "it exists and is not a directory")
    _check_fixable(path, info, operation)


def restrict_directory(path: Path, operation: str, *, follow_symlinks: bool = True) -> None:
    """Strip the group and other permission bits of the directory ``path`` (see module doc).

    The directory is opened and changed through its descriptor, so what is checked is what is
    changed; with ``follow_symlinks=False`` a symbolic link at ``path`` is refused, never
    followed, and the error names where it points.

    Runtime complexity: O(1) system calls.

    :raises StateDirectoryError: ``path`` is missing, not a directory, (without
        ``follow_symlinks``) a symbolic link, or looser than owner-only and owned by another
        user; or it cannot be opened or changed.
    """
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if not follow_symlinks and os.path.islink(path):
            raise symlink_error(path, operation) from None
        if isinstance(exc, NotADirectoryError):
            raise StateDirectoryError(path, operation,
                                      "it exists and is not a directory") from None
        raise StateDirectoryError(
            path, operation, f"cannot reach or create the directory: {describe_os_error(exc)}"
        ) from exc
    try:
        restrict_descriptor(fd, path, operation)
    finally:
        os.close(fd)


def restrict_descriptor(fd: int, path: Path, operation: str) -> None:
    """Strip the group and other permission bits of the open file or directory ``fd``.

    ``path`` names it in errors. Runtime complexity: O(1) system calls.

    :raises StateDirectoryError: it is looser than owner-only and owned by another user, or
        the change fails.
    """
    try:
        info = os.fstat(fd)
        _check_fixable(path, info, operation)
        if stat.S_IMODE(info.st_mode) & 0o077:
            os.fchmod(fd, stat.S_IMODE(info.st_mode) & 0o700)
    except OSError as exc:
        raise StateDirectoryError(
            path, operation, f"cannot make it owner-only: {describe_os_error(exc)}"
        ) from exc


def make_private(path: Path, operation: str) -> None:
    """Make the accepted state directory ``path`` owner-only (hold its lock).

    Strips the group and other bits of ``path`` (through a descriptor), then of ``db/``
    (or ``db.creating/``), the marker and the commit file (found with ``lstat``: ``path``
    is owner-only by then, so no one else can swap them). Missing entries are skipped, and
    so are symbolic links (:func:`inspect` refuses those). RocksDB's own files are left to
    the umask: ``db/`` keeps everyone else out of them.

    Runtime complexity: O(1) system calls.

    :raises StateDirectoryError: an entry is looser than owner-only and belongs to another
        user, or a change fails.
    """
    restrict_directory(path, operation)
    for name in (DB_DIR, DB_CREATING, MARKER, COMMITTED):
        entry = path / name
        try:
            info = os.lstat(entry)
            if stat.S_ISLNK(info.st_mode) or not stat.S_IMODE(info.st_mode) & 0o077:
                continue
            _check_fixable(entry, info, operation)
            os.chmod(entry, stat.S_IMODE(info.st_mode) & 0o700)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise StateDirectoryError(
                path, operation, f"cannot make {name} owner-only: {describe_os_error(exc)}"
            ) from exc


def symlink_error(path: Path, operation: str) -> StateDirectoryError:
    """The refusal of a symbolic link where a library directory should be."""
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    return StateDirectoryError(
        path, operation,
        f"it is a symbolic link to {target!r}: a directory the library keeps state in is never "
        "followed through a link; remove the link, or give the directory it points to as the "
        "state_dir (the state_dir itself may be a link)")


def _check_fixable(path: Path, info: os.stat_result, operation: str) -> None:
    """Refuse ``path`` if it is looser than owner-only and this process cannot fix that."""
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077 and info.st_uid != os.geteuid():
        raise StateDirectoryError(
            path, operation,
            f"its mode 0o{mode:03o} lets group or others in, and it belongs to uid "
            f"{info.st_uid}, not to this process (uid {os.geteuid()}), so it cannot be made "
            f"owner-only: have its owner run 'chmod go= {path}', or use another directory")


def inspect(path: Path, operation: str) -> Layout:
    """Classify the directory ``path`` without modifying anything in it.

    Reads the directory listing and, if present, the format marker.

    Runtime complexity: O(n) in the number of entries of ``path``.

    :raises StateFormatError: the marker names a newer format version.
    :raises StateDirectoryError: ``path`` is not (and cannot become) a state directory: it
        cannot be listed, holds foreign entries, or has a corrupt marker.
    """
    try:
        with os.scandir(path) as listing:
            entries = {
                entry.name: _kind(entry.is_dir(follow_symlinks=False),
                                  entry.is_file(follow_symlinks=False))
                for entry in listing
            }
    except OSError as exc:
        raise StateDirectoryError(
            path, operation, f"cannot list the directory: {describe_os_error(exc)}"
        ) from exc
    if MARKER not in entries:
        if _only(entries, _LEFTOVERS):
            return Layout.FRESH
        if DB_DIR in entries:
            detail = (f"it holds a database ({DB_DIR}/) but no {MARKER} format marker: it was not "
                      "written by this library, or its marker was removed")
        else:
            detail = (f"it is not empty and is not a state directory (no {MARKER} format "
                      f"marker); it holds {_sample(entries)}")
        raise StateDirectoryError(path, operation, detail)
    _read_marker(path, operation)
    foreign = [name for name in entries if name not in _ENTRIES]
    if foreign:
        raise StateDirectoryError(
            path, operation,
            f"it holds entries that are not part of a state directory: {_sample(foreign)}",
        )
    for name, kind in entries.items():
        if kind != _ENTRIES[name]:
            raise StateDirectoryError(
                path, operation, f"{name} should be a {_ENTRIES[name]}, found a {kind}"
            )
    if DB_DIR in entries and DB_CREATING not in entries:
        return Layout.READY
    if DB_CREATING in entries and DB_DIR not in entries:
        return Layout.UNFINISHED
    if DB_DIR in entries:
        detail = f"it holds both {DB_DIR}/ and {DB_CREATING}/, which no creation leaves"
    else:
        detail = f"its database directory {DB_DIR}/ is missing"
    raise StateDirectoryError(path, operation, detail)


def create(path: Path, populate: Callable[[Path], None], operation: str) -> None:
    """Make the :attr:`Layout.FRESH` directory ``path`` a state directory (hold its lock).

    ``populate(target)`` builds a closed RocksDB database at the directory ``target``, which
    does not exist yet. Steps and crash safety: see the module docstring.

    Runtime complexity: O(1) system calls plus ``populate``.

    :raises StateDirectoryError: a step fails (permissions, a full disk ...); what was done so
        far is left as a recognisable leftover.
    """
    creating = path / DB_CREATING
    try:
        if os.path.lexists(path / MARKER_TMP):
            os.unlink(path / MARKER_TMP)
        if os.path.lexists(creating):
            shutil.rmtree(creating)
        populate(creating)
        os.chmod(creating, 0o700)
        _write_marker(path)
        os.rename(creating, path / DB_DIR)
        _fsync_directory(path)
    except OSError as exc:
        raise StateDirectoryError(
            path, operation, f"cannot create the state directory: {describe_os_error(exc)}"
        ) from exc


def finish(path: Path, operation: str) -> None:
    """Complete the creation of an :attr:`Layout.UNFINISHED` directory (hold its lock).

    Runtime complexity: O(1) system calls.

    :raises StateDirectoryError: the rename fails.
    """
    try:
        os.rename(path / DB_CREATING, path / DB_DIR)
        _fsync_directory(path)
    except OSError as exc:
        raise StateDirectoryError(
            path, operation, f"cannot finish creating the state directory: {describe_os_error(exc)}"
        ) from exc


def _read_marker(path: Path, operation: str) -> int:
    """Read and check the format marker; return its version."""
    try:
        fd = os.open(path / MARKER, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as marker:
            data = marker.read(_MAX_MARKER_BYTES + 1)
    except OSError as exc:
        raise StateDirectoryError(
            path, operation, f"cannot read the format marker {MARKER}: {describe_os_error(exc)}"
        ) from exc
    try:
        document = json.loads(data.decode("utf-8")) if len(data) <= _MAX_MARKER_BYTES else None
    except ValueError:  # includes UnicodeDecodeError and json.JSONDecodeError
        document = None
    version = document.get("version") if isinstance(document, dict) else None
    if (not isinstance(document, dict) or document.get("format") != FORMAT_NAME
            or type(version) is not int or version < 1):
        raise StateDirectoryError(
            path, operation,
            f"its format marker {MARKER} is corrupt or not a {FORMAT_NAME} marker "
            f"({len(data)} bytes)",
        )
    if version > FORMAT_VERSION:
        raise StateFormatError(
            path, operation,
            f"it was written in state format version {version}, and this library reads "
            f"version {FORMAT_VERSION} only: open it with the release that wrote it",
        )
    return version


def _write_marker(path: Path) -> None:
    """Write the marker atomically (temporary file, fsync, rename, fsync the directory)."""
    document = {"format": FORMAT_NAME, "version": FORMAT_VERSION}
    temporary = path / MARKER_TMP
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    with os.fdopen(os.open(temporary, flags, 0o600), "wb") as marker:
        marker.write(json.dumps(document).encode("utf-8") + b"\n")
        marker.flush()
        os.fsync(marker.fileno())
    os.rename(temporary, path / MARKER)
    _fsync_directory(path)


def _fsync_directory(path: Path) -> None:
    """Make renames and creations in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _kind(is_dir: bool, is_file: bool) -> str:
    """Name the kind of a directory entry (symbolic links are neither file nor directory)."""
    return "directory" if is_dir else "file" if is_file else "link or special file"


def _only(entries: dict[str, str], allowed: dict[str, str]) -> bool:
    """Whether every entry is one of ``allowed``, of the kind it should be."""
    return all(allowed.get(name) == kind for name, kind in entries.items())


def _sample(names: Iterable[str]) -> str:
    """A short, sorted listing of ``names`` for an error message."""
    ordered = sorted(names)
    shown = ", ".join(repr(name) for name in ordered[:5])
    return shown if len(ordered) <= 5 else f"{shown} and {len(ordered) - 5} more"

