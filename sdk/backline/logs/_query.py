"""Reading the conversation log: the latest conversations, full-text search, one timeline."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from ..limits import DEFAULT_LIMITS
from . import _files, _schema
from ._store import connect, data_dir, explain


class LogError(Exception):
    """The log does not exist, cannot be read, or has no such conversation."""


def open_log(path: Path) -> sqlite3.Connection:
    """A connection to an existing log, migrated to this backline's schema."""
    if not path.exists():
        raise LogError(f"No conversations logged yet ({path} does not exist).")
    try:
        _files.prepare(path, own_folder=data_dir(), create=False)  # before SQLite adds -shm
        conn = connect(path, DEFAULT_LIMITS.log_busy_timeout)
    except (sqlite3.Error, OSError) as e:
        raise LogError(explain(e, path)) from None
    try:
        _schema.migrate(conn)
    except (sqlite3.Error, _schema.NewerSchemaError) as e:
        conn.close()
        raise LogError(explain(e, path)) from None
    conn.row_factory = sqlite3.Row
    return conn


def _with_background(background: str | None, column: str) -> tuple[str, tuple[Any, ...]]:
    if background is None:
        return "", ()
    return (
        f" AND EXISTS (SELECT 1 FROM session_backgrounds b WHERE b.session_id = {column}"
        " AND b.background = ?)",
        (background,),
    )


_SAID = " AND EXISTS (SELECT 1 FROM turns t WHERE t.session_id = {column})"
"""Only conversations in which something was said: one still running before anyone
spoke, or one a killed process left before anyone did, is not listed."""


def list_sessions(
    conn: sqlite3.Connection, *, limit: int, background: str | None = None
) -> list[dict[str, Any]]:
    """The latest ``limit`` conversations in which something was said (optionally: that
    ran ``background``), newest first."""
    where, params = _with_background(background, "s.id")
    where += _SAID.format(column="s.id")
    rows = conn.execute(
        f"""
        SELECT s.*,
            (SELECT count(*) FROM turns t WHERE t.session_id = s.id) AS turns,
            (SELECT text FROM turns t WHERE t.session_id = s.id AND t.speaker = 'user'
             ORDER BY t.at LIMIT 1) AS first_words,
            (SELECT group_concat(background, ',') FROM
                (SELECT background FROM session_backgrounds b WHERE b.session_id = s.id
                 ORDER BY background)) AS backgrounds
        FROM sessions s WHERE 1 = 1{where}
        ORDER BY s.started_at DESC LIMIT ?
        """,
        (*params, limit),
    ).fetchall()
    return [_session_dict(row) for row in rows]


def _session_dict(row: sqlite3.Row) -> dict[str, Any]:
    out = dict(row)
    out["backgrounds"] = [b for b in (out.get("backgrounds") or "").split(",") if b]
    try:
        options = json.loads(out.get("options") or "{}")
    except ValueError:  # written by hand, or damaged: the row still reads
        options = {}
    out["options"] = options if isinstance(options, dict) else {}
    ended = out.get("ended_at")
    out["duration"] = None if ended is None else round(ended - out["started_at"], 3)
    return out


def search(
    conn: sqlite3.Connection, query: str, *, limit: int, background: str | None = None
) -> list[dict[str, Any]]:
    """What was said (turns, tool outputs, background messages) matching ``query``,
    newest first: FTS5 syntax (``login AND bug``, ``"exact phrase"``, ``log*``); text
    that is not valid FTS5 syntax is searched as plain words."""
    where, params = _with_background(background, "search.session_id")
    if not _schema.has_search(conn):
        return _search_like(conn, query, limit=limit, background=background)
    sql = f"""
        SELECT session_id, at, kind, snippet(search, 0, '[', ']', '…', 12) AS text
        FROM search WHERE search MATCH ?{where} ORDER BY at DESC LIMIT ?
    """
    try:
        rows = conn.execute(sql, (query, *params, limit)).fetchall()
    except sqlite3.OperationalError:
        words = " ".join('"' + w.replace('"', '""') + '"' for w in query.split())
        if not words:
            return []
        rows = conn.execute(sql, (words, *params, limit)).fetchall()
    return [dict(row) for row in rows]


def _search_like(
    conn: sqlite3.Connection, query: str, *, limit: int, background: str | None
) -> list[dict[str, Any]]:
    where, params = _with_background(background, "session_id")
    rows = conn.execute(
        f"""
        SELECT session_id, at, kind, text FROM timeline
        WHERE kind IN ('user', 'agent', 'tool_output', 'background') AND text LIKE ?{where}
        ORDER BY at DESC LIMIT ?
        """,
        (f"%{query}%", *params, limit),
    ).fetchall()
    return [dict(row) for row in rows]


def find_session(conn: sqlite3.Connection, ref: str | None) -> str:
    """The id of the conversation ``ref`` names: an id or a unique prefix of one;
    ``None`` or ``latest``: the newest in which something was said."""
    if ref is None or ref == "latest":
        said = _SAID.format(column="s.id")
        row = conn.execute(
            f"SELECT id FROM sessions s WHERE 1 = 1{said} ORDER BY started_at DESC LIMIT 1"
        ).fetchone()
        if row is None:
            raise LogError("No conversations logged yet.")
        return str(row["id"])
    escaped = ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    rows = conn.execute(
        "SELECT id FROM sessions WHERE id LIKE ? ESCAPE '\\' ORDER BY started_at DESC LIMIT 6",
        (escaped + "%",),
    ).fetchall()
    if not rows:
        raise LogError(f"No conversation {ref!r} in the log (`backline logs` lists them).")
    if len(rows) > 1:
        ids = ", ".join(str(r["id"]) for r in rows)
        raise LogError(f"{ref!r} names several conversations ({ids}): give more of the id.")
    return str(rows[0]["id"])


def timeline(conn: sqlite3.Connection, session_id: str, *, states: bool) -> dict[str, Any]:
    """One conversation: its row, and everything in it in time order (agent and user
    state changes only with ``states``)."""
    row = conn.execute(
        """
        SELECT s.*, (SELECT group_concat(background, ',') FROM
            (SELECT background FROM session_backgrounds b WHERE b.session_id = s.id
             ORDER BY background)) AS backgrounds
        FROM sessions s WHERE id = ?
        """,
        (session_id,),
    ).fetchone()
    if row is None:
        raise LogError(f"No conversation {session_id!r} in the log.")
    hidden = "" if states else " AND NOT (kind = 'state' AND who IN ('agent', 'user'))"
    events = conn.execute(
        f"SELECT at, kind, who, text, detail FROM timeline WHERE session_id = ?{hidden}"
        " ORDER BY at, kind, row_id",
        (session_id,),
    ).fetchall()
    out = _session_dict(row)
    out["events"] = [dict(e) for e in events]
    return out
