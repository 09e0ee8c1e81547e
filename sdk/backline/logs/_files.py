"""The conversation log's files are the user's alone: the folder 0700, the database and
its ``-wal``/``-shm`` files 0600, whatever the umask.

SQLite creates the ``-wal`` and ``-shm`` files with the database file's own mode, so
the database is created here first, 0600; files found looser (from an older backline,
a copy, a umask of 0) are tightened, and said so once. The folder is made 0700; an
existing folder that others can enter is tightened when it is backline's own data
folder, and warned about (with the command that fixes it) when the log was put
somewhere else.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from pathlib import Path

log = logging.getLogger("backline.logs")

FILE_MODE = 0o600
FOLDER_MODE = 0o700
SIDE_FILES = ("-wal", "-shm", "-journal")
"""SQLite's files next to the database (WAL, its shared memory, a rollback journal)."""

_warned: set[Path] = set()


def prepare(path: Path, *, own_folder: Path | None = None, create: bool = True) -> None:
    """Before SQLite opens ``path``: with ``create``, its folder and an empty database
    file exist (0700, 0600); whatever exists already is tightened. ``own_folder`` is
    backline's data folder (tightened too; another folder is only warned about).
    Raises ``OSError`` when the folder or the file cannot be made."""
    folder = path.parent
    if create and not folder.exists():
        folder.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):  # a race: another process made it
            os.chmod(folder, FOLDER_MODE)  # mkdir's mode is cut by the umask
    _check_folder(folder, own=own_folder is not None and _same(folder, own_folder))
    if create:
        _create_private(path)
    for each in (path, *(path.with_name(path.name + side) for side in SIDE_FILES)):
        _tighten(each)


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def _create_private(path: Path) -> None:
    """An empty file (an empty SQLite database), 0600 whatever the umask."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, FILE_MODE)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)


def _loose(mode: int) -> bool:
    return bool(mode & (stat.S_IRWXG | stat.S_IRWXO))


def _tighten(path: Path) -> None:
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode) or not _loose(info.st_mode):
        return
    was = stat.S_IMODE(info.st_mode)
    try:
        os.chmod(path, FILE_MODE)
    except OSError as e:
        _warn_once(
            path,
            "%s can be read by other users (mode %o) and could not be made private (%s): "
            "run `chmod 600 %s`",
            path,
            was,
            e.strerror or e,
            path,
        )
        return
    _warn_once(path, "%s could be read by other users (mode %o): it is now 0600", path, was)


def _check_folder(folder: Path, *, own: bool) -> None:
    try:
        info = folder.stat()
    except OSError:
        return  # opening the file says what is wrong
    if not stat.S_ISDIR(info.st_mode) or not _loose(info.st_mode):
        return
    was = stat.S_IMODE(info.st_mode)
    if own:
        try:
            os.chmod(folder, FOLDER_MODE)
        except OSError as e:
            _warn_once(
                folder,
                "the conversation log's folder %s can be entered by other users (mode %o) "
                "and could not be made private (%s): run `chmod 700 %s`",
                folder,
                was,
                e.strerror or e,
                folder,
            )
            return
        _warn_once(
            folder,
            "the conversation log's folder %s could be entered by other users (mode %o): "
            "it is now 0700",
            folder,
            was,
        )
        return
    _warn_once(
        folder,
        "the conversation log's folder %s can be listed by other users (mode %o); the log's "
        "files are 0600, but its name and size show: run `chmod 700 %s`, or keep the log "
        "in a private folder",
        folder,
        was,
        folder,
    )


def _warn_once(key: Path, message: str, *args: object) -> None:
    if key not in _warned:
        _warned.add(key)
        log.warning(message, *args)
