"""`backline try` and `backline fake-anthropic`: the tested recipes for trying backline
with no key.

The commands run as a user runs them; with `fake-anthropic` the console runs in a second
process with the environment it printed. The scripted voice agent is a careful model:
a failed tool call is reported, never claimed (tests of ``backline.testing.offline``).
The same try-outs from the built wheels, outside the checkout: tests/test_packaging.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from backline import Agent, BackgroundContext, Session, background
from backline.llm.anthropic import AnthropicLLM
from backline.testing import fake_anthropic as fa
from backline.testing import offline

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "offline" / "script.py"
BACKLINE = shutil.which("backline", path=str(Path(sys.executable).parent)) or "backline"


def _clean_env(tmp_path: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "BACKLINE_", "CLAUDE_"))
    }
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    return env


def _sourced(env_file: Path, base: dict[str, str]) -> dict[str, str]:
    """``base`` after ``source env_file``."""
    env = dict(base)
    for line in env_file.read_text().splitlines():
        if line.startswith("export "):
            name, _, value = line.removeprefix("export ").partition("=")
            env[name] = value.strip("'")
        elif line.startswith("unset "):
            for name in line.split()[1:]:
                env.pop(name, None)
    return env


def _serve(tmp_path: Path, *script: str) -> tuple[subprocess.Popen[str], dict[str, str]]:
    """``backline fake-anthropic [SCRIPT] --env-file F``, listening; and the env it exports."""
    env_file = tmp_path / "fake.env"
    server = subprocess.Popen(
        [BACKLINE, "fake-anthropic", *script, "--env-file", str(env_file)],
        env=_clean_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    first = server.stdout.readline()  # printed once the server listens
    assert "A fake Anthropic API answers from" in first, first + server.stderr.read()
    assert env_file.stat().st_mode & 0o777 == 0o600
    return server, _sourced(env_file, _clean_env(tmp_path))


@contextlib.contextmanager
def _serving(tmp_path: Path, *script: str) -> Iterator[dict[str, str]]:
    """``_serve``, stopped at the end."""
    server, env = _serve(tmp_path, *script)
    try:
        yield env
    finally:
        server.terminate()
        server.wait(timeout=10)


def _console(env: dict[str, str], *args: str, cwd: Path | None = None) -> pexpect.spawn:
    return pexpect.spawn(
        BACKLINE,
        ["console", "--plain", *args],
        env=env,
        cwd=str(cwd) if cwd else None,
        encoding="utf-8",
        timeout=60,
    )


def _quit(child: pexpect.spawn) -> None:
    child.sendline("/quit")
    child.expect(pexpect.EOF)


@pytest.mark.timeout(120)
def test_the_console_talks_to_the_fake_server_with_no_key(tmp_path: Path) -> None:
    with _serving(tmp_path) as env:  # no SCRIPT: the generic one
        child = _console({**env, "BACKLINE_PLUGINS": "anthropic"})
        try:
            child.expect("/quit or Ctrl-D")
            child.sendline("hello there")
            child.expect("I heard: hello there")
            _quit(child)
        finally:
            child.close(force=True)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("script", ["generic", str(SCRIPT)], ids=["generic", "example"])
def test_with_no_background_the_agent_says_nothing_was_passed_on(
    tmp_path: Path, script: str
) -> None:
    with _serving(tmp_path, script) as env:
        child = _console({**env, "BACKLINE_PLUGINS": "anthropic,claude_code"})
        try:
            child.expect("/quit or Ctrl-D")
            child.sendline("ask claude to add a README")
            child.expect("agent: (.*)\r\n")
            said = child.match.group(1)
            assert "passed that on" not in said
            assert "I heard: ask claude to add a README" in said
            assert "--background" in said  # and how to start one
            _quit(child)
        finally:
            child.close(force=True)


@pytest.mark.timeout(180)
def test_the_example_script_drives_claude_code(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    with _serving(tmp_path, str(SCRIPT)) as env:
        _drive_claude_code(env, repo)


def _drive_claude_code(env: dict[str, str], repo: Path) -> None:
    child = _console(
        {**env, "BACKLINE_PLUGINS": "anthropic,claude_code"},
        "--background",
        "claude_code",
        cwd=repo,
    )
    try:
        child.expect("background sessions: claude_code")
        child.sendline("ask claude to add a README")
        child.expect("passed that on to Claude Code")
        child.expect("I wrote the task into notes.md")
        deadline = time.monotonic() + 30
        while "ask claude to add a README" not in _read(repo / "notes.md"):
            assert time.monotonic() < deadline, "notes.md was not written"
            child.expect([pexpect.TIMEOUT], timeout=0.2)
        child.sendline("what is it doing?")
        child.expect("Claude Code is ")
        _quit(child)
    finally:
        child.close(force=True)


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


# -- backline try -----------------------------------------------------------------------------


def _try(tmp_path: Path, *args: str) -> pexpect.spawn:
    env = {**_clean_env(tmp_path), "BACKLINE_LLM": "openai"}  # try uses the fake one anyway
    return pexpect.spawn(
        BACKLINE, ["try", *args], env=env, cwd=str(tmp_path), encoding="utf-8", timeout=60
    )


@pytest.mark.timeout(180)
def test_try_claude_code_runs_the_console_in_a_scratch_folder(tmp_path: Path) -> None:
    child = _try(tmp_path, "claude_code", "--plain")
    try:
        child.expect("answers from the claude_code script")
        child.expect(r"Working folder: (\S+) \(removed at the end\)")
        work = Path(child.match.group(1))
        child.expect("background sessions: claude_code")
        child.sendline("ask claude to add a README")
        child.expect("I've passed that on to Claude Code")
        child.expect("Update from Claude Code: I wrote the task into notes.md.")
        assert "ask claude to add a README" in _read(work / "notes.md")
        child.expect(r"\[claude_code\] idle, waiting for the next task")  # its turn ended
        child.sendline("what is it doing?")
        child.expect("agent: Claude Code is idle")
        _quit(child)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    assert not work.parent.exists()  # the scratch folder and Claude Code's config are gone
    assert not (tmp_path / "notes.md").exists()  # the user's folder is untouched


@pytest.mark.timeout(120)
def test_try_passes_options_to_the_console_and_reports_its_status(tmp_path: Path) -> None:
    child = _try(tmp_path, "--plain", "--llm", "nope")  # an option first: not a background
    try:
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 2  # the console's usage error, passed on
    assert "nope" in (child.before or "")


def test_an_unknown_script_name_lists_the_shipped_ones(tmp_path: Path) -> None:
    result = subprocess.run(
        [BACKLINE, "fake-anthropic", "claude-code"],
        env=_clean_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "no script named 'claude-code'" in result.stderr
    assert "claude_code, cli_agent, deep_research, generic" in result.stderr


def test_a_script_without_a_responder_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    result = subprocess.run(
        [BACKLINE, "fake-anthropic", str(empty)],
        env=_clean_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert "defines neither respond(request) nor a SCRIPT list" in result.stderr


@pytest.mark.timeout(60)
def test_a_script_adds_its_environment_to_the_exports(tmp_path: Path) -> None:
    script = tmp_path / "mine.py"
    script.write_text(
        'ENVIRONMENT = {"MY_SETTING": "on"}\n\ndef respond(request):\n    return "hi"\n'
    )
    server, env = _serve(tmp_path, str(script))
    server.terminate()
    server.wait(timeout=10)
    assert env["MY_SETTING"] == "on"
    assert env["BACKLINE_LLM"] == "anthropic"


# -- SIGTERM leaves nothing behind --------------------------------------------------------------


@pytest.mark.timeout(60)
def test_sigterm_removes_the_fake_servers_folder(tmp_path: Path) -> None:
    server, env = _serve(tmp_path)
    folder = Path(env["CLAUDE_CONFIG_DIR"])
    assert folder.is_dir() and folder.name.startswith("backline-fake-claude-")
    server.send_signal(signal.SIGTERM)
    assert server.wait(timeout=10) == 128 + signal.SIGTERM
    assert not folder.exists()


@pytest.mark.timeout(120)
def test_sigterm_stops_try_its_console_and_removes_its_folder(tmp_path: Path) -> None:
    child = _try(tmp_path, "--plain")
    try:
        child.expect(r"Working folder: (\S+) \(removed at the end\)")
        folder = Path(child.match.group(1)).parent
        child.expect("/quit or Ctrl-D")
        consoles = _children(child.pid)
        assert consoles, "the console runs as a child of backline try"
        os.kill(child.pid, signal.SIGTERM)
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 128 + signal.SIGTERM
    assert not folder.exists()
    for pid in consoles:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


# -- the scripted voice agent is careful ---------------------------------------------------------


@background("stopper", description="Stops at once.")
async def stopper(ctx: BackgroundContext) -> None:
    return None


async def test_a_failed_tool_call_is_reported_never_claimed() -> None:
    with fa.FakeAnthropicServer(offline.respond) as server:
        llm = AnthropicLLM(base_url=server.url, api_key="sk-ant-fake-key")
        async with Session(llm, background=[stopper]) as session:
            ended = asyncio.Event()
            session.on("background_status", lambda e: ended.set() if e.status == "ended" else None)
            await session.start(Agent("Be brief."))
            await ended.wait()
            result = await session.run(user_input="tell stopper to start")
    said = result.final_output or ""
    assert "passed that on" not in said
    assert said.startswith("That did not work, nothing was done:")
    assert "Background session 'stopper' is not running (it has finished)" in said


def _request(messages: list[dict[str, Any]], tools: tuple[str, ...] = ()) -> fa.AnthropicRequest:
    listing = "\n\nAvailable background sessions:\n" + "\n".join(f"- {t}: x" for t in tools)
    body = {
        "model": "m",
        "max_tokens": 100,
        "messages": messages,
        "tools": [{"name": "backline_send", "description": "Send." + listing}] if tools else [],
    }
    return fa.AnthropicRequest(1, "POST", "/v1/messages", "", {}, body)


def test_the_voice_agent_says_which_background_it_does_not_know() -> None:
    request = _request([{"role": "user", "content": "ask claude to fix it"}], ("weather",))
    reply = offline.voice_agent(request)
    assert reply.tool_calls == ()
    assert "no background session called claude" in reply.text
    assert "Weather (weather)" in reply.text


def test_the_voice_agent_asks_which_one_when_several_run() -> None:
    request = _request([{"role": "user", "content": "do it"}], ("weather", "news"))
    assert offline.voice_agent(request).text == (
        "Which one should I ask: Weather or News? Say 'ask NAME to ...'."
    )
    named = _request([{"role": "user", "content": "ask the news to look"}], ("weather", "news"))
    (call,) = offline.voice_agent(named).tool_calls
    assert (call.name, dict(call.input)) == (
        "backline_send",
        {"background_session_id": "news", "content": "ask the news to look"},
    )


def test_the_voice_agent_reads_a_state_and_reports_an_error() -> None:
    args = {"background_session_id": "weather"}
    call = {"type": "tool_use", "id": "t1", "name": "backline_state", "input": args}
    state = json.dumps({"status": "checking", "city": "Paris"})
    messages = [
        {"role": "user", "content": "status?"},
        {"role": "assistant", "content": [call]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": state}],
        },
    ]
    assert offline.voice_agent(_request(messages, ("weather",))).text == (
        "Weather is checking (city: Paris)."
    )
    failed = {"type": "tool_result", "tool_use_id": "t1", "content": "boom", "is_error": True}
    messages[-1] = {"role": "user", "content": [failed]}
    assert offline.voice_agent(_request(messages, ("weather",))).text == (
        "That did not work, nothing was done: boom"
    )
