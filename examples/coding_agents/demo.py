"""`make demo`: talk to Claude Code, with the models scripted and everything else real.

The real console, the real backline-claude-code plugin and the real Claude Code
CLI (bundled in claude-agent-sdk) run against a fake Anthropic server on
127.0.0.1 that scripts both models: the voice agent's (through AnthropicLLM) and
Claude Code's. No API key, no network. The user's lines are typed by a script
that watches the screen, as a person would.

The conversation: the user asks for a file and a test; while Claude Code works
on the test (its model is slow to answer), the user asks what it is doing (the
voice agent answers from Claude Code's live state), then changes their mind.
That correction interrupts Claude Code's running turn and becomes its next
instruction.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from backline_claude_code import ClaudeCodeConfig, claude_code_background
from backline_claude_code.testing import ScriptedWorld, isolated_claude_env
from claude_code import CodingAssistant  # the example next to this file

from backline import Session
from backline.io.console import run_console
from backline.llm.anthropic import AnthropicLLM
from backline.testing import fake_anthropic as fa

ASK = "Please create hello.py that prints hello world, and a test for it."
ASK_STATUS = "What is Claude Code doing right now?"
CORRECTION = "Actually, skip the test, and make it print hello, backline."
TASK = "Create hello.py that prints hello world, and write a test for it."
FIXED_TASK = "Skip the test. Make hello.py print hello, backline instead."
GRACE = 2.0  # the plugin's interrupt grace window (the default)
SLOW = 60.0  # Claude Code's model takes this long on the test: the correction cuts it short
WAIT = 60.0  # bounds every wait of the scripted user (a hang, not a pace)
NEXT_STEPS = """
Next:
  source .venv/bin/activate          # puts `backline` on your PATH (or run .venv/bin/backline)
  backline fake-anthropic examples/offline/script.py
                                     # try the console and the web page offline, interactively
  export ANTHROPIC_API_KEY=sk-ant-...
  cd your/repository && backline console --background claude_code    # the real thing"""


def voice_model(request: fa.AnthropicRequest) -> Any:
    """The voice agent's model, scripted: it forwards, relays and reads the state."""
    line = request.last_user_text.rsplit("\n", 1)[-1]  # context notes may come first
    results = request.tool_results
    if results:
        content = results[0].get("content")
        text = content if isinstance(content, str) else json.dumps(content)
        if "delivered" in text:
            if line == CORRECTION:
                return fa.text("Got it, I've passed your change to Claude Code.")
            return fa.text("I've asked Claude Code to do that; I'll tell you when it reports back.")
        state = json.loads(text)
        files = ", ".join(state.get("files_changed") or []) or "nothing yet"
        latest = (state.get("recent_activity") or ["nothing yet"])[-1]
        return fa.text(
            f"Claude Code is {state['status']} on: {state['task']} "
            f"Its latest step: {latest}. Files changed so far: {files}."
        )
    if not request.tools:  # a background update to relay (tools are disabled then)
        updates = request.background_updates(after="Claude Code says:")
        return fa.text(f"Claude Code says: {(updates or [''])[-1]}")
    sends = {ASK: TASK, CORRECTION: FIXED_TASK}
    if line in sends:
        return fa.tool_calls(
            ("backline_send", {"background_session_id": "claude_code", "content": sends[line]})
        )
    if line == ASK_STATUS:
        return fa.tool_calls(("backline_state", {"background_session_id": "claude_code"}))
    return fa.text("Okay.")


def last_tool(request: fa.AnthropicRequest) -> str | None:
    """The tool whose result this request answers, or None for a new instruction (after
    an interrupt the CLI puts the new instruction beside the cut turn's last result)."""
    content = request.messages[-1].get("content") if request.messages else None
    if not isinstance(content, list) or any(
        block.get("type") == "text"
        and not block["text"].lstrip().startswith(("<system-reminder>", "[Request interrupted"))
        for block in content
    ):
        return None
    for message in reversed(request.messages):
        blocks = message.get("content")
        if message.get("role") == "assistant" and isinstance(blocks, list):
            names = [b.get("name") for b in blocks if b.get("type") == "tool_use"]
            if names:
                return str(names[-1])
    return None


def claude_code_model(cwd: Path) -> Any:
    """Claude Code's model, scripted: write the file, start (slowly) on the test; after
    the correction, rewrite the file and speak a summary."""
    hello = str(cwd / "hello.py")

    def respond(request: fa.AnthropicRequest) -> Any:
        tool = last_tool(request)
        if "hello, backline" in request.last_user_text:  # the correction, as a new turn
            if tool is None:
                return fa.tool_calls(
                    ("Write", {"file_path": hello, "content": 'print("hello, backline")\n'}),
                    text="Switching to the new instruction: no test, and a new greeting.",
                )
            if tool == "Write":
                message = "Done: hello.py now prints hello, backline, and I skipped the test."
                return fa.tool_calls(("mcp__voice__send_to_user", {"message": message}))
            return fa.text("hello.py prints hello, backline; no test was written.")
        if tool is None:
            return fa.tool_calls(
                ("Write", {"file_path": hello, "content": 'print("hello world")\n'}),
                text="I'll create hello.py first, then a test for it.",
            )
        return fa.text("Here is a test for hello.py.", delay=SLOW)  # still thinking...

    return respond


class Screen:
    """The terminal: what the console writes goes to stdout and is kept, so the
    scripted user can wait for what a person would wait for."""

    def __init__(self) -> None:
        self.text = ""
        self._changed = asyncio.Event()

    def write(self, text: str) -> int:
        self.text += text
        self._changed.set()
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()

    async def shows(self, text: str) -> None:
        async with asyncio.timeout(WAIT):
            while text not in self.text:
                self._changed.clear()
                await self._changed.wait()


async def type_lines(
    writer: int, session: Session[Any], world: ScriptedWorld, screen: Screen
) -> None:
    """The user: types a line, waits for what it should cause, types the next."""
    loop = asyncio.get_running_loop()
    turn_started: list[float] = []  # when Claude Code's state first said "working"
    session.on(
        "background_state",
        lambda e: (
            turn_started.append(loop.time())
            if e.state["status"] == "working" and not turn_started
            else None
        ),
    )

    def type_line(text: str) -> None:
        screen.write(f"you> {text}\n")
        os.write(writer, (text + "\n").encode())

    await screen.shows("[claude_code] idle, waiting for a task")
    type_line(ASK)
    await screen.shows("I'll tell you when it reports back.")
    # Claude Code wrote hello.py and now waits for its (slow) model on the test.
    await asyncio.to_thread(world.wait_for_coder_requests, 2, WAIT)
    await session.wait_for_idle()
    type_line(ASK_STATUS)
    await screen.shows("agent: Claude Code is working on:")
    await session.wait_for_idle()
    # A message interrupts a turn older than the grace window (a quicker one waits
    # its turn): the user speaks up a moment later, as a person would.
    await asyncio.sleep(max(0.0, turn_started[0] + GRACE + 0.2 - loop.time()))
    type_line(CORRECTION)
    await screen.shows("[claude_code] interrupted")
    await screen.shows("agent (update): Claude Code says: Done:")
    await screen.shows("[claude_code] idle, waiting for the next task")
    await session.wait_for_idle()
    type_line("/quit")


def init_repository(folder: Path) -> None:
    """Make the demo's folder a git repository, as yours would be: Claude Code then has
    nothing to warn about when it starts (without git, you hear that it could not check)."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(["git", "init", "-q", str(folder)], check=True, timeout=30)


async def main() -> int:
    with isolated_claude_env() as home, tempfile.TemporaryDirectory(prefix="demo-repo-") as repo:
        cwd = Path(repo)
        init_repository(cwd)
        world = ScriptedWorld(voice_model, claude_code_model(cwd))
        with world:
            config = ClaudeCodeConfig(cwd=cwd, env=world.claude_code_env(home))
            llm = AnthropicLLM(base_url=world.server.url, api_key="sk-ant-fake-key")
            background = claude_code_background(config, interrupt_grace=GRACE)
            session: Session[Any] = Session(llm, background=[background])
            screen = Screen()
            reader, writer = os.pipe()
            with os.fdopen(reader, "r") as stdin:
                typing = asyncio.ensure_future(type_lines(writer, session, world, screen))
                try:
                    await run_console(
                        session,
                        CodingAssistant(),
                        rich=False,
                        stdin=stdin,
                        stdout=screen,  # type: ignore[arg-type]
                        banner=f"backline demo: talking to Claude Code in {cwd}",
                    )
                finally:
                    typing.cancel()
                    os.close(writer)
                    await llm.aclose()
                await asyncio.gather(typing, return_exceptions=True)
            created = cwd / "hello.py"
            print()
            print(f"The file Claude Code left, {created.name}:")
            print("    " + created.read_text().rstrip().replace("\n", "\n    "))
            print(
                f"Claude Code made {len(world.coder_requests)} model requests "
                f"({len(world.server.disconnects)} cut short by the correction); "
                f"the voice agent made {len(world.voice_requests)}."
            )
    print(
        "\nThe models in this demo were scripted: a fake Anthropic server on 127.0.0.1 "
        "answered both the voice agent and Claude Code. The console, the plugin and the "
        "Claude Code CLI ran for real."
    )
    print(NEXT_STEPS)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
