"""Switching agents: handoffs, and running an inline ``AgentTask`` and handing back.

``Switches`` owns what a switch needs: its lock, the count of switches running
(``switching``: the agent state is ``thinking`` and the away timer stays off until
the new agent's activity, and its realtime session, are attached), the handoffs
and hand-backs owed (``owed``), and the user turns held until a switch is over
(``held``). Nothing starts once the session is closing.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ..llm.chat_context import AgentHandoff
from ..llm.tools import ToolError
from ._activity import AgentActivity
from ._replies import reply_work
from ._runtime import Runtime
from ._tool_runner import ToolRunner
from .agent import Agent, AgentTask
from .events import AgentHandoffEvent, ErrorEvent

logger = logging.getLogger("backline")


class Switches:
    """The switches of agents of one session (see the module doc)."""

    __slots__ = (
        "_mutex",
        "_runner",
        "_session",
        "activities",
        "current",
        "held",
        "owed",
        "switching",
    )

    def __init__(self, session: Runtime, runner: ToolRunner) -> None:
        self._session = session
        self._runner = runner
        self.current: AgentActivity | None = None  # the agent the user talks to
        self.activities: list[AgentActivity] = []  # every agent running (paused ones too)
        self.switching = 0  # switches running
        self.owed = 0  # handoffs and hand-backs owed (requested, not yet done)
        self.held: list[str] = []  # user turns that wait for the switch to end
        self._mutex: asyncio.Lock | None = None  # made at the first switch

    @property
    def _lock(self) -> asyncio.Lock:
        """Held by every switch of agents (handoffs, inline tasks and hand-backs)."""
        lock = self._mutex
        if lock is None:
            lock = self._mutex = asyncio.Lock()
        return lock

    # -- the agents ---------------------------------------------------------------------
    def begin(self, activity: AgentActivity) -> None:
        """The session starts with ``activity`` (its first agent)."""
        self.current = activity
        self.activities.append(activity)

    def take_all(self) -> list[AgentActivity]:
        """Every agent, the last started first (the session closes them)."""
        taken, self.activities = self.activities[::-1], []
        return taken

    def target_agent(self) -> Agent:
        """The agent that what is said to the session reaches now."""
        if self.current is None:
            raise RuntimeError("the session has not started")
        return self.current.agent

    def make_current(self, new: AgentActivity, old: AgentActivity | None) -> None:
        """A switch made ``new`` the current agent (before ``old`` is torn down: there
        is never a closed current agent)."""
        session = self._session
        self.current = new
        if new not in self.activities:
            self.activities.append(new)
        session._transcript.add(
            [AgentHandoff(old_agent=old.agent.label if old else None, new_agent=new.agent.label)]
        )
        session.emit(AgentHandoffEvent(old_agent=old.agent if old else None, new_agent=new.agent))
        session._refresh()

    async def retire(self, activity: AgentActivity) -> None:
        """Close an agent that is no longer current, for good."""
        # Its running tools are the session's from now on: they hold the away timer off
        # while its on_exit runs too (a hold a closed agent owned would count for no one).
        away = self._session._away
        away.move_holds(activity, None)
        await activity.aclose()
        if activity in self.activities:
            self.activities.remove(activity)
        away.move_holds(activity, None)  # (any its closing speech started)

    # -- owed switches and held turns ----------------------------------------------------
    def owe_handoff(self) -> None:
        """A tool returned an agent: the handoff is owed from now on (the speech ends
        before it is requested, and the agent must not blip to "listening" between)."""
        self.owed += 1

    def hold_turn(self, text: str) -> None:
        self.held.append(text)

    def drop_held_turns(self) -> None:
        self.held.clear()

    def flush_held_turns(self) -> None:
        session = self._session
        if session._closing or self.switching or self.owed:
            return
        turns, self.held = self.held, []
        for text in turns:
            session._start_user_turn(text)

    # -- handoffs ---------------------------------------------------------------------
    def request_handoff(self, old: AgentActivity, agent: Agent) -> None:
        """Start the handoff a finished speech asked for (owed already: ``handoff``
        releases it)."""
        session = self._session
        if session._closing:
            self.owed -= 1
            return
        session._refresh()
        session._spawn(self._handoff(old, agent), name=f"handoff to {agent.label}")

    async def _handoff(self, old: AgentActivity, agent: Agent) -> None:
        session = self._session
        new: AgentActivity | None = None
        try:
            async with self._lock:
                if session._closing or self.current is not old:
                    logger.warning("handoff to %s skipped: the agent changed", agent.label)
                    return
                if isinstance(old.agent, AgentTask) and old.agent._awaited:
                    raise RuntimeError(
                        f"{old.agent.label} is an AgentTask: complete() it instead of handing off"
                    )
                new = AgentActivity(session, agent, self._runner)
                new.check_tools(agent._tools)
                self.switching += 1
                try:
                    await old.agent.on_exit()
                    await old.drain()
                    if session._closing:
                        return  # close owns what is left; never start an agent now
                    await new.start(replacing=old)
                    # The new agent is current before the old one is torn down: there
                    # is never a closed current agent (a say() meanwhile goes to it).
                    self.make_current(new, old)
                    await self.retire(old)
                    await session._follow_switch()
                finally:
                    self.switching -= 1
                new.start_on_enter()
        except asyncio.CancelledError:
            raise
        except Exception as e:
            logger.exception("handoff to %s failed", agent.label)
            session.emit(ErrorEvent(error=e, recoverable=True, source="handoff"))
        finally:
            self.owed -= 1
            self.flush_held_turns()
            session._refresh()

    # -- inline tasks -------------------------------------------------------------------
    async def run_task(self, parent: AgentActivity, task: AgentTask[Any]) -> Any:
        """Pause ``parent``, run ``task`` as the current agent until it completes,
        then hand the conversation back. Called with ``parent``'s pause slot held."""
        session = self._session
        fut = task._future()
        child = AgentActivity(session, task, self._runner)
        async with self._lock:
            if session._closing or parent.closed:
                raise ToolError(f"cannot start {task.label}: the session is closing")
            self.switching += 1
            try:
                parent.pause()
                try:
                    await child.start()
                except Exception as e:
                    parent.resume()
                    raise ToolError(f"cannot start {task.label}: {e}") from e
                self.make_current(child, parent)
                self._hand_over_user_turns(parent, child)
                await session._follow_switch()
            finally:
                self.switching -= 1
            child.start_on_enter()
        completing = False

        def on_complete() -> None:
            # Synchronous with complete(): a run must not see a settled session
            # between the task completing and the hand-back starting.
            nonlocal completing
            if not session._closing and not completing:
                completing = True
                self.owed += 1

        task._completion_hook = on_complete
        if fut.done():
            on_complete()
        try:
            return await asyncio.shield(fut)
        finally:
            task._completion_hook = None
            try:
                if not session._closing:
                    # The session owns the hand-back (close cancels it within its
                    # bound); a cancelled tool does not stop it halfway.
                    back = session._spawn(
                        self._hand_back(parent, child), name=f"hand back from {task.label}"
                    )
                    await asyncio.shield(back)
            finally:
                # Released here, in the awaiting tool, with no suspension before its
                # speech is watched again: a run never sees the gap as settled.
                if completing:
                    self.owed -= 1
                self.flush_held_turns()
                session._refresh()

    @staticmethod
    def _hand_over_user_turns(parent: AgentActivity, child: AgentActivity) -> None:
        """Replies to user turns that have not started move to ``child``, the inline
        task that pauses ``parent``: the user speaks to the agent that is current, and
        the paused one cannot answer until the task is done. The user message is copied
        into the task's context (the history has it already)."""
        speeches = parent.take_user_turn_replies()
        if speeches:
            for speech in speeches:
                assert speech._user_turn is not None
                child.agent._chat_ctx.insert([speech._user_turn])
            child.requeue(speeches, reply_work)

    async def _hand_back(self, parent: AgentActivity, child: AgentActivity) -> None:
        session = self._session
        async with self._lock:
            if session._closing:
                return
            self.switching += 1
            try:
                await child.agent.on_exit()
                await child.drain()
                if self.current is child and not parent.closed:
                    merged = child.agent.chat_ctx.copy(
                        exclude_instructions=True,
                        exclude_function_calls=True,
                        exclude_handoffs=True,
                    )
                    parent.agent._chat_ctx.insert(merged.items)
                    self.make_current(parent, child)  # before the task is torn down
                    parent.resume()
                elif self.current is child:  # pragma: no cover - parent closed under us
                    logger.warning("%s finished but its caller is gone", child.agent.label)
                await self.retire(child)
                await session._follow_switch()
            finally:
                self.switching -= 1
        self.flush_held_turns()  # also when the awaiting tool was cancelled meanwhile
        session._refresh()
