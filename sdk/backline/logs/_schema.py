"""The conversation log's schema, its migrations, and the statements that write it.

The version is SQLite's ``user_version``: migration ``n`` takes a database from
version ``n - 1`` to ``n``, in one transaction. docs/logs.md describes the tables.
"""

from __future__ import annotations

import sqlite3

SCHEMA_VERSION = 2
"""The version this backline writes (``PRAGMA user_version``)."""

_CHILD = "session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE"

_V1 = f"""
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    started_at REAL NOT NULL,
    ended_at REAL,
    close_reason TEXT,
    front_end TEXT,
    llm TEXT,
    model TEXT,
    agent TEXT,
    cwd TEXT,
    backline_version TEXT,
    dropped INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX sessions_started ON sessions (started_at);
CREATE TABLE session_backgrounds (
    {_CHILD},
    background TEXT NOT NULL,
    PRIMARY KEY (session_id, background)
);
CREATE TABLE turns (
    id INTEGER PRIMARY KEY,
    {_CHILD},
    at REAL NOT NULL,
    speaker TEXT NOT NULL CHECK (speaker IN ('user', 'agent')),
    agent TEXT,
    text TEXT NOT NULL,
    interrupted INTEGER NOT NULL DEFAULT 0,
    item_id TEXT
);
CREATE INDEX turns_session ON turns (session_id, at);
CREATE TABLE tool_calls (
    id INTEGER PRIMARY KEY,
    {_CHILD},
    at REAL NOT NULL,
    call_id TEXT NOT NULL,
    name TEXT NOT NULL,
    arguments TEXT NOT NULL
);
CREATE INDEX tool_calls_session ON tool_calls (session_id, at);
CREATE TABLE tool_outputs (
    id INTEGER PRIMARY KEY,
    {_CHILD},
    at REAL NOT NULL,
    call_id TEXT NOT NULL,
    name TEXT NOT NULL,
    output TEXT NOT NULL,
    is_error INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX tool_outputs_session ON tool_outputs (session_id, at);
CREATE TABLE background_messages (
    id INTEGER PRIMARY KEY,
    {_CHILD},
    at REAL NOT NULL,
    background TEXT NOT NULL,
    message_id TEXT NOT NULL,
    text TEXT NOT NULL,
    silent INTEGER NOT NULL,
    status TEXT,
    status_at REAL
);
CREATE INDEX background_messages_session ON background_messages (session_id, at);
CREATE INDEX background_messages_id ON background_messages (session_id, message_id);
CREATE TABLE state_changes (
    id INTEGER PRIMARY KEY,
    {_CHILD},
    at REAL NOT NULL,
    subject TEXT NOT NULL,
    name TEXT,
    old TEXT,
    new TEXT,
    detail TEXT
);
CREATE INDEX state_changes_session ON state_changes (session_id, at);
CREATE TABLE llm_requests (
    id INTEGER PRIMARY KEY,
    {_CHILD},
    at REAL NOT NULL,
    speech_id TEXT,
    llm TEXT NOT NULL,
    model TEXT,
    ttft REAL,
    duration REAL NOT NULL,
    input_tokens INTEGER,
    output_tokens INTEGER,
    tokens_per_second REAL,
    status TEXT NOT NULL
);
CREATE INDEX llm_requests_session ON llm_requests (session_id, at);
CREATE TABLE errors (
    id INTEGER PRIMARY KEY,
    {_CHILD},
    at REAL NOT NULL,
    source TEXT NOT NULL,
    message TEXT NOT NULL,
    recoverable INTEGER NOT NULL
);
CREATE INDEX errors_session ON errors (session_id, at);
CREATE VIEW timeline (session_id, at, kind, who, text, detail, row_id) AS
    SELECT session_id, at, speaker, agent, text,
           CASE WHEN interrupted THEN 'interrupted' END, id FROM turns
    UNION ALL SELECT session_id, at, 'tool_call', name, arguments, call_id, id FROM tool_calls
    UNION ALL SELECT session_id, at, 'tool_output', name, output,
           CASE WHEN is_error THEN 'error' END, id FROM tool_outputs
    UNION ALL SELECT session_id, at, 'background', background, text,
           CASE WHEN silent THEN 'silent' ELSE 'spoken: ' || coalesce(status, 'pending') END, id
           FROM background_messages
    UNION ALL SELECT session_id, at, 'state', subject || coalesce(':' || name, ''), new, old, id
           FROM state_changes
    UNION ALL SELECT session_id, at, 'llm', coalesce(model, llm), status,
           'ttft ' || coalesce(printf('%.3fs', ttft), '-') || ', '
           || coalesce(printf('%.1f tokens/s', tokens_per_second), '- tokens/s'), id
           FROM llm_requests
    UNION ALL SELECT session_id, at, 'error', source, message, NULL, id FROM errors;
"""

# Full-text search over what was said and done. Optional: an SQLite built without
# FTS5 gets the tables without it (``backline logs -q`` then falls back to LIKE).
_V1_SEARCH = """
CREATE VIRTUAL TABLE search USING fts5(
    text, kind UNINDEXED, session_id UNINDEXED, at UNINDEXED, tokenize = 'unicode61'
);
CREATE TRIGGER turns_search AFTER INSERT ON turns BEGIN
    INSERT INTO search (text, kind, session_id, at)
    VALUES (new.text, new.speaker, new.session_id, new.at);
END;
CREATE TRIGGER tool_outputs_search AFTER INSERT ON tool_outputs BEGIN
    INSERT INTO search (text, kind, session_id, at)
    VALUES (new.output, 'tool_output', new.session_id, new.at);
END;
CREATE TRIGGER background_messages_search AFTER INSERT ON background_messages BEGIN
    INSERT INTO search (text, kind, session_id, at)
    VALUES (new.text, 'background', new.session_id, new.at);
END;
CREATE TRIGGER sessions_search_cleanup AFTER DELETE ON sessions BEGIN
    DELETE FROM search WHERE session_id = old.id;
END;
"""


class NewerSchemaError(Exception):
    """The database was written by a newer backline."""


def has_fts5(conn: sqlite3.Connection) -> bool:
    try:
        conn.execute("CREATE VIRTUAL TABLE temp.fts5_probe USING fts5(x)")
        conn.execute("DROP TABLE temp.fts5_probe")
    except sqlite3.OperationalError:
        return False
    return True


def _migrate_1(conn: sqlite3.Connection) -> None:
    for statement in _statements(_V1):
        conn.execute(statement)
    if has_fts5(conn):
        for statement in _statements(_V1_SEARCH):
            conn.execute(statement)


def _migrate_2(conn: sqlite3.Connection) -> None:
    """The session row keeps the options that shaped the conversation (a JSON object:
    ``user_away_signal``, a front end's speech engines, ...)."""
    conn.execute("ALTER TABLE sessions ADD COLUMN options TEXT")


MIGRATIONS = (_migrate_1, _migrate_2)
"""``MIGRATIONS[n - 1]`` takes version ``n - 1`` to ``n``. Append; never edit one."""


def _statements(script: str) -> list[str]:
    """Split a script into statements (a trigger's body keeps its semicolons)."""
    out: list[str] = []
    current: list[str] = []
    for line in script.strip().splitlines():
        current.append(line)
        text = "\n".join(current).strip()
        if text.endswith(";") and sqlite3.complete_statement(text):
            out.append(text)
            current = []
    if "\n".join(current).strip():
        out.append("\n".join(current).strip())
    return out


def version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the database to ``SCHEMA_VERSION``, one migration per transaction.

    Returns the version it started from. Raises ``NewerSchemaError`` for a database
    from a newer backline (it is left untouched).
    """
    start = version(conn)
    if start > SCHEMA_VERSION:
        raise NewerSchemaError(
            f"was written by a newer backline (schema version {start}, this one writes "
            f"{SCHEMA_VERSION})"
        )
    for target in range(start + 1, SCHEMA_VERSION + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            if version(conn) < target:  # another process may have migrated meanwhile
                MIGRATIONS[target - 1](conn)
                conn.execute(f"PRAGMA user_version = {target}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return start


def has_search(conn: sqlite3.Connection) -> bool:
    """Whether the database has the FTS5 ``search`` table."""
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'search'")
    return row.fetchone() is not None


# -- the statements the writer runs (a record is ``(statement, params)``) -------------------
INSERT_SESSION = (
    "INSERT INTO sessions"
    " (id, started_at, front_end, llm, model, agent, cwd, backline_version, options)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
INSERT_SESSION_BACKGROUND = (
    "INSERT OR IGNORE INTO session_backgrounds (session_id, background) VALUES (?, ?)"
)
END_SESSION = (
    "UPDATE sessions SET ended_at = ?, close_reason = ?, dropped = dropped + ? WHERE id = ?"
)
DELETE_SESSION_IF_SILENT = (
    "DELETE FROM sessions WHERE id = ? AND dropped = 0"
    " AND NOT EXISTS (SELECT 1 FROM turns WHERE session_id = ?)"
)
"""At the close (after ``END_SESSION``): a conversation in which nothing was said (no turn
written, none dropped) goes, and its rows with it (ON DELETE CASCADE)."""
INSERT_TURN = (
    "INSERT INTO turns (session_id, at, speaker, agent, text, interrupted, item_id)"
    " VALUES (?, ?, ?, ?, ?, ?, ?)"
)
INSERT_TOOL_CALL = (
    "INSERT INTO tool_calls (session_id, at, call_id, name, arguments) VALUES (?, ?, ?, ?, ?)"
)
INSERT_TOOL_OUTPUT = (
    "INSERT INTO tool_outputs (session_id, at, call_id, name, output, is_error)"
    " VALUES (?, ?, ?, ?, ?, ?)"
)
INSERT_BACKGROUND_MESSAGE = (
    "INSERT INTO background_messages (session_id, at, background, message_id, text, silent)"
    " VALUES (?, ?, ?, ?, ?, ?)"
)
UPDATE_BACKGROUND_STATUS = (
    "UPDATE background_messages SET status = ?, status_at = ?"
    " WHERE session_id = ? AND message_id = ?"
)
INSERT_STATE = (
    "INSERT INTO state_changes (session_id, at, subject, name, old, new, detail)"
    " VALUES (?, ?, ?, ?, ?, ?, ?)"
)
INSERT_LLM_REQUEST = (
    "INSERT INTO llm_requests (session_id, at, speech_id, llm, model, ttft, duration,"
    " input_tokens, output_tokens, tokens_per_second, status)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
INSERT_ERROR = (
    "INSERT INTO errors (session_id, at, source, message, recoverable) VALUES (?, ?, ?, ?, ?)"
)
