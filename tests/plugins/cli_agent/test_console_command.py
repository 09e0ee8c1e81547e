"""`backline console --background cli_agent --agent-cmd "claude -p"` as a user runs it: the
installed command and plugin, the voice model and Claude Code both on the fake Anthropic
server, and backline's MCP voice channel between them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pexpect
import pytest
from backline_cli_agent import AGENT_GUIDANCE

from backline.app import DEFAULT_INSTRUCTIONS
from backline.testing import fake_anthropic as fa
from tests.mcp.claude_cli import CLI, cli_env, requires_cli
from tests.plugins.cli_agent.conftest import FAKE_AGENT

BACKLINE = shutil.which("backline", path=str(Path(sys.executable).parent)) or "backline"
MARKER = AGENT_GUIDANCE.splitlines()[0][:50]


def is_voice(request: fa.AnthropicRequest) -> bool:
    return DEFAULT_INSTRUCTIONS[:60] in request.system


def claude_side_request(request: fa.AnthropicRequest) -> bool:
    """Claude Code's own helper requests (the voice model's update replies have no tools
    either: they are the voice model's)."""
    return not is_voice(request) and fa.claude_code_side_request(request)


def responder(coder: list[fa.AnthropicResponse]) -> Any:
    def respond(request: fa.AnthropicRequest) -> Any:
        if MARKER in request.system:  # Claude Code, run by cli_agent
            return coder.pop(0) if coder else fa.text("ok")
        if request.tool_results:
            return fa.text("I passed that on.")
        last = request.last_user_text
        if not request.tools:  # a scheduled update: read it out
            return fa.text("Update: " + (request.background_updates(after="Update:") or [""])[-1])
        line = last.rsplit("\n", 1)[-1]
        if line.startswith("cc: "):
            args = {"background_session_id": "cli_agent", "content": line[4:]}
            return fa.tool_calls(("backline_send", args))
        return fa.text("Okay.")

    return respond


def path_without_claude() -> str:
    """The test's PATH without any folder that has a ``claude``."""
    folders = os.environ["PATH"].split(os.pathsep)
    return os.pathsep.join(f for f in folders if f and not (Path(f) / "claude").exists())


@requires_cli
@pytest.mark.timeout(180)
@pytest.mark.parametrize("claude_on_path", [True, False], ids=["on-path", "bundled"])
def test_backline_console_runs_claude_code_through_the_voice_channel(
    tmp_path: Path, claude_on_path: bool
) -> None:
    """With ``claude`` on PATH, as for a user who installed Claude Code; and without it,
    as after a normal install (issue 26, item 5): the CLI bundled in claude-agent-sdk."""
    repo, home, bin_dir, runtime = (tmp_path / d for d in ("repo", "home", "bin", "runtime"))
    for directory in (repo, home, bin_dir):
        directory.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=30)
    if claude_on_path:
        (bin_dir / "claude").symlink_to(CLI)  # "claude -p" is found on PATH, as for a user
    coder = [
        fa.tool_calls(("mcp__backline__send_to_user", {"message": "The parser is fixed."})),
        fa.text("Done."),
    ]
    with fa.FakeAnthropicServer(responder(coder), side=claude_side_request) as server:
        env = {
            **cli_env(server, home),
            "PATH": f"{bin_dir}{os.pathsep}{path_without_claude()}",
            "BACKLINE_PLUGINS": "cli_agent,anthropic",
            "BACKLINE_RUNTIME_DIR": str(runtime),
        }
        child = pexpect.spawn(
            BACKLINE,
            ["console", "--background", "cli_agent", "--agent-cmd", "claude -p", "--plain"],
            cwd=str(repo),
            env=env,
            encoding="utf-8",
            timeout=60,
        )
        try:
            child.expect(r"background sessions: cli_agent")
            source = "from PATH" if claude_on_path else "bundled"  # the line is cut at 70
            child.expect(rf"\[cli_agent\] idle, waiting for a task .*program {source}")
            child.sendline("cc: fix the parser")
            child.expect("agent: I passed that on.")
            child.expect(r"agent \(update\): Update: The parser is fixed.")
            child.expect(r"\[cli_agent\] idle, waiting for the next task")
            (announcement,) = runtime.glob("mcp-*.json")  # the console serves the endpoint
            front_end = json.loads(announcement.read_text())
            child.sendline("/quit")
            child.expect("bye")
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)

    assert child.exitstatus == 0
    assert front_end["front_end"] == "backline console" and front_end["pid"] == child.pid
    assert list(runtime.glob("mcp-*.json")) == []  # withdrawn when it stopped
    claude_requests = [r for r in server.scripted_requests if MARKER in r.system]
    assert claude_requests[0].last_user_text == "fix the parser"
    assert "mcp__backline__send_to_user" in claude_requests[0].tool_names
    # The voice agent got cli_agent's guidance.
    voice = next(r for r in server.scripted_requests if MARKER not in r.system)
    assert "background session `cli_agent`" in voice.system


@pytest.mark.timeout(120)
def test_agent_env_adds_a_variable_and_nothing_else_of_backlines_environment_passes(
    tmp_path: Path,
) -> None:
    """Issue 25, item 8, as a user runs it: ``--agent-env NAME`` (repeatable)."""
    repo, runtime = tmp_path / "repo", tmp_path / "runtime"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=30)
    agent = f"{sys.executable} {FAKE_AGENT}"
    names = "MY_TOOL_TOKEN MY_OTHER AWS_SECRET_ACCESS_KEY BACKLINE_WEB_TOKEN"
    with fa.FakeAnthropicServer(responder([])) as server:
        env = {
            **os.environ,
            "ANTHROPIC_BASE_URL": server.url,
            "ANTHROPIC_API_KEY": "sk-ant-fake-key",
            "BACKLINE_PLUGINS": "cli_agent,anthropic",
            "BACKLINE_RUNTIME_DIR": str(runtime),
            "BACKLINE_WEB_TOKEN": "web-token",
            "AWS_SECRET_ACCESS_KEY": "aws-secret",
            "MY_TOOL_TOKEN": "one",
            "MY_OTHER": "two",
        }
        child = pexpect.spawn(
            BACKLINE,
            [
                *("console", "--background", "cli_agent", "--agent-cmd", agent, "--plain"),
                *("--agent-env", "MY_TOOL_TOKEN", "--agent-env", "MY_OTHER"),
            ],
            cwd=str(repo),
            env=env,
            encoding="utf-8",
            timeout=60,
        )
        try:
            child.expect(r"\[cli_agent\] idle, waiting for a task")
            child.sendline(f"cc: envcheck: {names}")
            child.expect(r"agent \(update\): Update: python\S* finished: (.*)\r\n")
            heard = child.match.group(1)
            child.sendline("/quit")
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)

    assert heard == "has MY_TOOL_TOKEN MY_OTHER; lacks AWS_SECRET_ACCESS_KEY BACKLINE_WEB_TOKEN"
