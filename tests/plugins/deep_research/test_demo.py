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


def test_the_scripted_voice_agent_relays_an_update_that_landed_mid_reply() -> None:
    """CI found the race: the clarifying question was inserted while the voice agent's
    own reply was still running, so the relay after it ended with a placeholder turn."""
    from backline_deep_research.testing import anthropic_voice_agent

    from backline.testing import fake_anthropic as fa

    update = "Background session `deep_research` sent an update:\nBefore I start, a question?"
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "Research night trains."}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Research says: Hello."}]},
        {"role": "user", "content": [{"type": "text", "text": update}]},
        {"role": "assistant", "content": [{"type": "text", "text": "I've passed that on."}]},
        {"role": "user", "content": [{"type": "text", "text": "Continue."}]},
    ]
    request = fa.AnthropicRequest(0, "POST", "/v1/messages", "", {}, {"messages": messages})
    relay = anthropic_voice_agent(request)
    assert relay == fa.text("Research says: Before I start, a question?")
