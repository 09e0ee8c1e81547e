"""Make docs/web.png: `backline web` with the real Claude Code plugin, models scripted.

`backline web --background claude_code` runs as a user runs it (its own process),
with the real backline-claude-code plugin driving the real Claude Code CLI (bundled
in claude-agent-sdk) in a small scratch repository, and both models scripted by a
fake Anthropic server on 127.0.0.1 (``ScriptedWorld``): no key, no network. Claude
Code runs the repository's tests for real (Bash, allowed here), fixes the bug, says
so through the voice agent, and is at work on a second task when the picture is
taken. The page runs in the machine's Chromium with the browser's speech faked.

Run from the repository root (needs a Chromium, as the browser tests do):

    .venv/bin/python -m tests.web.make_screenshot [--out docs/web.png]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from backline_claude_code.testing import ScriptedWorld, isolated_claude_env

from backline.processes import spawn, stop_process
from backline.testing import fake_anthropic as fa

from .browser import chromium, find_chromium, open_page

FIX = "Please fix the failing login test."
MORE = "Great. Add a test for expired tokens too."
TESTS = "python3 -m unittest -q"
WAIT = 60.0  # bounds each wait (a hang, not a pace)
SIZE = {"width": 1280, "height": 960}

AUTH = '''\
import time


def is_valid(token, now=None):
    """A token is valid until its expiry time, inclusive."""
    now = time.time() if now is None else now
    return now < token["expires_at"]
'''
TEST_AUTH = """\
import unittest

from auth import is_valid


class LoginTest(unittest.TestCase):
    def test_a_token_is_valid_before_it_expires(self):
        self.assertTrue(is_valid({"expires_at": 100}, now=99))

    def test_a_token_is_valid_at_its_expiry_time(self):
        self.assertTrue(is_valid({"expires_at": 100}, now=100))
"""
TEST_EXPIRY = """\
import unittest

from auth import is_valid


class ExpiryTest(unittest.TestCase):
    def test_an_expired_token_is_refused(self):
        self.assertFalse(is_valid({"expires_at": 100}, now=101))
"""


def voice(request: fa.AnthropicRequest) -> Any:
    """The voice agent: forwards what the user says, and relays Claude Code's updates."""
    if request.tool_results:
        if "expired" in json.dumps(request.messages[-2:]):
            return fa.text(
                "On it. I've asked Claude Code to add a test for expired tokens, and "
                "I'll tell you when it's done."
            )
        return fa.text("On it. Claude Code is looking at the login test now.")
    if not request.tools:  # a background update to relay (tools are disabled then)
        updates = request.background_updates(after="Good news from Claude Code.")
        return fa.text(f"Good news from Claude Code. {(updates or [''])[-1]}")
    said = request.last_user_text.rsplit("\n", 1)[-1]  # context notes may come first
    return fa.tool_calls(
        ("backline_send", {"background_session_id": "claude_code", "content": said})
    )


def steps_taken(request: fa.AnthropicRequest) -> int:
    """How many tool calls Claude Code made since its task arrived (the last user
    message with text that is not a tool result or a reminder)."""
    count = 0
    for message in reversed(request.messages):
        content = message.get("content")
        if message.get("role") == "user" and (
            isinstance(content, str)
            or any(
                b.get("type") == "text" and not b["text"].lstrip().startswith("<system-reminder>")
                for b in content
            )
        ):
            return count
        if message.get("role") == "assistant" and isinstance(content, list):
            count += sum(1 for b in content if b.get("type") == "tool_use")
    return count


def claude_code(repo: Path) -> Any:
    """Claude Code's model: run the tests, read, fix, test again, tell the user; then
    start on the second task and take its time (the picture is taken meanwhile)."""
    fix = [
        fa.tool_calls(("Bash", {"command": TESTS}), text="I'll run the tests first."),
        fa.tool_calls(("Read", {"file_path": str(repo / "auth.py")})),
        fa.tool_calls(
            (
                "Edit",
                {
                    "file_path": str(repo / "auth.py"),
                    "old_string": 'return now < token["expires_at"]',
                    "new_string": 'return now <= token["expires_at"]',
                },
            ),
            text="One failure: a token at its expiry time is refused. The check uses < "
            "where it needs <=.",
        ),
        fa.tool_calls(("Bash", {"command": TESTS})),
        fa.tool_calls(
            (
                "mcp__voice__send_to_user",
                {
                    "message": "Fixed the login test: the expiry check was off by one. "
                    "All tests pass now."
                },
            )
        ),
        fa.text("auth.py fixed; all tests pass."),
    ]
    more = [
        fa.tool_calls(
            ("Write", {"file_path": str(repo / "test_expiry.py"), "content": TEST_EXPIRY}),
            text="I'll add test_expiry.py next to the login tests.",
        ),
        fa.text("Running the new test.", delay=WAIT * 2),  # still working at the picture
    ]

    def respond(request: fa.AnthropicRequest) -> Any:
        script = more if "expired" in request.last_user_text else fix
        step = steps_taken(request)
        return script[step] if step < len(script) else fa.text("Done.")

    return respond


async def serve(world: ScriptedWorld, home: Path, repo: Path, state: Path) -> tuple[Any, str]:
    """`backline web --background claude_code` in its own process; its page's URL."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "BACKLINE_", "CLAUDE_"))
    }
    env.update(world.claude_code_env(home))
    env.update(
        BACKLINE_PLUGINS="anthropic,claude_code",
        BACKLINE_CLAUDE_CODE_CWD=str(repo),
        BACKLINE_CLAUDE_CODE_ALLOW_BASH="1",
        BACKLINE_LOG="0",
        XDG_STATE_HOME=str(state),
    )
    argv = [sys.executable, "-m", "backline", "web", "--background", "claude_code"]
    errors = (state / "web.stderr").open("wb")
    try:
        proc = await spawn(argv, env=env, stderr=errors)
    finally:
        errors.close()
    assert proc.stdout is not None
    async with asyncio.timeout(WAIT):
        while True:
            line = (await proc.stdout.readline()).decode()
            if not line:
                raise RuntimeError(
                    "backline web exited: " + (state / "web.stderr").read_text()[-2000:]
                )
            if match := re.search(r"open (http://\S+)", line):
                return proc, match.group(1)


async def take(url: str, out: Path, executable: str) -> None:
    async with chromium(executable) as browser:
        page = await open_page(browser, url, wordMs=40)
        await page.set_viewport_size(SIZE)  # room for the whole conversation
        await page.wait_for_selector('#agent-state[data-state="listening"]', timeout=WAIT * 1000)
        await page.click("#mic")
        await page.wait_for_function("() => window.__fake.active !== null")
        await page.evaluate(f"window.__fake.userSpeaks({FIX!r})")
        await page.wait_for_selector(".entry.agent.update.final", timeout=WAIT * 1000)
        # The agent's next reply waits to be spoken until Claude Code is at work on
        # the second task, so the picture shows both.
        await page.evaluate("window.__fake.holdSpeech = true")
        await page.evaluate(f"window.__fake.userSpeaks({MORE!r})")
        card = '.card[data-background="claude_code"]'
        await page.wait_for_function(
            f"() => document.querySelectorAll('{card} .files-changed li').length === 2"
            " && document.querySelector('.entry.agent.live') !== null",
            timeout=WAIT * 1000,
        )
        spoken = await page.evaluate("window.__fake.spokenWords().length")
        await page.evaluate("window.__fake.config.wordMs = 100; window.__fake.holdSpeech = false")
        await page.wait_for_function(
            f"() => window.__fake.spokenWords().length >= {spoken + 8}", timeout=WAIT * 1000
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(out))


async def make_screenshot(out: Path, executable: str) -> None:
    """Play the conversation and write the picture to ``out``; raises ``RuntimeError``
    when the conversation did not happen as the picture tells it."""
    with isolated_claude_env() as home, tempfile.TemporaryDirectory(prefix="web-png-") as tmp:
        repo, state = Path(tmp) / "app", Path(tmp) / "state"
        repo.mkdir()
        state.mkdir()
        (repo / "auth.py").write_text(AUTH)
        (repo / "test_auth.py").write_text(TEST_AUTH)
        commit_all(repo)  # a clean repository: Claude Code has nothing to warn about
        with ScriptedWorld(voice, claude_code(repo)) as world:
            proc, url = await serve(world, home, repo, state)
            try:
                await take(url, out, executable)
            finally:
                await stop_process(proc, interrupt_first=True, step_timeout=5)
                assert proc.stdout is not None
                await proc.stdout.read()  # what it printed while closing
        fixed = 'return now <= token["expires_at"]' in (repo / "auth.py").read_text()
        runs = bash_outputs(world)
    # The story in the picture happened: the tests really failed, then passed.
    if not (fixed and len(runs) == 2 and "FAILED" in runs[0] and "OK" in runs[1]):
        raise RuntimeError(f"the conversation went wrong: fixed={fixed}, test runs={runs!r}")


async def main(out: Path) -> None:
    executable = find_chromium()
    if executable is None:
        raise SystemExit("no Chromium found (apt-get install chromium, or set BACKLINE_CHROMIUM)")
    await make_screenshot(out, executable)
    print(f"wrote {out}")


def commit_all(repo: Path) -> None:
    who = ["-c", "user.name=Dev", "-c", "user.email=dev@example.com"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "The app."]):
        subprocess.run(
            ["git", "-C", str(repo), *who, *args],
            check=True,
            capture_output=True,
            timeout=30,
        )


def bash_outputs(world: ScriptedWorld) -> list[str]:
    """What each of Claude Code's test runs printed (the Bash results it sent back)."""
    runs: dict[str, str] = {}
    for request in world.coder_requests:
        calls = {
            b["id"]
            for m in request.messages
            if m.get("role") == "assistant" and isinstance(m.get("content"), list)
            for b in m["content"]
            if b.get("type") == "tool_use" and b.get("name") == "Bash"
        }
        for result in request.tool_results:
            if result.get("tool_use_id") in calls:
                runs[result["tool_use_id"]] = json.dumps(result.get("content"))
    return list(runs.values())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("docs/web.png"))
    asyncio.run(main(parser.parse_args().out))
