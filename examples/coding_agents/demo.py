"""`make demo`: talk to Claude Code, with the models scripted and everything else real.

The real console, the real backline-claude-code plugin and the real Claude Code
CLI (bundled in claude-agent-sdk) run against a fake Anthropic server on
127.0.0.1 that scripts both models: the voice agent's (through AnthropicLLM) and
Claude Code's. No API key, no network. The user's lines are typed by a script
that waits for the conversation, as a person would.
"""

from __future__ import annotations

import asyncio
import json
import os
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

ASK_FILE = "Please create hello.py that prints hello world."
ASK_STATUS = "What is Claude Code doing now?"


def voice_model(request: fa.AnthropicRequest) -> Any:
    """The voice agent's model, scripted: it forwards, relays and reads the state."""
    results = request.tool_results
    if results:
        content = results[0].get("content")
        text = content if isinstance(content, str) else json.dumps(content)
        if "delivered" in text:
            return fa.text("I've asked Claude Code to do that; I'll tell you when it reports back.")
        state = json.loads(text)
        files = ", ".join(state.get("files_changed") or []) or "no files"
        return fa.text(
            f"Claude Code is {state['status']}. Its last task was: {state['last_task']} "
            f"It changed {files}."
        )
    last = request.last_user_text
    if not request.tools:  # a background update to relay (tools are disabled then)
        update = last.rsplit("sent an update:\n", 1)[-1]
        return fa.text(f"Claude Code says: {update}")
    line = last.rsplit("\n", 1)[-1]
    if line == ASK_FILE:
        content = "Create hello.py that prints hello world."
        return fa.tool_calls(
            ("backline_send", {"background_session_id": "claude_code", "content": content})
        )
    if line == ASK_STATUS:
        return fa.tool_calls(("backline_state", {"background_session_id": "claude_code"}))
    return fa.text("Okay.")


def claude_code_model(cwd: Path) -> Any:
    """Claude Code's model, scripted: write the file, narrate, speak a summary."""
    steps = [
        fa.tool_calls(
            ("Write", {"file_path": str(cwd / "hello.py"), "content": 'print("hello world")\n'}),
            text="I'll create hello.py with a single print statement.",
        ),
        fa.tool_calls(
            ("mcp__voice__send_to_user", {"message": "I created hello.py; it prints hello world."})
        ),
        fa.text("hello.py is written and ready to run."),
    ]

    def respond(_: fa.AnthropicRequest) -> Any:
        return steps.pop(0) if steps else fa.text("Nothing else to do.")

    return respond


async def type_lines(writer: Any, session: Session[Any], echo: Any) -> None:
    """The user: types a line, waits for what it should cause, types the next."""
    relayed = asyncio.Event()
    finished = asyncio.Event()
    answered = asyncio.Event()
    session.on("background_reply", lambda e: relayed.set() if e.status == "completed" else None)
    session.on(
        "background_state",
        lambda e: finished.set() if e.state["status"].startswith("idle, waiting for the") else None,
    )
    session.on(
        "conversation_item_added",
        lambda e: (
            answered.set()
            if e.item.type == "message"
            and e.item.role == "assistant"
            and "is idle" in e.item.content
            else None
        ),
    )

    async def type_line(text: str) -> None:
        echo(f"you> {text}\n")
        os.write(writer, (text + "\n").encode())

    await type_line(ASK_FILE)
    await asyncio.wait_for(relayed.wait(), 60)
    await asyncio.wait_for(finished.wait(), 60)
    await asyncio.wait_for(session.wait_for_idle(), 60)
    await type_line(ASK_STATUS)
    await asyncio.wait_for(answered.wait(), 60)
    await type_line("/quit")


async def main() -> int:
    with isolated_claude_env() as home, tempfile.TemporaryDirectory(prefix="demo-repo-") as repo:
        cwd = Path(repo)
        world = ScriptedWorld(voice_model, claude_code_model(cwd))
        with world:
            config = ClaudeCodeConfig(cwd=cwd, env=world.claude_code_env(home))
            llm = AnthropicLLM(base_url=world.server.url, api_key="sk-ant-fake-key")
            session: Session[Any] = Session(llm, background=[claude_code_background(config)])
            reader, writer = os.pipe()

            def echo(text: str) -> None:
                sys.stdout.write(text)
                sys.stdout.flush()

            with os.fdopen(reader, "r") as stdin:
                typing = asyncio.ensure_future(type_lines(writer, session, echo))
                try:
                    await run_console(
                        session,
                        CodingAssistant(),
                        rich=False,
                        stdin=stdin,
                        banner=f"backline demo: talking to Claude Code in {cwd}",
                    )
                finally:
                    typing.cancel()
                    os.close(writer)
            created = cwd / "hello.py"
            print()
            print(f"The file Claude Code created, {created.name}:")
            print("    " + created.read_text().rstrip().replace("\n", "\n    "))
            print(
                f"\nClaude Code made {len(world.coder_requests)} model requests; "
                f"the voice agent made {len(world.voice_requests)}."
            )
    print(
        "\nThe models in this demo were scripted: a fake Anthropic server on 127.0.0.1 "
        "answered both the voice agent and Claude Code. The console, the plugin and the "
        "Claude Code CLI ran for real.\n"
        "For the real thing: export ANTHROPIC_API_KEY=sk-ant-... and run "
        "`backline console --background claude_code` in your repository."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
