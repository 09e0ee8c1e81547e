"""Closing a session: one path, bounded, in order, and without a task of its own
unless something must be awaited.

1. The parts stop (their tasks cancelled at once) and the reply schedulers drop
   what they buffer (an insert in flight is waited for at the end, bounded).
2. With ``drain``, the agents' current speech may finish first (bounded).
3. The session's own tasks (user turns, switches, deliveries) and every agent
   stop; one bounded wait for all of their tasks and the parts' (``when_empty``:
   their own done callbacks end it).
4. The tool calls still running are cancelled; one bounded wait for them.
5. What agents and parts still await (an MCP server's stop) runs in a task; without
   any, the close ends at once (``done``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

from ..tasks import TaskScope, done_within, when_empty
from ._handoffs import Switches
from ._session_tools import SessionTools
from ._tool_runner import ToolRunner
from .reply_scheduler import ReplyScheduler

logger = logging.getLogger("backline")

INSERT_CLOSE_TIMEOUT = 5.0
"""How long a close waits for an insert already in flight (into an agent's context)."""


class Closing:
    """One close of a session (see the module doc): it stops what the session owns,
    in order, and calls ``done(error)`` once everything has ended (within bounds)."""

    __slots__ = (
        "_done",
        "_error",
        "_inserts",
        "_part_scopes",
        "_runner",
        "_schedulers",
        "_scope",
        "_session_scope",
        "_switches",
        "_toolbox",
    )

    def __init__(
        self,
        *,
        toolbox: SessionTools,
        schedulers: Sequence[ReplyScheduler],
        session_scope: TaskScope,
        switches: Switches,
        runner: ToolRunner,
        done: Callable[[BaseException | None], None],
    ) -> None:
        self._toolbox = toolbox
        self._schedulers = schedulers
        self._session_scope = session_scope
        self._switches = switches
        self._runner = runner
        self._done = done
        self._scope: TaskScope | None = None  # what the close awaits, if anything
        self._error: BaseException | None = None
        self._part_scopes: list[TaskScope] = []
        self._inserts: list[asyncio.Future[None]] = []

    def begin(self, *, drain: bool) -> None:
        try:
            self._part_scopes = [s for p in reversed(self._toolbox.parts) for s in p.stop()]
            self._inserts = [w for s in self._schedulers if (w := s.close()) is not None]
        except BaseException as e:  # pragma: no cover - close must finish whatever happens
            self._failed(e)
        if drain and any(a.speeches() for a in self._switches.activities):
            self._task(self._drain_then_stop(), "session drain")
        else:
            self._stop_agents()

    def _task(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        """A task of the close (its scope made at the first: most closes need none)."""
        if self._scope is None:
            self._scope = TaskScope("session close")
        self._scope.create_task(coro, name=name)

    async def _drain_then_stop(self) -> None:
        # The current agent first, then the agents paused under it; speech blocked on
        # an inline task is exempt (it would wait for user input).
        try:
            for activity in reversed(list(self._switches.activities)):
                await activity.drain()
        finally:
            self._stop_agents()

    def _stop_agents(self) -> None:
        """No new agent can start once closing: stop the session's own tasks (user
        turns, switches, deliveries) and every agent; wait for them and the parts."""
        scopes = list(self._part_scopes)
        try:
            self._session_scope.cancel()
            scopes.append(self._session_scope)
            activities = self._switches.activities
            for activity in reversed(activities):
                activity.interrupt_all(force=True)
            for activity in reversed(activities):
                scopes.append(activity.stop())
        except BaseException as e:  # pragma: no cover - close must finish whatever happens
            self._failed(e)
        when_empty(scopes, self._stop_tools, owner="session")

    def _stop_tools(self) -> None:
        """The agents have stopped: the tool calls still running are cancelled."""
        scope = self._runner.scope
        scope.cancel()
        when_empty([scope], self._finish, owner="session")

    def _finish(self) -> None:
        pending: list[Awaitable[Any]] = []
        try:
            for activity in self._switches.take_all():
                if (aw := activity.finish()) is not None:
                    pending.append(aw)
            for part in reversed(self._toolbox.parts):
                if (aw := part.finish()) is not None:
                    pending.append(aw)
            self._toolbox.changed()
        except BaseException as e:  # pragma: no cover - close must finish whatever happens
            self._failed(e)
        pending += [done_within(w, INSERT_CLOSE_TIMEOUT) for w in self._inserts]
        if pending:
            self._task(self._await_then_end(pending), "session close")
        else:
            self._done(self._error)

    async def _await_then_end(self, pending: list[Awaitable[Any]]) -> None:
        try:
            for aw in pending:
                try:
                    await aw
                except Exception as e:
                    self._failed(e)
        finally:
            self._done(self._error)

    def _failed(self, error: BaseException) -> None:
        logger.error("error while closing the session", exc_info=error)
        self._error = self._error or error
