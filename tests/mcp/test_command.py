"""``backline mcp``: help a newcomer can follow, each client's exact configuration, status."""

from __future__ import annotations

import json
import os
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from backline.cli import make_cli
from backline.mcp.channel._discovery import announce
from backline.mcp.channel._snippets import Target, snippet


def run(*args: str) -> Any:
    return CliRunner().invoke(make_cli(), list(args), catch_exceptions=False)


def toml_of(text: str) -> dict[str, Any]:
    return tomllib.loads("\n".join(line for line in text.splitlines() if not line.startswith("#")))


def json_block(text: str) -> dict[str, Any]:
    """The JSON object printed in ``text`` (from its first ``{`` line to the matching end)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("{"))
    end = next(i for i in range(start, len(lines)) if lines[i] == "}")
    return json.loads("\n".join(lines[start : end + 1]))  # type: ignore[no-any-return]


STDIO = Target("cli_agent", ("/opt/bin/backline",), Path("/run/user/1/backline"))
HTTP = Target(
    "cli_agent",
    ("/opt/bin/backline",),
    Path("/run/user/1/backline"),
    url="http://127.0.0.1:4321/mcp/cli_agent",
    token="tok",
)
SERVE = ["mcp", "serve", "--background", "cli_agent"]
ENV = {"BACKLINE_RUNTIME_DIR": "/run/user/1/backline"}


def test_help_explains_the_two_steps_and_the_subcommands() -> None:
    result = run("mcp", "--help")

    assert result.exit_code == 0
    assert "backline console --background cli_agent" in result.output
    assert "backline mcp config --background cli_agent --for claude" in result.output
    for command in ("serve", "config", "status"):
        assert f"  {command}  " in result.output
    assert "mcp" in run("--help").output


@pytest.mark.parametrize("client", ["claude", "cursor", "gemini"])
def test_json_clients_start_the_proxy(client: str) -> None:
    entry = json_block(snippet(client, STDIO))["mcpServers"]["backline"]

    assert entry == {"command": "/opt/bin/backline", "args": SERVE, "env": ENV}


def test_claude_gets_the_add_command_and_the_allowed_tools_hint() -> None:
    text = snippet("claude", STDIO)
    add = next(line for line in text.splitlines() if line.startswith("claude mcp add"))

    assert shlex.split(add) == [
        *("claude", "mcp", "add", "backline", "-e", "BACKLINE_RUNTIME_DIR=/run/user/1/backline"),
        *("--", "/opt/bin/backline", *SERVE),
    ]
    assert "--allowedTools mcp__backline" in text


def test_codex_gets_a_config_toml_table() -> None:
    text = snippet("codex", STDIO)
    table = toml_of(text)

    assert table == {
        "mcp_servers": {"backline": {"command": "/opt/bin/backline", "args": SERVE, "env": ENV}}
    }


def test_http_snippets_carry_the_url_and_the_token() -> None:
    bearer = {"Authorization": "Bearer tok"}
    assert json_block(snippet("claude", HTTP))["mcpServers"]["backline"] == {
        "type": "http",
        "url": HTTP.url,
        "headers": bearer,
    }
    assert json_block(snippet("cursor", HTTP))["mcpServers"]["backline"] == {
        "url": HTTP.url,
        "headers": bearer,
    }
    assert json_block(snippet("gemini", HTTP))["mcpServers"]["backline"] == {
        "httpUrl": HTTP.url,
        "headers": bearer,
    }
    codex = snippet("codex", HTTP)
    table = toml_of(codex)
    assert table["mcp_servers"]["backline"] == {
        "url": HTTP.url,
        "bearer_token_env_var": "BACKLINE_MCP_TOKEN",
    }
    assert "export BACKLINE_MCP_TOKEN=tok" in codex  # the token stays out of the file


def test_config_prints_every_client_or_one(runtime_dir: Path) -> None:
    every = run("mcp", "config", "--background", "cli_agent")
    one = run("mcp", "config", "-b", "cli_agent", "--for", "codex")

    assert every.exit_code == 0
    for name in ("Claude Code", "Codex", "Cursor", "Gemini CLI"):
        assert f"# {name}" in every.output
    assert f'BACKLINE_RUNTIME_DIR = "{runtime_dir}"' in one.output
    assert "Cursor" not in one.output


def test_config_refuses_a_name_that_is_not_a_background_id() -> None:
    result = run("mcp", "config", "--background", "no spaces")

    assert result.exit_code == 2
    assert "is not a background session id" in result.output


def test_http_config_needs_a_running_front_end(runtime_dir: Path) -> None:
    result = run("mcp", "config", "-b", "cli_agent", "--http", "--for", "cursor")

    assert result.exit_code == 1
    assert "--http needs a running front end" in result.output


def test_http_config_and_status_use_the_announced_front_end(runtime_dir: Path) -> None:
    path = announce("http://127.0.0.1:4321", "secret", "backline web")
    try:
        config = run("mcp", "config", "-b", "cli_agent", "--http", "--for", "cursor")
        status = run("mcp", "status")
    finally:
        path.unlink()

    assert json_block(config.output)["mcpServers"]["backline"] == {
        "url": "http://127.0.0.1:4321/mcp/cli_agent",
        "headers": {"Authorization": "Bearer secret"},
    }
    assert "Valid while this front end runs" in config.output
    assert f"backline web (pid {os.getpid()}): http://127.0.0.1:4321/mcp/<background>" in (
        status.output
    )


def test_announcements_of_gone_front_ends_are_removed_and_others_not_trusted(
    runtime_dir: Path,
) -> None:
    runtime_dir.mkdir(mode=0o700)
    gone = runtime_dir / "mcp-999999999.json"
    gone.write_text(json.dumps({"url": "http://127.0.0.1:1", "token": "t", "pid": 999999999}))
    gone.chmod(0o600)
    shared = runtime_dir / "mcp-1.json"
    shared.write_text(json.dumps({"url": "http://127.0.0.1:2", "token": "t", "pid": os.getpid()}))
    shared.chmod(0o644)

    result = run("mcp", "status")

    assert "No backline front end is running" in result.output
    assert not gone.exists()  # its process is gone
    assert shared.exists()  # readable by others: not ours, left alone but not used
