"""``ConversationLog``: the SQLite file and the writer thread that owns its connection.

The event loop only puts records on a bounded queue (``submit`` never blocks: a full
queue drops the record and counts it). One thread opens the database, migrates it,
applies the retention setting, and commits records in batches. A database that
cannot be used (damaged, locked, unwritable, from a newer backline) gives one clear
warning, told at once to whoever listens (``add_listener``: the recorders, which show
it as an ``error`` event), and the conversation goes on without a log. The files are
the user's alone (``_files``).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..limits import DEFAULT_LIMITS, Limits
from . import _files, _schema

log = logging.getLogger("backline.logs")

Record = tuple[str, tuple[Any, ...]]
"""``(statement, params)``: one write (the statements are in ``_schema``)."""


class Records(Protocol):
    """Records made on the writer thread (``records()``), from what the event loop
    noted: the loop queues one entry, the writer does the formatting."""

    def __len__(self) -> int: ...

    def records(self) -> list[Record]: ...


LOG_ENV = "BACKLINE_LOG"
"""``0`` (or ``false``, ``no``, ``off``) turns the conversation log off."""
RETENTION_ENV = "BACKLINE_LOG_RETENTION_DAYS"
"""Conversations older than this many days are deleted when the log opens; ``0`` keeps all."""
DEFAULT_RETENTION_DAYS = 30.0
DB_NAME = "conversations.db"
LOCK_NOTICE = 0.25
"""Seconds the writer waits for another process's lock before it says so (a commit of
another backline takes milliseconds); it goes on waiting up to ``log_busy_timeout``."""

_STOP = object()


@dataclass
class _Barrier:
    done: threading.Event = field(default_factory=threading.Event)


def data_dir() -> Path:
    """backline's directory in the user's data directory (``platformdirs``; on Linux
    ``$XDG_DATA_HOME/backline``, else ``~/.local/share/backline``)."""
    import platformdirs

    return platformdirs.user_data_path("backline", appauthor=False)


def default_path() -> Path:
    """The conversation log every front end writes: ``<data dir>/conversations.db``."""
    return data_dir() / DB_NAME


def logging_enabled(environ: Any = None) -> bool:
    """False when ``BACKLINE_LOG`` is ``0``, ``false``, ``no`` or ``off``."""
    env = os.environ if environ is None else environ
    return str(env.get(LOG_ENV, "1")).strip().lower() not in ("0", "false", "no", "off")


def retention_days(environ: Any = None) -> float | None:
    """``BACKLINE_LOG_RETENTION_DAYS`` (default 30); ``None`` means keep everything."""
    env = os.environ if environ is None else environ
    raw = env.get(RETENTION_ENV)
    if raw is None or not str(raw).strip():
        return DEFAULT_RETENTION_DAYS
    try:
        days = float(raw)
    except ValueError:
        days = -1.0
    if days < 0 or days != days:  # negative or NaN
        log.warning(
            "%s=%r is not a number of days (0 keeps everything); using %g",
            RETENTION_ENV,
            raw,
            DEFAULT_RETENTION_DAYS,
        )
        return DEFAULT_RETENTION_DAYS
    return None if days == 0 else days


def explain(error: BaseException, path: Path) -> str:
    """What went wrong with the log at ``path`` and what to do, in one line for people."""
    text = str(error) or type(error).__name__
    if isinstance(error, _schema.NewerSchemaError):
        return f"the conversation log {path} {text}: upgrade backline, or use --no-log"
    if _is_locked(error):
        return (
            f"the conversation log {path} is locked by another process ({text}): close it, "
            "or use --no-log"
        )
    if isinstance(error, sqlite3.DatabaseError) and not isinstance(error, sqlite3.OperationalError):
        return f"the conversation log {path} is damaged ({text}): move it away, or use --no-log"
    return f"cannot use the conversation log {path} ({text}): check its directory, or use --no-log"


def _is_locked(error: BaseException) -> bool:
    lowered = str(error).lower()
    return isinstance(error, sqlite3.OperationalError) and (
        "locked" in lowered or "busy" in lowered
    )


def connect(path: Path, busy_timeout: float) -> sqlite3.Connection:
    """A connection in autocommit mode (explicit transactions), WAL, foreign keys on."""
    conn = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None)
    try:
        conn.execute("PRAGMA foreign_keys = ON")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            log.debug("the conversation log %s is in journal mode %s", path, mode)
        conn.execute("PRAGMA synchronous = NORMAL")
    except BaseException:
        conn.close()
        raise
    return conn


class ConversationLog:
    """A conversation log file and its writer thread.

    ``submit(record)`` from any thread (never blocks; the writer starts on the first
    record); ``flush(timeout)`` waits until what was submitted is written;
    ``close(timeout)`` writes what is left and stops the writer (bounded).
    ``error`` is the clear message once the log could not be used (then records are
    discarded); ``trouble`` is what is wrong right now (that failure, or another
    process's lock being waited for), and ``add_listener(callback)`` has ``callback``
    called with it, on the writer thread, the moment it happens. ``dropped`` counts
    records lost to a full queue or a failed write.
    """

    def __init__(
        self,
        path: Path | str | None = None,
        *,
        limits: Limits = DEFAULT_LIMITS,
        retention_days: float | None = DEFAULT_RETENTION_DAYS,
    ) -> None:
        self.path = Path(path) if path is not None else default_path()
        self.limits = limits
        self.retention_days = retention_days
        # The hand-off: a deque (an append is atomic and costs the loop next to nothing)
        # and a wake-up the submitter sets only when the writer sleeps.
        self._pending: deque[Any] = deque()
        self._writer_sleeping = False
        self._wake = threading.Event()
        self._hurry = threading.Event()  # a flush or a close waits: write now
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._usable = True  # False once closed or failed
        self.error: str | None = None
        self.trouble: str | None = None
        self._listeners: list[Callable[[str], None]] = []
        self._dropped_full = 0  # counted on the submitting thread
        self._dropped_write = 0  # counted on the writer thread
        self._warned_full = False

    def __repr__(self) -> str:
        return f"ConversationLog({str(self.path)!r})"

    @property
    def dropped(self) -> int:
        """Records lost so far: to a full queue, a failed write, or a failed log."""
        return self._dropped_full + self._dropped_write

    @property
    def available(self) -> bool:
        """False once the log failed or was closed: records are then discarded."""
        return self._usable

    def add_listener(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(message)`` when the log fails or waits for another process's
        lock (on the writer thread: hand it to your own thread from there)."""
        with self._lock:
            if callback not in self._listeners:
                self._listeners.append(callback)

    def remove_listener(self, callback: Callable[[str], None]) -> None:
        with self._lock:
            if callback in self._listeners:
                self._listeners.remove(callback)

    # -- the event loop's side ---------------------------------------------------------
    def submit(self, record: Record | Records) -> bool:
        """Queue one write (or several, made on the writer thread: ``Records``);
        ``False`` if it was dropped (a full queue, a closed or failed log). Never
        blocks."""
        if not self._usable:
            return False
        if self._thread is None:
            self.start()
        if len(self._pending) >= self.limits.log_queue_size:
            self._dropped_full += 1
            if not self._warned_full:
                self._warned_full = True
                log.warning(
                    "the conversation log %s is falling behind (a slow disk?): records are "
                    "being dropped; the conversation is not affected",
                    self.path,
                )
            return False
        self._pending.append(record)
        if self._writer_sleeping:
            self._writer_sleeping = False
            self._wake.set()
        return True

    def _control(self, item: Any) -> None:
        """Hand the writer a barrier or the stop, and have it write at once."""
        self._pending.append(item)
        self._hurry.set()
        self._wake.set()

    def start(self) -> None:
        """Start the writer now (it opens, migrates and prunes the file); the first
        record does this anyway."""
        with self._lock:
            if self._thread is not None or self._closed:
                return
            self._thread = threading.Thread(
                target=self._run, name=f"backline conversation log {self.path.name}", daemon=True
            )
            self._thread.start()

    def flush(self, timeout: float = 5.0) -> bool:
        """Block until every record submitted so far is written (or discarded after a
        failure); ``False`` on timeout or when the writer is not running."""
        if self._thread is None:
            return True
        barrier = _Barrier()
        self._control(barrier)
        return barrier.done.wait(timeout)

    def close(self, timeout: float | None = None) -> bool:
        """Write what is queued and stop the writer, waiting at most ``timeout`` seconds
        (default ``limits.log_close_timeout``). ``False`` if the writer did not finish in
        time (it is a daemon thread: it never keeps the process alive). Idempotent."""
        wait = self.limits.log_close_timeout if timeout is None else timeout
        with self._lock:
            first = not self._closed
            self._closed = True
            self._usable = False
            thread = self._thread
        if thread is None:
            return True
        if first:
            self._control(_STOP)
        thread.join(wait)
        return not thread.is_alive()

    # -- the writer thread ----------------------------------------------------------------
    def _tell(self, message: str) -> None:
        self.trouble = message
        with self._lock:
            listeners = list(self._listeners)
        for callback in listeners:
            try:
                callback(message)
            except Exception:  # a listener's bug must not stop the writer
                log.exception("a conversation log listener failed")

    def _fail(self, error: BaseException) -> None:
        self.error = "This conversation is not being logged: " + explain(error, self.path)
        self._usable = False
        log.warning("%s", self.error)
        self._tell(self.error)

    def _begin(self, conn: sqlite3.Connection) -> None:
        """``BEGIN IMMEDIATE``: take the write lock, waiting at most ``log_busy_timeout``
        for another process's; one held past ``LOCK_NOTICE`` is told at once."""
        busy = self.limits.log_busy_timeout
        notice = min(LOCK_NOTICE, busy)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(notice * 1000)}")
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as e:
                if not _is_locked(e) or busy <= notice:
                    raise
                self._tell(
                    "This conversation may not be logged: "
                    + explain(e, self.path)
                    + f" (records wait up to {busy:g}s for it)"
                )
                conn.execute(f"PRAGMA busy_timeout = {int((busy - notice) * 1000)}")
                conn.execute("BEGIN IMMEDIATE")  # raises "locked" if it is still held
        finally:
            with contextlib.suppress(sqlite3.Error):
                conn.execute(f"PRAGMA busy_timeout = {int(busy * 1000)}")
        if self.error is None:
            self.trouble = None  # no lock in the way (any more)

    def _open(self) -> sqlite3.Connection | None:
        try:
            _files.prepare(self.path, own_folder=data_dir())
            conn = connect(self.path, self.limits.log_busy_timeout)
        except (sqlite3.Error, OSError) as e:
            self._fail(e)
            return None
        try:
            self._begin(conn)  # another process's lock is told now, not at its timeout
            conn.execute("ROLLBACK")
            _schema.migrate(conn)
            if self.retention_days is not None:
                cutoff = time.time() - self.retention_days * 86400.0
                conn.execute("DELETE FROM sessions WHERE started_at < ?", (cutoff,))
        except (sqlite3.Error, OSError, _schema.NewerSchemaError) as e:
            conn.close()
            self._fail(e)
            return None
        return conn

    def _run(self) -> None:
        conn = self._open()
        try:
            while True:
                self._sleep_until_pending()
                # Gather for a moment: one wake-up and one transaction for many records
                # (a flush or a close cuts the wait short).
                if self._hurry.wait(self.limits.log_batch_interval):
                    self._hurry.clear()
                batch: list[Any] = []
                while self._pending and len(batch) < self.limits.log_batch_size:
                    batch.append(self._pending.popleft())
                records = self._records(batch)
                if conn is not None and records:
                    conn = self._write(conn, records)
                elif records:
                    self._dropped_write += len(records)
                for item in batch:
                    if isinstance(item, _Barrier):
                        item.done.set()
                if any(item is _STOP for item in batch):
                    return
        finally:
            if conn is not None:
                conn.close()

    def _records(self, batch: list[Any]) -> list[Record]:
        records: list[Record] = []
        for item in batch:
            if type(item) is tuple:
                records.append(item)
            elif item is not _STOP and not isinstance(item, _Barrier):
                try:
                    records += item.records()
                except Exception:  # a bug making them must not stop the writer
                    log.exception("conversation log records could not be made")
                    self._dropped_write += len(item)
        return records

    def _sleep_until_pending(self) -> None:
        while not self._pending:
            self._writer_sleeping = True
            if not self._pending:  # re-checked once the submitter can see we sleep
                self._wake.wait()
            self._wake.clear()
            self._writer_sleeping = False

    def _write_run(
        self, conn: sqlite3.Connection, statement: str, rows: list[tuple[Any, ...]]
    ) -> None:
        conn.execute("SAVEPOINT run")
        try:
            conn.executemany(statement, rows)
        except sqlite3.IntegrityError:  # e.g. a row of a session whose own row was lost
            conn.execute("ROLLBACK TO run")
            for params in rows:  # keep the good rows, count the bad ones
                try:
                    conn.execute(statement, params)
                except sqlite3.IntegrityError:
                    self._dropped_write += 1
        conn.execute("RELEASE run")

    def _write(self, conn: sqlite3.Connection, records: list[Record]) -> sqlite3.Connection | None:
        try:
            self._begin(conn)
            # Runs of one statement go in one executemany (its loop is C: little GIL).
            for statement, run in itertools.groupby(records, key=lambda r: r[0]):
                self._write_run(conn, statement, [params for _, params in run])
            conn.execute("COMMIT")
            return conn
        except sqlite3.Error as e:
            if conn.in_transaction:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
            self._dropped_write += len(records)
            if _is_locked(e):
                log.warning(
                    "%s; %d records were not written (later ones will be tried)",
                    explain(e, self.path),
                    len(records),
                )
                return conn
            conn.close()
            self._fail(e)
            return None


_shared: dict[Path, ConversationLog] = {}
_shared_lock = threading.Lock()


def shared_log(path: Path | None = None) -> ConversationLog:
    """The process's log for ``path`` (default: ``default_path()``), created once and
    closed at exit (bounded), with ``BACKLINE_LOG_RETENTION_DAYS`` applied."""
    target = path if path is not None else default_path()
    with _shared_lock:
        found = _shared.get(target)
        if found is None:
            if not _shared:
                import atexit

                atexit.register(_close_shared)
            found = _shared[target] = ConversationLog(target, retention_days=retention_days())
        return found


def _close_shared() -> None:
    with _shared_lock:
        logs = list(_shared.values())
        _shared.clear()
    for each in logs:
        each.close()
