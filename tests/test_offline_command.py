"""`backline fake-anthropic SCRIPT`: the tested recipe for trying backline with no key.

The command runs as a user runs it; the console runs in a second process with the
environment it printed, and the shipped example script drives both the voice agent
and the real Claude Code CLI."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "offline" / "script.py"
BACKLINE = shutil.which("backline", path=str(Path(sys.executable).parent)) or "backline"


def _clean_env(tmp_path: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "BACKLINE_", "CLAUDE_"))
    }
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    return env


@pytest.fixture
def served(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The fake server running from the example script; yields the env to use."""
    env_file = tmp_path / "fake.env"
    server = subprocess.Popen(
        [BACKLINE, "fake-anthropic", str(SCRIPT), "--env-file", str(env_file)],
        env=_clean_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        first = server.stdout.readline()  # printed once the server listens
        assert "A fake Anthropic API answers from" in first, first
        assert env_file.stat().st_mode & 0o777 == 0o600
        env = _clean_env(tmp_path)
        for line in env_file.read_text().splitlines():
            if line.startswith("export "):
                name, _, value = line.removeprefix("export ").partition("=")
                env[name] = value.strip("'")
            elif line.startswith("unset "):
                for name in line.split()[1:]:
                    env.pop(name, None)
        yield env
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.timeout(120)
def test_the_console_talks_to_the_fake_server_with_no_key(
    served: dict[str, str], tmp_path: Path
) -> None:
    child = pexpect.spawn(
        BACKLINE,
        ["console", "--plain"],
        env={**served, "BACKLINE_PLUGINS": "anthropic"},
        encoding="utf-8",
        timeout=30,
    )
    try:
        child.expect("/quit or Ctrl-D")
        child.sendline("hello there")
        child.expect("I heard: hello there")
        child.sendline("/quit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)


@pytest.mark.timeout(180)
def test_the_example_script_drives_claude_code(served: dict[str, str], tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    child = pexpect.spawn(
        BACKLINE,
        ["console", "--plain", "--background", "claude_code"],
        env={**served, "BACKLINE_PLUGINS": "anthropic,claude_code"},
        cwd=str(repo),
        encoding="utf-8",
        timeout=60,
    )
    try:
        child.expect("background sessions: claude_code")
        child.sendline("ask claude to add a README")
        child.expect("passed that on to Claude Code")
        child.expect("I wrote the task into notes.md")
        deadline = time.monotonic() + 30
        while "ask claude to add a README" not in _read(repo / "notes.md"):
            assert time.monotonic() < deadline, "notes.md was not written"
            child.expect([pexpect.TIMEOUT], timeout=0.2)
        child.sendline("what is it doing?")
        child.expect("Claude Code is ")
        child.sendline("/quit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def test_a_script_without_a_responder_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    result = subprocess.run(
        [BACKLINE, "fake-anthropic", str(empty)],
        env=_clean_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert "defines neither respond(request) nor a SCRIPT list" in result.stderr
