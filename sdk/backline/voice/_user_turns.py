"""User turns: interrupt when allowed, run ``on_user_turn_completed``, store, reply.

Turns are processed one at a time (the session's turn lock), so replies come in
the order the user spoke; each counts as owed work until its reply is queued.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..llm.chat_context import ChatMessage
from ..llm.tools import StopResponse
from .agent import Agent
from .events import ErrorEvent

if TYPE_CHECKING:
    from .run_result import RunResult
    from .session import Session

logger = logging.getLogger("backline")


def start_user_turn(session: Session[Any], text: str) -> None:
    """Interrupt the agent when allowed, then process the turn (in order) and reply."""
    activity = session._require_activity()
    activity.interrupt_all(force=False)
    session._user_turns += 1
    run = session._active_run
    session._scope.create_task(handle_user_turn(session, text, run), name="user turn")
    session._refresh()


async def handle_user_turn(session: Session[Any], text: str, run: RunResult | None) -> None:
    try:
        async with session._turn_lock:
            activity = session._activity
            if activity is None or session._closing:
                return
            msg = ChatMessage(role="user", content=text)
            if run is not None:
                run._input_ids.add(msg.id)
            hook = activity.agent.on_user_turn_completed
            # The default hook does nothing: skip it, and the copy of the whole
            # context it would receive (the largest per-turn cost on a long history).
            if getattr(hook, "__func__", None) is not Agent.on_user_turn_completed:
                turn_ctx = activity.agent.chat_ctx.copy()
                try:
                    await hook(turn_ctx, msg)
                except StopResponse:
                    activity.record([msg], None)
                    return
            activity = session._activity
            if activity is None or session._closing:
                return
            activity.record([msg], None)
            session._generate(
                activity,
                user_input=None,
                instructions=None,
                tool_choice=None,
                allow_interruptions=None,
                source="user_turn",
                user_turn=msg,
            )
    except Exception as e:
        logger.exception("handling a user turn failed")
        session.emit(ErrorEvent(error=e, recoverable=True, source="user_turn"))
    finally:
        session._user_turns -= 1
        session._refresh()
