"""User turns: interrupt when allowed, run ``on_user_turn_completed``, store, reply.

``UserTurns`` processes turns one at a time (its lock), so replies come in the
order the user spoke; each counts as work in progress (``in_progress``) until its
reply is queued.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ..llm.chat_context import ChatMessage
from ..llm.tools import StopResponse
from ._activity import AgentActivity
from ._handoffs import Switches
from ._replies import generate
from ._runtime import Runtime
from .agent import Agent
from .events import ErrorEvent

logger = logging.getLogger("backline")


class UserTurns:
    """The user turns of one session being processed (see the module doc)."""

    __slots__ = ("_lock", "_session", "_switches", "in_progress")

    def __init__(self, session: Runtime, switches: Switches) -> None:
        self._session = session
        self._switches = switches
        self.in_progress = 0
        self._lock = asyncio.Lock()

    def start(self, text: str, activity: AgentActivity) -> None:
        """Interrupt the agent when allowed, then process the turn (in order) and reply."""
        session = self._session
        if activity._current is not None or activity._queue:
            activity.interrupt_all(force=False)
        run = session._transcript.run
        if not self.in_progress and _default_hook(activity.agent):
            # Nothing to wait for (no earlier turn in progress, no hook to run): the
            # turn is stored and its reply queued now, with no task per turn.
            try:
                _take_turn(session, activity, ChatMessage(role="user", content=text), run)
            except Exception as e:
                logger.exception("handling a user turn failed")
                session.emit(ErrorEvent(error=e, recoverable=True, source="user_turn"))
                session._refresh()
            # else: queuing the reply refreshed the derived state already
            return
        self.in_progress += 1
        session._spawn(self._handle(text, run), name="user turn")
        session._refresh()

    async def _handle(self, text: str, run: Any) -> None:
        session = self._session
        try:
            async with self._lock:
                activity = self._switches.current
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
                            run._inputs.append(msg)
                        activity.record([msg], None)
                        return
                activity = self._switches.current
                if activity is None or session._closing:
                    return
                _take_turn(session, activity, msg, run)
        except Exception as e:
            logger.exception("handling a user turn failed")
            session.emit(ErrorEvent(error=e, recoverable=True, source="user_turn"))
        finally:
            self.in_progress -= 1
            session._refresh()


def _default_hook(agent: Agent) -> bool:
    """The agent keeps the default ``on_user_turn_completed`` (which does nothing)."""
    hook = agent.on_user_turn_completed
    return getattr(hook, "__func__", None) is Agent.on_user_turn_completed


def _take_turn(session: Runtime, activity: AgentActivity, msg: ChatMessage, run: Any) -> None:
    """Store the user's message and queue the current agent's reply to it."""
    if run is not None:
        run._inputs.append(msg)
    activity.record([msg], None)
    generate(activity, source="user_turn", user_turn=msg)
