"""`backline console --background claude_code` as a user runs it: the installed
command, the plugin found through its entry point, and the real Claude Code CLI."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest
from backline_claude_code.testing import ScriptedWorld, isolated_claude_env

from backline.testing import fake_anthropic as fa
from tests.plugins.claude_code.conftest import requires_cli, voice_responder

BACKLINE = shutil.which("backline", path=str(Path(sys.executable).parent)) or "backline"


@requires_cli
@pytest.mark.timeout(120)
def test_backline_console_talks_to_claude_code(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    steps = [
        fa.tool_calls(("Write", {"file_path": str(repo / "notes.md"), "content": "# Notes\n"})),
        fa.tool_calls(("mcp__voice__send_to_user", {"message": "notes.md is ready."})),
        fa.text("Done."),
    ]
    world = ScriptedWorld(voice_responder, lambda _: steps.pop(0) if steps else fa.text("ok"))
    with isolated_claude_env() as home, world:
        env = {
            **os.environ,
            **world.claude_code_env(home),
            "BACKLINE_PLUGINS": "claude_code,anthropic",
        }
        child = pexpect.spawn(
            BACKLINE,
            ["console", "--background", "claude_code", "--plain"],
            cwd=str(repo),
            env=env,
            encoding="utf-8",
            timeout=45,
        )
        try:
            child.expect(r"background sessions: claude_code")
            child.expect(r"\[claude_code\] idle, waiting for a task")
            child.sendline("cc: start a notes file")
            child.expect("agent: I passed that to Claude Code.")
            child.expect(r"agent \(update\): Claude Code says: notes.md is ready.")
            child.expect(r"\[claude_code\] idle, waiting for the next task · edited notes.md")
            child.sendline("/quit")
            child.expect("bye")
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
    assert child.exitstatus == 0
    assert (repo / "notes.md").read_text() == "# Notes\n"
    # The default voice agent carried the plugin's guidance for the voice model.
    assert "Sending is not doing" in world.voice_requests[0].system


def test_backline_console_without_a_key_says_what_to_do(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    out = subprocess.run(
        [BACKLINE, "console", "--plain"],
        env={**env, "BACKLINE_PLUGINS": "anthropic"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode != 0
    assert "ANTHROPIC_API_KEY is not set" in out.stderr
