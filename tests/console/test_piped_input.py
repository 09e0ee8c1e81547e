"""`backline console` is scriptable (issue 26, item 6): with stdin a pipe, each line is sent
after the previous reply ended (none barges in), and the end of the input, or a quit
command in it, waits for the pending replies before the console closes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from backline.testing import fake_anthropic as fa

BACKLINE = shutil.which("backline", path=str(Path(sys.executable).parent)) or "backline"


def echo(request: fa.AnthropicRequest) -> fa.AnthropicResponse:
    """Answer each line slowly, word by word: a line sent meanwhile would cut it."""
    return fa.text(f"You said {request.last_user_text}, and that is all.", chunk_delay=0.05)


def pipe_into_console(
    text: str, server: fa.FakeAnthropicServer
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "BACKLINE_"))}
    env.update(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="sk-ant-test")
    env.update(BACKLINE_PLUGINS="anthropic", BACKLINE_LOG="0")
    return subprocess.run(
        [BACKLINE, "console", "--plain"],
        input=text,  # a pipe, written at once and closed: the lines are all there at the start
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.timeout(90)
def test_a_line_then_quit_is_answered_before_the_console_closes() -> None:
    with fa.FakeAnthropicServer(echo) as server:
        result = pipe_into_console("hello\n/quit\n", server)
    assert result.returncode == 0, result.stderr
    assert "agent: You said hello, and that is all.\n" in result.stdout
    assert "[interrupted]" not in result.stdout
    assert result.stdout.rstrip().endswith("bye")


@pytest.mark.timeout(90)
def test_piped_lines_are_answered_in_order_none_barging_in() -> None:
    with fa.FakeAnthropicServer(echo) as server:
        result = pipe_into_console("first\nsecond\nthird\n", server)
        requests = server.requests
    assert result.returncode == 0, result.stderr
    replies = [line for line in result.stdout.splitlines() if line.startswith("agent: ")]
    assert replies == [
        "agent: You said first, and that is all.",
        "agent: You said second, and that is all.",
        "agent: You said third, and that is all.",
    ]
    assert [r.last_user_text for r in requests] == ["first", "second", "third"]
    # Each line was sent once the reply before it was whole: the model saw it in full.
    assert "You said first, and that is all." in str(requests[1].messages)


@pytest.mark.timeout(90)
def test_lines_after_a_quit_command_are_not_sent() -> None:
    with fa.FakeAnthropicServer(echo) as server:
        result = pipe_into_console("one\n/quit\ntwo\n", server)
        requests = server.requests
    assert result.returncode == 0, result.stderr
    assert [r.last_user_text for r in requests] == ["one"]
    assert "You said one, and that is all." in result.stdout
