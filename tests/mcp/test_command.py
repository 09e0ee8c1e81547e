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


def entry(text: str) -> Any:
    """The ``backline`` server of a JSON configuration."""
    return json.loads(text)["mcpServers"]["backline"]


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
    assert entry(snippet(client, STDIO).config) == {
        "command": "/opt/bin/backline",
        "args": SERVE,
        "env": ENV,
    }


def test_claude_gets_the_add_command_and_the_allowed_tools_hint() -> None:
    hints = snippet("claude", STDIO).hints
    add = next(line.strip() for line in hints if line.strip().startswith("claude mcp add"))

    assert shlex.split(add) == [
        *("claude", "mcp", "add", "backline", "-e", "BACKLINE_RUNTIME_DIR=/run/user/1/backline"),
        *("--", "/opt/bin/backline", *SERVE),
    ]
    assert any("--allowedTools mcp__backline" in line for line in hints)


def test_codex_gets_a_config_toml_table() -> None:
    table = tomllib.loads(snippet("codex", STDIO).config)

    assert table == {
        "mcp_servers": {"backline": {"command": "/opt/bin/backline", "args": SERVE, "env": ENV}}
    }


def test_http_snippets_carry_the_url_and_the_token() -> None:
    bearer = {"Authorization": "Bearer tok"}
    assert entry(snippet("claude", HTTP).config) == {
        "type": "http",
        "url": HTTP.url,
        "headers": bearer,
    }
    assert entry(snippet("cursor", HTTP).config) == {"url": HTTP.url, "headers": bearer}
    assert entry(snippet("gemini", HTTP).config) == {"httpUrl": HTTP.url, "headers": bearer}
    codex = snippet("codex", HTTP)
    assert tomllib.loads(codex.config)["mcp_servers"]["backline"] == {
        "url": HTTP.url,
        "bearer_token_env_var": "BACKLINE_MCP_TOKEN",
    }
    assert "Bearer" not in codex.config and "=tok" not in codex.config  # not in the file
    assert any("export BACKLINE_MCP_TOKEN=tok" in line for line in codex.hints)


@pytest.mark.parametrize("client", ["claude", "cursor", "gemini"])
def test_config_prints_the_json_alone_on_stdout_and_the_hints_on_stderr(
    runtime_dir: Path, client: str
) -> None:
    result = run("mcp", "config", "-b", "cli_agent", "--for", client)

    assert result.exit_code == 0
    assert entry(result.stdout)["args"] == SERVE  # the whole of stdout parses (`| jq` works)
    assert entry(result.stdout)["env"] == {"BACKLINE_RUNTIME_DIR": str(runtime_dir)}
    assert "put this in" in result.stderr


def test_config_is_claude_codes_by_default_and_codex_gets_toml_alone(runtime_dir: Path) -> None:
    default = run("mcp", "config", "--background", "cli_agent")
    codex = run("mcp", "config", "-b", "cli_agent", "--for", "codex")

    assert "--type" not in default.stdout and entry(default.stdout)["args"] == SERVE
    assert "claude mcp add backline" in default.stderr
    assert "--for codex | cursor | gemini" in default.stderr
    table = tomllib.loads(codex.stdout)["mcp_servers"]["backline"]
    assert table["env"] == {"BACKLINE_RUNTIME_DIR": str(runtime_dir)}
    assert "~/.codex/config.toml" in codex.stderr


def test_config_refuses_a_name_that_is_not_a_background_id() -> None:
    result = run("mcp", "config", "--background", "no spaces")

    assert result.exit_code == 2
    assert "is not a background session id" in result.output


def test_config_for_a_background_nobody_has_is_a_usage_error_naming_the_installed_ones() -> None:
    unknown = run("mcp", "config", "--background", "nope")
    close = run("mcp", "config", "-b", "cli-agent")

    assert unknown.exit_code == 2 and unknown.stdout == ""
    assert "'nope' is not a background session" in unknown.stderr
    assert "cli_agent" in unknown.stderr and "Did you mean" not in unknown.stderr
    assert close.exit_code == 2
    assert "Did you mean 'cli_agent'?" in close.stderr


def test_help_names_the_flag_not_a_session_argument() -> None:
    for command in ("config", "serve"):
        text = run("mcp", command, "--help").output

        assert "session NAME" not in " ".join(text.split())
        assert "-b/--background NAME" in " ".join(text.split())


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

    assert entry(config.stdout) == {
        "url": "http://127.0.0.1:4321/mcp/cli_agent",
        "headers": {"Authorization": "Bearer secret"},
    }
    assert "Valid while this front end runs" in config.stderr
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
