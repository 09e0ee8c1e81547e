"""An LLM error in the console: one clear line for the user, the details in a log file,
never a traceback on the terminal (plain lines and prompt_toolkit alike)."""

from __future__ import annotations

import io
import os
import re
import shutil
import sys
from pathlib import Path

import pexpect
import pytest

from backline.testing import fake_anthropic as fa

BACKLINE = shutil.which("backline", path=str(Path(sys.executable).parent)) or "backline"
CPR_REQUEST = re.escape("\x1b[6n")


def _spawn(tmp_path: Path, server: fa.FakeAnthropicServer, *args: str) -> pexpect.spawn:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "BACKLINE_"))}
    env.update(
        ANTHROPIC_BASE_URL=server.url,
        ANTHROPIC_API_KEY="sk-ant-wrong",
        BACKLINE_PLUGINS="anthropic",
        TERM="xterm-256color",
        XDG_STATE_HOME=str(tmp_path / "state"),
    )
    return pexpect.spawn(
        BACKLINE, ["console", *args], env=env, encoding="utf-8", timeout=30, dimensions=(40, 140)
    )


def _expect(child: pexpect.spawn, pattern: str) -> None:
    while child.expect([CPR_REQUEST, pattern]) == 0:
        child.send("\x1b[1;1R")  # answer the terminal's cursor-position request


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", ["plain", "rich"])
def test_a_rejected_key_is_one_clear_line_and_the_details_go_to_the_log(
    tmp_path: Path, mode: str
) -> None:
    log = tmp_path / "state" / "backline" / "backline.log"
    with fa.FakeAnthropicServer([fa.error(401)]) as server:
        child = _spawn(tmp_path, server, *(["--plain"] if mode == "plain" else []))
        shown = io.StringIO()
        child.logfile_read = shown  # everything the terminal showed
        try:
            _expect(child, "no background session is running")
            _expect(child, "you>" if mode == "rich" else "/quit or Ctrl-D")
            child.sendline("hello")
            _expect(
                child, r"The model provider rejected the API key \(401\): check ANTHROPIC_API_KEY"
            )
            _expect(child, re.escape(f"(details: {log})"))
            child.sendline("/quit")
            _expect(child, "bye")
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
    assert "Traceback" not in shown.getvalue()
    details = log.read_text()
    assert "LLM request failed" in details and "Traceback" in details


def test_log_file_option_names_the_file(tmp_path: Path) -> None:
    chosen = tmp_path / "mine.log"
    with fa.FakeAnthropicServer([fa.error(401)]) as server:
        child = _spawn(tmp_path, server, "--plain", "--log-file", str(chosen))
        try:
            _expect(child, "/quit or Ctrl-D")
            child.sendline("hello")
            _expect(child, re.escape(f"(details: {chosen})"))
            child.sendline("/quit")
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
    assert "401" in chosen.read_text()
