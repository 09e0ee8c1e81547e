"""The generated voice tools: ``backline_send`` and ``backline_state`` (reserved names)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..llm.tool_output import serialize_tool_output
from ..llm.tools import FunctionTool, ToolError
from .context import UNSET

if TYPE_CHECKING:
    from .runtime import BackgroundManager, BackgroundRuntime

SEND_TOOL = "backline_send"
STATE_TOOL = "backline_state"
RESERVED_TOOL_NAMES = frozenset({SEND_TOOL, STATE_TOOL})

DELIVERED = "Message has been delivered."
NO_STATE = "The background session has not reported any state yet."

SEND_DESCRIPTION = (
    "Send a message to a background session: a task, an answer to its question, or a new "
    "direction. Delivery is asynchronous: this returns at once and does not wait for a "
    "response; the background session reports back on its own. A message sent while it is "
    "working interrupts its current work."
)
STATE_DESCRIPTION = (
    "Return the real-time state a background session reports: what it is working on right "
    "now. Use it when the user asks about progress or status."
)


def _listing(manager: BackgroundManager) -> str:
    by_id = {d.id: d for d in manager.definitions}
    lines = [f"- {i}: {' '.join(by_id[i].description.split())}" for i in manager.sorted_ids()]
    return "\n\nAvailable background sessions:\n" + "\n".join(lines)


def _id_schema() -> dict[str, Any]:
    return {"type": "string", "description": "The id of the background session."}


def _runtime(manager: BackgroundManager, background_id: Any) -> BackgroundRuntime:
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


def make_send_tool(manager: BackgroundManager) -> FunctionTool:
    async def send(args: dict[str, Any], _ctx: Any) -> str:
        rt = _runtime(manager, args["background_session_id"])
        if rt.status in ("ended", "crashed"):
            raise ToolError(
                f"Background session '{rt.definition.id}' is not running "
                f"({'it crashed' if rt.status == 'crashed' else 'it has finished'}); "
                "the message was not delivered."
            )
        rt.deliver(args["content"])
        return DELIVERED

    return FunctionTool.from_schema(
        send,
        name=SEND_TOOL,
        description=SEND_DESCRIPTION + _listing(manager),
        parameters={
            "type": "object",
            "properties": {
                "background_session_id": _id_schema(),
                "content": {"type": "string", "description": "The message to send."},
            },
            "required": ["background_session_id", "content"],
            "additionalProperties": False,
        },
    )


def make_state_tool(manager: BackgroundManager) -> FunctionTool:
    async def state(args: dict[str, Any], _ctx: Any) -> str:
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

    return FunctionTool.from_schema(
        state,
        name=STATE_TOOL,
        description=STATE_DESCRIPTION + _listing(manager),
        parameters={
            "type": "object",
            "properties": {"background_session_id": _id_schema()},
            "required": ["background_session_id"],
            "additionalProperties": False,
        },
    )
