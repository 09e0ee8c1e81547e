"""Closing a session: at once when nothing but its agents' and backgrounds' own
tasks needs awaiting (no task of its own, one bounded wait for their scopes to
empty), else in a task (``close_in_task``, the general path). ``Session.aclose``
chooses; both end in ``end_close``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import TYPE_CHECKING, Any

from ..tasks import TaskScope, when_empty
from . import observers
from .events import CloseEvent

if TYPE_CHECKING:
    from .session import Session

logger = logging.getLogger("backline")


def closes_at_once(session: Session[Any]) -> bool:
    """Whether nothing but the agents' and the backgrounds' own tasks needs
    awaiting at close: no speech queued or speaking, no user turn, handoff or
    delivery running (the session's scope), no tool running, no reply scheduler
    inserting, no MCP server."""
    if session._mcp is not None or session._scope.live() or session._tool_scope.live():
        return False
    if not session._tool_scheduler.closes_at_once():
        return False
    for a in session._activities:
        if a.agent._mcp is not None or a._current is not None or a._queue:
            return False  # (a speech queued or speaking: the task path, as before)
    return session._background is None or session._background.closes_at_once()


def close_at_once(session: Session[Any]) -> None:
    """The close when ``closes_at_once()``: what ``close_in_task`` does, in its order,
    without a task. Every task of the agents and the backgrounds is told to stop
    now (an idle speech loop is woken, the others are cancelled); one bounded wait
    for their scopes to empty (``when_empty``), then ``finish_at_once``. Thousands
    of sessions may close at once: no task, no coroutine, a few loop iterations."""
    session._closing = True
    session._away.stop()
    session._refresh()
    scopes: list[TaskScope] = []
    try:
        if session._background is not None:
            scopes.append(session._background.cancel_for_close())
        session._tool_scheduler.close_now()
        session._scope.cancel()  # closes it: nothing runs in it
        for activity in reversed(session._activities):
            activity.interrupt_all(force=True)
        for activity in reversed(session._activities):
            scopes.append(activity.cancel_for_close())
    except BaseException as e:  # pragma: no cover - close must finish whatever happens
        logger.exception("error while closing the session")
        when_empty(scopes, functools.partial(finish_at_once, session, e), owner="session")
        return
    when_empty(scopes, functools.partial(finish_at_once, session), owner="session")


def finish_at_once(session: Session[Any], error: BaseException | None = None) -> None:
    """After ``close_at_once``'s wait: the rest of the close, at once unless work
    started meanwhile (then ``close_in_task`` does what is left, in a task)."""
    try:
        while session._activities:
            session._activities.pop().finish_close()  # no MCP server: nothing to unmount
        done = session._background is None or session._background.close_now()
        if not done or session._scope.live() or session._tool_scope.live():
            session._close_task = asyncio.ensure_future(session._aclose(False))
            return
        session._tool_scope.cancel()  # closes it: nothing runs in it
    except BaseException as e:  # pragma: no cover - close must finish whatever happens
        logger.exception("error while closing the session")
        error = error or e
    end_close(session, error)


async def close_in_task(session: Session[Any], drain: bool) -> None:
    session._closing = True
    session._away.stop()
    session._refresh()
    error: BaseException | None = None
    try:
        if session._background is not None:
            # Closed and cancelled now, waited for once the agents are closed: the
            # two waits overlap (thousands of sessions may close at once).
            session._background.stop()
        await session._tool_scheduler.aclose()
        if drain:
            # The current agent first, then the agents paused under it; speech
            # blocked on an inline task is exempt (it would wait for user input).
            for activity in reversed(list(session._activities)):
                await activity.drain()
        # No new agent can start once closing is set; stop the session's own
        # tasks (user turns, handoffs) first, then every agent, then the tools.
        await session._scope.aclose()
        for activity in reversed(list(session._activities)):
            activity.interrupt_all(force=True)
        while session._activities:
            await session._activities.pop().aclose()
        if session._background is not None:
            await session._background.aclose()
        await session._tool_scope.aclose()
        if session._mcp is not None:  # last: tool calls are over; stops its servers
            await session._mcp.aclose()
    except BaseException as e:  # pragma: no cover - close must finish whatever happens
        error = e
        logger.exception("error while closing the session")
    finally:
        end_close(session, error)


def end_close(session: Session[Any], error: BaseException | None) -> None:
    session._closed = True
    session._pending_turns.clear()  # turns held for a handoff that never comes
    session._away.stop()
    session._refresh()  # the state a closed session reports, and wakes waiters (aclose)
    if session._started:
        observers.notify("session_closed", session)
    if session._wants("close"):
        session.emit(CloseEvent(reason="error" if error else "user", error=error))
