"""AgentActivity: a running agent — its speech queue, scheduling loop and replies."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from sys import intern  # (a name per session, shared: one string per agent or background)
from typing import TYPE_CHECKING, Any

from ..llm.chat_context import ChatItem, ChatMessage
from ..llm.llm import LLM
from ..llm.realtime import ContextFollower, RealtimeSession
from ..llm.tools import FunctionTool, ToolError
from ..tasks import CancelWhenDone, TaskScope, done_within, emptied, first_completed
from ._context import current_call, current_on_enter
from ._session_tools import taken_by_others
from ._tool_runner import ToolRunner
from .agent import Agent, AgentTask
from .events import ErrorEvent
from .io import PlayoutResult, TextOutput
from .parts import close_part
from .speech_handle import SpeechHandle

if TYPE_CHECKING:
    from ._runtime import Runtime

logger = logging.getLogger("backline")

SpeechWork = Callable[["AgentActivity", SpeechHandle], Coroutine[Any, Any, None]]
"""What a speech runs: ``work(activity, speech)``, in the agent's speech loop."""

PLAYOUT_CLEAR_TIMEOUT = 2.0
DRAIN_TIMEOUT = 5.0

_seq = itertools.count()


class AgentActivity:
    """One agent while it runs. Owns its speeches' tasks; the session owns the activity."""

    def __init__(self, session: Runtime, agent: Agent, runner: ToolRunner) -> None:
        self.session = session
        self.agent = agent
        self.runner = runner  # the session's: every tool call of this agent's replies
        self._scope = TaskScope(intern(f"activity {agent.label}"))
        self._queue: list[tuple[int, int, SpeechHandle, SpeechWork]] = []
        self._current: SpeechHandle | None = None
        self._wake: asyncio.Future[None] | None = None  # the idle loop waits on it
        self._paused = False
        self._draining = False
        self._closed = False
        self._started = False
        self._pause_slot: asyncio.Lock | None = None  # made at the first inline task
        self.drain_exempt: dict[asyncio.Task[Any], SpeechHandle | None] = {}
        self._realtime_listener: Callable[[bool], None] | None = None
        self._realtime: RealtimeSession | None = None  # the one attached
        self.entering = False  # on_enter is running
        self.handoff: Agent | None = None  # the current speech's tools handed off to it
        self._loop_task: asyncio.Task[None] | None = None  # every speech runs in it
        self._guard: CancelWhenDone | None = None  # its model streams' (one at a time)
        # (the agent's list and the session's tools version the map was built from,
        # the map, its values) while valid
        self._tools_cached: (
            tuple[object, int, dict[str, FunctionTool], list[FunctionTool]] | None
        ) = None
        self._parts_started = False  # the agent's own parts (Agent(mcp_servers=...))

    def __repr__(self) -> str:
        return f"AgentActivity({self.agent.label})"

    @property
    def public_session(self) -> Any:
        """The ``backline.Session`` (what ``Agent.session`` gives)."""
        return self.session._public

    def changed(self) -> None:
        """Something the derived state reads changed (an ``AgentTask`` completed)."""
        self.session._refresh()

    @property
    def pause_slot(self) -> asyncio.Lock:
        """Taken by an inline task while it pauses this agent (FIFO)."""
        lock = self._pause_slot
        if lock is None:
            lock = self._pause_slot = asyncio.Lock()
        return lock

    # -- state ------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def current_speech(self) -> SpeechHandle | None:
        cur = self._current
        return cur if cur is not None and not cur.done() else None

    @property
    def queued(self) -> int:
        return len(self._queue)

    def speeches(self) -> list[SpeechHandle]:
        out = [s for _, _, s, _ in self._queue]
        if self._current is not None and not self._current.done():
            out.insert(0, self._current)
        return out

    @property
    def llm(self) -> LLM:
        return self.agent.llm or self.session.llm

    def tool_map(self) -> dict[str, FunctionTool]:
        """Every tool this agent sees, by name (read-only: it may be shared).

        Rebuilt only when the agent's list is replaced (``update_tools``) or the
        session's tools version moves (a part's tools changed, or one started)."""
        agent_tools = self.agent._tools
        toolbox = self.session._toolbox
        cached = self._tools_cached
        if cached is not None and cached[0] is agent_tools and cached[1] == toolbox.version:
            return cached[2]
        tools = {t.name: t for t in toolbox.all()}
        for t in agent_tools:
            tools[t.name] = t
        if self._parts_started:  # its own parts' tools, while it runs
            for part in self.agent._parts:
                for t in part.tools:
                    tools[t.name] = t
        self._tools_cached = (agent_tools, toolbox.version, tools, list(tools.values()))
        return tools

    def check_tools(self, agent_tools: list[FunctionTool]) -> None:
        """Raise before anything changes if the agent's tools clash with the session's."""
        self.session._toolbox.check_agent(self.agent, agent_tools)

    # -- lifecycle --------------------------------------------------------------
    async def start(self, *, replacing: AgentActivity | None = None) -> None:
        """Start running the agent (``replacing``: the activity of the same agent
        that a handoff to itself retires once this one is current)."""
        self.check_tools(self.agent._tools)
        running = self.agent._activity
        if running is not None and running is not self and running is not replacing:
            raise RuntimeError(f"{self.agent.label} is already running in a session")
        await self._start_parts()
        self.agent._activity = self
        self._attach_realtime()
        self._loop_task = self._scope.create_task(
            self._scheduling_loop(), name=intern(f"{self.agent.label} speech loop")
        )
        self._started = True

    def start_on_enter(self) -> None:
        if type(self.agent).on_enter is Agent.on_enter:
            return  # nothing to run (and no "thinking" while it would)
        self.entering = True
        self._scope.create_task(self._run_on_enter(), name=f"{self.agent.label}.on_enter")

    async def _run_on_enter(self) -> None:
        current_on_enter.set(self)
        current_call.set(None)  # the task may have been started from a tool's context
        try:
            await self.agent.on_enter()
        except asyncio.CancelledError:
            raise
        except Exception as e:
            logger.exception("%s.on_enter raised", self.agent.label)
            self.session.emit(ErrorEvent(error=e, recoverable=True, source="on_enter"))
        finally:
            self.entering = False
            self.session._refresh()

    def _find_realtime(self) -> RealtimeSession | None:
        """The agent's realtime session, else the session's, else the one its LLM is
        (an LLM whose ``realtime`` attribute is a ``RealtimeSession``)."""
        rt = self.agent.realtime or self.session.realtime
        if rt is not None:
            return rt
        of_llm = getattr(self.llm, "realtime", None)
        return of_llm if isinstance(of_llm, RealtimeSession) else None

    def _attach_realtime(self) -> None:
        rt = self._find_realtime()
        if rt is None:
            return

        def changed(_: bool) -> None:
            self.session._refresh()

        rt.add_background_work_listener(changed)
        self._realtime = rt
        self._realtime_listener = changed
        if isinstance(rt, ContextFollower):
            try:
                rt.agent_changed(self.agent._chat_ctx, list(self.tool_map().values()))
            except Exception:
                logger.exception("the realtime session failed to take its agent")

    def context_inserted(self) -> None:
        """Items reached the agent's context with no reply of their own (a silent
        update): a realtime session that follows the context is told at once."""
        rt = self._realtime
        if isinstance(rt, ContextFollower):
            try:
                rt.context_changed(self.agent._chat_ctx)
            except Exception:
                logger.exception("the realtime session failed to take a context change")

    def _detach_realtime(self) -> None:
        rt = self._realtime
        if rt is not None and self._realtime_listener is not None:
            rt.remove_background_work_listener(self._realtime_listener)
        self._realtime_listener = None
        self._realtime = None

    @property
    def realtime_busy(self) -> bool:
        if self._realtime_listener is None:
            return False  # no realtime model (asked whenever the away timer would arm)
        rt = self._realtime
        return bool(rt is not None and rt.background_work_running)

    # -- inline tasks -------------------------------------------------------------
    async def run_inline(self, task: AgentTask[Any], speech: SpeechHandle | None) -> Any:
        """``await task`` inside a tool of ``speech`` (or inside ``on_enter``): pause this
        agent, run the task as the current agent until it completes, hand back.

        Pausing an activity is a single slot (``pause_slot``), so the inline tasks of
        one turn's parallel tool calls queue for it (FIFO) and take it in turn:

        1. before the queue, take a *counted* interruption hold on the shared speech
           (releasing per task would let one task's conversation interrupt the speech
           the others wait on);
        2. before the queue, register as exempt from drain, and again once the slot is
           acquired (nothing may leave a queued task exposed to a drain);
        3. once the slot is acquired, check again that the activity is open and the
           speech was not interrupted (a forced interrupt bypasses the hold), and only
           then stop the run from watching the blocked speech.

        A nested task pauses a different activity (the task's own), so it never queues
        behind its parent.
        """
        task._awaited = True
        session = self.session
        me = asyncio.current_task()
        assert me is not None
        if speech is not None:
            if speech.interrupted:
                raise RuntimeError("the speech that awaited the inline task is interrupted")
            speech._hold_interruptions()
        self.drain_exempt[me] = speech
        try:
            async with self.pause_slot:
                self.drain_exempt[me] = speech  # a resume must never leave us exposed
                if self._closed or session._closing:
                    raise ToolError(f"cannot start {task.label}: {self.agent.label} is closing")
                if speech is not None and speech.interrupted:
                    raise ToolError(
                        f"cannot start {task.label}: the speech that awaited it was interrupted"
                    )
                if speech is not None:
                    speech._block()
                try:
                    return await session._run_task(self, task)
                finally:
                    if speech is not None:
                        speech._unblock()
                        session._transcript.watch(speech)
        finally:
            self.drain_exempt.pop(me, None)
            if speech is not None:
                speech._release_interruptions()

    def pause(self) -> None:
        self._paused = True
        self.session._refresh()

    def resume(self) -> None:
        self._paused = False
        self._notify()
        self.session._refresh()

    async def drain(self, timeout: float = DRAIN_TIMEOUT) -> None:
        """Let queued and current speech finish, except speeches whose tool awaits an
        inline task (those would wait for user input that can no longer come)."""
        self._draining = True

        def settled() -> bool:
            exempt = {sp for sp in self.drain_exempt.values() if sp is not None}
            return all(sp in exempt for sp in self.speeches())

        if not settled():
            ok = await self.session._wait_for(settled, timeout=timeout, even_when_closing=True)
            if not ok:
                logger.warning("%s: speech did not finish within %.1fs; stopping it", self, timeout)

    def interrupt_all(self, *, force: bool) -> None:
        if self._current is None and not self._queue:
            return  # the common case at a user turn: nothing speaks or waits
        for sp in self.speeches():
            if force or sp.allow_interruptions:
                sp.interrupt(force=force)

    async def aclose(self) -> None:
        """Close this agent for good (it is no longer current): ``stop()``, a bounded
        wait for its tasks, then ``finish()``. The session's close does the same in
        its own steps."""
        await emptied([self.stop()], owner=str(self))
        pending = self.finish()
        if pending is not None:
            await pending

    def stop(self) -> TaskScope:
        """Stop now, without waiting: every speech is interrupted and its tasks are
        cancelled; an idle speech loop, woken, ends by itself (no cancellation, no
        traceback to keep). Returns the scope to wait for (then ``finish()``)."""
        self._closed = True
        self.interrupt_all(force=True)
        if self._current is None and self._wake is not None:  # parked in _scheduling_loop
            self._notify()
            self._scope.cancel(spare=(self._loop_task,))
        else:
            self._scope.cancel()
        return self._scope

    def finish(self) -> Awaitable[None] | None:
        """The end of close, once its tasks have ended (idempotent): the agent is
        detached; an awaitable when its own parts still need closing."""
        for _, _, sp, _ in self._queue:
            sp._mark_done()
        self._queue.clear()
        self._detach_realtime()
        if self.agent._activity is not self:
            return None
        self.agent._activity = None
        if not self._parts_started:
            return None
        self._parts_started = False
        return self._close_parts()

    async def _start_parts(self) -> None:
        """Start the agent's own parts (their tools are its tools while it runs); all
        or none: a part that fails stops those already started."""
        parts = self.agent._parts
        if not parts:
            return
        session = self.session
        started = []
        try:
            for part in parts:
                taken = taken_by_others(part, self.tool_map(), session._toolbox)
                await part.start(session._public, taken)
                started.append(part)
        except BaseException:
            for part in reversed(started):
                await close_part(part, owner=str(self))
            raise
        self._parts_started = True
        self._tools_cached = None

    async def _close_parts(self) -> None:
        for part in reversed(self.agent._parts):
            await close_part(part, owner=str(self))
        self.session.tools_changed()

    # -- speeches ---------------------------------------------------------------
    def say(
        self, text: str, *, allow_interruptions: bool | None, add_to_chat_ctx: bool
    ) -> SpeechHandle:
        """Queue ``text``, spoken as this agent (no model call)."""
        if allow_interruptions is None:
            allow_interruptions = self.agent.allow_interruptions
        speech = SpeechHandle(
            allow_interruptions=True if allow_interruptions is None else allow_interruptions,
            source="say",
        )

        async def work(activity: AgentActivity, sp: SpeechHandle) -> None:
            await activity.say_work(sp, text, add_to_chat_ctx)

        self.schedule(speech, work)
        return speech

    # -- scheduling -------------------------------------------------------------
    def schedule(self, speech: SpeechHandle, work: SpeechWork) -> None:
        if self._closed:
            raise RuntimeError(f"{self.agent.label} is no longer active; cannot schedule speech")
        speech._on_change = self._speech_changed
        heapq.heappush(self._queue, (-speech.priority, next(_seq), speech, work))
        session = self.session
        transcript = session._transcript
        if transcript.wants("speech_created"):
            transcript.speech_created(speech)
        self._notify()
        session._refresh()

    def take_user_turn_replies(self) -> list[SpeechHandle]:
        """Take the replies to user turns that have not started, oldest first (an
        inline task that pauses this agent answers them: ``requeue``)."""
        turns = sorted((q for q in self._queue if q[2]._user_turn is not None), key=lambda q: q[1])
        if not turns:
            return []
        self._queue = [q for q in self._queue if q[2]._user_turn is None]
        heapq.heapify(self._queue)
        return [speech for _, _, speech, _ in turns]

    def requeue(self, speeches: list[SpeechHandle], work: SpeechWork) -> None:
        """Queue speeches taken from another agent, each to run ``work`` here."""
        for speech in speeches:
            speech._on_change = self._speech_changed
            heapq.heappush(self._queue, (-speech.priority, next(_seq), speech, work))
        self._notify()
        self.session._refresh()

    def _notify(self) -> None:
        """Wake the scheduling loop if it waits (it re-checks the queue)."""
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    def _speech_changed(self, speech: SpeechHandle) -> None:
        current = self._current
        if speech._interrupt_fut.done() and speech is not current and not speech._done:
            self._queue = [q for q in self._queue if q[2] is not speech]
            heapq.heapify(self._queue)
            speech._mark_done()
            return  # _mark_done notifies again
        if speech is current and speech._done:
            return  # the scheduling loop refreshes as it lets the speech go
        self.session._refresh()

    async def _scheduling_loop(self) -> None:
        me = asyncio.current_task()
        assert me is not None
        # Once for every speech: this task's context is its own (a tool's task, an
        # on_enter's, copy theirs), and nothing a speech runs sets these in it.
        current_call.set(None)
        current_on_enter.set(None)
        new_future = me.get_loop().create_future
        while True:
            while not self._queue or self._paused:
                if self._closed:
                    return  # woken by close (stop()): end quietly
                wake = self._wake = new_future()
                try:
                    await wake
                finally:
                    self._wake = None
            _, _, speech, work = heapq.heappop(self._queue)
            if speech._done:
                continue
            self._current = speech
            try:
                # The speech runs in this task (no task per speech): close cancels
                # this loop, and with it the speech, as it would cancel the speech's
                # own task.
                if not speech._interrupt_fut.done():
                    await work(self, speech)
            except asyncio.CancelledError:
                if me.cancelling():
                    raise  # this loop is cancelled (close): the speech ends with it
                # A CancelledError nobody asked this task for (a future the speech
                # awaited was cancelled, e.g. an output's playout replaced by a new
                # segment): it ends this speech only, as it ended its own task before.
                logger.debug("speech %s ended by a cancelled future", speech.id)
            except Exception as e:
                logger.exception("speech %s failed", speech.id)
                self.session.emit(ErrorEvent(error=e, recoverable=True, source="speech"))
            finally:
                speech._mark_done(notify=False)  # (the refresh below covers it)
                self._current = None
                # The handoff the speech owes is requested (or released, when closing)
                # even if this loop is cancelled the moment the speech ends.
                handoff, self.handoff = self.handoff, None
                if handoff is not None:
                    self.session._request_handoff(self, handoff)
                self.session._refresh()
            # Not kept while this loop waits: an idle agent holds no finished speech.
            speech = work = None  # type: ignore[assignment]
            if me.cancelling():
                # Code in the speech swallowed this loop's cancellation (3.11's
                # asyncio.wait_for does when its future ends at the same moment): close
                # stands all the same.
                raise asyncio.CancelledError()

    # -- recording --------------------------------------------------------------
    def record(self, items: list[ChatItem], speech: SpeechHandle | None) -> None:
        """Add items to this agent's context, the history, and the speech."""
        if len(items) == 1:
            self.agent._chat_ctx._add(items[0])  # (the usual case: one item at a time)
        else:
            self.agent._chat_ctx.insert(items)
        self.session._transcript.add(items)
        if speech is not None:
            speech.chat_items.extend(items)

    # -- output -----------------------------------------------------------------
    async def _playout(self, speech: SpeechHandle) -> PlayoutResult:
        """Wait for the current output segment to play, or cut it if interrupted."""
        output = self.session._output
        playout: asyncio.Future[PlayoutResult]
        if output._speech_id is not None and (
            type(output).wait_for_playout is TextOutput.wait_for_playout
        ):
            # The default wait is a shield over the segment's future: wait on it
            # directly (and never cancel it), one task and several loop steps fewer
            # per segment; none at all when the output reported already (instant).
            if output._result is not None:
                return output._result
            playout, owned = output._playout_future(), False
        else:
            # An output's own wait: a task of this wait's own (cancelled in the end).
            scope = TaskScope("playout")
            playout, owned = scope.create_task(output.wait_for_playout(), name="playout"), True
        interrupted = speech._interrupt_fut  # waited on directly: never cancel it
        try:
            if not playout.done():
                await first_completed(playout, interrupted)
            if playout.done():
                return playout.result()
            output.clear()
            # Not asyncio.wait_for: in 3.11 it swallows a cancellation that lands as its
            # future ends, and this runs in the agent's loop task (close must stand).
            if await done_within(playout, PLAYOUT_CLEAR_TIMEOUT):
                return playout.result()
            logger.warning("the output did not report playout within %.1fs", PLAYOUT_CLEAR_TIMEOUT)
            return PlayoutResult(speech.id, "", True, asyncio.get_running_loop().time())
        except asyncio.CancelledError:
            output.clear()
            raise
        finally:
            if owned:
                playout.cancel()

    async def say_work(self, speech: SpeechHandle, text: str, add_to_chat_ctx: bool) -> None:
        started = time.time()
        output = self.session._output
        output.begin_segment(speech.id)
        speech._set_phase("speaking")
        output.write(text)
        output.flush()
        result = await self._playout(speech)
        if add_to_chat_ctx and (result.text or not result.interrupted):
            msg = ChatMessage(
                role="assistant",
                content=result.text,
                interrupted=result.interrupted,
                created_at=started,
            )
            self.record([msg], speech)
