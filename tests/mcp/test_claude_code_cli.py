"""The real Claude Code CLI talks to the user through backline's voice channel (-p mode)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from backline.mcp import Hosting, VoiceChannel
from backline.testing import BackgroundDriver
from backline.testing import fake_anthropic as fa
from tests.mcp.claude_cli import (
    cli_env,
    http_config,
    init_event,
    requires_cli,
    run_print_mode,
    stdio_config,
)
from tests.mcp.conftest import until_listening

pytestmark = [requires_cli, pytest.mark.timeout(180)]

SCRIPT = [
    fa.tool_calls(("mcp__backline__send_to_user", {"message": "Starting on the parser."})),
    fa.tool_calls(
        ("mcp__backline__set_status", {"status": {"step": "parsing", "files": ["parse.py"]}})
    ),
    fa.tool_calls(("mcp__backline__wait_for_user", {"timeout_seconds": 60})),
    fa.text("Done: switched to the new grammar."),
]


@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_claude_code_speaks_reports_and_hears_a_correction(
    hosting: Hosting, driver: BackgroundDriver, runtime_dir: Path, tmp_path: Path, transport: str
) -> None:
    ctx = driver.session.background.context("agent")  # type: ignore[union-attr]
    endpoint = await hosting.endpoint(ctx)
    config = http_config(endpoint) if transport == "http" else stdio_config("agent", runtime_dir)
    work = tmp_path / "work"
    work.mkdir()

    async def the_user() -> None:
        """Hears the update, asks for the state, then corrects the agent."""
        assert await driver.wait_for_spoken(1) == ["Starting on the parser."]
        await driver.wait_for_state(lambda s: s == {"step": "parsing", "files": ["parse.py"]})
        await until_listening(VoiceChannel.of(ctx))
        await driver.say("Use the new grammar instead.")

    with fa.FakeAnthropicServer.for_claude_code(SCRIPT) as server:
        env = cli_env(server, tmp_path / "home")
        user = asyncio.ensure_future(the_user())
        try:
            events = await run_print_mode("Fix the parser.", config, cwd=work, env=env)
            await user
        finally:
            user.cancel()
        requests = server.scripted_requests

    assert init_event(events)["mcp_servers"] == [
        {"name": "backline", "status": "connected", "source": "dynamic"}
    ]
    assert "mcp__backline__wait_for_user" in requests[0].tool_names
    spoken, status, heard = (r.tool_results[0] for r in requests[1:4])
    assert _text(spoken).startswith("Delivered")
    assert _text(status) == "Status updated."
    assert _text(heard) == "The user says:\nUse the new grammar instead."
    # The voice agent spoke the update, and its state tool answers with the status.
    await driver.wait_until_done()
    assert "Starting on the parser." in driver.result().transcript
    state_tool = next(t for t in driver.session.tools if t.name == "backline_state")
    assert json.loads(await state_tool.invoke({"background_session_id": "agent"})) == {
        "step": "parsing",
        "files": ["parse.py"],
    }


async def test_a_wrong_token_shows_as_a_failed_server_in_the_init_event(
    hosting: Hosting, driver: BackgroundDriver, tmp_path: Path
) -> None:
    """What cli_agent checks: Claude Code says nothing else about it."""
    endpoint = await hosting.endpoint(driver.session.background.context("agent"))  # type: ignore[union-attr]
    config = http_config(endpoint)
    config["mcpServers"]["backline"]["headers"] = {"Authorization": "Bearer wrong"}
    work = tmp_path / "work"
    work.mkdir()

    with fa.FakeAnthropicServer.for_claude_code([fa.text("Nothing to do.")]) as server:
        events = await run_print_mode(
            "Hello.", config, cwd=work, env=cli_env(server, tmp_path / "home")
        )

    (backline,) = init_event(events)["mcp_servers"]
    assert backline["status"] == "failed"


def _text(result: dict[str, Any]) -> str:
    content = result["content"]
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content)
