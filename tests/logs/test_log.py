"""The conversation log: what a session writes, the schema, and every way the file can fail."""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from backline import Agent, BackgroundContext, ChatMessage, InMemoryTextOutput, Session, background
from backline import function_tool as tool
from backline.limits import DEFAULT_LIMITS
from backline.logs import (
    SCHEMA_VERSION,
    ConversationLog,
    ConversationLogError,
    _store,
    attach_log,
    data_dir,
    default_path,
    retention_days,
)
from backline.logs._query import find_session, list_sessions, open_log
from backline.testing import ScriptedLLM, text, tool_calls

WAIT = 10.0  # bounds a hang only


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "logs" / "conversations.db"


@pytest.fixture
def conv_log(db: Path) -> Iterator[ConversationLog]:
    log = ConversationLog(db)
    yield log
    assert log.close(WAIT)


def rows(db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql, params).fetchall()


def write_file(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def read_file(path: Path) -> bytes:
    return path.read_bytes()


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@background("coder", description="Writes code.")
async def coder(ctx: BackgroundContext) -> None:
    async for task in ctx.messages():
        async with ctx.turn():
            ctx.set_state({"status": "working", "task": task})
            await ctx.send(f"started: {task}", silent=True)
            await ctx.send(f"finished: {task}")


class Front(Agent):
    def __init__(self) -> None:
        super().__init__("You front a coder.")


def conversation_llm() -> ScriptedLLM:
    return ScriptedLLM(
        [
            tool_calls(
                ("lookup", {"key": "alpha"}),
                ("backline_send", {"background_session_id": "coder", "content": "fix login"}),
            ),
            text("Asked the coder; alpha is known."),
            text("The login is fixed."),
        ]
    )


async def run_conversation(log: ConversationLog, **meta: Any) -> Session[Any]:
    session: Session[Any] = Session(conversation_llm(), tools=[lookup], background=[coder])
    spoken = asyncio.Event()
    session.on("background_reply", lambda e: spoken.set() if e.status == "completed" else None)
    recorder = attach_log(session, log, **meta)
    async with session:
        await session.start(Front())
        await session.run(user_input="fix the login, and look alpha up")
        await asyncio.wait_for(spoken.wait(), WAIT)
        assert await session.wait_for_idle(timeout=WAIT)
    assert recorder.session_id is None  # closed
    return session


# -- what a conversation writes -----------------------------------------------------------


async def test_a_conversation_is_written_in_full(
    conv_log: ConversationLog, db: Path, no_leaked_tasks: Callable[[], Any]
) -> None:
    started = time.time()
    await run_conversation(conv_log, front_end="console", llm="scripted", model="m-1")
    assert conv_log.flush(WAIT)
    assert conv_log.error is None and conv_log.dropped == 0
    await no_leaked_tasks()

    ((sid, front, llm, model, agent, reason, begun, ended, dropped),) = rows(
        db,
        "SELECT id, front_end, llm, model, agent, close_reason, started_at, ended_at, dropped "
        "FROM sessions",
    )
    assert (front, llm, model, agent, reason, dropped) == (
        "console",
        "scripted",
        "m-1",
        "Front",
        "user",
        0,
    )
    assert started <= begun <= ended <= time.time()
    assert rows(db, "SELECT background FROM session_backgrounds") == [("coder",)]
    turns = rows(db, "SELECT speaker, agent, text, interrupted FROM turns ORDER BY at, id")
    assert turns == [
        ("user", None, "fix the login, and look alpha up", 0),
        ("agent", "Front", "Asked the coder; alpha is known.", 0),
        ("agent", "Front", "The login is fixed.", 0),
    ]
    assert rows(db, "SELECT name, arguments FROM tool_calls ORDER BY id") == [
        ("lookup", '{"key":"alpha"}'),
        ("backline_send", '{"background_session_id":"coder","content":"fix login"}'),
    ]
    assert rows(db, "SELECT name, output, is_error FROM tool_outputs ORDER BY id") == [
        ("lookup", "value of alpha", 0),
        ("backline_send", "Message has been delivered.", 0),
    ]
    assert rows(db, "SELECT background, text, silent, status FROM background_messages") == [
        ("coder", "started: fix login", 1, None),
        ("coder", "finished: fix login", 0, "completed"),
    ]
    states = rows(db, "SELECT subject, name, old, new FROM state_changes ORDER BY id")
    agent_states = [new for subject, _, _, new in states if subject == "agent"]
    # Between the two replies the agent listens unless the coder's reply is already
    # buffered when the first ends (the follow-up rule counts a buffered reply, not a
    # message the background has yet to answer): both orders are logged faithfully.
    assert agent_states in (
        ["listening", "thinking", "speaking", "thinking", "speaking", "listening"],
        ["listening", "thinking", "speaking", "listening", "thinking", "speaking", "listening"],
    )
    assert (
        "background_state",
        "coder",
        None,
        '{"status": "working", "task": "fix login"}',
    ) in states
    assert [s[3] for s in states if s[0] == "background_status"][:3] == ["running", "busy", "idle"]
    requests = rows(db, "SELECT llm, status, ttft IS NOT NULL, output_tokens FROM llm_requests")
    assert requests == [
        ("ScriptedLLM", "completed", 1, 2),
        ("ScriptedLLM", "completed", 1, 6),
        ("ScriptedLLM", "completed", 1, 4),
    ]
    assert {r[0] for r in rows(db, "SELECT session_id FROM turns")} == {sid}


async def test_an_interruption_keeps_what_was_heard(
    conv_log: ConversationLog, db: Path, virtual_clock: Any
) -> None:
    llm = ScriptedLLM([text("0123456789abcdefghij")])
    async with Session(llm, output=InMemoryTextOutput(chars_per_second=10)) as session:
        attach_log(session, conv_log)
        await session.start(Front())
        handle = session.generate_reply()
        await asyncio.sleep(1.05)  # virtual time: ten characters were heard
        session.interrupt()
        await handle
    assert conv_log.flush(WAIT)
    assert rows(db, "SELECT speaker, text, interrupted FROM turns") == [("agent", "0123456789", 1)]
    assert rows(db, "SELECT status FROM llm_requests") == [("completed",)]  # playout was cut


async def test_errors_and_a_restarted_session(conv_log: ConversationLog, db: Path) -> None:
    session: Session[Any] = Session(ScriptedLLM(["one"]))  # the second request fails
    attach_log(session, conv_log)
    for words in ("first", "second"):
        async with session:
            await session.start(Front())
            await session.run(user_input=words)
    assert conv_log.flush(WAIT)
    sessions = rows(db, "SELECT id, close_reason FROM sessions ORDER BY started_at")
    assert len(sessions) == 2 and {r[1] for r in sessions} == {"user"}
    ((source, message, recoverable),) = rows(db, "SELECT source, message, recoverable FROM errors")
    assert (source, recoverable) == ("llm", 1) and "no response scripted" in message
    assert rows(db, "SELECT session_id FROM errors") == [(sessions[1][0],)]


async def test_long_texts_are_cut_with_a_marker(db: Path) -> None:
    log = ConversationLog(db, limits=DEFAULT_LIMITS.with_(log_text_chars=20))
    async with Session(ScriptedLLM(["x" * 50])) as session:
        attach_log(session, log)
        await session.start(Front())
        await session.run(user_input="y" * 10)
    assert log.close(WAIT)
    (agent_text,) = rows(db, "SELECT text FROM turns WHERE speaker = 'agent'")[0]
    assert agent_text.startswith("x" * 20 + "\n[... truncated: 30 of 50 characters cut")
    assert rows(db, "SELECT text FROM turns WHERE speaker = 'user'") == [("y" * 10,)]


# -- the file ----------------------------------------------------------------------------


def test_a_new_log_is_versioned_and_in_wal_mode(conv_log: ConversationLog, db: Path) -> None:
    conv_log.start()
    assert conv_log.flush(WAIT)
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert {"sessions", "turns", "tool_calls", "tool_outputs", "background_messages"} <= names
    assert {"state_changes", "llm_requests", "errors", "timeline", "search"} <= names
    again = ConversationLog(db)  # opening a current log migrates nothing
    again.start()
    assert again.flush(WAIT) and again.error is None
    assert again.close(WAIT)


def test_a_log_of_the_first_version_is_migrated_and_its_rows_still_read(db: Path) -> None:
    from backline.logs import _schema

    write_file(db, b"")
    with sqlite3.connect(db) as conn:
        _schema.MIGRATIONS[0](conn)
        conn.execute("PRAGMA user_version = 1")
        now = time.time()  # recent: the log prunes what is past its retention
        conn.execute(
            "INSERT INTO sessions (id, started_at, front_end, llm) VALUES ('old1', ?, 'web', 'x')",
            (now,),
        )
        conn.execute(
            "INSERT INTO turns (session_id, at, speaker, text) VALUES ('old1', ?, 'user', 'hi')",
            (now,),
        )
        conn.commit()
    log = ConversationLog(db)
    log.start()
    assert log.flush(WAIT) and log.error is None
    assert log.close(WAIT)
    assert rows(db, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    with open_log(db) as conn:
        (old,) = list_sessions(conn, limit=5)
    assert old["id"] == "old1" and old["options"] == {}


async def test_the_session_row_keeps_the_options_that_shaped_the_conversation(
    conv_log: ConversationLog, db: Path
) -> None:
    async with Session(ScriptedLLM(["fine"]), user_away_signal="transcript") as session:
        attach_log(session, conv_log, options={"stt": "pocketsphinx"})
        await session.start(Front())
        await session.run(user_input="hi")
    assert conv_log.flush(WAIT)
    with open_log(db) as conn:
        (row,) = list_sessions(conn, limit=5)
    assert row["options"] == {"stt": "pocketsphinx", "user_away_signal": "transcript"}


async def test_a_log_from_a_newer_backline_is_left_alone(
    db: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_file(db, b"")
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA user_version = 99")
    log = ConversationLog(db)
    with caplog.at_level(logging.WARNING, logger="backline.logs"):
        async with Session(ScriptedLLM(["fine"])) as session:
            attach_log(session, log)
            await session.start(Front())
            result = await session.run(user_input="hi")
        log.flush(WAIT)
    result.expect.next_event().is_message(content="fine")  # the conversation went on
    assert log.error == (
        f"This conversation is not being logged: the conversation log {db} was written by a "
        f"newer backline (schema version 99, this one writes {SCHEMA_VERSION}): upgrade backline, "
        "or use --no-log"
    )
    assert "newer backline" in caplog.text
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 99
        assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
    assert log.close(WAIT)


async def test_a_damaged_log_is_reported_and_the_conversation_goes_on(
    db: Path, caplog: pytest.LogCaptureFixture
) -> None:
    garbage = b"this is not a database" * 100
    write_file(db, garbage)
    log = ConversationLog(db)
    errors: list[Any] = []
    with caplog.at_level(logging.WARNING, logger="backline.logs"):
        async with Session(ScriptedLLM(["still here", "and here"])) as session:
            session.on("error", errors.append)
            attach_log(session, log)
            await session.start(Front())
            first = await session.run(user_input="hi")
            log.flush(WAIT)
            second = await session.run(user_input="again")
    first.expect.next_event().is_message(content="still here")
    second.expect.next_event().is_message(content="and here")
    assert not log.available
    assert log.error == (
        f"This conversation is not being logged: the conversation log {db} is damaged (file is "
        "not a database): move it away, or use --no-log"
    )
    assert caplog.text.count("is damaged") == 1  # logged once
    # ... and said once where the front end shows errors (a line in the console).
    ((source, recoverable, error),) = [(e.source, e.recoverable, e.error) for e in errors]
    assert (source, recoverable) == ("log", True)
    assert isinstance(error, ConversationLogError) and str(error) == log.error
    assert read_file(db) == garbage  # never overwritten
    assert log.close(WAIT)


async def test_a_log_locked_at_open_is_reported(db: Path, caplog: pytest.LogCaptureFixture) -> None:
    ConversationLog(db).close()  # nothing written: creates nothing
    first = ConversationLog(db)
    first.start()
    assert first.close(WAIT)  # now the file exists, migrated
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        log = ConversationLog(db, limits=DEFAULT_LIMITS.with_(log_busy_timeout=0.05))
        with caplog.at_level(logging.WARNING, logger="backline.logs"):
            async with Session(ScriptedLLM(["ok"])) as session:
                attach_log(session, log)
                await session.start(Front())
                result = await session.run(user_input="hi")
            log.flush(WAIT)
        result.expect.next_event().is_message(content="ok")
        assert log.error is not None and "is locked by another process" in log.error
        assert log.close(WAIT)
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def migrated(db: Path) -> None:
    first = ConversationLog(db)
    first.start()
    assert first.close(WAIT)


def errors_of(session: Session[Any]) -> tuple[list[Any], asyncio.Event]:
    """The session's ``error`` events, and an event set at the first one."""
    seen: list[Any] = []
    first = asyncio.Event()

    def on_error(event: Any) -> None:
        seen.append(event)
        first.set()

    session.on("error", on_error)
    return seen, first


async def test_a_lock_is_shown_at_once_in_a_short_conversation(db: Path) -> None:
    migrated(db)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another program holds the log
    log = ConversationLog(db, limits=DEFAULT_LIMITS.with_(log_busy_timeout=60.0))
    try:
        async with Session(ScriptedLLM(["ok"])) as session:
            errors, shown = errors_of(session)
            attach_log(session, log)
            await session.start(Front())
            await session.run(user_input="hi")
            # One turn, then nothing: no later event is needed for the report, and it
            # does not wait for the lock's timeout (60 s).
            await asyncio.wait_for(shown.wait(), WAIT)
            holder.execute("ROLLBACK")  # released in time: nothing is lost
    finally:
        if holder.in_transaction:
            holder.execute("ROLLBACK")
        holder.close()
    assert log.flush(WAIT) and log.error is None and log.trouble is None
    ((source, recoverable, error),) = [(e.source, e.recoverable, e.error) for e in errors]
    assert (source, recoverable) == ("log", True) and isinstance(error, ConversationLogError)
    assert str(error).startswith("This conversation may not be logged: the conversation log")
    assert "is locked by another process" in str(error) and "wait up to 60s" in str(error)
    assert rows(db, "SELECT speaker, text FROM turns") == [("user", "hi"), ("agent", "ok")]
    assert log.close(WAIT)


async def test_an_unusable_log_is_shown_without_waiting_for_another_event(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")  # the log's folder cannot be made: a file is in the way
    log = ConversationLog(blocker / "conversations.db")
    async with Session(ScriptedLLM([])) as session:
        errors, shown = errors_of(session)
        attach_log(session, log)
        await session.start(Front())  # its first event starts the writer; nothing follows
        await asyncio.wait_for(shown.wait(), WAIT)
    ((error,),) = [(e.error,) for e in errors]
    assert str(error) == log.error
    assert "cannot use the conversation log" in str(error) and "use --no-log" in str(error)
    assert "other users" not in caplog.text  # a file in the way is not a loose folder
    assert log.close(WAIT)


# -- the files are the user's alone -----------------------------------------------------------


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def side_files(db: Path) -> list[Path]:
    return [db.with_name(db.name + side) for side in ("-wal", "-shm")]


def test_the_log_is_private_whatever_the_umask(db: Path) -> None:
    previous = os.umask(0)  # everything would be world-writable
    try:
        log = ConversationLog(db)
        assert log.submit(("INSERT INTO sessions (id, started_at) VALUES (?, ?)", ("s", 1.0)))
        assert log.flush(WAIT)
        assert all(p.exists() for p in side_files(db))  # open: WAL and its shared memory
        assert mode(db.parent) == 0o700
        assert [mode(p) for p in (db, *side_files(db))] == [0o600] * 3
        assert log.close(WAIT)
    finally:
        os.umask(previous)


def test_looser_files_in_backlines_folder_are_tightened(
    caplog: pytest.LogCaptureFixture,
) -> None:
    db = default_path()
    migrated(db)
    loose = (db.parent, db, db.with_name(db.name + "-wal"))
    db.with_name(db.name + "-wal").write_bytes(b"")  # as an older backline left them
    for path, wide in zip(loose, (0o755, 0o644, 0o666), strict=True):
        os.chmod(path, wide)
    with caplog.at_level(logging.WARNING, logger="backline.logs"):
        log = ConversationLog(db)
        log.start()
        assert log.flush(WAIT) and log.error is None
    assert db.parent == data_dir() and mode(db.parent) == 0o700
    assert [mode(p) for p in (db, *side_files(db))] == [0o600] * 3
    assert f"{db} could be read by other users (mode 644): it is now 0600" in caplog.text
    assert "could be entered by other users (mode 755): it is now 0700" in caplog.text
    assert log.close(WAIT)


def test_backline_logs_tightens_what_it_reads(caplog: pytest.LogCaptureFixture) -> None:
    db = default_path()
    migrated(db)
    os.chmod(db, 0o644)
    with caplog.at_level(logging.WARNING, logger="backline.logs"):
        conn = open_log(db)
    try:
        assert mode(db) == 0o600 and mode(db.with_name(db.name + "-shm")) == 0o600
    finally:
        conn.close()
    assert "it is now 0600" in caplog.text


def test_a_folder_of_ones_own_that_others_can_list_is_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    os.chmod(folder, 0o755)
    with caplog.at_level(logging.WARNING, logger="backline.logs"):
        log = ConversationLog(folder / "conversations.db")
        log.start()
        assert log.close(WAIT)
    assert mode(folder) == 0o755  # not backline's folder: left as it is, and said
    assert mode(folder / "conversations.db") == 0o600
    assert f"run `chmod 700 {folder}`" in caplog.text


# -- a conversation in which nothing was said ---------------------------------------------------


async def test_a_conversation_with_nothing_said_leaves_no_row(
    conv_log: ConversationLog, db: Path
) -> None:
    session: Session[Any] = Session(ScriptedLLM(["ok"]))
    recorder = attach_log(session, conv_log)
    async with session:
        await session.start(Front())  # started and closed: nothing said
        assert recorder.session_id is not None  # its row was open meanwhile
    async with session:  # restarted: this time something is said
        await session.start(Front())
        await session.run(user_input="hello")
    assert conv_log.flush(WAIT)
    ((sid,),) = rows(db, "SELECT id FROM sessions")
    assert rows(db, "SELECT count(*) FROM state_changes WHERE session_id != ?", sid) == [(0,)]
    assert rows(db, "SELECT speaker FROM turns") == [("user",), ("agent",)]


def test_a_conversation_with_no_turn_is_neither_listed_nor_shown(db: Path) -> None:
    log = ConversationLog(db)
    insert = "INSERT INTO sessions (id, started_at) VALUES (?, ?)"
    log.submit((insert, ("spoken", 1.0)))
    turn = "INSERT INTO turns (session_id, at, speaker, text) VALUES (?, ?, 'user', 'hi')"
    log.submit((turn, ("spoken", 1.0)))
    log.submit((insert, ("silent", 2.0)))  # newer: running, or left by a killed process
    assert log.close(WAIT)
    conn = open_log(db)
    try:
        assert [s["id"] for s in list_sessions(conn, limit=10)] == ["spoken"]
        assert find_session(conn, None) == "spoken"  # `backline logs show`
        assert find_session(conn, "sil") == "silent"  # named: still found
    finally:
        conn.close()


def test_a_lock_taken_while_writing_loses_one_batch_only(
    db: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = ConversationLog(db, limits=DEFAULT_LIMITS.with_(log_busy_timeout=0.05))
    insert = "INSERT INTO sessions (id, started_at) VALUES (?, ?)"
    log.submit((insert, ("before", 1.0)))
    assert log.flush(WAIT)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    with caplog.at_level(logging.WARNING, logger="backline.logs"):
        log.submit((insert, ("during", 2.0)))
        assert log.flush(WAIT)
    holder.execute("ROLLBACK")
    holder.close()
    log.submit((insert, ("after", 3.0)))
    assert log.flush(WAIT)
    assert rows(db, "SELECT id FROM sessions ORDER BY started_at") == [("before",), ("after",)]
    assert log.available and log.dropped == 1
    assert "locked by another process" in caplog.text and "will be tried" in caplog.text
    assert log.close(WAIT)


async def test_a_slow_disk_never_stalls_a_turn(
    db: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    stuck = threading.Event()
    connect = _store.connect

    def stuck_connect(path: Path, busy_timeout: float) -> Any:
        stuck.set()
        release.wait(WAIT)  # the disk hangs until the test lets it go
        return connect(path, busy_timeout)

    monkeypatch.setattr(_store, "connect", stuck_connect)
    log = ConversationLog(db, limits=DEFAULT_LIMITS.with_(log_queue_size=3))
    llm = ScriptedLLM([f"reply {i}" for i in range(5)])
    with caplog.at_level(logging.WARNING, logger="backline.logs"):
        async with Session(llm) as session:
            attach_log(session, log)
            await session.start(Front())
            for i in range(5):  # every turn completes while the writer is stuck
                result = await session.run(user_input=f"turn {i}")
                result.expect.next_event().is_message(content=f"reply {i}")
            assert await asyncio.to_thread(stuck.wait, WAIT)  # the writer is the one stuck
            assert not release.is_set()
    assert log.dropped > 0
    assert caplog.text.count("is falling behind") == 1
    release.set()
    assert log.close(WAIT)
    assert rows(db, "SELECT count(*) FROM sessions") == [(1,)]  # the first records made it


# -- retention and settings -----------------------------------------------------------------


def test_retention_deletes_old_conversations_and_their_rows(db: Path) -> None:
    log = ConversationLog(db)
    now = time.time()
    for sid, age_days in (("old", 40), ("recent", 2)):
        log.submit(
            ("INSERT INTO sessions (id, started_at) VALUES (?, ?)", (sid, now - age_days * 86400))
        )
        log.submit(
            (
                "INSERT INTO turns (session_id, at, speaker, text) VALUES (?, ?, 'user', ?)",
                (sid, now, f"words of {sid}"),
            )
        )
    assert log.close(WAIT)
    kept = ConversationLog(db, retention_days=None)
    kept.start()
    assert kept.close(WAIT)
    assert rows(db, "SELECT count(*) FROM sessions") == [(2,)]
    pruned = ConversationLog(db, retention_days=7)
    pruned.start()
    assert pruned.close(WAIT)
    assert rows(db, "SELECT id FROM sessions") == [("recent",)]
    assert rows(db, "SELECT text FROM turns") == [("words of recent",)]
    assert rows(db, "SELECT text FROM search") == [("words of recent",)]


def test_the_retention_setting(caplog: pytest.LogCaptureFixture) -> None:
    assert retention_days({}) == 30
    assert retention_days({"BACKLINE_LOG_RETENTION_DAYS": "7"}) == 7
    assert retention_days({"BACKLINE_LOG_RETENTION_DAYS": "0"}) is None
    with caplog.at_level(logging.WARNING, logger="backline.logs"):
        assert retention_days({"BACKLINE_LOG_RETENTION_DAYS": "a week"}) == 30
    assert "is not a number of days" in caplog.text


def test_logging_can_be_turned_off() -> None:
    assert _store.logging_enabled({})
    assert _store.logging_enabled({"BACKLINE_LOG": "1"})
    for off in ("0", "false", "No", "off"):
        assert not _store.logging_enabled({"BACKLINE_LOG": off})


def test_a_closed_or_unused_log_creates_nothing(db: Path) -> None:
    log = ConversationLog(db)
    assert log.flush(1) and log.close(1)
    assert not log.submit(("SELECT 1", ()))
    assert not db.exists()


@background("oneshot", description="Ends at once.")
async def oneshot(ctx: BackgroundContext) -> None:
    return


async def test_a_background_note_is_not_a_user_turn(conv_log: ConversationLog, db: Path) -> None:
    async with Session(ScriptedLLM(["ok"]), background=[oneshot]) as session:
        attach_log(session, conv_log)
        ended = asyncio.Event()
        session.on("background_status", lambda e: ended.set() if e.status == "ended" else None)
        await session.start(Front())
        await asyncio.wait_for(ended.wait(), WAIT)
        await session.run(user_input="hello")
        notes = [
            m.content
            for m in session.history.items
            if isinstance(m, ChatMessage) and "no longer running" in m.content
        ]
    assert notes  # the voice agent was told
    assert conv_log.flush(WAIT)
    assert rows(db, "SELECT speaker, text FROM turns") == [("user", "hello"), ("agent", "ok")]


def test_flush_and_close_are_bounded_when_the_disk_hangs(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    connect = _store.connect

    def stuck_connect(path: Path, busy_timeout: float) -> Any:
        release.wait(WAIT)
        return connect(path, busy_timeout)

    monkeypatch.setattr(_store, "connect", stuck_connect)
    log = ConversationLog(db)
    assert log.submit(("INSERT INTO sessions (id, started_at) VALUES (?, ?)", ("s", 1.0)))
    assert not log.flush(0.05)  # it gives up: the writer is stuck
    assert not log.close(0.05)  # bounded too; the writer is a daemon thread
    assert not log.submit(("INSERT INTO sessions (id, started_at) VALUES (?, ?)", ("t", 2.0)))
    release.set()
    assert log._thread is not None
    log._thread.join(WAIT)
    assert not log._thread.is_alive()  # it wrote what it had, then stopped
    assert rows(db, "SELECT id FROM sessions") == [("s",)]


def test_records_from_many_threads_are_all_written(conv_log: ConversationLog, db: Path) -> None:
    insert = "INSERT INTO sessions (id, started_at) VALUES (?, ?)"

    def submit_many(prefix: str) -> None:
        for i in range(500):
            assert conv_log.submit((insert, (f"{prefix}{i}", float(i))))

    threads = [threading.Thread(target=submit_many, args=(p,)) for p in "abcd"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    assert conv_log.flush(WAIT)
    assert rows(db, "SELECT count(*) FROM sessions") == [(2000,)]
    assert conv_log.dropped == 0


class Billing(Agent):
    def __init__(self) -> None:
        super().__init__("You handle billing.")


class Reception(Agent):
    def __init__(self) -> None:
        super().__init__("You route callers.")

    @tool
    async def to_billing(self) -> tuple[str, Agent]:
        """Transfer to billing."""
        return "Transferring you.", Billing()


async def test_each_turn_names_the_agent_that_spoke_across_a_handoff(
    conv_log: ConversationLog, db: Path
) -> None:
    llm = ScriptedLLM(
        [text("Reception here."), tool_calls(("to_billing", {})), text("Billing here.")]
    )
    async with Session(llm) as session:
        attach_log(session, conv_log)
        await session.start(Reception())
        await session.run(user_input="hello")
        await session.run(user_input="my bill")  # (the handoff: no reply of its own)
        await session.run(user_input="it is wrong")
        # The turn ended (the agent listens): its records are queued, not held back.
        assert conv_log.flush(WAIT)
        turns = rows(db, "SELECT speaker, agent, text FROM turns ORDER BY at, id")
        assert turns == [
            ("user", None, "hello"),
            ("agent", "Reception", "Reception here."),
            ("user", None, "my bill"),
            ("user", None, "it is wrong"),
            ("agent", "Billing", "Billing here."),
        ]
        handoffs = rows(db, "SELECT old, new FROM state_changes WHERE subject = 'handoff'")
        assert handoffs == [("Reception", "Billing")]


async def test_each_turn_row_names_its_history_item(conv_log: ConversationLog, db: Path) -> None:
    """The log writes the item's own id (made on the event loop when the log notes the
    item, before the writer thread reads the rest of it)."""
    async with Session(ScriptedLLM([text("Hi there.")])) as session:
        attach_log(session, conv_log)
        await session.start(Front())
        await session.run(user_input="hello")
        user, reply = session.history.items
        assert conv_log.flush(WAIT)
    written = rows(db, "SELECT speaker, text, item_id FROM turns ORDER BY at, id")
    assert written == [("user", "hello", user.id), ("agent", "Hi there.", reply.id)]
    assert len({user.id, reply.id}) == 2
