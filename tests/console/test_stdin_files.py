"""`backline console` reading a file or /dev/null (a script, a CI job): the loop cannot
watch those, so a thread reads them; no traceback, and the console ends at the file's end."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from backline.testing import fake_anthropic as fa

BACKLINE = shutil.which("backline", path=str(Path(sys.executable).parent)) or "backline"


def _run(stdin_path: str, server: fa.FakeAnthropicServer) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "BACKLINE_"))}
    env.update(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="sk-ant-test")
    env.update(BACKLINE_PLUGINS="anthropic", BACKLINE_LOG="0")
    with open(stdin_path) as stdin:
        return subprocess.run(
            [BACKLINE, "console", "--plain"],
            stdin=stdin,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )


@pytest.mark.timeout(90)
def test_a_file_of_lines_is_a_conversation(tmp_path: Path) -> None:
    script = tmp_path / "turns.txt"
    script.write_text("hello from a file\n")
    with fa.FakeAnthropicServer([fa.text("Hi, file.")]) as server:
        result = _run(str(script), server)
        assert result.returncode == 0, result.stderr
        assert server.requests and server.requests[0].last_user_text == "hello from a file"
    assert "Traceback" not in result.stdout + result.stderr
    assert "bye" in result.stdout


@pytest.mark.timeout(90)
def test_dev_null_ends_the_console_at_once() -> None:
    with fa.FakeAnthropicServer([]) as server:
        result = _run(os.devnull, server)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stdout.rstrip().endswith("bye")
