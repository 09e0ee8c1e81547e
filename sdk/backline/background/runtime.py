"""Background runtimes: one per definition per session start, owned by a manager.

The manager is a session part (``backline.voice.parts.SessionPart``): it gives the
voice agent ``backline_send`` and ``backline_state`` (reserved names), starts every
entrypoint with the session, and stops them on the session's one close path.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Iterable,
    Mapping,
    Sequence,
)
from sys import intern  # (a name per session, shared: one string per agent or background)
from typing import Any

from ..limits import truncate_text
from ..llm.chat_context import ChatMessage, new_id
from ..llm.tool_output import json_snapshot
from ..llm.tools import FunctionTool
from ..tasks import Signal, TaskScope
from ..voice.events import BackgroundMessage, BackgroundReply, BackgroundState, BackgroundStatus
from ..voice.parts import PartHost, Pending, SchedulerClosed
from ._asking import Asking
from ._grace import GraceWindow
from ._kinds import INTRODUCE, PRIORITY, URGENT, status_priority, update_kind
from .context import UNSET, Answer, BackgroundContext
from .definition import (
    BackgroundDefinition,
    HandlingOptions,
    render_template,
    validate_definition,
    validate_handling,
)
from .tools import RESERVED_TOOL_NAMES, make_tools

logger = logging.getLogger("backline")

STOP_TIMEOUT = 10.0
"""How long ``backline_stop`` waits for a background's interrupt callback, in seconds."""


def _done(task: asyncio.Task[Any] | None) -> bool:
    return task is not None and task.done()


class BackgroundRuntime:
    """One running background session: inbox, context, scheduler, state, entrypoint task."""

    def __init__(
        self, manager: BackgroundManager, session: PartHost, definition: BackgroundDefinition
    ) -> None:
        self.manager = manager
        self.session = session
        self.definition = definition
        self.handling = manager.handling_for(definition)
        self.ctx = BackgroundContext(self)
        self.state: Any = UNSET  # as shown (with the open question: _asking.py)
        self.reported_state: Any = UNSET  # as the background reported it
        self.asking = Asking(self)
        self.closed = False
        self.status = "created"
        self.interrupt_callback: Callable[[], Awaitable[None]] | None = None
        self.stop_callback: Callable[[], Awaitable[None]] | None = None  # (else the above)
        # Usually empty or short: a list (a deque takes about 700 bytes even empty).
        self._inbox: list[str] = []
        self._inbox_signal = Signal()
        self._reader: tuple[asyncio.Task[Any] | None, object] | None = None
        self._grace = GraceWindow(definition.interrupt_grace)
        self._task: asyncio.Task[None] | None = None
        self._interrupts: set[asyncio.Task[None]] | None = None  # at the first interrupt
        self._state_cut_logged = False
        self.scheduler = session.reply_scheduler(
            self, name=intern(f"background session '{definition.id}'"), source="background_reply"
        )

    # -- lifecycle ----------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done() and not self.closed

    def start(self) -> None:
        if self.closed:
            raise RuntimeError(f"background session '{self.definition.id}' is closed")
        if self._task is not None:
            return
        self._task = self.manager.scope.create_task(
            self._run_entrypoint(), name=intern(f"background {self.definition.id}")
        )

    async def _run_entrypoint(self) -> None:
        self._set_status("running")
        try:
            await self.definition.entrypoint(self.ctx)
        except asyncio.CancelledError as e:
            # The task keeps its CancelledError: not with a traceback through every
            # frame of the entrypoint (and their locals) for as long as the session.
            e.__traceback__ = None
            raise
        except Exception as e:
            logger.error(
                "background session entrypoint failed",
                exc_info=e,
                extra={"background_id": self.definition.id},
            )
            self._set_status("crashed", error=f"{type(e).__name__}: {e}")
            await self._note_stopped(f"stopped working after an error ({type(e).__name__}: {e})")
        else:
            self._set_status("ended")
            await self._note_stopped("has finished and is no longer running")

    async def _note_stopped(self, what: str) -> None:
        if self.closed:
            return
        note = f"Background session `{self.definition.id}` {what}."
        # Marked as the background's (not the user's words), like its messages.
        item = ChatMessage(role="user", content=note, extra={"background_id": self.definition.id})
        with contextlib.suppress(SchedulerClosed, RuntimeError):
            await self.scheduler.insert_silent([item])

    def _set_status(self, status: Any, *, error: str | None = None) -> None:
        self.status = status
        raised = status_priority(status, error)
        if raised is not None:  # what it still has to say is a failure or a completion
            self.scheduler.promote(raised)
        self.session.emit(
            BackgroundStatus(background_id=self.definition.id, status=status, error=error)
        )

    def mark_closed(self) -> None:
        self.closed = True
        self._inbox_signal.notify()
        self.asking.close()

    def _closed_error(self) -> RuntimeError:
        return RuntimeError(f"background session '{self.definition.id}' is closed")

    # -- inbox ----------------------------------------------------------------------
    def deliver(self, content: str) -> None:
        """A message from the voice agent (the ``backline_send`` tool)."""
        if self.asking.take(content):
            return  # the answer to the open question: not for the inbox, no interrupt
        waiting = len(self._inbox)
        self._inbox.append(content)
        self._inbox_signal.notify()
        now = asyncio.get_running_loop().time()
        if self._grace.should_interrupt(now=now, earlier_waiting=waiting):
            callback = self.interrupt_callback
            turn = self._grace.turn
            if callback is not None and turn is not None:
                task = self.manager.scope.create_task(
                    self._interrupt(callback, turn), name=f"interrupt {self.definition.id}"
                )
                if self._interrupts is None:
                    self._interrupts = set()
                self._interrupts.add(task)
                task.add_done_callback(self._interrupts.discard)

    async def _interrupt(self, callback: Callable[[], Awaitable[None]], turn: int) -> None:
        if self._grace.turn != turn:
            logger.debug(
                "background session %r: interrupt dropped, its turn has ended", self.definition.id
            )
            return
        try:
            await callback()
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("background session %r: interrupt callback failed", self.definition.id)

    @property
    def waiting(self) -> int:
        """How many messages wait in the inbox, not yet read."""
        return len(self._inbox)

    async def stop_work(self) -> str:
        """Stop the current turn through ``on_stop``, else ``on_interrupt``
        (``backline_stop``), whatever the grace window: ``stopped``, ``idle`` (no turn
        runs), ``unstoppable`` (no callback), ``unconfirmed`` (it did not return within
        ``STOP_TIMEOUT``) or ``failed`` (it raised). The inbox is left as it is."""
        callback = self.stop_callback or self.interrupt_callback
        if not self._grace.in_turn:
            return "idle"
        if callback is None:
            return "unstoppable"
        self._grace.stopped()
        try:
            async with asyncio.timeout(STOP_TIMEOUT):
                await callback()
        except TimeoutError:
            return "unconfirmed"
        except Exception:
            logger.exception("background session %r: interrupt callback failed", self.definition.id)
            return "failed"
        return "stopped"

    def put_back(self, content: str) -> None:
        """A message taken for a question that was withdrawn: first in the inbox again."""
        self._inbox.insert(0, content)
        self._inbox_signal.notify()

    def take_pending(self) -> list[str]:
        items, self._inbox = self._inbox, []
        return items

    async def wait_for_message(self, timeout: float | None) -> bool:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while not self._inbox:
            if self.closed:
                return False
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return False
            try:
                # Awaited in this task, so the waiter is registered before anything can
                # deliver (a wait_for task would register it one step later: a lost wakeup).
                async with asyncio.timeout(remaining):
                    await self._inbox_signal.wait()
            except TimeoutError:
                return bool(self._inbox)
        return True

    async def iterate(self, *, batch: bool) -> AsyncGenerator[Any, None]:
        # The reader is the task iterating. Another task's open iterator is a second
        # concurrent consumer; an earlier iterator of this same task was abandoned
        # (``break``) and is only waiting to be finalised, so a new one takes over.
        me = (asyncio.current_task(), object())
        reader = self._reader
        if reader is not None and reader[0] is not me[0] and not _done(reader[0]):
            raise RuntimeError(
                f"background session '{self.definition.id}' already has a message reader; "
                "messages() has a single consumer"
            )
        self._reader = me
        signal = self._inbox_signal
        try:
            while True:
                while not self._inbox and not self.closed:
                    # Signal.wait() inlined: no coroutine of its own kept while an idle
                    # background session waits for its next message.
                    fut = signal.waiter()
                    try:
                        await fut
                    finally:
                        signal.discard(fut)
                if self.closed:
                    return  # what is still waiting is dropped: the session is gone
                if batch:
                    yield self.take_pending()
                else:
                    yield self._inbox.pop(0)
        finally:
            if self._reader is me:
                self._reader = None

    # -- outbound -------------------------------------------------------------------
    async def send(
        self,
        text: str,
        *,
        silent: bool,
        note: str | None = None,
        kind: Any = None,
        interrupt: bool = False,
    ) -> None:
        """``note``: what the voice agent reads after the text, not front ends (a
        question's instructions); the item is then marked ``"question": True``.
        ``kind``: what a spoken update is (``_kinds.py``), its place on the floor.
        ``interrupt``: the agent's speech is cut and the update goes first (marked
        ``"interrupt": True``)."""
        if not isinstance(text, str):
            raise TypeError("a background message must be a string")
        kind = update_kind(text, kind, question=note is not None)
        if self.closed:
            raise self._closed_error()
        defn = self.definition
        limit = self.session.limits.max_send_chars
        text, cut = truncate_text(text, limit, f"a message of background session '{defn.id}'")
        if cut:
            logger.warning(
                "background session %r sent a message longer than %d characters "
                "(Limits.max_send_chars): the voice agent gets it cut, with a marker. Send "
                "a short summary (keep details in set_state), or raise the bound: "
                "Session(limits=Limits(max_send_chars=...)).",
                defn.id,
                limit,
            )
        rendered = render_template(
            self.handling,
            "update_template",
            {
                "background_session_id": defn.id,
                "background_session_description": defn.description,
                "message": text if note is None else f"{text}\n\n{note}",
            },
        )
        message_id = new_id("background_message_")
        extra = {"background_id": defn.id, "background_message_id": message_id, "silent": silent}
        if note is not None:
            extra["question"] = True
        if not silent:
            extra["kind"] = kind
        if interrupt:
            extra["interrupt"] = True
        item = ChatMessage(role="user", content=rendered, extra=extra)
        try:
            if silent:
                await self.scheduler.insert_silent([item])
            else:
                if interrupt:
                    self.session.interrupt()  # the agent stops; this goes first
                priority = URGENT if interrupt else PRIORITY[kind]
                await self.scheduler.enqueue([item], [message_id], owner=None, priority=priority)
        except SchedulerClosed:
            raise self._closed_error() from None
        self.session.emit(
            BackgroundMessage(
                background_id=defn.id, message_id=message_id, content=text, silent=silent
            )
        )

    def set_state(self, value: Any) -> None:
        if self.closed:
            raise self._closed_error()
        defn_id = self.definition.id
        limits = self.session.limits
        snap = json_snapshot(
            value,
            what=f"the state of background session '{defn_id}'",
            root="state",
            max_chars=limits.max_state_chars,
            max_depth=limits.max_value_depth,
        )
        if snap.cut and not self._state_cut_logged:
            self._state_cut_logged = True
            logger.warning(
                "background session %r reported a state larger than %d characters of JSON "
                "(Limits.max_state_chars): it is stored cut, with markers (logged once). "
                "Report a summary (the last items, counts), or raise the bound: "
                "Session(limits=Limits(max_state_chars=...)).",
                defn_id,
                limits.max_state_chars,
            )
        self.reported_state = snap.value
        self.publish_state()

    def publish_state(self) -> None:
        """The state as shown (the reported one, with the open question) to front ends."""
        self.state = self.asking.overlay(self.reported_state)
        shown = {} if self.state is UNSET else self.state  # a question ended before any report
        self.session.emit(BackgroundState(background_id=self.definition.id, state=shown))

    async def ask(self, question: str, *, choices: Any, timeout: float) -> Answer:
        return await self.asking.ask(question, choices=choices, timeout=timeout)

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        if self.closed:
            raise self._closed_error()
        if self._grace.in_turn:
            raise RuntimeError("ctx.turn() is already active; turns do not nest")
        self._grace.turn_started(asyncio.get_running_loop().time())
        hold = self.session.away_hold()
        self._set_status("busy")
        error: str | None = None
        try:
            yield
        except Exception as e:  # the turn failed: its "idle" says how (alerts read it)
            error = f"{type(e).__name__}: {e}"
            raise
        finally:
            self._grace.turn_ended()
            hold.release()
            if not self.closed:
                self._set_status("idle", error=error)

    # -- replies --------------------------------------------------------------------
    def render_reply(self, batch: list[Pending], at_tail: bool) -> str:
        key = "reply_at_tail_template" if at_tail else "reply_maybe_covered_template"
        args = {
            "background_session_id": self.definition.id,
            "message_ids": [i for p in batch for i in p.ids],
        }
        text = render_template(self.handling, key, args)
        if len(self.manager.definitions) > 1:  # several voices: whose update is this?
            text += " " + INTRODUCE.format(**args)
        return text

    def reply_status(self, ids: list[str], status: Any, speech_id: str | None) -> None:
        self.session.emit(
            BackgroundReply(
                background_id=self.definition.id,
                message_ids=list(ids),
                status=status,
                speech_id=speech_id,
            )
        )


class BackgroundManager:
    """The background sessions of one ``Session``: validation, tools, start and close
    (a session part: see the module doc)."""

    def __init__(
        self,
        definitions: Iterable[BackgroundDefinition],
        *,
        handling: HandlingOptions | None = None,
    ) -> None:
        defs = list(definitions)
        for d in defs:
            validate_definition(d)
        ids = [d.id for d in defs]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"duplicate background session id(s): {', '.join(dupes)}")
        self._session: PartHost | None = None
        self.definitions = defs
        self._handling = validate_handling(handling, where="Session(handling=...)")
        self.scope = TaskScope("background sessions")
        self.runtimes: dict[str, BackgroundRuntime] = {}
        self.closed = False
        self.tools: list[FunctionTool] = make_tools(self)

    @property
    def session(self) -> PartHost:
        """The session it runs in (once started)."""
        if self._session is None:
            raise RuntimeError("the background sessions have not started")
        return self._session

    def handling_for(self, definition: BackgroundDefinition) -> dict[str, Any] | None:
        own = definition.handling
        if own is not None:
            return dict(own)
        return None if self._handling is None else dict(self._handling)

    def reserved_names(self) -> Mapping[str, str]:
        return {name: "background sessions" for name in RESERVED_TOOL_NAMES}

    def sorted_ids(self) -> list[str]:
        return sorted(d.id for d in self.definitions)

    def runtime(self, background_id: str) -> BackgroundRuntime | None:
        return self.runtimes.get(background_id)

    def deliver(self, background_id: str, content: str) -> None:
        """Put a message in a background's inbox, as the voice agent's ``backline_send``
        does (for front ends and tests). Raises ``KeyError`` for an unknown id and
        ``RuntimeError`` when that background is not running."""
        rt = self.runtimes.get(background_id)
        if rt is None:
            known = ", ".join(self.sorted_ids())
            raise KeyError(f"no running background session {background_id!r} (known: {known})")
        if rt.closed or rt.status in ("ended", "crashed"):
            raise RuntimeError(f"background session {background_id!r} is not running")
        if not isinstance(content, str):
            raise TypeError("a message must be a string")
        rt.deliver(content)

    def context(self, background_id: str) -> BackgroundContext:
        """The context of a running background session (for tests and front ends)."""
        rt = self.runtimes.get(background_id)
        if rt is None:
            raise KeyError(f"no background session {background_id!r}")
        return rt.ctx

    # -- the session part ---------------------------------------------------------------
    async def start(self, session: PartHost, taken: Collection[str] = ()) -> None:
        """Build fresh runtimes and start every entrypoint (each runs to its first
        suspension point before this returns)."""
        self._session = session
        self.closed = False
        self.scope = TaskScope("background sessions")
        self.runtimes = {d.id: BackgroundRuntime(self, session, d) for d in self.definitions}
        for rt in self.runtimes.values():
            rt.start()
        await asyncio.sleep(0)

    def stop(self) -> Sequence[TaskScope]:
        """Mark every background closed and cancel its tasks (entrypoint, interrupt
        callbacks), all at once; the session waits for the scope (bounded)."""
        self.closed = True
        for rt in self.runtimes.values():
            rt.mark_closed()
        self.scope.cancel()
        return (self.scope,)

    def finish(self) -> None:
        """The end of close: each background still running reports ``closed``."""
        for rt in self.runtimes.values():
            if rt.status not in ("ended", "crashed", "closed"):
                rt._set_status("closed")


def background_of(session: PartHost) -> BackgroundManager | None:
    """The background sessions of ``session`` (its ``BackgroundManager`` part), if any."""
    for part in session.parts:
        if isinstance(part, BackgroundManager):
            return part
    return None
