"""A task's state directory: where its on-disk state lives, opened on first use.

The task's :class:`~topology.state.rocksdb.StateDB` is ``<state_dir>/<application_id>/<task>``
(Kafka's layout) when the runtime is given a ``state_dir``, otherwise a private temporary
directory that :meth:`TaskStateDir.close` removes. Directories created here are owner-only
(0o700). Nothing is opened, and rocksdict is not imported, until the first keyspace is asked
for: a topology that never writes to disk never touches one.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..state.rocksdb import Keyspace, StateDB

__all__ = ("TaskStateDir",)

_COMPONENT = re.compile(r"[A-Za-z0-9._-]+")


class TaskStateDir:
    """The state directory of one task, and its state database, opened lazily.

    :param state_dir: the parent directory of every application's state (created 0o700 if
        missing), or ``None`` for a private temporary directory removed by :meth:`close`.
    :param application_id: the application's directory under ``state_dir``.
    :param task_id: the task's directory under that (Kafka's ``<subtopology>_<partition>``).
    :raises ValueError: with a ``state_dir``, for an ``application_id`` that is not one path
        component of ``[A-Za-z0-9._-]`` (other than ``.`` and ``..``).
    """

    def __init__(self, state_dir: str | os.PathLike[str] | None, application_id: str,
                 task_id: str = "0_0") -> None:
        if state_dir is not None and (_COMPONENT.fullmatch(application_id) is None
                                      or application_id in (".", "..")):
            raise ValueError(f"with a state_dir, the application id names a directory: it must "
                             f"be made of [A-Za-z0-9._-], got {application_id!r}")
        self._parent = None if state_dir is None else Path(os.path.abspath(state_dir))
        self._application_id = application_id
        self._task_id = task_id
        self._temporary: Path | None = None
        self._db: StateDB | None = None

    @property
    def path(self) -> Path | None:
        """The state database's directory, once opened (``None`` before)."""
        return None if self._db is None else self._db.path

    def keyspace(self, name: str) -> Keyspace:
        """The keyspace ``name`` of the task's state database, which is opened on first use.

        :raises StateDirectoryError: the directory cannot be created, or holds something
            that is not a state directory (it is never half-read).
        :raises StateLockedError: another live database has the directory open.
        """
        db = self._db
        if db is None:
            db = self._db = self._open()
        return db.keyspace(name)

    def _open(self) -> StateDB:
        from ..state.rocksdb import StateDB

        if self._parent is None:
            self._temporary = Path(tempfile.mkdtemp(prefix="topology-state-"))  # 0o700
            return StateDB.open(self._temporary / self._task_id)
        application = self._parent / self._application_id
        _make_private_dirs(application)
        return StateDB.open(application / self._task_id)

    def commit(self) -> None:
        """Commit the state database's pending writes; nothing to do if it was never opened.

        :raises StateStoreError: the write failed (see ``StateDB.commit``).
        """
        if self._db is not None:
            self._db.commit()

    def close(self) -> None:
        """Close the state database (pending writes are dropped); idempotent.

        A temporary directory is removed; one under ``state_dir`` is kept.
        """
        db, self._db = self._db, None
        try:
            if db is not None:
                db.close()
        finally:
            temporary, self._temporary = self._temporary, None
            if temporary is not None:
                shutil.rmtree(temporary, ignore_errors=True)


def _make_private_dirs(path: Path) -> None:
    """Create ``path`` and its missing ancestors, each owner-only (0o700).

    Existing directories are left as they are; on an error it stops, and ``StateDB.open``
    then reports what is wrong with the path.
    """
    missing = []
    while not os.path.lexists(path) and path.parent != path:
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            pass
        except OSError:
            return
