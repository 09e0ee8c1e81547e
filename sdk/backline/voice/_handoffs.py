"""Switching agents: handoffs, and running an inline ``AgentTask`` and handing back.

Every switch holds the session's switch lock and counts as ``switching`` (the
agent state is ``thinking`` and the away timer stays off until the new agent's
activity, and its realtime session, are attached). Nothing starts once the
session is closing.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from ..llm.chat_context import AgentHandoff
from ..llm.tools import ToolError
from ._activity import AgentActivity
from .agent import Agent, AgentTask
from .events import AgentHandoffEvent, ErrorEvent

if TYPE_CHECKING:
    from .session import Session

logger = logging.getLogger("backline")


def request_handoff(session: Session[Any], old: AgentActivity, agent: Agent) -> None:
    """Start the handoff a finished speech asked for (already counted as pending
    when the tool returned the agent; ``_handoff`` releases the count)."""
    if session._closing:
        session._handoffs_pending -= 1
        return
    session._refresh()
    session._scope.create_task(handoff(session, old, agent), name=f"handoff to {agent.label}")


async def handoff(session: Session[Any], old: AgentActivity, agent: Agent) -> None:
    new: AgentActivity | None = None
    try:
        async with session._switch_lock:
            if session._closing or session._activity is not old:
                logger.warning("handoff to %s skipped: the agent changed", agent.label)
                return
            if isinstance(old.agent, AgentTask) and old.agent._awaited:
                raise RuntimeError(
                    f"{old.agent.label} is an AgentTask: complete() it instead of handing off"
                )
            new = AgentActivity(session, agent)
            new.check_tools(agent._tools)
            session._switching += 1
            try:
                await old.agent.on_exit()
                await old.drain()
                if session._closing:
                    return  # close owns what is left; never start an agent now
                await new.start(replacing=old)
                # The new agent is current before the old one is torn down: there is
                # never a closed current agent (a say() meanwhile goes to the new one).
                set_current(session, new, old)
                await retire(session, old)
                await follow_switch(session)
            finally:
                session._switching -= 1
            new.start_on_enter()
    except asyncio.CancelledError:
        raise
    except Exception as e:
        logger.exception("handoff to %s failed", agent.label)
        session.emit(ErrorEvent(error=e, recoverable=True, source="handoff"))
    finally:
        session._handoffs_pending -= 1
        flush_pending_turns(session)
        session._refresh()


async def retire(session: Session[Any], activity: AgentActivity) -> None:
    """Close an agent that is no longer current, for good."""
    await activity.aclose()
    if activity in session._activities:
        session._activities.remove(activity)
    session._away.move_holds(activity, None)  # its running tools now belong to the session


def set_current(session: Session[Any], new: AgentActivity, old: AgentActivity | None) -> None:
    session._activity = new
    if new not in session._activities:
        session._activities.append(new)
    session._add_to_history(
        [AgentHandoff(old_agent=old.agent.label if old else None, new_agent=new.agent.label)]
    )
    session.emit(AgentHandoffEvent(old_agent=old.agent if old else None, new_agent=new.agent))
    session._refresh()


async def follow_switch(session: Session[Any]) -> None:
    """Silent inserts made during the switch reach the agent it made current."""
    await session._tool_scheduler.follow_switch()
    if session._background is not None:
        for scheduler in session._background.schedulers():
            await scheduler.follow_switch()


def flush_pending_turns(session: Session[Any]) -> None:
    if session._closing or session._switching or session._handoffs_pending:
        return
    turns, session._pending_turns = session._pending_turns, []
    for text in turns:
        session._start_user_turn(text)


async def run_task(session: Session[Any], parent: AgentActivity, task: AgentTask[Any]) -> Any:
    """Pause ``parent``, run ``task`` as the current agent until it completes,
    then hand the conversation back. Called with ``parent``'s pause slot held."""
    fut = task._future()
    child = AgentActivity(session, task)
    async with session._switch_lock:
        if session._closing or parent.closed:
            raise ToolError(f"cannot start {task.label}: the session is closing")
        session._switching += 1
        try:
            parent.pause()
            try:
                await child.start()
            except Exception as e:
                parent.resume()
                raise ToolError(f"cannot start {task.label}: {e}") from e
            set_current(session, child, parent)
            parent.hand_over_user_turns(child)
            await follow_switch(session)
        finally:
            session._switching -= 1
        child.start_on_enter()
    completing = False

    def on_complete() -> None:
        # Synchronous with complete(): a run must not see a settled session
        # between the task completing and the hand-back starting.
        nonlocal completing
        if not session._closing and not completing:
            completing = True
            session._handoffs_pending += 1

    task._completion_hook = on_complete
    if fut.done():
        on_complete()
    try:
        return await asyncio.shield(fut)
    finally:
        task._completion_hook = None
        try:
            if not session._closing:
                # The session owns the hand-back (close cancels it within its bound);
                # a cancelled tool does not stop it halfway.
                back = session._scope.create_task(
                    hand_back(session, parent, child), name=f"hand back from {task.label}"
                )
                await asyncio.shield(back)
        finally:
            # Released here, in the awaiting tool, with no suspension before its
            # speech is watched again: a run never sees the gap as settled.
            if completing:
                session._handoffs_pending -= 1
            flush_pending_turns(session)
            session._refresh()


async def hand_back(session: Session[Any], parent: AgentActivity, child: AgentActivity) -> None:
    async with session._switch_lock:
        if session._closing:
            return
        session._switching += 1
        try:
            await child.agent.on_exit()
            await child.drain()
            if session._activity is child and not parent.closed:
                merged = child.agent.chat_ctx.copy(
                    exclude_instructions=True,
                    exclude_function_calls=True,
                    exclude_handoffs=True,
                )
                parent.agent._chat_ctx.insert(merged.items)
                set_current(session, parent, child)  # before the task is torn down
                parent.resume()
            elif session._activity is child:  # pragma: no cover - parent closed under us
                logger.warning("%s finished but its caller is gone", child.agent.label)
            await retire(session, child)
            await follow_switch(session)
        finally:
            session._switching -= 1
    flush_pending_turns(session)  # also when the awaiting tool was cancelled meanwhile
    session._refresh()
