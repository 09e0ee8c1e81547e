"""The console in a pseudo-terminal (issue 7): typing, updates with no input, the
status line, and a clean Ctrl-C exit."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

APP = Path(__file__).with_name("app.py")
ROOT = APP.parents[2]
TIMEOUT = 20


def spawn(*args: str, columns: int = 140) -> pexpect.spawn:
    env = {**os.environ, "TERM": "xterm-256color", "PYTHONPATH": str(ROOT)}
    env["COLUMNS"] = str(columns)
    env.pop("BACKLINE_CONSOLE_PLAIN", None)
    child = pexpect.spawn(
        sys.executable,
        [str(APP), *args],
        env=env,
        encoding="utf-8",
        timeout=TIMEOUT,
        dimensions=(40, columns),
    )
    return child


CPR_REQUEST = re.escape("\x1b[6n")


def expect(child: pexpect.spawn, pattern: str) -> None:
    """Wait for ``pattern``, answering the cursor-position requests a terminal would."""
    while child.expect([CPR_REQUEST, pattern]) == 0:
        child.send("\x1b[1;1R")


@pytest.mark.timeout(60)
def test_rich_console_typing_updates_status_and_ctrl_c() -> None:
    child = spawn()
    try:
        expect(child, "console test ready")
        expect(child, "you>")
        # The status line (a bottom toolbar) shows the agent and the background.
        expect(child, r"agent: listening \| you: listening \| builder: idle")
        child.sendline("hello there")
        expect(child, "agent: You said: hello there")
        child.sendline("build the docs")
        expect(child, "agent: Sent to the builder.")
        expect(child, "builder: building")
        # The background's update appears with no further input.
        expect(child, r"agent \(update\): Update: the build of the docs finished")
        expect(child, "builder: done")
        child.sendintr()  # Ctrl-C
        expect(child, "bye")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0


@pytest.mark.timeout(60)
def test_plain_console_streams_and_quits() -> None:
    child = spawn("--plain")
    child.logfile_read = seen = io.StringIO()
    try:
        child.expect("console test ready")
        child.expect(r"\[builder\] idle")
        child.sendline("build the site")
        child.expect("agent: Sent to the builder.")
        child.expect(r"agent \(update\): Update: the build of the site finished")
        child.sendline("/quit")
        child.expect("bye")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    # A line per change of the background's state, and nothing for the agent's
    # listening/thinking flips.
    lines = [line for line in seen.getvalue().splitlines() if line.startswith("[")]
    assert lines[:3] == [
        "[builder] idle",
        "[builder] building · started the site",
        "[builder] done · 1 file changed",
    ]
    assert lines[3:] in (["[builder] ended"], ["[builder] closed"])  # its loop ends on close


# -- a line over the limit (issue 13, item 13) -------------------------------------------------
LONG = 70_000  # over asyncio's 64 KiB line limit, and over Limits.max_user_turn_chars


def run_piped(lines: str) -> subprocess.CompletedProcess[str]:
    """The plain console with stdin a pipe (``cat notes | backline console``)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, str(APP), "--plain"],
        input=lines,
        capture_output=True,
        text=True,
        env=env,
        timeout=TIMEOUT * 3,
        check=False,
    )


@pytest.mark.timeout(90)
def test_plain_console_refuses_a_line_over_64_kib_and_keeps_going() -> None:
    result = run_piped("x" * LONG + "\nhello after\n/quit\n")

    assert result.returncode == 0, result.stderr
    assert "Separator is found" not in result.stderr
    assert "[not sent] that line has about 70,001 bytes; a turn can have at most 10,000 " in (
        result.stdout
    )
    assert "agent: You said: hello after" in result.stdout
    assert "You said: xxx" not in result.stdout  # no part of the long line was sent
    assert result.stdout.rstrip().endswith("bye")


@pytest.mark.timeout(90)
def test_plain_console_refuses_a_turn_over_the_character_limit() -> None:
    result = run_piped("é" * 10_001 + "\n" + "y" * 10_000 + "\n/quit\n")

    assert result.returncode == 0, result.stderr
    assert "[not sent] that line has 10,001 characters" in result.stdout
    assert "agent: You said: " + "y" * 10_000 in result.stdout  # the limit itself is fine


@pytest.mark.timeout(90)
def test_rich_console_refuses_a_long_line_and_keeps_going() -> None:
    child = spawn()
    try:
        expect(child, "you>")
        child.send("\x1b[200~" + "z" * LONG + "\x1b[201~")  # a paste, as terminals send it
        child.send("\r")
        expect(child, r"\[not sent\] that line has 70,000 characters")
        expect(child, "you>")
        child.sendline("still here")
        expect(child, "agent: You said: still here")
        child.sendintr()
        expect(child, "bye")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0


@pytest.mark.timeout(60)
def test_the_model_warms_up_once_the_first_prompt_is_on_the_screen() -> None:
    """The console shows its prompt first, then lets the model load what its first
    request needs (``warm_up``: the Anthropic adapter imports its package), once."""
    child = spawn()
    try:
        expect(child, "you>")
        expect(child, "warm-up asked")
        child.sendline("hello there")
        expect(child, "agent: You said: hello there")
        child.sendline("/quit")
        child.expect(pexpect.EOF)
        assert "warm-up asked" not in child.before  # not twice
    finally:
        child.close(force=True)
