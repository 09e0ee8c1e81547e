"""A script for `backline fake-anthropic`: both models of a Claude Code conversation.

    backline fake-anthropic examples/offline/script.py      # terminal 1: prints exports
    backline console --background claude_code               # terminal 2, after the exports
    backline try claude_code --script examples/offline/script.py   # or both in one terminal

The voice agent forwards anything that mentions Claude Code ("ask claude to ...",
"tell claude code ..."), answers "what is it doing?" from Claude Code's live state,
relays its updates, and otherwise says what it heard; when a tool call fails, or no
background runs, it says so. Claude Code writes the task into notes.md in its working
folder, tells the user, and finishes. (The scripts shipped with backline and its
plugins, `backline try NAME`, build on `backline.testing.offline`.) Edit the two
functions below to script your own conversation: `respond(request)` gets each
request (`request.last_user_text`, `request.tool_results`, `request.tools` ...) and
returns a reply from `backline.testing.fake_anthropic` (`fa.text`, `fa.tool_calls`,
`fa.error`) or a plain string. See docs/fake-anthropic.md.
"""

from __future__ import annotations

import json
import re
from typing import Any

from backline.testing import fake_anthropic as fa

CLAUDE_CODE_MARKER = "Primary working directory: "


def respond(request: fa.AnthropicRequest) -> Any:
    if CLAUDE_CODE_MARKER in json.dumps(request.body):
        return claude_code(request)
    return voice_agent(request)


def voice_agent(request: fa.AnthropicRequest) -> Any:
    said = request.last_user_text.rsplit("\n", 1)[-1].strip()
    if request.tool_results:  # what our last tool call returned
        result = request.tool_results[0]
        content = result.get("content")
        text = content if isinstance(content, str) else json.dumps(content)
        if result.get("is_error"):  # it failed: say what went wrong, never that it worked
            return f"That did not work, nothing was sent: {text}"
        if text.lstrip().startswith("{"):
            state = json.loads(text)
            return f"Claude Code is {state.get('status', 'working')}."
        return "I've passed that on to Claude Code; I'll tell you when it reports back."
    updates = request.background_updates(after="Claude Code says:")
    if not request.tools and updates:  # a background update to relay
        return "Claude Code says: " + updates[-1]
    if "backline_send" not in request.tool_names:  # no background runs: nobody to ask
        return (
            f"I heard: {said}. No Claude Code session is running, so I cannot pass "
            "anything on: start the console with --background claude_code."
        )
    if re.search(r"\b(doing|status|going)\b", said, re.I):
        return fa.tool_calls(("backline_state", {"background_session_id": "claude_code"}))
    if re.search(r"\bclaude\b", said, re.I):
        return fa.tool_calls(
            ("backline_send", {"background_session_id": "claude_code", "content": said})
        )
    return f"I heard: {said}. Say 'ask Claude to ...' to give Claude Code a task."


def claude_code(request: fa.AnthropicRequest) -> Any:
    cwd = re.search(CLAUDE_CODE_MARKER + r"(\S+?)(?:\\n|\s)", json.dumps(request.body))
    folder = cwd.group(1) if cwd else "."
    if not request.tool_results:  # a new task: write it down
        task = request.last_user_text.strip().splitlines()[-1]
        return fa.tool_calls(
            ("Write", {"file_path": f"{folder}/notes.md", "content": f"# Task\n\n{task}\n"}),
            text="I'll note the task in notes.md.",
        )
    if last_tool(request) == "Write":  # the file is written: tell the user
        return fa.tool_calls(
            ("mcp__voice__send_to_user", {"message": "I wrote the task into notes.md."})
        )
    return fa.text("notes.md is written.")


def last_tool(request: fa.AnthropicRequest) -> str | None:
    """The tool the model called last (the answer to it is in this request)."""
    for message in reversed(request.messages):
        if message["role"] == "assistant" and isinstance(message["content"], list):
            calls = [b["name"] for b in message["content"] if b.get("type") == "tool_use"]
            return calls[-1] if calls else None
    return None
