"""`make demo-research` keeps working: the scripted conversation, the real plugin and web path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.timeout(120)
def test_the_research_demo_runs_the_whole_conversation() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "deep_research" / "demo.py")],
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    assert "Research says: " in text  # updates are relayed (coalesced when they arrive together)
    assert "Before I start, a few questions:" in text
    assert "Starting research on whether night trains are coming back" in text
    assert "[deep_research] done, listening for follow-ups · sources read 6" in text
    assert "agent: The research is done, listening for follow-ups." in text
    assert "[1] *(confidence: high)*" in text
    assert "1. [The night train revival](http://127.0.0.1:" in text
    assert "research model calls (clarify 2, plan 1, extract 6, verify 21, write 1)" in text
