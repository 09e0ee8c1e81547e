"""cli_agent with a generic agent CLI (a fake one): one process per task, over MCP."""

from __future__ import annotations

import asyncio
import os
import select
from pathlib import Path
from typing import Any

import pytest

from backline.mcp import VoiceChannel
from backline.testing import BackgroundDriver
from tests.mcp.conftest import http_client, text_of
from tests.plugins.cli_agent.conftest import FAKE, WAIT, cmdline, silent, state

pytestmark = pytest.mark.timeout(120)


def channel_of(driver: BackgroundDriver) -> VoiceChannel:
    return VoiceChannel.of(driver.session.background.context("cli_agent"))  # type: ignore[union-attr]


async def finished(driver: BackgroundDriver, runs: int = 1) -> dict[str, Any]:
    """Wait until ``runs`` runs have ended (the task is cleared and the process exited)."""
    seen = 0

    def ended(s: Any) -> bool:
        nonlocal seen
        if s["task"] is None and s["last_task"] is not None and s["process"]["state"] == "exited":
            seen += 1
        return seen >= runs

    return await driver.wait_for_state(ended, timeout=WAIT)  # type: ignore[no-any-return]


async def test_output_lines_become_notes_and_a_quiet_agent_is_announced_finished(
    drive: Any,
) -> None:
    driver = await drive(FAKE)

    await driver.say("print: Reading the code.\nprint: All tests pass.")
    final = await finished(driver)
    await driver.wait_until_done()

    assert silent(driver) == ["Reading the code.", "All tests pass."]
    assert driver.result().spoken == [f"{FAKE[0].rsplit('/', 1)[-1]} finished: All tests pass."]
    assert final["status"] == "idle, waiting for the next task"
    assert final["process"]["exit_code"] == 0
    assert final["last_task"] == "print: Reading the code.\nprint: All tests pass."


async def test_output_past_max_output_lines_is_counted_in_one_last_note(drive: Any) -> None:
    driver = await drive(FAKE, max_output_lines=2)

    await driver.say("print: one\nprint: two\nprint: three\nprint: four")
    await finished(driver)
    await driver.wait_until_done()

    agent = FAKE[0].rsplit("/", 1)[-1]
    assert silent(driver) == ["one", "two", f"(2 more output lines of {agent} not shown)"]


async def test_one_output_line_over_the_limit_stops_the_agents_group_and_fails_the_task(
    drive: Any,
) -> None:
    """Issue 25, item 10: the agent prints one line over the limit and then blocks (it
    ignores SIGINT, and a child of its own sleeps): the run ends, its process group is
    stopped, the task is reported as failed and the user hears why."""
    driver = await drive(FAKE, max_line_bytes=4096)

    await driver.say("print: short\nhuge: 100000\nprint: after")
    final = await driver.wait_for_state(lambda s: s["error"] is not None, timeout=WAIT)
    await driver.wait_until_done()

    assert final["status"] == "the last task ended with an error"  # not "finished"
    assert "longer than 4,096 bytes" in final["error"] and "run was stopped" in final["error"]
    assert final["process"]["state"] == "exited"
    notes = silent(driver)
    assert notes[0] == "short" and notes[1].startswith("child: ")
    assert not any(n.startswith("xxx") or n == "after" for n in notes)
    (spoken,) = driver.result().spoken
    assert (
        spoken.startswith("python")
        and "could not finish the task: one line of its output was longer than 4,096 bytes"
        in spoken
    )
    for pid in (final["process"]["pid"], int(notes[1].removeprefix("child: "))):
        assert _ended(pid), pid  # the agent and the child it started


async def test_a_stderr_line_over_the_limit_is_left_out_and_the_run_goes_on(
    drive: Any,
) -> None:
    """A reader that stopped at it would leave the agent blocked on a full stderr pipe."""
    driver = await drive(FAKE, max_line_bytes=4096)

    await driver.say("errhuge: 300000\nprint: after\ncrash: 2")
    final = await finished(driver)

    assert "after" in silent(driver)
    assert final["process"]["exit_code"] == 2 and final["error"] == "exit code 2: boom"


def _ended(pid: int) -> bool:
    """Whether process ``pid`` has exited (waited for, bounded, through a pidfd)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True  # exited and reaped
    try:
        readable, _, _ = select.select([fd], [], [], WAIT)  # readable once it exited
        return bool(readable)
    finally:
        os.close(fd)


async def test_the_task_is_on_the_agents_stdin_not_on_its_command_line(drive: Any) -> None:
    """Issue 25, item 9: every local user can read /proc/PID/cmdline."""
    driver = await drive(FAKE)

    await driver.say("print: the-secret-plan-42\nsleep")
    await driver.wait_for(lambda: "sleeping" in silent(driver), what="the agent to start")
    pid = state(driver)["process"]["pid"]
    command_line = cmdline(pid)

    assert "the-secret-plan-42" in silent(driver)  # it got the task
    assert "the-secret-plan-42" not in command_line and "person" not in command_line
    assert command_line.split("\0")[:2] == list(FAKE)


async def test_prompt_file_gives_the_task_in_a_private_file_removed_after_the_run(
    drive: Any,
) -> None:
    driver = await drive((*FAKE, "--file", "{prompt_file}"))

    await driver.say("print: the-secret-plan-42\nfilemode\nargv")
    await finished(driver)
    await driver.wait_until_done()

    notes = silent(driver)
    assert notes[:2] == ["the-secret-plan-42", "0o600 0o700"]
    path = Path(notes[notes.index("argv| --file") + 1].removeprefix("argv| "))
    assert "the-secret-plan-42" not in " ".join(notes[2:])  # not among its arguments
    assert _kinds(path, path.parent) == ["missing", "folder"]  # removed; the folder stays


def _kinds(*paths: Path) -> list[str]:
    return ["folder" if p.is_dir() else "file" if p.exists() else "missing" for p in paths]


async def test_the_agent_gets_an_allow_listed_environment_and_the_names_added(
    drive: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 25, item 8: not the parent's whole environment."""
    for name, value in {
        "AWS_SECRET_ACCESS_KEY": "aws-secret",
        "BACKLINE_WEB_TOKEN": "web-token",
        "BACKLINE_RUNTIME_DIR": "/somewhere",
        "MY_TOOL_TOKEN": "added",
        "ANTHROPIC_API_KEY": "not-for-this-agent",
        "LANG": "C.UTF-8",
        "LC_TIME": "C",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "SSL_CERT_FILE": "/etc/ssl/cert.pem",
    }.items():
        monkeypatch.setenv(name, value)
    driver = await drive(FAKE, pass_env=("MY_TOOL_TOKEN",))

    await driver.say("env")
    await finished(driver)
    env = dict(
        line.removeprefix("env| ").split("=", 1)
        for line in silent(driver)
        if line.startswith("env| ")
    )

    for name in ("PATH", "HOME", "LANG", "LC_TIME", "HTTPS_PROXY", "SSL_CERT_FILE"):
        assert name in env, name
    assert env["MY_TOOL_TOKEN"] == "added"
    assert "AWS_SECRET_ACCESS_KEY" not in env
    assert "ANTHROPIC_API_KEY" not in env  # a key of another agent's provider
    assert sorted(n for n in env if n.startswith("BACKLINE_")) == [
        "BACKLINE_BACKGROUND",
        "BACKLINE_MCP_CONFIG",
        "BACKLINE_MCP_TOKEN",
        "BACKLINE_MCP_URL",
    ]  # only its voice channel: never backline's own


async def test_the_agent_speaks_and_reports_its_status_over_mcp(drive: Any) -> None:
    driver = await drive(FAKE)

    await driver.say('say: Tests are green.\nstatus: {"step": "pushing", "done": 3}')
    final = await finished(driver)
    await driver.wait_until_done()

    assert driver.result().spoken == ["Tests are green."]  # no "finished" on top of it
    assert final["agent_status"] == {"step": "pushing", "done": 3}
    assert final["voice_channel"].startswith("offered at http://127.0.0.1:")


async def test_a_message_while_the_agent_waits_for_the_user_reaches_it(drive: Any) -> None:
    driver = await drive(FAKE)

    await driver.say("wait")
    await driver.wait_for_state(lambda s: s["status"] == "waiting for your instructions")
    assert channel_of(driver).listening
    await driver.say("Use tabs.")  # past the grace window, yet no interrupt: it listens
    await finished(driver)

    assert "heard: The user says: / Use tabs." in silent(driver)


async def test_a_message_while_it_works_interrupts_it_and_becomes_the_next_task(
    drive: Any,
) -> None:
    driver = await drive(FAKE)
    await driver.say("sleep")
    await driver.wait_for(lambda: "sleeping" in silent(driver), what="the agent to start")

    await driver.say("prompt")  # interrupts (SIGINT), then runs with the task it stopped
    await finished(driver, runs=2)

    notes = silent(driver)
    assert "interrupted" in notes  # it got SIGINT, as an agent CLI's "stop"
    assert (
        "prompt| Your previous run was stopped because the person said something new. "
        "It was working on:" in notes
    )
    assert "prompt| sleep" in notes and "prompt| prompt" in notes


async def test_a_crash_is_reported_and_the_next_message_starts_a_fresh_run(drive: Any) -> None:
    driver = await drive(FAKE)

    await driver.say("crash: 3")
    crashed = await finished(driver)
    await driver.wait_until_done()
    await driver.say("print: back")
    await finished(driver, runs=2)

    assert crashed["status"] == "stopped after an error; the next message starts it again"
    assert crashed["error"] == "exit code 3: boom"
    assert crashed["process"]["exit_code"] == 3
    spoken = driver.result().spoken
    assert spoken[0].endswith(
        "stopped because of an error (exit code 3: boom). The next message starts it again."
    )
    assert "back" in silent(driver)


async def test_closing_the_session_stops_a_running_agent(drive: Any) -> None:
    driver = await drive(FAKE)
    await driver.say("sleep")
    await driver.wait_for(lambda: "sleeping" in silent(driver), what="the agent to start")
    pid = state(driver)["process"]["pid"]

    await driver.session.aclose()

    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_without_a_command_an_agent_you_start_attaches_over_mcp(drive: Any) -> None:
    driver = await drive(None)
    await driver.wait_for_state(lambda s: s["voice_channel"].startswith("offered at"))
    assert state(driver)["status"].startswith("waiting for an agent to connect")
    await driver.say("Add a README.")  # waits for whichever agent connects

    url = state(driver)["voice_channel"].removeprefix("offered at ")
    token = _token_of(driver)
    async with http_client(url, token) as client:
        heard = await client.call_tool("wait_for_user", {"timeout_seconds": 5})

    assert text_of(heard) == "The user says:\nAdd a README."


def _token_of(driver: BackgroundDriver) -> str:
    from backline.mcp.channel._hosting import _shared

    shared = _shared[asyncio.get_running_loop()]
    assert shared.host is not None
    return shared.host.token
