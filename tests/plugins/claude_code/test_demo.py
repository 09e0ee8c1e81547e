"""`make demo` keeps working: the scripted conversation with the real CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugins.claude_code.conftest import requires_cli

ROOT = Path(__file__).resolve().parents[3]


@requires_cli
@pytest.mark.timeout(120)
def test_the_demo_runs_the_whole_conversation() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "coding_agents" / "demo.py")],
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    assert "agent (update): Claude Code says: I created hello.py" in text
    assert "context only): I'll create hello.py" in text
    assert "agent: Claude Code is idle, waiting for the next task." in text
    assert 'print("hello world")' in text
    assert "The models in this demo were scripted" in text
