"""Scripted models for trying backline with no key: ``backline try`` and ``backline
fake-anthropic``.

A script answers the fake Anthropic server's requests (``respond(request)``); this module
holds the parts every script needs, written to behave as a careful model would:

- ``voice_agent(request)``: the voice agent. It passes what the user says to a running
  background session through ``backline_send``, reads its live state through
  ``backline_state`` when asked how it is going, relays its updates, and when a tool
  call fails, says what went wrong (never that it passed something on). It only calls
  the tools the request offers: with no background session running it says so.
- ``coding_agent(request)``: the model of a Claude Code CLI (run by a background such
  as ``claude_code``, or by ``cli_agent`` as ``claude -p``): it writes the task into
  ``notes.md`` when it may write, and tells the user through its ``send_to_user`` tool.
- ``respond(request)``: the generic script: ``coding_agent`` for the Claude Code CLI's
  requests, ``voice_agent`` for the rest. It drives any background session, your own
  included (``backline new-plugin weather``, then ``backline try weather``).

A background's own script (see docs/fake-anthropic.md) builds on these two.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from .fake_anthropic import AnthropicRequest, AnthropicResponse, text, tool_calls

__all__ = [
    "CLAUDE_CODE_CLI_MARKER",
    "RELAY_PREFIX",
    "backgrounds",
    "coding_agent",
    "display_name",
    "is_claude_code_cli",
    "last_tool_calls",
    "respond",
    "voice_agent",
]

SEND_TOOL = "backline_send"  # backline.background.tools.SEND_TOOL (a lower layer's name)
STATE_TOOL = "backline_state"
NO_STATE = "has not reported any state yet"

#: How the voice agent starts a relayed background update.
RELAY_PREFIX = "Update from "

#: Text in every request of the Claude Code CLI (its environment section).
CLAUDE_CODE_CLI_MARKER = "Primary working directory: "

_LISTING = re.compile(r"^- ([^:\s]+): ", re.M)
_UPDATE = re.compile(
    r"Background session `([^`]*)` sent an update:\n(.*?)(?=\nBackground session `|\Z)", re.S
)
_STATUS_QUESTION = re.compile(r"\b(doing|status|progress|going|state)\b", re.I)
_ADDRESSED = re.compile(r"^\s*(?:please\s+)?(?:ask|tell)\s+([\w-]+)", re.I)
_NOT_A_NAME = frozenset({"me", "us", "it", "them", "him", "her", "the", "my", "a", "an"})
_TASK_WORDS = re.compile(r"^\s*(please\s+)?(ask|tell)\b|\b(claude|research|agent)\b", re.I)


# -- reading a request ------------------------------------------------------------------------


def backgrounds(request: AnthropicRequest) -> list[str]:
    """The ids of the background sessions the request's ``backline_send`` tool lists
    (none when the tool is not offered: no background session is running)."""
    for tool in request.tools:
        if tool.get("name") == SEND_TOOL:
            description = str(tool.get("description", ""))
            listing = description.partition("Available background sessions:")[2]
            return _LISTING.findall(listing)
    return []


def display_name(background_id: str, names: Mapping[str, str] | None = None) -> str:
    """How the voice agent names a background: ``names[id]``, else ``claude_code`` ->
    ``Claude Code``."""
    if names and background_id in names:
        return names[background_id]
    return " ".join(w.capitalize() for w in re.split(r"[_\-\s]+", background_id) if w)


def last_tool_calls(request: AnthropicRequest) -> list[dict[str, Any]]:
    """The ``tool_use`` blocks of the last assistant message (what the answers in
    ``request.tool_results`` answer)."""
    for message in reversed(request.messages):
        if message.get("role") == "assistant":
            content = message.get("content")
            if not isinstance(content, list):
                return []
            return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
    return []


def is_claude_code_cli(request: AnthropicRequest) -> bool:
    """A request from the Claude Code CLI (its system prompt describes its environment)."""
    return CLAUDE_CODE_CLI_MARKER in json.dumps(request.body)


def _result_text(result: Mapping[str, Any]) -> str:
    content = result.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("text")
        )
    return "" if content is None else json.dumps(content)


def _said(request: AnthropicRequest) -> str:
    return request.last_user_text.rsplit("\n", 1)[-1].strip()


def _updates(request: AnthropicRequest) -> list[tuple[str, str]]:
    """The (background id, text) of the spoken updates since the voice agent last relayed."""
    found: list[tuple[str, str]] = []
    for message in request.messages:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        said = [
            b["text"]
            for b in (blocks if isinstance(blocks, list) else [])
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        ]
        if message.get("role") == "user":
            found += [(i, t.strip()) for s in said for i, t in _UPDATE.findall(s)]
        elif any(s.startswith(RELAY_PREFIX) for s in said):
            found = []
    return found


# -- the voice agent --------------------------------------------------------------------------


def voice_agent(
    request: AnthropicRequest, *, names: Mapping[str, str] | None = None
) -> AnthropicResponse:
    """The voice agent's next reply, as a careful model would give it (see the module doc).

    ``names`` maps background ids to how they are spoken of (``{"cli_agent": "the coding
    agent"}``); by default ``claude_code`` is "Claude Code".
    """
    if request.tool_results:
        return _after_tools(request, names)
    updates = _updates(request) if not request.tools else []
    if updates:  # a scheduled reply (its tools are off): relay the latest of each
        latest = dict(updates)  # the request does not say which were context only
        return text(
            " ".join(f"{RELAY_PREFIX}{display_name(i, names)}: {t}" for i, t in latest.items())
        )
    said = _said(request)
    return _user_turn(request, said, names) if said else text("I'm listening.")


def _user_turn(
    request: AnthropicRequest, said: str, names: Mapping[str, str] | None
) -> AnthropicResponse:
    ids = backgrounds(request)
    if not ids:
        if _TASK_WORDS.search(said):
            return text(
                f"I heard: {said}. But no background session is running in this "
                "conversation, so there is nobody to pass that on to, and nothing was sent. "
                "Start one with --background NAME (`backline plugins` lists them), or "
                "`backline try NAME`."
            )
        return text(f"I heard: {said}. Say 'ask NAME to ...' once a background session runs.")
    spoken = {i: display_name(i, names) for i in ids}
    named = [i for i in ids if _mentions(said, i, spoken[i])]
    addressed = _ADDRESSED.match(said)
    if not named and addressed and addressed.group(1).lower() not in _NOT_A_NAME:
        running = ", ".join(f"{spoken[i]} ({i})" for i in ids)
        return text(
            f"There is no background session called {addressed.group(1)} here, so I did not "
            f"send anything. Running: {running}."
        )
    if named:
        target = named[0]
    elif len(ids) == 1:
        target = ids[0]
    else:
        choices = " or ".join(spoken[i] for i in ids)
        return text(f"Which one should I ask: {choices}? Say 'ask NAME to ...'.")
    if _STATUS_QUESTION.search(said):
        return tool_calls((STATE_TOOL, {"background_session_id": target}))
    return tool_calls((SEND_TOOL, {"background_session_id": target, "content": said}))


def _mentions(said: str, background_id: str, spoken: str) -> bool:
    lowered = said.lower()
    if spoken.lower() in lowered or background_id.lower() in lowered:
        return True
    words = [w for w in re.split(r"[_\-\s]+", background_id.lower()) if len(w) >= 5]
    return any(re.search(rf"\b{re.escape(w)}\b", lowered) for w in words)


def _after_tools(request: AnthropicRequest, names: Mapping[str, str] | None) -> AnthropicResponse:
    calls = {c.get("id"): c for c in last_tool_calls(request)}
    replies: list[str] = []
    for result in request.tool_results:
        call = calls.get(result.get("tool_use_id"), {})
        tool = str(call.get("name", "the tool"))
        given = call.get("input")
        args: dict[str, Any] = given if isinstance(given, dict) else {}
        target = display_name(str(args.get("background_session_id", "")), names) or "it"
        output = _result_text(result)
        if result.get("is_error"):
            # A careful model says what went wrong, and never that it happened.
            replies.append(f"That did not work, nothing was done: {output}")
        elif tool == SEND_TOOL:
            replies.append(f"I've passed that on to {target}; I'll tell you when it reports back.")
        elif tool == STATE_TOOL:
            replies.append(_describe_state(target, output))
        else:
            replies.append(f"{tool} says: {output}")
    return text(" ".join(replies) or "Done.")


def _describe_state(name: str, output: str) -> str:
    name = name[:1].upper() + name[1:]  # it starts the sentence
    if NO_STATE in output:
        return f"{name} has not reported anything yet."
    try:
        state = json.loads(output)
    except ValueError:
        return f"{name} reports: {output}"
    if not isinstance(state, dict):
        return f"{name} reports: {output}"
    doing = state.get("status", state.get("phase"))
    shown = [(k, v) for k, v in state.items() if k not in ("status", "phase") and (v or v == 0)]
    rest = "; ".join(f"{k.replace('_', ' ')}: {_spoken(v)}" for k, v in shown[:3])
    if doing is None:
        return f"{name} reports {rest or 'nothing yet'}."
    return f"{name} is {doing}" + (f" ({rest})." if rest else ".")


def _spoken(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(_spoken(v) for v in value)
    return value if isinstance(value, str) else json.dumps(value)


# -- the Claude Code CLI's model ----------------------------------------------------------------


def coding_agent(request: AnthropicRequest, *, notes: str | None = "notes.md") -> AnthropicResponse:
    """The model of a Claude Code CLI: a new task is written into ``notes`` (in the working
    folder, when the CLI offers ``Write``; ``notes=None``: never), then the user is told
    through the CLI's ``send_to_user`` tool (``mcp__<server>__send_to_user``), with what
    went wrong if the write failed."""
    speak = next((t for t in request.tool_names if t.endswith("__send_to_user")), None)
    if not request.tool_results:  # a new task
        task = request.last_user_text.strip().splitlines()[-1] if request.last_user_text else ""
        folder = _working_folder(request)
        if notes is not None and "Write" in request.tool_names and folder is not None:
            note = {"file_path": f"{folder}/{notes}", "content": f"# Task\n\n{task}\n"}
            return tool_calls(("Write", note), text=f"I'll note the task in {notes}.")
        return _tell(speak, f"I got the task: {task}")
    (last,) = last_tool_calls(request)[-1:] or [{}]
    if last.get("name") == "Write":
        result = request.tool_results[-1]
        if result.get("is_error"):
            return _tell(speak, f"I could not write {notes}: {_result_text(result)}")
        return _tell(speak, f"I wrote the task into {notes}.")
    return text("Done.")


def _tell(speak: str | None, message: str) -> AnthropicResponse:
    return tool_calls((speak, {"message": message})) if speak else text(message)


def _working_folder(request: AnthropicRequest) -> str | None:
    found = re.search(
        re.escape(CLAUDE_CODE_CLI_MARKER) + r"(\S+?)(?:\\n|\s|\")", json.dumps(request.body)
    )
    return found.group(1) if found else None


# -- the generic script ------------------------------------------------------------------------


def respond(request: AnthropicRequest) -> AnthropicResponse:
    """The generic script: the Claude Code CLI's requests to ``coding_agent``, the voice
    agent's to ``voice_agent``. Drives any background session through its tools."""
    if is_claude_code_cli(request):
        return coding_agent(request)
    return voice_agent(request)


HINT = (
    "What you type goes to the background session (say 'ask NAME to ...' when several "
    "run); 'status?' reads its live state; its updates are read out."
)
