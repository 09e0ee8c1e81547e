"""`backline logs` and the front ends: every conversation they run is in the log."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pexpect
import pytest
from click.testing import CliRunner, Result

from backline import Agent, Session
from backline.app import SessionOptions, build_session
from backline.cli import make_cli
from backline.logs import ConversationLog, attach_log, default_path
from backline.plugins import PluginManager
from backline.testing import ScriptedLLM
from backline.testing import fake_anthropic as fa
from tests.logs.test_log import WAIT, run_conversation

BACKLINE = shutil.which("backline", path=str(Path(sys.executable).parent)) or "backline"


def logs(*args: str) -> Result:
    return CliRunner().invoke(make_cli(), ["logs", *args], catch_exceptions=False)


async def two_conversations() -> list[str]:
    """A conversation with the coder, then a short one without it (newest)."""
    log = ConversationLog(default_path())
    await run_conversation(log, front_end="console", llm="scripted")
    async with Session(ScriptedLLM(["Bonjour."])) as session:
        attach_log(session, log, front_end="web", llm="scripted")
        await session.start(Agent("Greet."))
        await session.run(user_input="say hello in French")
    assert log.close(WAIT)
    with sqlite3.connect(default_path()) as conn:
        return [r[0] for r in conn.execute("SELECT id FROM sessions ORDER BY started_at DESC")]


async def test_logs_lists_latest_first_and_filters() -> None:
    newest, oldest = await two_conversations()
    listed = logs()
    assert listed.exit_code == 0, listed.output
    header, *lines = listed.output.splitlines()
    assert re.split(r"\s{2,}", header) == [
        "ID",
        "STARTED",
        "LENGTH",
        "FRONT END",
        "LLM",
        "BACKGROUNDS",
        "TURNS",
        "FIRST WORDS",
    ]
    assert [line.split()[0] for line in lines] == [newest, oldest]
    # Each value starts under its column's name (TURNS is right-aligned: it ends there).
    for column, value, line in (
        ("FRONT END", "web", lines[0]),
        ("LLM", "scripted", lines[0]),
        ("BACKGROUNDS", "-", lines[0]),
        ("FIRST WORDS", '"say hello in French"', lines[0]),
        ("BACKGROUNDS", "coder", lines[1]),
    ):
        assert line.index(value, header.index(column)) == header.index(column), (column, line)
    turns_end = header.index("TURNS") + len("TURNS")
    assert [line[turns_end - 1] for line in lines] == ["2", "3"]
    assert [ln.split()[0] for ln in logs("-n", "1").output.splitlines()[1:]] == [newest]
    coder = logs("--background", "coder").output.splitlines()[1:]
    assert [ln.split()[0] for ln in coder] == [oldest]
    assert logs("--background", "nobody").output == "No conversations logged with nobody.\n"
    (entry, _) = json.loads(logs("--json").output)
    assert entry["id"] == newest and entry["front_end"] == "web" and entry["turns"] == 2
    assert entry["backgrounds"] == [] and entry["close_reason"] == "user"
    assert entry["duration"] is not None and entry["duration"] >= 0


async def test_logs_search_is_full_text() -> None:
    newest, oldest = await two_conversations()
    hits = logs("-q", "login").output.splitlines()
    assert hits and all(h.startswith(oldest) for h in hits)
    assert any("background: finished: fix the [login]" in h or "[login]" in h for h in hits)
    found = json.loads(logs("-q", "French", "--json").output)
    assert [(h["session_id"], h["kind"]) for h in found] == [(newest, "user")]
    assert logs("-q", "fix AND login", "--background", "nobody").output == "Nothing found.\n"
    broken = logs("-q", 'fix "login')  # not valid FTS5 syntax: searched as words
    assert broken.exit_code == 0 and oldest in broken.output


async def test_logs_show_prints_one_conversation() -> None:
    newest, oldest = await two_conversations()
    latest = logs("show")
    assert latest.exit_code == 0
    assert latest.output.startswith(f"Conversation {newest}: web, scripted, agent Agent\n")
    shown = logs("show", oldest[:6]).output
    assert f"Conversation {oldest}: console, scripted" in shown and "backgrounds: coder" in shown
    for expected in (
        "you: fix the login, and look alpha up",
        '[tool call] lookup {"key":"alpha"}',
        "[tool output] lookup: value of alpha",
        "[coder, silent] started: fix login",
        "[coder, spoken: completed] finished: fix login",
        "agent (Front): The login is fixed.",
        "[llm] ScriptedLLM completed: ttft ",
        "[background_status:coder] busy",
    ):
        assert expected in shown, expected
    assert "[agent] listening → thinking" not in shown
    assert "[agent] listening → thinking" in logs("show", oldest, "--states").output
    detail = json.loads(logs("show", oldest, "--json").output)
    kinds = [e["kind"] for e in detail["events"]]
    assert kinds.index("user") < kinds.index("agent") and "llm" in kinds
    missing = logs("show", "zzz")
    assert missing.exit_code == 1 and "No conversation 'zzz' in the log" in missing.output


def test_logs_without_a_log_and_with_a_damaged_one() -> None:
    assert logs("path").output == f"{default_path()}\n"
    empty = logs()
    assert empty.exit_code == 0 and "No conversations logged yet" in empty.output
    assert logs("show").exit_code == 1
    assert logs("--json").output == "[]\n"
    default_path().parent.mkdir(parents=True)
    default_path().write_bytes(b"garbage" * 200)
    damaged = logs()
    assert damaged.exit_code == 1
    assert f"the conversation log {default_path()} is damaged" in damaged.output
    assert "Traceback" not in damaged.output


# -- front ends write it -----------------------------------------------------------------------


def test_build_session_attaches_the_log_unless_told_not_to(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr("backline.logs.attach_log", lambda session, **meta: calls.append(meta))
    manager = PluginManager(entry_points=False).load()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setenv("BACKLINE_LOG", "1")
    session, _ = build_session(
        manager, SessionOptions(instructions="Hi.", user_away_signal="transcript")
    )
    assert session.user_away_signal == "transcript"  # --user-away-signal reaches the session
    assert calls == [
        {
            "front_end": None,
            "llm": "anthropic",
            "agent": "Agent",
            "backgrounds": (),
            "options": {"user_away_signal": "transcript"},
        }
    ]
    build_session(manager, SessionOptions(instructions="Hi.", log=False))  # --no-log
    monkeypatch.setenv("BACKLINE_LOG", "0")
    build_session(manager, SessionOptions(instructions="Hi."))
    assert len(calls) == 1


def console_env(server: fa.FakeAnthropicServer, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "BACKLINE_"))}
    return {
        **env,
        "ANTHROPIC_BASE_URL": server.url,
        "ANTHROPIC_API_KEY": "sk-ant-test",
        "BACKLINE_PLUGINS": "anthropic",
        **extra,
    }


def run_console(env: dict[str, str], *flags: str) -> None:
    child = pexpect.spawn(
        BACKLINE, ["console", "--plain", *flags], env=env, encoding="utf-8", timeout=30
    )
    try:
        child.expect("backline console")
        child.sendline("hello there")
        child.expect("agent: Hi! How can I help?")
        child.sendline("/quit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0


@pytest.mark.timeout(90)
def test_backline_console_writes_the_conversation_log() -> None:
    with fa.FakeAnthropicServer(["Hi! How can I help?", "Hi! How can I help?"]) as server:
        run_console(console_env(server, BACKLINE_LOG="1"), "--no-log")
        assert not default_path().exists()
        run_console(console_env(server, BACKLINE_LOG="1"))
    (entry,) = json.loads(logs("--json").output)
    assert (entry["front_end"], entry["llm"], entry["turns"]) == ("console", "anthropic", 2)
    assert entry["model"] == "claude-haiku-5-5" and entry["close_reason"] == "user"
    events = json.loads(logs("show", "--json").output)["events"]
    said = [(e["kind"], e["text"]) for e in events if e["kind"] in ("user", "agent")]
    assert said == [("user", "hello there"), ("agent", "Hi! How can I help?")]
    (llm,) = [e for e in events if e["kind"] == "llm"]
    assert llm["who"] == "claude-haiku-5-5" and llm["text"] == "completed"


def test_importing_backline_loads_neither_sqlite_nor_openai() -> None:
    code = (
        "import sys, backline, backline.cli\n"
        "heavy = [m for m in ('sqlite3', 'openai', 'backline.logs', 'platformdirs')"
        " if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.timeout(90)
def test_the_console_says_once_that_a_damaged_log_is_not_written() -> None:
    default_path().parent.mkdir(parents=True)
    default_path().write_bytes(b"garbage" * 200)
    out = io.StringIO()
    with fa.FakeAnthropicServer(["Hi! How can I help?", "Still here."]) as server:
        child = pexpect.spawn(
            BACKLINE,
            ["console", "--plain"],
            env=console_env(server, BACKLINE_LOG="1"),
            encoding="utf-8",
            timeout=30,
        )
        child.logfile_read = out
        try:
            child.expect("backline console")
            child.sendline("hello there")
            child.expect("agent: Hi! How can I help?")
            child.sendline("and again")
            child.expect("agent: Still here.")
            child.sendline("/quit")
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
    assert child.exitstatus == 0  # the conversation went on
    said = out.getvalue()
    assert said.count("This conversation is not being logged: the conversation log") == 1, said


@pytest.mark.timeout(90)
def test_the_console_shows_a_locked_log_during_a_one_turn_conversation() -> None:
    first = ConversationLog(default_path())
    first.start()
    assert first.close(WAIT)  # the log exists, migrated
    holder = sqlite3.connect(default_path(), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another program holds it
    out = io.StringIO()
    try:
        with fa.FakeAnthropicServer(["Hi! How can I help?"]) as server:
            child = pexpect.spawn(
                BACKLINE,
                ["console", "--plain"],
                env=console_env(server, BACKLINE_LOG="1"),
                encoding="utf-8",
                timeout=30,
            )
            child.logfile_read = out
            try:
                child.expect("backline console")
                child.sendline("hello there")
                child.expect("agent: Hi! How can I help?")
                # Nothing more is said: the console shows it anyway, before the user leaves
                # (before the reply when the reply comes after the lock's notice).
                if "This conversation may not be logged" not in out.getvalue():
                    child.expect("This conversation may not be logged: the conversation log")
                child.sendline("/quit")
                child.expect(pexpect.EOF)
            finally:
                child.close(force=True)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert child.exitstatus == 0  # the conversation went on
    assert "is locked by another process" in out.getvalue()
