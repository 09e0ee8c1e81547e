"""cli_agent with the real Claude Code CLI (bundled in claude-agent-sdk): one persistent
stream-json process, backline's voice channel over HTTP, an interrupt and a crash."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from backline.testing import fake_anthropic as fa
from tests.mcp.claude_cli import CLI, cli_env, requires_cli
from tests.plugins.cli_agent.conftest import WAIT, cmdline, state

pytestmark = [requires_cli, pytest.mark.timeout(180)]

CLAUDE = (str(CLI), "-p")


async def coder_requests(server: fa.FakeAnthropicServer, count: int) -> list[Any]:
    """Block (in a thread) until Claude Code sent ``count`` scripted requests."""
    return await asyncio.to_thread(server.wait_for_requests, count, timeout=WAIT, scripted=True)


async def test_claude_code_speaks_reports_its_status_and_finishes(
    drive: Any, tmp_path: Path
) -> None:
    script = [
        fa.tool_calls(("mcp__backline__send_to_user", {"message": "On it: the parser."})),
        fa.tool_calls(("mcp__backline__set_status", {"status": {"step": "parsing"}})),
        fa.text("The parser is fixed."),
    ]
    with fa.FakeAnthropicServer.for_claude_code(script) as server:
        driver = await drive(CLAUDE, env=cli_env(server, tmp_path / "home"))
        await driver.say("Fix the parser.")
        final = await driver.wait_for_state(
            lambda s: s["status"] == "idle, waiting for the next task", timeout=WAIT
        )
        await driver.wait_until_done()
        first = server.scripted_requests[0]

    assert first.last_user_text == "Fix the parser."
    assert "You are working for a person who talks to a voice assistant" in first.system
    assert driver.result().spoken == ["On it: the parser."]
    assert "The parser is fixed." in driver.result().silent  # its own text is context
    assert "On it: the parser." in driver.result().transcript
    assert final["agent_status"] == {"step": "parsing"}
    assert final["voice_channel"] == "connected"
    assert final["process"]["state"] == "running"  # kept for the next task


async def test_a_correction_interrupts_the_turn_and_runs_next_in_the_same_process(
    drive: Any, tmp_path: Path
) -> None:
    script = [
        fa.text("Writing it with spaces...", delay=60.0),  # a turn still waiting for the model
        fa.text("Switched to tabs."),
    ]
    with fa.FakeAnthropicServer.for_claude_code(script) as server:
        driver = await drive(CLAUDE, env=cli_env(server, tmp_path / "home"))
        await driver.say("Reformat the file.")
        await coder_requests(server, 1)
        pid = state(driver)["process"]["pid"]
        command_line = cmdline(pid)  # readable by every local user

        await driver.say("Use tabs instead.")  # past the grace window: interrupts
        await driver.wait_for_state(lambda s: s["last_task"] == "Use tabs instead.", timeout=WAIT)
        second = (await coder_requests(server, 2))[1]

    assert "Reformat the file." not in command_line  # the task went to its stdin
    assert "[Request interrupted by user]" in str(second.messages)
    assert second.last_user_text.endswith("Use tabs instead.")
    assert state(driver)["process"]["pid"] == pid  # the same conversation
    assert "Switched to tabs." in driver.result().silent


async def test_a_crash_is_reported_and_the_next_message_starts_claude_code_again(
    drive: Any, tmp_path: Path
) -> None:
    script = [fa.text("Thinking...", delay=60.0), fa.text("Back and done.")]
    with fa.FakeAnthropicServer.for_claude_code(script) as server:
        driver = await drive(CLAUDE, env=cli_env(server, tmp_path / "home"))
        await driver.say("Start the migration.")
        await coder_requests(server, 1)
        pid = state(driver)["process"]["pid"]

        os.kill(pid, signal.SIGKILL)
        crashed = await driver.wait_for_state(lambda s: s["error"] is not None, timeout=WAIT)
        await driver.wait_until_done()
        await driver.say("Try again.")
        await driver.wait_for_state(lambda s: s["last_task"] == "Try again.", timeout=WAIT)

    assert crashed["status"] == "stopped after an error; the next message starts it again"
    assert "Claude Code exited (exit code -9)" in crashed["error"]
    assert driver.result().spoken[0].startswith("claude stopped because of an error")
    assert state(driver)["process"]["pid"] != pid
    assert "Back and done." in driver.result().silent


async def test_a_voice_channel_claude_code_cannot_connect_to_is_said_in_words(
    drive: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claude Code only shows a failed server in its init event: cli_agent reads it."""
    from backline_cli_agent import worker

    real = worker.mcp_config

    def wrong_token(endpoint: Any) -> Any:
        document = real(endpoint)
        document["mcpServers"]["backline"]["headers"] = {"Authorization": "Bearer wrong"}
        return document

    monkeypatch.setattr(worker, "mcp_config", wrong_token)
    with fa.FakeAnthropicServer.for_claude_code([fa.text("Done without it.")]) as server:
        driver = await drive(CLAUDE, env=cli_env(server, tmp_path / "home"))
        await driver.say("Tidy the imports.")
        final = await driver.wait_for_state(
            lambda s: s["status"] == "idle, waiting for the next task", timeout=WAIT
        )
        await driver.wait_until_done()

    assert final["voice_channel"] == "not connected: its status is 'failed'"
    assert (
        driver.result()
        .spoken[0]
        .startswith("Claude Code could not connect to backline's voice tools")
    )
    assert "Done without it." in driver.result().silent


async def test_claude_not_on_path_runs_the_cli_bundled_in_claude_agent_sdk(
    drive: Any, tmp_path: Path
) -> None:
    """Issue 26, item 5: ``--agent-cmd "claude -p"`` after a normal install."""
    empty = tmp_path / "bin"
    empty.mkdir()
    with fa.FakeAnthropicServer.for_claude_code([fa.text("Done with the bundled one.")]) as server:
        env = {**cli_env(server, tmp_path / "home"), "PATH": str(empty)}  # no claude on it
        driver = await drive(("claude", "-p"), env=env)
        found = await driver.wait_for_state(lambda s: s["program"] is not None)
        await driver.say("Tidy the imports.")
        await driver.wait_for_state(
            lambda s: s["status"] == "idle, waiting for the next task", timeout=WAIT
        )
        await driver.wait_until_done()

    assert found["program"] == "bundled with claude-agent-sdk"
    assert found["program_path"] == str(CLI)
    assert "Done with the bundled one." in driver.result().silent


async def test_an_event_line_over_the_limit_stops_claude_code_and_fails_the_task(
    drive: Any, tmp_path: Path
) -> None:
    """Issue 25, item 10, with Claude Code: its init event alone is over 2,000 bytes."""
    with fa.FakeAnthropicServer.for_claude_code([fa.text("Never read.")]) as server:
        driver = await drive(CLAUDE, env=cli_env(server, tmp_path / "home"), max_line_bytes=2000)
        await driver.say("Fix the parser.")
        final = await driver.wait_for_state(lambda s: s["error"] is not None, timeout=WAIT)
        await driver.wait_until_done()

    assert final["status"] == "the last task ended with an error"
    assert "longer than 2,000 bytes" in final["error"]
    assert final["process"]["state"] == "exited"
    with pytest.raises(ProcessLookupError):
        os.kill(final["process"]["pid"], 0)  # stopped (and reaped)
    (spoken,) = driver.result().spoken
    assert spoken.startswith("claude could not finish the task: one line of its output")
