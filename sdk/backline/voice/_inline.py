"""Awaiting an ``AgentTask`` inline: the pause slot and its three orderings.

Pausing an activity is a single slot, so the inline tasks of one turn's
parallel tool calls queue for it (FIFO) and take it in turn:

1. before the queue, take a *counted* interruption hold on the shared speech
   (releasing per task would let one task's conversation interrupt the speech
   the others wait on);
2. before the queue, register as exempt from drain, and register again once the
   slot is acquired (nothing may leave a queued task exposed to a drain);
3. once the slot is acquired, check again that the activity is open and the
   speech was not interrupted (a forced interrupt bypasses the hold), and only
   then stop the run from watching the blocked speech.

A nested task pauses a different activity (the task's own), so it never queues
behind its parent.
"""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

from ..llm.tools import ToolError
from ._context import current_call, current_on_enter
from .agent import AgentTask

T = TypeVar("T")


async def run_inline(task: AgentTask[T]) -> T:
    if task._awaited:
        raise RuntimeError(f"{task.label} was already awaited; an AgentTask runs once")
    state = current_call.get()
    activity = state.activity if state is not None else current_on_enter.get()
    if activity is None:
        raise RuntimeError("await an AgentTask inside a tool or inside on_enter")
    task._awaited = True
    speech = state.speech if state is not None else None
    session = activity.session
    me = asyncio.current_task()
    assert me is not None

    if speech is not None:
        if speech.interrupted:
            raise RuntimeError("the speech that awaited the inline task is interrupted")
        speech._hold_interruptions()
    activity.drain_exempt[me] = speech
    try:
        async with activity.pause_slot:
            activity.drain_exempt[me] = speech  # a resume must never leave us exposed
            if activity.closed or session._closing:
                raise ToolError(f"cannot start {task.label}: {activity.agent.label} is closing")
            if speech is not None and speech.interrupted:
                raise ToolError(
                    f"cannot start {task.label}: the speech that awaited it was interrupted"
                )
            if speech is not None:
                speech._block()
            try:
                result: Any = await session._switches.run_task(activity, task)
            finally:
                if speech is not None:
                    speech._unblock()
                    session._transcript.watch(speech)
            return result  # type: ignore[no-any-return]
    finally:
        activity.drain_exempt.pop(me, None)
        if speech is not None:
            speech._release_interruptions()
