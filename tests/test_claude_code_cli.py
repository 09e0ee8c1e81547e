"""The real Claude Code CLI (bundled in claude-agent-sdk) against FakeAnthropicServer."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from backline.testing import fake_anthropic as fa
from backline.testing.fake_anthropic import CLAUDE_CODE_CLEARED_ENV, FakeAnthropicServer

claude_agent_sdk = pytest.importorskip("claude_agent_sdk")

CLI = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"

pytestmark = [
    pytest.mark.skipif(
        not CLI.is_file(),
        reason=f"the Claude Code CLI bundled with claude-agent-sdk is missing ({CLI})",
    ),
    pytest.mark.timeout(60),
]

TURN_TIMEOUT = 45.0  # one whole CLI session; it takes 1-3 s


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the parent environment from steering the CLI elsewhere."""
    for name in (*CLAUDE_CODE_CLEARED_ENV, "CLAUDECODE", "CLAUDE_CONFIG_DIR"):
        monkeypatch.delenv(name, raising=False)


async def run_cli(
    server: FakeAnthropicServer,
    prompt: str,
    tmp_path: Path,
    *,
    nonessential_traffic: bool = False,
    **options: Any,
) -> list[Any]:
    """One ``ClaudeSDKClient`` turn; returns every message the SDK yielded."""
    from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient

    home = tmp_path / "home"
    work = tmp_path / "work"
    home.mkdir()
    work.mkdir(exist_ok=True)
    env = server.claude_code_env(home)
    if nonessential_traffic:  # then the CLI also checks /api/hello and asks for a title
        del env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"]
    stderr: list[str] = []
    opts = ClaudeAgentOptions(
        cwd=str(work),
        permission_mode="acceptEdits",
        env=env,
        stderr=stderr.append,
        **options,
    )
    messages: list[Any] = []
    async with asyncio.timeout(TURN_TIMEOUT):
        async with ClaudeSDKClient(options=opts) as client:
            await client.query(prompt)
            async for message in client.receive_response():
                messages.append(message)
    result = messages[-1]
    assert type(result).__name__ == "ResultMessage", messages
    assert not result.is_error, (result, server.requests, stderr)
    return messages


def assert_agent_loop_requests(server: FakeAnthropicServer, tool_name: str) -> None:
    main = server.scripted_requests
    assert len(main) == 2, server.requests
    for request in main:
        assert request.is_messages
        assert request.stream  # the CLI always streams
        assert request.api_key == "sk-ant-fake-key"
        assert tool_name in request.tool_names


@pytest.mark.usefixtures("cli_env")
@pytest.mark.parametrize("nonessential_traffic", [False, True], ids=["quiet", "chatty"])
async def test_cli_writes_a_file_through_a_scripted_write_call(
    tmp_path: Path, nonessential_traffic: bool
) -> None:
    target = tmp_path / "work" / "hello.txt"
    script = [
        fa.tool_calls(("Write", {"file_path": str(target), "content": "hi"}, "toolu_write1")),
        fa.text("done"),
    ]
    with FakeAnthropicServer.for_claude_code(script) as server:
        messages = await run_cli(
            server,
            "Write hi to hello.txt",
            tmp_path,
            nonessential_traffic=nonessential_traffic,
            allowed_tools=["Write"],
        )

    assert target.read_text() == "hi"
    assert_agent_loop_requests(server, "Write")
    first, second = server.scripted_requests
    assert first.last_user_text == "Write hi to hello.txt"
    (result,) = second.tool_results
    assert result["tool_use_id"] == "toolu_write1"
    assert not result.get("is_error")
    assert "hello.txt" in str(result["content"])
    texts = [
        block.text
        for m in messages
        if type(m).__name__ == "AssistantMessage"
        for block in m.content
        if type(block).__name__ == "TextBlock"
    ]
    assert texts == ["done"]
    side = [r for r in server.requests if not r.scripted]
    if nonessential_traffic:  # a title request (structured output) was kept off the script
        assert any(r.is_messages and r.output_format for r in side), server.requests
    else:
        assert side == []


@pytest.mark.usefixtures("cli_env")
async def test_cli_calls_an_in_process_sdk_mcp_tool(tmp_path: Path) -> None:
    from claude_agent_sdk import create_sdk_mcp_server, tool

    calls: list[dict[str, Any]] = []

    @tool("send_to_user", "Say something to the user.", {"text": str})
    async def send_to_user(args: dict[str, Any]) -> dict[str, Any]:
        calls.append(args)
        return {"content": [{"type": "text", "text": "delivered"}]}

    script = [
        fa.tool_calls(("mcp__voice__send_to_user", {"text": "hello from the backline"})),
        fa.text("done"),
    ]
    with FakeAnthropicServer.for_claude_code(script) as server:
        await run_cli(
            server,
            "Tell the user hello",
            tmp_path,
            mcp_servers={"voice": create_sdk_mcp_server("voice", tools=[send_to_user])},
            allowed_tools=["mcp__voice__send_to_user"],
        )

    assert calls == [{"text": "hello from the backline"}]
    assert_agent_loop_requests(server, "mcp__voice__send_to_user")
    (result,) = server.scripted_requests[1].tool_results
    assert result["tool_use_id"] == "toolu_fake0001"
    assert result["content"] == [{"type": "text", "text": "delivered"}]
