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
    lines = text.splitlines()
    # The voice agent answers "what is it doing?" from the live state, mid-task.
    assert (
        "agent: Claude Code is working on: Create hello.py that prints hello world, and write "
        "a test for it. Its latest step: edited hello.py. Files changed so far: hello.py."
    ) in lines
    # The correction interrupts the running turn and becomes the next instruction.
    asked = lines.index("you> Actually, skip the test, and make it print hello, backline.")
    interrupted = next(i for i, line in enumerate(lines) if line.startswith("[claude_code] inter"))
    relayed = lines.index(
        "agent (update): Claude Code says: Done: hello.py now prints hello, backline, "
        "and I skipped the test."
    )
    assert asked < interrupted < relayed
    assert "  · claude_code (context only): I'll create hello.py first, then a test for it." in (
        lines
    )
    assert '    print("hello, backline")' in lines
    assert "(1 cut short by the correction)" in text  # the slow request was aborted
    # Status lines: one per change of Claude Code's state, none for the agent's flips.
    assert [line for line in lines if line.startswith("[")] == [
        "[claude_code] idle, waiting for a task",
        "[claude_code] working",
        "[claude_code] working · edited hello.py · 1 file changed",
        "[claude_code] interrupted, switching to the user's new instruction · edited hello.p…",
        "[claude_code] working · edited hello.py · 1 file changed",
        "[claude_code] idle, waiting for the next task · edited hello.py · 1 file changed",
        "[claude_code] closed",
    ]
    assert not any("listening" in line or "thinking" in line for line in lines)
    # It ends by saying how to go on.
    assert "The models in this demo were scripted" in text
    assert "source .venv/bin/activate" in text and ".venv/bin/backline" in text
    assert "backline fake-anthropic examples/offline/script.py" in text
