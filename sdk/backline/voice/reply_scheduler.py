"""The reply scheduler: eager inserts, then one coalesced reply when the session is idle.

Shared by deferred tool results and background sessions. ``enqueue`` inserts
items at once into the current agent's context and the history (both or
neither, even if close lands mid-insert), then buffers them; a delivery task
waits for the session to be idle, takes everything buffered, copies it onto the
agent that is current by then (following handoffs until stable), and asks for
one reply with tools disabled. ``insert_silent`` shares the lock, the insert and
the retargeting, but never buffers a reply; a silent insert made while agents
are switching is kept until the switch has set the new agent
(``follow_switch``), so it reaches that agent too.

A part that speaks (a background session) gets its scheduler from its session
(``session.reply_scheduler(owner, name=..., source=...)``): the session owns it,
counts what it owes as speech to follow, and closes it on its one close path.

The floor: what is enqueued with a ``priority`` (background updates) is voiced one
reply at a time across the session's schedulers (its ``peers``), the most urgent
first, the oldest first among equals: a scheduler takes its batch only when no peer
waits with something more urgent, or older at the same priority, and no peer is
between taking its batch and asking for its reply. Items without a priority (tool
results) take no part.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..llm.chat_context import ChatItem
from .agent import Agent
from .parts import CURRENT_RUN, Pending, ReplyOwner, ReplyStatus, SchedulerClosed

if TYPE_CHECKING:
    from ._runtime import Runtime

__all__ = [
    "CURRENT_RUN",
    "Pending",
    "ReplyOwner",
    "ReplyScheduler",
    "ReplyStatus",
    "SchedulerClosed",
]

logger = logging.getLogger("backline")

_ENQUEUED = itertools.count(1)  # the order of enqueues, across schedulers
_HOLDING = (0, 0, 0)  # the claim of a scheduler taking its batch: it has the floor


class ReplyScheduler:
    # One per background and one per session, idle nearly all the time: slots, and
    # the lock and the lists are made when first needed.
    __slots__ = (
        "_closed",
        "_closing",
        "_following",
        "_holding",
        "_inserting",
        "_mutex",
        "_name",
        "_owner",
        "_peers",
        "_pending",
        "_session",
        "_source",
        "_taking",
        "_task",
    )

    def __init__(
        self,
        session: Runtime,
        owner: ReplyOwner,
        *,
        name: str,
        source: str,
        peers: Sequence[ReplyScheduler] = (),
    ) -> None:
        self._session = session
        self._owner = owner
        self._name = name
        self._source = source
        self._peers = peers  # the session's schedulers (a live list): the floor
        self._holding = False  # taking a batch with a priority: it has the floor
        self._mutex: asyncio.Lock | None = None  # made at the first insert
        self._pending: list[Pending] | None = None  # buffered for the next reply
        self._following: list[Pending] | None = None  # silent inserts made during a switch
        self._taking = 0  # a batch is between "taken" and "reply requested"
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._closing: asyncio.Future[None] | None = None  # close() waits for an insert
        self._inserting = False  # an insert holds the lock

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def _lock(self) -> asyncio.Lock:
        lock = self._mutex
        if lock is None:
            lock = self._mutex = asyncio.Lock()
        return lock

    # -- owed speech -------------------------------------------------------------
    def owes_reply(self) -> bool:
        """A reply is committed to follow: deliverable items are buffered or being taken."""
        if self._closed:
            return False
        if self._taking > 0:
            return True
        # Asked on every refresh, usually with nothing pending: no generator then.
        pending = self._pending
        return bool(pending) and any(self._deliverable(p) for p in pending or ())

    def owes_reply_for(self, run: Any) -> bool:
        if self._closed:
            return False
        if self._taking > 0:
            return True
        pending = self._pending
        if not pending:
            return False  # the usual case: nothing buffered (no generator per check)
        return any(p.run is run and self._deliverable(p) for p in pending)

    def _deliverable(self, p: Pending) -> bool:
        owner = p.owner
        if owner is None or owner.closed:
            return True
        # A paused agent's results wait until it is current again.
        return self._session._is_current(owner)

    # -- inserting ---------------------------------------------------------------
    async def enqueue(
        self,
        items: Sequence[ChatItem],
        ids: Sequence[str],
        *,
        owner: object = None,
        run: Any = CURRENT_RUN,
        priority: int | None = None,
    ) -> None:
        """Insert eagerly and buffer for one coalesced reply. Raises ``SchedulerClosed``.

        ``run``: the ``session.run()`` that waits for the reply (by default the one in
        progress). ``priority``: its place on the floor (see the module doc)."""
        if run is CURRENT_RUN:
            run = self._session._transcript.run
        await self._insert(
            list(items), list(ids), owner=owner, run=run, silent=False, priority=priority
        )

    async def insert_silent(self, items: Sequence[ChatItem]) -> None:
        """Insert into the current agent's context and the history; no reply."""
        await self._insert(list(items), [], owner=None, run=None, silent=True)

    async def _insert(
        self,
        items: list[ChatItem],
        ids: list[str],
        *,
        owner: object,
        run: Any,
        silent: bool,
        priority: int | None = None,
    ) -> None:
        if self._closed:
            raise SchedulerClosed(f"{self._name} is closed")
        async with self._lock:
            self._inserting = True
            try:
                await self._insert_locked(
                    items, ids, owner=owner, run=run, silent=silent, priority=priority
                )
            finally:
                self._inserting = False
                closing = self._closing
                if closing is not None and not closing.done():
                    closing.set_result(None)  # close() waited for this insert

    async def _insert_locked(
        self,
        items: list[ChatItem],
        ids: list[str],
        *,
        owner: object,
        run: Any,
        silent: bool,
        priority: int | None,
    ) -> None:
        if self._closed:
            raise SchedulerClosed(f"{self._name} is closed")
        session = self._session
        agent = session._target_agent()
        try:
            await _copy_into(agent, items)
        except BaseException:
            agent._chat_ctx.remove(it.id for it in items)
            raise
        if self._closed:
            # Both or neither: take the items back out of the agent's context.
            agent._chat_ctx.remove(it.id for it in items)
            raise SchedulerClosed(f"{self._name} closed during the insert")
        session._transcript.add(items)
        entry = Pending(
            items=items,
            ids=ids,
            owner=owner,
            reached=[agent],
            run=run,
            priority=priority,
            seq=next(_ENQUEUED),
        )
        if silent:
            target = await self._retarget([entry])
            if self._closed:
                raise SchedulerClosed(f"{self._name} closed during the insert")
            if session._switching():
                if self._following is None:  # the agent is about to change
                    self._following = []
                self._following.append(entry)
                return
            activity = session._current_activity()
            if activity is not None and activity.agent is target:
                activity.context_inserted()  # a realtime model takes it at once
            return
        if self._pending is None:
            self._pending = []
        self._pending.append(entry)
        if self._task is None or self._task.done():
            self._task = session._spawn(self._deliver(), name=f"{self._name} delivery")
        session._refresh()

    async def _retarget(self, entries: list[Pending]) -> Agent:
        """Copy the entries onto the current agent, following handoffs until it is stable."""
        while True:
            target = self._session._target_agent()
            for entry in entries:
                if any(a is target for a in entry.reached):
                    continue
                missing = [it for it in entry.items if it.id not in target.chat_ctx]
                if missing:
                    logger.debug(
                        "%s: retargeting %d item(s) to %s", self._name, len(missing), target
                    )
                    await _copy_into(target, missing)
                entry.reached.append(target)
            if self._closed or self._session._target_agent() is target:
                return target

    async def follow_switch(self) -> None:
        """A switch set a new current agent: copy the silent inserts made during it
        onto that agent (the history is not written again)."""
        if not self._following or self._closed:
            return
        async with self._lock:
            following, self._following = self._following, None
            if not self._closed:
                await self._retarget(following)

    # -- the floor ---------------------------------------------------------------
    def promote(self, priority: int) -> None:
        """Raise what waits here (with a priority) to at least ``priority``."""
        raised = False
        for p in self._pending or ():
            if p.priority is not None and p.priority < priority:
                p.priority, raised = priority, True
        if raised:
            self._session._refresh()

    def _claim(self) -> tuple[int, int, int] | None:
        """This scheduler's place in line for the floor (the lowest goes first), or
        None when it waits for nothing with a priority."""
        if self._closed:
            return None
        if self._holding:
            return _HOLDING
        best: tuple[int, int, int] | None = None
        for p in self._pending or ():
            if p.priority is not None and self._deliverable(p):
                claim = (1, -p.priority, p.seq)
                if best is None or claim < best:
                    best = claim
        return best

    def _has_floor(self) -> bool:
        mine = self._claim()
        if mine is None:
            return True  # (nothing with a priority: it takes no part)
        for peer in self._peers:
            if peer is not self:
                theirs = peer._claim()
                if theirs is not None and theirs <= mine:
                    return False
        return True

    # -- delivering --------------------------------------------------------------
    async def _deliver(self) -> None:
        session = self._session
        while True:
            ok = await session._wait_for(
                lambda: (
                    session._is_idle()
                    and any(self._deliverable(p) for p in self._pending or ())
                    and self._has_floor()
                )
            )
            if not ok or self._closed:
                self._pending = None
                return
            async with self._lock:
                if self._closed:
                    return
                batch = [p for p in self._pending or () if self._deliverable(p)]
                if not batch:
                    continue
                self._taking += 1
                self._holding = any(p.priority is not None for p in batch)
                try:
                    self._pending = [p for p in self._pending or () if p not in batch] or None
                    target = await self._retarget(batch)
                    if self._closed:
                        return
                    # No suspension from the stability check to the request: the reply
                    # lands on the agent that now holds every item.
                    last = target.chat_ctx.items[-1].id if len(target.chat_ctx) else None
                    at_tail = last == batch[-1].items[-1].id
                    instructions = self._owner.render_reply(batch, at_tail)
                    ids = [i for p in batch for i in p.ids]
                    speech = session._generate_scheduled_reply(
                        instructions=instructions, source=self._source
                    )
                finally:
                    self._taking -= 1
                    self._holding = False
                self._owner.reply_status(ids, "scheduled", speech.id)

                def done(sp: Any, ids: list[str] = ids) -> None:
                    if sp.interrupted:
                        status: ReplyStatus = "interrupted"
                    elif not sp.chat_items:
                        status = "skipped"
                    else:
                        status = "completed"
                    self._owner.reply_status(ids, status, sp.id)

                speech.add_done_callback(done)
            if not self._pending:
                return

    def close(self) -> asyncio.Future[None] | None:
        """Drop buffered replies and stop delivering (the delivery task is the
        session's: it is cancelled with the session's tasks). Returns a future that
        an insert in flight resolves as it ends (its items both in or both out), for
        the session's close to wait for (bounded); ``None`` when none is in flight."""
        self._closed = True
        self._pending = None
        self._following = None
        self._task = None
        if not self._inserting:
            return None  # (a delivery or a switch holding the lock is the session's task)
        if self._closing is None:
            self._closing = asyncio.get_running_loop().create_future()
        return self._closing


async def _copy_into(agent: Agent, items: list[ChatItem]) -> None:
    ctx = agent.chat_ctx.copy()
    ctx.insert(items)
    await agent.update_chat_ctx(ctx)
