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
    from ._activity import AgentActivity
    from .run_result import RunResult
    from .session import Session

logger = logging.getLogger("backline")


def start_user_turn(
    session: Session[Any], text: str, activity: AgentActivity | None = None
) -> None:
    """Interrupt the agent when allowed, then process the turn (in order) and reply."""
    if activity is None:
        activity = session._require_activity()
    if activity._current is not None or activity._queue:
        activity.interrupt_all(force=False)
    run = session._active_run
    if not session._user_turns and _default_hook(activity.agent):
        # Nothing to wait for (no earlier turn in progress, no hook to run): the turn
        # is stored and its reply queued now, with no task per turn.
        try:
            _take_turn(session, activity, ChatMessage(role="user", content=text), run)
        except Exception as e:
            logger.exception("handling a user turn failed")
            session.emit(ErrorEvent(error=e, recoverable=True, source="user_turn"))
            session._refresh()
        # else: queuing the reply refreshed the derived state already
        return
    session._user_turns += 1
    session._scope.create_task(handle_user_turn(session, text, run), name="user turn")
    session._refresh()


def _default_hook(agent: Agent) -> bool:
    """The agent keeps the default ``on_user_turn_completed`` (which does nothing)."""
    hook = agent.on_user_turn_completed
    return getattr(hook, "__func__", None) is Agent.on_user_turn_completed


def _take_turn(
    session: Session[Any], activity: AgentActivity, msg: ChatMessage, run: RunResult | None
) -> None:
    """Store the user's message and queue the current agent's reply to it."""
    if run is not None:
        run._input_ids.add(msg.id)
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


async def handle_user_turn(session: Session[Any], text: str, run: RunResult | None) -> None:
    try:
        async with session._turn_lock:
            activity = session._activity
            if activity is None or session._closing:
                return
            msg = ChatMessage(role="user", content=text)
            # The default hook does nothing: skip it, and the copy of the whole
            # context it would receive (the largest per-turn cost on a long history).
            if not _default_hook(activity.agent):
                turn_ctx = activity.agent.chat_ctx.copy()
                try:
                    await activity.agent.on_user_turn_completed(turn_ctx, msg)
                except StopResponse:
                    if run is not None:
                        run._input_ids.add(msg.id)
                    activity.record([msg], None)
                    return
            activity = session._activity
            if activity is None or session._closing:
                return
            _take_turn(session, activity, msg, run)
    except Exception as e:
        logger.exception("handling a user turn failed")
        session.emit(ErrorEvent(error=e, recoverable=True, source="user_turn"))
    finally:
        session._user_turns -= 1
        session._refresh()
