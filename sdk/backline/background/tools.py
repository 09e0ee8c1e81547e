"""The generated voice tools: ``backline_send``, ``backline_state`` and ``backline_stop``
(reserved names)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, Protocol

from ..llm.tool_output import serialize_tool_output
from ..llm.tools import FunctionTool, ToolError
from .context import UNSET


class _Definition(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def description(self) -> str: ...


class _Running(Protocol):
    """A running background (``_Running``), as the tools use it."""

    @property
    def definition(self) -> _Definition: ...

    @property
    def closed(self) -> bool: ...

    @property
    def status(self) -> str: ...

    @property
    def state(self) -> Any: ...

    @property
    def waiting(self) -> int: ...

    def deliver(self, content: str) -> None: ...

    async def stop_work(self) -> str: ...


class _Manager(Protocol):
    """The backgrounds of a session (``_Manager``), as the tools use them."""

    @property
    def definitions(self) -> Sequence[_Definition]: ...

    @property
    def closed(self) -> bool: ...

    def sorted_ids(self) -> list[str]: ...

    def runtime(self, background_id: str) -> _Running | None: ...


SEND_TOOL = "backline_send"
STATE_TOOL = "backline_state"
STOP_TOOL = "backline_stop"
MISSED_TOOL = "backline_missed"
"""What the user missed (``_missed.py``: a part of its own answers it)."""
RESERVED_TOOL_NAMES = frozenset({SEND_TOOL, STATE_TOOL, STOP_TOOL, MISSED_TOOL})

DELIVERED = "Message has been delivered."
NO_STATE = "The background session has not reported any state yet."

SEND_DESCRIPTION = (
    "Send a message to a background session: a task, an answer to its question, or a new "
    "direction. Delivery is asynchronous: this returns at once and does not wait for a "
    "response; the background session reports back on its own. A message sent while it is "
    "working interrupts its current work. When a background session asks the user a "
    "question, put it to the user and send their answer here, in their words: it answers "
    "that question and interrupts nothing."
)
STATE_DESCRIPTION = (
    "Return the real-time state a background session reports: what it is working on right "
    "now. Use it when the user asks about progress or status."
)
STOP_DESCRIPTION = (
    "Stop what a background session is doing right now (its current task), when the user "
    "asks to stop it. Unlike sending it a message, this gives it no new instruction: it "
    "stops and waits. Returns what happened."
)


def _listing(manager: _Manager) -> str:
    by_id = {d.id: d for d in manager.definitions}
    lines = [f"- {i}: {' '.join(by_id[i].description.split())}" for i in manager.sorted_ids()]
    return "\n\nAvailable background sessions:\n" + "\n".join(lines)


def _runtime(manager: _Manager, background_id: Any) -> _Running:
    valid = ", ".join(manager.sorted_ids())
    known = {d.id for d in manager.definitions}
    if not isinstance(background_id, str) or background_id not in known:
        raise ToolError(f"Unknown background session ID '{background_id}'. Valid IDs: {valid}")
    rt = manager.runtime(background_id)
    if rt is None and not manager.closed:
        raise ToolError(
            f"Background session '{background_id}' has not started yet: the conversation "
            "has not started, so nothing can be sent to it."
        )
    if manager.closed or rt is None or rt.closed:
        raise ToolError(
            f"Background session '{background_id}' is closed: the conversation is ending, "
            "so nothing can be sent to it."
        )
    return rt


async def _send(manager: _Manager, args: dict[str, Any], _ctx: Any) -> str:
    rt = _runtime(manager, args["background_session_id"])
    if rt.status in ("ended", "crashed"):
        raise ToolError(
            f"Background session '{rt.definition.id}' is not running "
            f"({'it crashed' if rt.status == 'crashed' else 'it has finished'}); "
            "the message was not delivered."
        )
    rt.deliver(args["content"])
    return DELIVERED


async def _stop(manager: _Manager, args: dict[str, Any], _ctx: Any) -> str:
    rt = _runtime(manager, args["background_session_id"])
    name = rt.definition.id
    if rt.status in ("ended", "crashed"):
        return f"Background session '{name}' is not running: nothing to stop."
    outcome = await rt.stop_work()
    if outcome == "idle":
        said = f"Nothing to stop: background session '{name}' is not working on anything."
    elif outcome == "unstoppable":
        said = (
            f"Background session '{name}' cannot be stopped in the middle of its work "
            "(it has no interrupt); it goes on."
        )
    elif outcome == "unconfirmed":
        said = f"Asked background session '{name}' to stop; it has not confirmed yet."
    elif outcome == "failed":
        said = f"Background session '{name}' could not be stopped: its interrupt failed."
    else:
        said = f"Stopped background session '{name}': its current work is interrupted."
    waiting = rt.waiting
    if waiting and outcome in ("stopped", "unconfirmed"):
        said += f" {waiting} message(s) sent to it still wait and run next."
    return said


async def _state(manager: _Manager, args: dict[str, Any], _ctx: Any) -> str:
    background_id = args["background_session_id"]
    known = {d.id for d in manager.definitions}
    if background_id not in known:
        valid = ", ".join(manager.sorted_ids())
        raise ToolError(f"Unknown background session ID '{background_id}'. Valid IDs: {valid}")
    rt = manager.runtime(background_id)
    value = UNSET if rt is None else rt.state
    if value is UNSET:
        return NO_STATE
    return serialize_tool_output(value)


# Shared by every session's tools (nothing changes a tool's parameters).
_ID_SCHEMA = {"type": "string", "description": "The id of the background session."}
_SEND_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "background_session_id": _ID_SCHEMA,
        "content": {"type": "string", "description": "The message to send."},
    },
    "required": ["background_session_id", "content"],
    "additionalProperties": False,
}
_STATE_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"background_session_id": _ID_SCHEMA},
    "required": ["background_session_id"],
    "additionalProperties": False,
}


@functools.lru_cache(maxsize=64)
def _templates(listing: str) -> tuple[FunctionTool, FunctionTool, FunctionTool]:
    """The tools for one listing of background sessions, built once and shared by
    every session with that listing (each binds them to its manager: a small copy)."""
    send = FunctionTool(
        _send,
        name=SEND_TOOL,
        description=SEND_DESCRIPTION + listing,
        parameters=_SEND_PARAMETERS,
        raw=True,  # the arguments as one dict (after the manager it is bound to)
    )
    state = FunctionTool(
        _state,
        name=STATE_TOOL,
        description=STATE_DESCRIPTION + listing,
        parameters=_STATE_PARAMETERS,
        raw=True,
    )
    stop = FunctionTool(
        _stop,
        name=STOP_TOOL,
        description=STOP_DESCRIPTION + listing,
        parameters=_STATE_PARAMETERS,  # (the same: one id)
        raw=True,
    )
    return send, state, stop


def make_tools(manager: _Manager) -> list[FunctionTool]:
    """``backline_send``, ``backline_state`` and ``backline_stop`` for ``manager``'s
    background sessions."""
    return [tool.__get__(manager) for tool in _templates(_listing(manager))]
