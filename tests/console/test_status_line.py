"""The console's status line never cuts off the instruction the user needs (issue 26,
item 9): in a narrow terminal it wraps, between items, else between words; how to leave
and a background's instruction in backticks are always there, whole."""

from __future__ import annotations

import re
from typing import Any

import pexpect
import pytest

from backline import Session
from backline.io._view import summarize_state
from backline.io.console import LEAVE_HINT, ConsoleView, wrap_items
from backline.testing import ScriptedLLM

from .app import WAITING
from .test_console import expect, spawn

COMMAND = "`backline mcp config --background builder`"


def test_wrapping_breaks_between_items_then_words_and_loses_nothing() -> None:
    items = ["agent: listening", "you: listening", f"builder: {WAITING}", LEAVE_HINT]
    for width in (20, 32, 50, 80):
        lines = wrap_items(items, width)
        assert all(len(line) <= width for line in lines), (width, lines)
        assert words(lines) == words(items)  # a break takes the separator's place
    assert wrap_items(items, 200) == [" | ".join(items)]
    assert wrap_items(items, 50) == [
        "agent: listening | you: listening",
        "builder: waiting for an agent to connect",
        "(`backline mcp config --background builder`)",  # kept on one line: it fits
        LEAVE_HINT,
    ]


def words(lines: list[str]) -> list[str]:
    return [w for w in " ".join(lines).split() if w != "|"]


def test_the_status_lines_end_with_how_to_leave_at_any_width() -> None:
    session: Session[Any] = Session(ScriptedLLM([]))
    view = ConsoleView(session)
    view.backgrounds["builder"] = summarize_state({"status": WAITING})
    for width in (24, 40, 60):
        lines = view.status_lines(width)
        assert all(len(line) <= width for line in lines)
        assert lines[-1].endswith(LEAVE_HINT)
        assert COMMAND in " ".join(lines)


def test_a_state_is_never_cut_inside_a_command() -> None:
    assert summarize_state({"status": WAITING}, width=40) == WAITING
    longer = summarize_state({"status": WAITING + " and more words after it"}, width=40)
    assert longer == WAITING + "…"


@pytest.mark.timeout(60)
def test_a_narrow_terminal_shows_the_instruction_and_how_to_leave() -> None:
    child = spawn("--waiting", columns=50)
    try:
        expect(child, "you>")
        # The toolbar's lines, as the terminal draws them, in order: each one whole.
        expect(child, re.escape("builder: waiting for an agent to connect"))
        expect(child, re.escape(f"({COMMAND})"))
        expect(child, re.escape(LEAVE_HINT))
        child.sendintr()
        expect(child, "bye")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
