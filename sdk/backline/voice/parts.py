"""Session parts: what a ``Session`` is assembled from, besides its agents.

A part contributes tools (and names it reserves) to every agent of a session and
lives as long as the session runs: background sessions are a part, the tools of
mounted MCP servers are a part. The runtime knows parts only through this
protocol; it never imports what implements one. An agent can have parts of its
own (``Agent(mcp_servers=...)``): they live while that agent runs.

The protocol, in the order the session uses it:

- ``reserved_names()`` and ``tools``: read when the session is built (a clash with
  the session's tools fails there, never half-applied) and whenever an agent's
  tools are checked; ``tools`` may change while the part runs (MCP servers list
  theirs once started): the part then calls ``session.tools_changed()``.
- ``await start(session, taken)``: the session starts (after its first agent);
  ``taken`` are the tool names already in use, which the part's new tools must
  not take (raise ``ValueError`` naming both). A part that fails to start fails
  the session's start, and the parts already started are closed.
- ``stop()``: the session closes. Stop at once, without waiting: mark closed,
  cancel what runs; return the ``TaskScope``s whose tasks the session waits for
  (one bounded wait for all of them, beside the agents' own tasks).
- ``finish()``: once those tasks have ended: end the close, returning an awaitable
  when something still needs awaiting (stopping a server), else ``None``.

A part may then be started again (a closed session can restart). What a part may
use of its session is ``PartHost``; a part that speaks gets a reply scheduler from
it (``Replies``), which voices what it enqueues when the conversation is idle.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from ..limits import Limits
from ..llm.chat_context import ChatItem
from ..llm.tools import FunctionTool
from ..tasks import TaskScope, emptied

__all__ = [
    "CURRENT_RUN",
    "AwayHold",
    "PartHost",
    "Pending",
    "Replies",
    "ReplyOwner",
    "ReplyStatus",
    "SchedulerClosed",
    "SessionPart",
    "close_part",
    "part_of",
]

ReplyStatus: TypeAlias = Literal["scheduled", "completed", "interrupted", "skipped"]


class SchedulerClosed(RuntimeError):
    """The scheduler (or its session) closed before the items were accepted."""


CURRENT_RUN: Any = object()
"""``enqueue(run=CURRENT_RUN)``: the ``session.run()`` in progress, if any, waits for
the reply (the default)."""


@dataclass(eq=False)
class Pending:
    """Items enqueued together: their ids, the agent whose work they finish
    (``owner``: its results wait while it is paused), the agents they reached.
    ``priority``: their place on the floor (higher first; None: they take no part);
    ``seq``: when they were enqueued, across the session's schedulers."""

    items: list[ChatItem]
    ids: list[str]
    owner: Any
    reached: list[object] = field(default_factory=list)
    run: Any = None
    priority: int | None = None
    seq: int = 0


class ReplyOwner(Protocol):
    """Whose replies a scheduler delivers (the tool runner, a background runtime)."""

    def render_reply(self, batch: list[Pending], at_tail: bool) -> str:
        """The instructions of the reply that covers ``batch``."""
        ...

    def reply_status(self, ids: list[str], status: ReplyStatus, speech_id: str | None) -> None:
        """The reply covering ``ids`` changed status."""
        ...


class Replies(Protocol):
    """A reply scheduler (``backline.voice.reply_scheduler.ReplyScheduler``), as a part
    uses it: ``enqueue`` inserts items into the current agent's context and the
    history at once and voices them later, coalesced; ``insert_silent`` only inserts.
    Both raise ``SchedulerClosed`` once the session closes.

    The floor: replies enqueued with a ``priority`` are voiced one at a time across
    the session's schedulers, the most urgent first (then the oldest); ``promote``
    raises what waits to at least ``priority``."""

    async def enqueue(
        self,
        items: Sequence[ChatItem],
        ids: Sequence[str],
        *,
        owner: Any = None,
        run: Any = ...,
        priority: int | None = None,
    ) -> None: ...

    async def insert_silent(self, items: Sequence[ChatItem]) -> None: ...

    def promote(self, priority: int) -> None: ...


class AwayHold(Protocol):
    """A hold on the user-away timer; ``release()`` ends it (idempotent)."""

    def release(self) -> None: ...


class PartHost(Protocol):
    """What a part may use of its session (``backline.voice.Session`` is one)."""

    @property
    def limits(self) -> Limits: ...

    @property
    def closed(self) -> bool: ...

    @property
    def parts(self) -> tuple[SessionPart, ...]: ...

    def emit(self, event: Any) -> None:
        """Emit one of the session's events (``backline.voice.events``)."""
        ...

    def on(self, event: Any, callback: Callable[[Any], Any] | None = None) -> Any:
        """Listen to one of the session's events (by name): a part that watches the
        conversation (``backline.background``'s alerts and catch-up do)."""
        ...

    def off(self, event: Any, callback: Callable[[Any], Any]) -> None:
        """Stop listening (a part stops)."""
        ...

    def away_hold(self) -> AwayHold:
        """Hold off the user-away timer while some work runs."""
        ...

    def reply_scheduler(self, owner: ReplyOwner, *, name: str, source: str) -> Replies:
        """A reply scheduler of the session for ``owner``."""
        ...

    def interrupt(self, *, force: bool = False) -> None:
        """Interrupt the agent's current and queued speech (as ``Session.interrupt``)."""
        ...

    def tools_changed(self) -> None:
        """The part's tools changed: agents see the new list at their next request."""
        ...


@runtime_checkable
class SessionPart(Protocol):
    """A part of a session (or of an agent, while it runs). See the module doc."""

    @property
    def tools(self) -> Sequence[FunctionTool]:
        """The tools it gives every agent (the current list; may change once started)."""
        ...

    def reserved_names(self) -> Mapping[str, str]:
        """Tool names no one else may use, each with who reserved it (for messages)."""
        ...

    async def start(self, session: PartHost, taken: Collection[str]) -> None:
        """Start with ``session``; ``taken``: tool names its tools must not use."""
        ...

    def stop(self) -> Sequence[TaskScope]:
        """Stop now (the session closes); the scopes whose tasks close waits for."""
        ...

    def finish(self) -> Awaitable[None] | None:
        """End the close once those tasks ended; an awaitable if something remains."""
        ...


def part_of(specs: Sequence[Any], *, owner: str) -> SessionPart | None:
    """The part that ``specs`` describe (``Agent(mcp_servers=...)``), or ``None``.

    A spec's class builds the part for the whole group: ``type(spec).session_part(specs,
    owner=...)`` (``backline.mcp``'s server configs do), so the runtime never imports
    the layer that implements it.
    """
    if not specs:
        return None
    build = getattr(type(specs[0]), "session_part", None)
    if build is None:
        raise TypeError(
            f"{owner}: mcp_servers takes MCPServerStdio or MCPServerHTTP (backline.mcp), "
            f"got {type(specs[0]).__name__}"
        )
    part = build(list(specs), owner=owner)
    if not isinstance(part, SessionPart):  # pragma: no cover - a broken spec class
        raise TypeError(f"{owner}: {type(specs[0]).__name__}.session_part gave no SessionPart")
    return part


async def close_part(part: SessionPart, *, owner: str) -> None:
    """Close ``part`` outside a session's close (an agent's part, as the agent ends):
    ``stop()``, wait for its scopes (bounded), then ``finish()``."""
    await emptied(list(part.stop()), owner=owner)
    pending = part.finish()
    if pending is not None:
        await pending
