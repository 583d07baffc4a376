"""The committed versions of a state directory, kept at a URI of Spark's Hadoop FileSystem.

:class:`RemoteState` copies complete state directories (made by ``StateDB.checkpoint``) to and
from any URI that Spark's Hadoop FileSystem reaches (``file:``, ``hdfs:``, ``s3a:``,
``abfss:``, ``gs:``), through py4j from the Spark driver. The URI holds::

    sst/<name>                    RocksDB's immutable *.sst files, shared by the versions
    versions/<v>/files/<path>     every other file of version v (MANIFEST-*, CURRENT, OPTIONS-*,
                                  *.log, the state directory's own marker...), by its path
                                  relative to the state directory
    versions/<v>/manifest         JSON: the relative path and size of every file of version v,
                                  and the info bytes given to ``upload`` (hex)
    latest/<v, 20 digits>         an empty file: version v is committed

An ``*.sst`` file never changes and its name is unique within one database, so it is
uploaded once and referenced by every version that holds it; the rest of a version is
small and uploaded whole.

Crash safety rests on ordering, not on any atomic rename (rename over an existing file fails,
or is not atomic, on several Hadoop file systems): ``upload`` writes the sst files, then the
version's other files, then its manifest, and only then creates its ``latest/`` entry, a new
file that no earlier step names. The latest version is the highest-numbered ``latest/`` entry
whose manifest exists, so a crash at any point leaves either the previous version or the new
one, complete, as the latest. Pruning (after the entry is written) removes the ``latest/``
entries of old versions before their folders and the sst files only they referenced, so a
version that is still listed is always complete.

An sst file left behind by an upload that never committed may have a name that the database,
restored from an earlier version, uses again for other contents; such a file is therefore never
taken as uploaded: only the sst files of committed versions are, and any other is overwritten.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]

from topology.state.rocksdb.errors import StateDirectoryError

__all__ = ("KEEP_VERSIONS", "RemoteState")

log = logging.getLogger("topology.spark")

KEEP_VERSIONS = 2
"""How many committed versions an upload keeps (the one it wrote and those just before it)."""

_FORMAT = "topology-remote-state"
_FORMAT_VERSION = 1
_SST_DIR = "sst"
_VERSIONS_DIR = "versions"
_LATEST_DIR = "latest"
_FILES_DIR = "files"
_MANIFEST = "manifest"
_POINTER_DIGITS = 20
_MAX_VERSION = 10**_POINTER_DIGITS - 1

_T = TypeVar("_T")


class _Manifest:
    """What ``versions/<v>/manifest`` says: the files of version ``v`` and its info bytes.

    ``sst`` and ``files`` map a file's path relative to the state directory (POSIX form) to
    its size in bytes; an sst file lives remotely at ``sst/<its name>``, any other file at
    ``versions/<v>/files/<its path>``.
    """

    def __init__(self, version: int, info: bytes, sst: dict[str, int],
                 files: dict[str, int]) -> None:
        self.version = version
        self.info = info
        self.sst = sst
        self.files = files

    def sst_names(self) -> set[str]:
        """The names under ``sst/`` of this version's sst files."""
        return {PurePosixPath(path).name for path in self.sst}

    def encode(self) -> bytes:
        """The manifest as UTF-8 JSON."""
        return json.dumps({
            "format": _FORMAT,
            "format_version": _FORMAT_VERSION,
            "version": self.version,
            "info": self.info.hex(),
            "sst": self.sst,
            "files": self.files,
        }, indent=1, sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes) -> _Manifest:
        """Parse what :meth:`encode` wrote.

        :raises ValueError: ``data`` is not such a manifest (the message says what is wrong).
        """
        try:
            doc = json.loads(data)
            if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
                raise ValueError("not a remote state manifest")
            if doc.get("format_version") != _FORMAT_VERSION:
                raise ValueError(f"format version {doc.get('format_version')!r} is not "
                                 f"{_FORMAT_VERSION}")
            version, sst, files = doc["version"], doc["sst"], doc["files"]
            if not isinstance(version, int) or not isinstance(sst, dict) or not isinstance(
                    files, dict):
                raise ValueError("malformed version, sst or files")
            for path, size in [*sst.items(), *files.items()]:
                _check_relative(path)
                if not isinstance(size, int) or size < 0:
                    raise ValueError(f"bad size {size!r} of {path!r}")
            return cls(version, bytes.fromhex(doc["info"]), sst, files)
        except (KeyError, TypeError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"malformed manifest: {exc}") from exc


def _check_relative(path: object) -> None:
    """Refuse a manifest path that would leave the state directory.

    :raises ValueError: ``path`` is not a non-empty relative POSIX path free of ``..``.
    """
    if not isinstance(path, str) or not path:
        raise ValueError(f"bad file path {path!r}")
    pure = PurePosixPath(path)
    if pure.is_absolute() or ".." in pure.parts or str(pure) != path:
        raise ValueError(f"bad file path {path!r}")


def _java_message(exc: Py4JJavaError) -> str:
    """The Java exception's class and message, or py4j's text if the JVM cannot be asked."""
    try:
        return str(exc.java_exception.toString())
    except Exception:  # the gateway may be gone; the Python text still says something
        return str(exc)


class RemoteState:
    """The committed versions of one state directory at a Hadoop FileSystem URI.

    Used from the Spark driver, by one writer at a time. ``upload`` adds a version,
    ``latest`` says which one is the newest, ``download`` restores one to a local state
    directory. See the module docstring for the layout and why a crash never loses the
    latest committed version.

    Every Hadoop error (py4j's ``Py4JJavaError``) is raised as :class:`OSError` naming the
    URI and the operation, with the original as ``__cause__``.
    """

    def __init__(self, uri: str, spark: Any) -> None:
        """Use the folder ``uri`` (e.g. ``"s3a://bucket/app/state"``) through ``spark``'s JVM.

        Nothing is read or written yet; the folder need not exist.

        :raises OSError: Hadoop has no file system for the URI (an unknown scheme, missing
            credentials...).
        """
        self._uri = uri.rstrip("/") or uri
        context = spark.sparkContext
        self._jvm: Any = context._jvm
        self._root: Any = self._jvm.org.apache.hadoop.fs.Path(uri)
        configuration = context._jsc.hadoopConfiguration()
        self._fs: Any = self._hadoop("open the file system", "", self._root.getFileSystem,
                                     configuration)
        self._uploaded: set[str] | None = None
        """Names under ``sst/`` known to be there for a committed version (None: not read)."""

    def __repr__(self) -> str:
        return f"<RemoteState {self._uri!r}>"

    # -- the API ---------------------------------------------------------------------------

    def latest(self) -> tuple[int, bytes] | None:
        """The latest committed version: ``(version, the info bytes given to upload)``.

        ``None`` if no version was ever committed. Runtime: one listing of ``latest/`` and
        one read of the manifest found.

        :raises OSError: Hadoop fails to list or read.
        :raises StateDirectoryError: the latest version's manifest cannot be parsed.
        :raises ValueError: this object was closed.
        """
        self._check_open()
        for version in self._committed():
            manifest = self._read_manifest(version, "latest")
            if manifest is not None:
                return version, manifest.info
        return None

    def upload(self, snapshot: Path, version: int, info: bytes) -> None:
        """Commit the local state directory ``snapshot`` as ``version``, with ``info``.

        ``snapshot`` is a complete state directory (``StateDB.checkpoint``), not in use;
        every file in it, recursively, is uploaded (each ``*.sst`` file only if no committed
        version holds it already), then the version is committed (see the module docstring).
        ``info`` is a few bytes returned by :meth:`latest` (e.g. the batch id). Afterwards
        only the latest :data:`KEEP_VERSIONS` versions are kept; a failure to prune is logged
        at DEBUG on ``topology.spark`` and retried by the next upload.

        :raises ValueError: ``version`` is not above the latest committed one (the message
            names both), is negative or above 20 digits, ``snapshot`` is not a directory,
            two sst files in it share a name, or this object was closed.
        :raises OSError: reading ``snapshot`` or a Hadoop operation failed; the latest version
            is then still the previous one.
        """
        self._check_open()
        if not isinstance(version, int) or not 0 <= version <= _MAX_VERSION:
            raise ValueError(f"version {version!r} is not an integer in [0, {_MAX_VERSION}]")
        if not snapshot.is_dir():
            raise ValueError(f"snapshot {snapshot} is not a directory")
        current = self.latest()
        if current is not None and version <= current[0]:
            raise ValueError(f"version {version} is not above the latest committed version "
                             f"{current[0]} at {self._uri}")
        manifest = _Manifest(version, bytes(info), {}, {})
        local: dict[str, Path] = {}
        for relative, path in _walk(snapshot):
            local[relative] = path
            size = path.stat().st_size
            (manifest.sst if relative.endswith(".sst") else manifest.files)[relative] = size
        names = [PurePosixPath(relative).name for relative in manifest.sst]
        if len(set(names)) != len(names):
            raise ValueError(f"snapshot {snapshot} holds two sst files of the same name")

        uploaded = self._uploaded_sst()
        version_dir = self._version_dir(version)
        pointer = self._pointer(version)
        # leftovers of an upload of this version that crashed before committing
        self._hadoop("delete", f"{_LATEST_DIR}/{version:0{_POINTER_DIGITS}d}",
                     self._fs.delete, pointer, False)
        self._hadoop("delete", f"{_VERSIONS_DIR}/{version}",
                     self._fs.delete, version_dir, True)
        for relative in manifest.sst:
            name = PurePosixPath(relative).name
            if name not in uploaded:
                self._put(local[relative], self._child(self._root, f"{_SST_DIR}/{name}"),
                          f"{_SST_DIR}/{name}")
        files_dir = self._child(version_dir, _FILES_DIR)
        for relative in manifest.files:
            self._put(local[relative], self._child(files_dir, relative),
                      f"{_VERSIONS_DIR}/{version}/{_FILES_DIR}/{relative}")
        self._write(self._child(version_dir, _MANIFEST), manifest.encode(),
                    f"{_VERSIONS_DIR}/{version}/{_MANIFEST}")
        self._write(pointer, b"", f"{_LATEST_DIR}/{version:0{_POINTER_DIGITS}d}")
        uploaded |= manifest.sst_names()
        try:
            self._prune(manifest)
        except Exception as exc:  # the version is committed; the next upload prunes again
            log.debug("remote state %s: pruning after version %d failed: %s",
                      self._uri, version, exc, exc_info=True)

    def download(self, version: int, target: Path) -> None:
        """Copy committed ``version`` into the new local state directory ``target``.

        ``target`` gets the layout the uploaded snapshot had (directories 0o700, files 0o600)
        and opens with ``StateDB.open``. The copy is made in a sibling temporary folder and
        renamed to ``target`` when complete, so ``target`` never holds part of a version.

        :raises ValueError: ``target`` exists, or this object was closed.
        :raises StateDirectoryError: the version has no manifest, its manifest cannot be
            parsed, or a file it lists is missing at the URI or has another size (the message
            names the URI, the version and the file).
        :raises OSError: a Hadoop or local file operation failed (``target`` is not created).
        """
        self._check_open()
        if os.path.lexists(target):
            raise ValueError(f"download target {target} already exists")
        manifest = self._read_manifest(version, "download")
        if manifest is None:
            raise self._corrupted(version, "download", f"{_VERSIONS_DIR}/{version}/{_MANIFEST}")
        sources = self._sources(manifest)
        target = Path(os.path.abspath(target))
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.download-", dir=target.parent))
        try:
            for relative, (source, remote, size) in sources.items():
                local = staging.joinpath(*PurePosixPath(relative).parts)
                _make_dirs(staging, local.parent)
                self._hadoop("download", remote, self._fs.copyToLocalFile, False, source,
                             self._local(local), True)
                if not local.is_file() or local.stat().st_size != size:
                    raise self._corrupted(version, "download", remote,
                                          f"does not have the size {size} listed")
                local.chmod(0o600)
            if os.path.lexists(target):
                raise ValueError(f"download target {target} already exists")
            staging.rename(target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise

    def close(self) -> None:
        """Drop the references to Spark's JVM; idempotent. Nothing remote is held.

        Every other method raises :class:`ValueError` afterwards.
        """
        self._fs = None
        self._root = None
        self._jvm = None
        self._uploaded = None

    # -- helpers ---------------------------------------------------------------------------

    def _check_open(self) -> None:
        """Refuse use after :meth:`close`.

        :raises ValueError: this object was closed.
        """
        if self._jvm is None:
            raise ValueError(f"remote state {self._uri} is closed")

    def _hadoop(self, operation: str, remote: str, call: Callable[..., _T], *args: Any) -> _T:
        """Return ``call(*args)`` (Hadoop through py4j); a Java error is raised as OSError.

        :raises OSError: Hadoop raised; the message names the URI, ``remote`` (relative to
            it) and ``operation``.
        """
        try:
            return call(*args)
        except Py4JJavaError as exc:
            where = f"{self._uri}/{remote}" if remote else self._uri
            raise OSError(f"remote state {where}: {operation} failed: "
                          f"{_java_message(exc)}") from exc

    def _child(self, parent: Any, relative: str) -> Any:
        """The Hadoop path ``relative`` (POSIX, may hold slashes) below ``parent``."""
        return self._jvm.org.apache.hadoop.fs.Path(parent, relative)

    def _local(self, path: Path) -> Any:
        """The Hadoop path of the local absolute ``path``."""
        return self._jvm.org.apache.hadoop.fs.Path(str(path))

    def _version_dir(self, version: int) -> Any:
        """The Hadoop path ``versions/<version>``."""
        return self._child(self._root, f"{_VERSIONS_DIR}/{version}")

    def _pointer(self, version: int) -> Any:
        """The Hadoop path ``latest/<version, 20 digits>``."""
        return self._child(self._root, f"{_LATEST_DIR}/{version:0{_POINTER_DIGITS}d}")

    def _corrupted(self, version: int, operation: str, remote: str,
                   problem: str = "is missing") -> StateDirectoryError:
        """The error for version ``version`` whose file ``remote`` (relative) is unusable."""
        return StateDirectoryError(
            self._uri, operation,
            f"version {version} at {self._uri} is corrupted: {self._uri}/{remote} {problem}")

    def _list(self, relative: str) -> Iterator[Any]:
        """The ``FileStatus`` of each entry of the folder ``relative``; none if it is missing.

        :raises OSError: Hadoop fails to list.
        """
        folder = self._child(self._root, relative)
        if not self._hadoop("check", relative, self._fs.exists, folder):
            return iter(())
        return iter(self._hadoop("list", relative, self._fs.listStatus, folder))

    def _committed(self) -> list[int]:
        """The versions with a ``latest/`` entry, highest first (manifests not checked)."""
        versions = []
        for status in self._list(_LATEST_DIR):
            name = str(status.getPath().getName())
            if len(name) == _POINTER_DIGITS and name.isdigit():
                versions.append(int(name))
        return sorted(versions, reverse=True)

    def _read_manifest(self, version: int, operation: str) -> _Manifest | None:
        """The manifest of ``version``, or ``None`` if it has none.

        :raises StateDirectoryError: it cannot be parsed, or is another version's.
        :raises OSError: Hadoop fails to read it.
        """
        relative = f"{_VERSIONS_DIR}/{version}/{_MANIFEST}"
        path = self._child(self._root, relative)
        if not self._hadoop("check", relative, self._fs.exists, path):
            return None

        def read() -> bytes:
            stream = self._fs.open(path)
            try:
                return bytes(stream.readAllBytes())
            finally:
                stream.close()

        data = self._hadoop("read", relative, read)
        try:
            manifest = _Manifest.decode(data)
        except ValueError as exc:
            raise self._corrupted(version, operation, relative, f"cannot be read: {exc}") from exc
        if manifest.version != version:
            raise self._corrupted(version, operation, relative,
                                  f"is the manifest of version {manifest.version}")
        return manifest

    def _uploaded_sst(self) -> set[str]:
        """Names under ``sst/`` that are there for a committed version (read once, then kept).

        An sst file of no committed version is left out: it may be a leftover of an upload
        that never committed, with contents that a later file of that name does not have.
        """
        if self._uploaded is None:
            referenced: set[str] = set()
            for version in self._committed():
                manifest = self._read_manifest(version, "upload")
                if manifest is not None:
                    referenced |= manifest.sst_names()
            present = {str(status.getPath().getName()) for status in self._list(_SST_DIR)}
            self._uploaded = referenced & present
        return self._uploaded

    def _put(self, local: Path, remote: Any, relative: str) -> None:
        """Upload the local file ``local`` to the Hadoop path ``remote``, replacing it."""
        source = self._local(local)
        self._hadoop("upload", relative,
                     self._fs.copyFromLocalFile, False, True, source, remote)

    def _write(self, remote: Any, data: bytes, relative: str) -> None:
        """Write the small file ``remote`` holding ``data``, replacing it."""
        def write() -> None:
            stream = self._fs.create(remote, True)
            try:
                stream.write(bytearray(data))
            finally:
                stream.close()

        self._hadoop("write", relative, write)

    def _sources(self, manifest: _Manifest) -> dict[str, tuple[Any, str, int]]:
        """Each file of ``manifest`` by relative path: its Hadoop path, path below the URI, size.

        :raises StateDirectoryError: a listed file is missing at the URI.
        :raises OSError: Hadoop fails to list or check.
        """
        version = manifest.version
        present = {str(status.getPath().getName()) for status in self._list(_SST_DIR)}
        sources: dict[str, tuple[Any, str, int]] = {}
        for relative, size in manifest.sst.items():
            remote = f"{_SST_DIR}/{PurePosixPath(relative).name}"
            if PurePosixPath(relative).name not in present:
                raise self._corrupted(version, "download", remote)
            sources[relative] = (self._child(self._root, remote), remote, size)
        for relative, size in manifest.files.items():
            remote = f"{_VERSIONS_DIR}/{version}/{_FILES_DIR}/{relative}"
            path = self._child(self._root, remote)
            if not self._hadoop("check", remote, self._fs.exists, path):
                raise self._corrupted(version, "download", remote)
            sources[relative] = (path, remote, size)
        return sources

    def _prune(self, newest: _Manifest) -> None:
        """Keep the latest :data:`KEEP_VERSIONS` committed versions (``newest`` is the latest).

        Removes, in this order, the ``latest/`` entries of other versions, their folders under
        ``versions/``, and the sst files that no kept version lists; a crash in between leaves
        only unreferenced leftovers, removed by the next prune.
        """
        kept = [newest]
        for version in self._committed():
            if len(kept) == KEEP_VERSIONS:
                break
            if version < newest.version:
                manifest = self._read_manifest(version, "prune")
                if manifest is not None:
                    kept.append(manifest)
        kept_versions = {manifest.version for manifest in kept}
        referenced = {name for manifest in kept for name in manifest.sst_names()}
        self._uploaded = referenced  # all there: a failure below leaves it right
        for version in self._committed():
            if version not in kept_versions:
                pointer = self._pointer(version)
                self._hadoop("delete", f"{_LATEST_DIR}/{version:0{_POINTER_DIGITS}d}",
                             self._fs.delete, pointer, False)
        for status in self._list(_VERSIONS_DIR):
            name = str(status.getPath().getName())
            if not (name.isdigit() and int(name) in kept_versions):
                folder = status.getPath()
                self._hadoop("delete", f"{_VERSIONS_DIR}/{name}",
                             self._fs.delete, folder, True)
        for status in self._list(_SST_DIR):
            name = str(status.getPath().getName())
            if name not in referenced:
                file = status.getPath()
                self._hadoop("delete", f"{_SST_DIR}/{name}",
                             self._fs.delete, file, False)


def _walk(snapshot: Path) -> Iterator[tuple[str, Path]]:
    """Every file below ``snapshot``: its POSIX path relative to ``snapshot``, and its path."""
    for folder, _dirs, files in os.walk(snapshot, onerror=_raise):
        for name in sorted(files):
            path = Path(folder, name)
            yield path.relative_to(snapshot).as_posix(), path


def _raise(exc: OSError) -> None:
    """``os.walk``'s error handler: stop, raising the error."""
    raise exc


def _make_dirs(root: Path, folder: Path) -> None:
    """Create ``folder`` and its missing parents below ``root``, each with mode 0o700."""
    missing = []
    while folder != root and not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for path in reversed(missing):
        path.mkdir(mode=0o700)
        path.chmod(0o700)
