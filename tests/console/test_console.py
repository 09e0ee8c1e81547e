"""The console in a pseudo-terminal (issue 7): typing, updates with no input, the
status line, and a clean Ctrl-C exit."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pexpect
import pytest

APP = Path(__file__).with_name("app.py")
ROOT = APP.parents[2]
TIMEOUT = 20


def spawn(*args: str) -> pexpect.spawn:
    env = {**os.environ, "TERM": "xterm-256color", "PYTHONPATH": str(ROOT), "COLUMNS": "140"}
    env.pop("BACKLINE_CONSOLE_PLAIN", None)
    child = pexpect.spawn(
        sys.executable,
        [str(APP), *args],
        env=env,
        encoding="utf-8",
        timeout=TIMEOUT,
        dimensions=(40, 140),
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
    try:
        child.expect("console test ready")
        child.expect(r"\[status\] agent: listening")
        child.sendline("build the site")
        child.expect("agent: Sent to the builder.")
        child.expect(r"agent \(update\): Update: the build of the site finished")
        child.expect(r"\[status\] agent: listening \| you: listening \| builder: done")
        child.sendline("/quit")
        child.expect("bye")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
