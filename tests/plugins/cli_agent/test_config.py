"""How each kind of agent is started, and the plugin as installed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from backline_cli_agent import AgentConfig, agent_kind
from backline_cli_agent.config import claude_launch, mcp_config, task_launch, write_private
from click.testing import CliRunner

from backline.cli import make_cli
from backline.mcp import Endpoint
from backline.plugins import PluginManager

ENDPOINT = Endpoint("http://127.0.0.1:4321/mcp/key/cli_agent", "s3cr3t", "cli_agent")


@pytest.mark.parametrize(
    ("argv", "kind"),
    [
        (("claude", "-p"), "claude"),
        (("/usr/local/bin/claude",), "claude"),
        (("codex", "exec"), "codex"),
        (("gemini", "-p"), "gemini"),
        (("python", "agent.py"), "generic"),
    ],
)
def test_the_kind_of_agent_comes_from_its_program(argv: tuple[str, ...], kind: str) -> None:
    assert agent_kind(argv) == kind


def test_claude_gets_stream_json_the_mcp_config_and_only_backline_allowed(tmp_path: Path) -> None:
    launch = claude_launch(("claude", "-p", "--model", "x"), tmp_path / "mcp.json", "Guidance.")

    assert launch.argv == [
        *("claude", "-p", "--model", "x"),
        *("--input-format", "stream-json", "--output-format", "stream-json", "--verbose"),
        *("--mcp-config", str(tmp_path / "mcp.json"), "--strict-mcp-config"),
        *("--allowedTools", "mcp__backline", "--append-system-prompt", "Guidance."),
    ]
    assert "-p" in claude_launch(("claude",), None, "G.").argv  # stream-json needs print mode


def test_codex_gets_the_server_in_config_overrides_and_the_token_and_task_out_of_argv() -> None:
    launch = task_launch("codex", ("codex", "exec"), "Do it.", ENDPOINT, None)

    assert launch.argv == [
        *("codex", "exec"),
        *("-c", 'mcp_servers.backline.url="http://127.0.0.1:4321/mcp/key/cli_agent"'),
        *("-c", 'mcp_servers.backline.bearer_token_env_var="BACKLINE_MCP_TOKEN"'),
        "-",  # codex exec reads its instructions from stdin
    ]
    assert launch.stdin == "Do it."
    assert launch.env["BACKLINE_MCP_TOKEN"] == "s3cr3t"
    assert "s3cr3t" not in " ".join(launch.argv)


def test_a_generic_agent_gets_the_task_on_stdin_and_the_server_in_the_environment(
    tmp_path: Path,
) -> None:
    config_file = write_private(tmp_path / "mcp.json", mcp_config(ENDPOINT))
    generic = task_launch("generic", ("my-agent", "--quiet"), "Do it.", ENDPOINT, config_file)
    gemini = task_launch("gemini", ("gemini", "-p"), "Do it.", ENDPOINT, config_file)

    assert (generic.argv, generic.stdin) == (["my-agent", "--quiet"], "Do it.")
    assert (gemini.argv, gemini.stdin) == (["gemini"], "Do it.")  # -p would take an argument
    assert generic.env == {
        "BACKLINE_MCP_URL": ENDPOINT.url,
        "BACKLINE_MCP_TOKEN": "s3cr3t",
        "BACKLINE_BACKGROUND": "cli_agent",
        "BACKLINE_MCP_CONFIG": str(config_file),
    }
    assert json.loads(config_file.read_text())["mcpServers"]["backline"] == {
        "type": "http",
        "url": ENDPOINT.url,
        "headers": {"Authorization": "Bearer s3cr3t"},
    }
    assert config_file.stat().st_mode & 0o777 == 0o600


def test_placeholders_put_the_task_in_a_private_file_or_on_the_command_line(
    tmp_path: Path,
) -> None:
    in_file = task_launch(
        "generic", ("aider", "--message-file", "{prompt_file}"), "Do it.", None, None,
        tmp_path / "task-1.txt",
    )  # fmt: skip
    as_argument = task_launch(
        "generic", ("agent", "--task", "{prompt}", "-v"), "Do it.", None, None
    )

    assert in_file.argv == ["aider", "--message-file", str(tmp_path / "task-1.txt")]
    assert in_file.prompt_file == (tmp_path / "task-1.txt", "Do it.")
    assert in_file.stdin is None
    assert as_argument.argv == ["agent", "--task", "Do it.", "-v"]
    assert as_argument.stdin is None and as_argument.env == {}


def test_the_command_is_read_from_the_environment_like_a_shell_would(tmp_path: Path) -> None:
    config = AgentConfig.from_env({"BACKLINE_AGENT_CMD": "claude -p --model 'a b'"}, cwd=tmp_path)

    assert config.argv == ("claude", "-p", "--model", "a b")
    assert config.kind == "claude" and config.name == "claude"
    assert AgentConfig.from_env({}, cwd=tmp_path).argv is None
    with pytest.raises(ValueError, match="BACKLINE_AGENT_CMD is not a valid command"):
        AgentConfig.from_env({"BACKLINE_AGENT_CMD": "claude 'unclosed"}, cwd=tmp_path)
    with pytest.raises(ValueError, match="does not exist"):
        AgentConfig(argv=("claude",), cwd=tmp_path / "missing")


def test_the_output_bounds_default_as_they_did_in_limits_and_come_from_the_environment(
    tmp_path: Path,
) -> None:
    default = AgentConfig(cwd=tmp_path)
    assert (default.max_output_lines, default.max_line_bytes) == (200, 8_000_000)

    config = AgentConfig.from_env(
        {"BACKLINE_AGENT_MAX_OUTPUT_LINES": "5", "BACKLINE_AGENT_MAX_LINE_BYTES": " 4096 "},
        cwd=tmp_path,
    )

    assert (config.max_output_lines, config.max_line_bytes) == (5, 4096)


@pytest.mark.parametrize("value", ["0", "-3", "many", "1.5"])
def test_a_bad_bound_in_the_environment_is_refused_naming_the_variable(
    tmp_path: Path, value: str
) -> None:
    with pytest.raises(ValueError, match="BACKLINE_AGENT_MAX_OUTPUT_LINES must be a positive"):
        AgentConfig.from_env({"BACKLINE_AGENT_MAX_OUTPUT_LINES": value}, cwd=tmp_path)


@pytest.mark.parametrize("field", ["max_output_lines", "max_line_bytes"])
@pytest.mark.parametrize("value", [0, -1, True])
def test_a_bad_bound_is_refused(tmp_path: Path, field: str, value: int) -> None:
    with pytest.raises(ValueError, match=f"AgentConfig.{field} must be a positive number"):
        AgentConfig(cwd=tmp_path, **{field: value})


def test_the_plugin_registers_the_background_and_its_options() -> None:
    manager = PluginManager.from_environment({"BACKLINE_PLUGINS": "cli_agent"}).load()

    info = manager.plugin("cli_agent")
    assert info.status == "loaded" and info.distribution == "backline-cli-agent"
    assert [d.id for d in manager.background_definitions()] == ["cli_agent"]
    assert [o.flag for o in manager.options()] == [
        "--agent-cmd",
        "--agent-env",
        "--agent-require-clean",
    ]


def test_every_front_end_shows_agent_cmd(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BACKLINE_PLUGINS", "cli_agent")
    for command in ("console", "web"):
        result = CliRunner().invoke(make_cli(), [command, "--help"])
        assert "--agent-cmd COMMAND" in result.output, command
        assert "--agent-env NAME" in result.output, command
        assert "--agent-require-clean" in result.output, command
