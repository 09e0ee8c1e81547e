""".mcp.json, --mcp-config, and a mounted server called by AnthropicLLM (fake server)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from backline import Agent, Session
from backline.app import SessionOptions, build_session
from backline.cli import make_cli
from backline.llm.anthropic import AnthropicLLM
from backline.mcp import MCPServerHTTP, MCPServerStdio, McpToolset, load_mcp_config
from backline.plugins import PluginManager
from backline.testing import fake_anthropic as fa
from tests.mcp.test_mount import RUN, WEATHER


def write(path: Path, document: Any) -> Path:
    path.write_text(json.dumps(document))
    return path


def test_the_mcp_json_format_is_read_with_its_variables(tmp_path: Path) -> None:
    config = write(
        tmp_path / ".mcp.json",
        {
            "mcpServers": {
                "files": {
                    "command": "npx",
                    "args": ["-y", "files-server", "${ROOT}"],
                    "env": {"TOKEN": "${TOKEN:-none}"},
                    "timeout": 5000,
                },
                "search": {
                    "type": "http",
                    "url": "https://search.example/mcp",
                    "headers": {"Authorization": "Bearer ${KEY}"},
                },
            }
        },
    )

    servers = load_mcp_config(config, {"ROOT": "/repo", "KEY": "k"})

    assert servers == [
        MCPServerStdio(
            "files",
            command="npx",
            args=("-y", "files-server", "/repo"),
            env={"TOKEN": "none"},
            timeout=5.0,
        ),
        MCPServerHTTP(
            "search", url="https://search.example/mcp", headers={"Authorization": "Bearer k"}
        ),
    ]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("not json", "is not valid JSON"),
        ({"servers": {}}, 'expected {"mcpServers"'),
        ({"mcpServers": {"a": {"type": "sse", "url": "http://x"}}}, "type 'sse' is not supported"),
        ({"mcpServers": {"a": {"command": "x", "args": "-v"}}}, "args must be a list"),
        ({"mcpServers": {"a b": {"command": "x"}}}, "the server name 'a b' must be"),
        ({"mcpServers": {"a": {"type": "http", "url": "ftp://x"}}}, "must start with http://"),
        ({"mcpServers": {"a": {"command": "${NOPE}"}}}, "NOPE is not set"),
        ({"mcpServers": {"a": {"command": "x", "timeout": "1s"}}}, "milliseconds"),
    ],
)
def test_what_cannot_be_used_is_a_clear_error_naming_the_file_and_server(
    tmp_path: Path, document: Any, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document))

    with pytest.raises(ValueError, match=message) as raised:
        load_mcp_config(path, {})

    assert str(path) in str(raised.value)


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"cannot read the MCP configuration .*missing\.json"):
        load_mcp_config(tmp_path / "missing.json")


def test_mcp_config_on_the_console_is_checked_before_anything_starts(tmp_path: Path) -> None:
    bad = write(tmp_path / "bad.json", {"mcpServers": {"a": {"type": "sse", "url": "x"}}})

    result = CliRunner().invoke(
        make_cli(), ["console", "--mcp-config", str(bad)], env={"BACKLINE_PLUGINS": "anthropic"}
    )

    assert result.exit_code == 2
    assert "Invalid value for '--mcp-config'" in result.output
    assert "type 'sse' is not supported" in result.output


def test_build_session_mounts_the_servers_of_mcp_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    config = write(
        tmp_path / ".mcp.json",
        {"mcpServers": {"weather": {"command": sys.executable, "args": [str(WEATHER)]}}},
    )
    manager = PluginManager(entry_points=False).load()

    session, _ = build_session(manager, SessionOptions(mcp_config=str(config)))

    (toolset,) = session.parts
    assert isinstance(toolset, McpToolset)
    assert [s.config.name for s in toolset._servers] == ["weather"]
    manager.deactivate()


@pytest.mark.timeout(120)
async def test_anthropic_llm_calls_a_mounted_tool_against_the_fake_server() -> None:
    script = [
        fa.tool_calls(("weather__forecast", {"city": "Paris"}, "toolu_weather")),
        fa.text("It is sunny in Paris."),
    ]
    server_config = MCPServerStdio("weather", command=sys.executable, args=[str(WEATHER)])
    async with fa.FakeAnthropicServer(script) as server:
        llm = AnthropicLLM(base_url=server.url, api_key="sk-ant-fake", retry_base_delay=0.01)
        session: Session[Any] = Session(llm, mcp_servers=[server_config], user_away_timeout=None)
        async with session:
            await session.start(Agent("You check the weather."))
            result = await session.run(user_input="Weather in Paris?", timeout=RUN)
        first, second = server.requests

    assert result.final_output == "It is sunny in Paris."
    tool = next(t for t in first.tools if t["name"] == "weather__forecast")
    assert tool["input_schema"]["properties"]["city"]["type"] == "string"
    (answer,) = second.tool_results
    assert answer["tool_use_id"] == "toolu_weather"
    content = answer["content"]
    text = content if isinstance(content, str) else "".join(b["text"] for b in content)
    assert text == "Sunny in Paris, 21 degrees."
