"""Session: one conversation — the current agent, the history, I/O, timers and events."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ..limits import DEFAULT_LIMITS, Limits
from ..llm.chat_context import ChatContext, ChatItem, ChatMessage
from ..llm.llm import LLM
from ..llm.realtime import RealtimeSession
from ..llm.tools import FunctionTool, ToolChoice
from ..tasks import Signal, TaskScope
from . import _closing, _handoffs, _user_turns, observers
from ._activity import AgentActivity
from ._away import AwayTimer
from ._reply_scheduler import ReplyScheduler
from ._tool_runner import ToolRunner
from .agent import Agent, AgentTask, check_tool_names
from .events import (
    AgentState,
    AgentStateChanged,
    ConversationItemAdded,
    Event,
    EventEmitter,
    EventName,
    SpeechCreated,
    UserState,
    UserStateChanged,
)
from .io import InMemoryTextOutput, TextOutput
from .speech_handle import PRIORITY_NORMAL, SpeechHandle

if TYPE_CHECKING:
    from ..background.definition import BackgroundDefinition, HandlingOptions
    from ..background.runtime import BackgroundManager
    from ..mcp._config import MCPServerConfig
    from ..mcp._mount import McpToolset
    from .run_result import RunResult

logger = logging.getLogger("backline")

UserdataT = TypeVar("UserdataT")

MAX_TOOL_STEPS_MESSAGE = "I'm sorry, I couldn't finish that."


class Session(Generic[UserdataT]):
    """One conversation between a user and a voice agent (and its background sessions).

    ``async with Session(llm) as session: await session.start(MyAgent())``. Front
    ends push user turns (``push_user_turn``) and speech signals
    (``user_started_speaking`` / ``user_stopped_speaking``) and receive the
    agent's words through ``output``; tests use ``run(user_input=...)``.
    ``aclose()`` is bounded and never hangs. ``limits`` bounds what the session
    accepts (tool outputs, background sends and state; see ``backline.Limits``).
    ``mcp_servers`` (``backline.mcp.MCPServerStdio`` / ``MCPServerHTTP``) are started
    with the session; their tools (``<server>__<tool>``) are every agent's.
    """

    def __init__(
        self,
        llm: LLM,
        *,
        tools: Sequence[FunctionTool] = (),
        background: Iterable[BackgroundDefinition] | None = None,
        handling: HandlingOptions | None = None,
        user_away_timeout: float | None = 15.0,
        max_tool_steps: int = 5,
        userdata: UserdataT | None = None,
        output: TextOutput | None = None,
        realtime: RealtimeSession | None = None,
        max_tool_steps_message: str = MAX_TOOL_STEPS_MESSAGE,
        limits: Limits | None = None,
        mcp_servers: Sequence[MCPServerConfig] = (),
    ) -> None:
        if max_tool_steps < 0:
            raise ValueError("max_tool_steps must be >= 0")
        if limits is not None and not isinstance(limits, Limits):
            raise TypeError(f"limits must be a backline.Limits, got {type(limits).__name__}")
        self.limits: Limits = limits if limits is not None else DEFAULT_LIMITS
        self._llm = llm
        self._tools: list[FunctionTool] = list(tools)
        check_tool_names(self._tools, where="Session tools")
        self._userdata = userdata
        self._output: TextOutput = output if output is not None else InMemoryTextOutput()
        self._realtime = realtime
        self.max_tool_steps = max_tool_steps
        self.max_tool_steps_message = max_tool_steps_message
        self._emitter = EventEmitter()
        self._history = ChatContext()
        self._user_away_timeout = user_away_timeout
        self._reset_runtime()
        self._background: BackgroundManager | None = None
        defs = list(background or ())
        if defs:
            from ..background.runtime import BackgroundManager

            self._background = BackgroundManager(self, defs, handling=handling)
        self._check_session_tools(self._tools)
        self._mcp: McpToolset | None = None
        if mcp_servers:  # their tools are mounted at start (backline.mcp)
            from ..mcp._mount import toolset_for

            self._mcp = toolset_for(mcp_servers, owner="Session", limits=lambda: self.limits)

    def _reset_runtime(self) -> None:
        """Fresh runtime state: at construction, and when a closed session restarts.
        The history, the event listeners and the configuration are kept."""
        self._scope = TaskScope("session")
        self._tool_scope = TaskScope("session tools")
        self._activity: AgentActivity | None = None
        self._activities: list[AgentActivity] = []
        self._agent_state: AgentState = "initializing"
        self._user_state: UserState = "listening"
        self._started = False
        self._closing = False
        self._closed = False
        self._close_task: asyncio.Task[None] | None = None
        self._switching = 0
        self._handoffs_pending = 0
        self._user_turns = 0
        self._pending_turns: list[str] = []
        self._turn_lock = asyncio.Lock()
        self._switch_mutex: asyncio.Lock | None = None  # made at the first handoff
        self._changed = Signal()
        self._refreshing = False
        self._refresh_again = False
        self._active_run: RunResult | None = None
        self._away = AwayTimer(
            self._user_away_timeout,
            should_arm=self._away_may_arm,
            current_owner=lambda: self._activity,
            fire=self._user_went_away,
        )
        self._tool_runner = ToolRunner(self)

    @property
    def _switch_lock(self) -> asyncio.Lock:
        """Held by every switch of agents (handoffs, inline tasks and hand-backs)."""
        lock = self._switch_mutex
        if lock is None:
            lock = self._switch_mutex = asyncio.Lock()
        return lock

    @property
    def _tool_scheduler(self) -> ReplyScheduler:
        """The reply scheduler of deferred tool results (owned by the tool runner)."""
        return self._tool_runner.scheduler

    # -- public state -----------------------------------------------------------
    @property
    def llm(self) -> LLM:
        return self._llm

    @property
    def realtime(self) -> RealtimeSession | None:
        return self._realtime

    @property
    def output(self) -> TextOutput:
        return self._output

    @output.setter
    def output(self, output: TextOutput) -> None:
        self._output = output

    @property
    def userdata(self) -> UserdataT:
        if self._userdata is None:
            raise ValueError("this session has no userdata (pass userdata= to Session)")
        return self._userdata

    @property
    def history(self) -> ChatContext:
        """Every item of the conversation, across agents, in order (read-only)."""
        return self._history

    @property
    def current_agent(self) -> Agent:
        if self._activity is None:
            raise RuntimeError("the session has not started")
        return self._activity.agent

    @property
    def agent_state(self) -> AgentState:
        return self._agent_state

    @property
    def user_state(self) -> UserState:
        return self._user_state

    @property
    def tools(self) -> list[FunctionTool]:
        """The session-level tools every agent sees (including generated ones)."""
        return self._all_session_tools()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def background(self) -> BackgroundManager | None:
        """The background sessions of this session, if any were configured."""
        return self._background

    # -- events -----------------------------------------------------------------
    def on(self, event: EventName, callback: Callable[[Any], Any] | None = None) -> Any:
        """Register ``callback(event)`` for an event name; usable as a decorator."""
        return self._emitter.on(event, callback)

    def off(self, event: EventName, callback: Callable[[Any], Any]) -> None:
        self._emitter.off(event, callback)

    def emit(self, event: Event) -> None:
        if self._active_run is not None:
            self._active_run._on_event(event)
        self._emitter.emit(event)

    def _wants(self, name: EventName) -> bool:
        """Whether an event would reach anyone (a listener, or a run() that collects
        it): hot paths skip building it otherwise."""
        return name in self._emitter._listeners or (
            self._active_run is not None and name in _RUN_EVENTS
        )

    # -- lifecycle --------------------------------------------------------------
    async def __aenter__(self) -> Session[UserdataT]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def start(self, agent: Agent) -> None:
        """Start the conversation with ``agent``; returns once background entrypoints run."""
        if self._closing and not self._closed:
            raise RuntimeError("the session is still closing; await aclose() first")
        if self._closed:
            self._reset_runtime()  # a restart: fresh runtimes, same history
        if self._started or self._activity is not None:
            raise RuntimeError("the session has already started")
        activity = AgentActivity(self, agent)
        await activity.start()
        self._activity = activity
        self._activities.append(activity)
        try:
            if self._mcp is not None:
                await self._mcp.start(taken={*activity.tool_map(), *self._reserved_names()})
            if self._background is not None:
                await self._background.start()
        except BaseException:
            await self.aclose()
            raise
        self._started = True
        activity.start_on_enter()
        observers.notify("session_started", self)
        self._refresh()

    async def aclose(self, *, drain: bool = False) -> None:
        """Close the conversation. With ``drain``, current speech may finish first
        (bounded). Idempotent, bounded, and it never hangs."""
        if not self._closing:
            if not drain and _closing.closes_at_once(self):
                _closing.close_at_once(self)
            else:
                self._closing = True
                self._close_task = asyncio.ensure_future(self._aclose(drain))
        # A cancelled caller stops waiting; the close goes on (it runs in no caller).
        await self._wait_for(lambda: self._closed, even_when_closing=True)
        task = self._close_task
        if task is not None and task.done():
            task.result()

    async def _aclose(self, drain: bool) -> None:
        await _closing.close_in_task(self, drain)

    # -- speaking ---------------------------------------------------------------
    def _require_activity(self) -> AgentActivity:
        if self._closing:
            raise RuntimeError("the session is closed")
        if self._activity is None:
            raise RuntimeError("the session has not started; call await session.start(agent)")
        return self._activity

    def generate_reply(
        self,
        *,
        user_input: str | None = None,
        instructions: str | None = None,
        tool_choice: ToolChoice | None = None,
        allow_interruptions: bool | None = None,
    ) -> SpeechHandle:
        """Ask the current agent for a reply; returns its handle at once."""
        activity = self._require_activity()
        return self._generate(
            activity,
            user_input=user_input,
            instructions=instructions,
            tool_choice=tool_choice,
            allow_interruptions=allow_interruptions,
            source="generate_reply",
        )

    def _generate(
        self,
        activity: AgentActivity,
        *,
        user_input: str | None,
        instructions: str | None,
        tool_choice: ToolChoice | None,
        allow_interruptions: bool | None,
        source: str,
        priority: int = PRIORITY_NORMAL,
        user_turn: ChatMessage | None = None,
    ) -> SpeechHandle:
        if allow_interruptions is None:  # (Session._allow, inline: once per turn)
            allow_interruptions = activity.agent._allow_interruptions
            if allow_interruptions is None:
                allow_interruptions = True
        speech = SpeechHandle(
            allow_interruptions=allow_interruptions, source=source, priority=priority
        )
        speech._user_turn = user_turn
        if user_input is not None:
            activity.record([ChatMessage(role="user", content=user_input)], None)

        if instructions is None and tool_choice is None:
            activity.schedule(speech, activity.reply_work)  # (a user turn's reply)
            return speech

        async def work(sp: SpeechHandle) -> None:
            await activity.reply_work(sp, instructions=instructions, tool_choice=tool_choice)

        activity.schedule(speech, work)
        return speech

    def _generate_scheduled_reply(self, *, instructions: str, source: str) -> SpeechHandle:
        activity = self._require_activity()
        return self._generate(
            activity,
            user_input=None,
            instructions=instructions,
            tool_choice="none",
            allow_interruptions=None,
            source=source,
        )

    @staticmethod
    def _allow(activity: AgentActivity, allow: bool | None) -> bool:
        if allow is not None:
            return allow
        agent_default = activity.agent.allow_interruptions
        return True if agent_default is None else agent_default

    def say(
        self, text: str, *, allow_interruptions: bool | None = None, add_to_chat_ctx: bool = True
    ) -> SpeechHandle:
        """Speak ``text`` as the current agent (no model call)."""
        activity = self._require_activity()
        speech = SpeechHandle(
            allow_interruptions=self._allow(activity, allow_interruptions), source="say"
        )

        async def work(sp: SpeechHandle) -> None:
            await activity.say_work(sp, text, add_to_chat_ctx)

        activity.schedule(speech, work)
        return speech

    def interrupt(self, *, force: bool = False) -> None:
        """Interrupt the current and queued speech; speeches that disallow
        interruptions are left alone unless ``force``."""
        if self._activity is not None:
            self._activity.interrupt_all(force=force)

    # -- user input -------------------------------------------------------------
    def push_user_turn(self, text: str) -> None:
        """A final user turn (text or a final transcript): interrupts the agent when
        allowed, then the current agent replies."""
        activity = self._activity
        if activity is None or self._closing:
            activity = self._require_activity()  # (raises, saying why)
        if self._user_state == "away":
            self._set_user_state("listening")
        else:
            # Restart the window: disarm now; the refresh that push_user_turn ends
            # with re-arms a full window if the timer may still run.
            self._away.cancel()
        if self._switching or self._handoffs_pending:
            self._pending_turns.append(text)
            self._refresh()
            return
        _user_turns.start_user_turn(self, text, activity)

    def _start_user_turn(self, text: str) -> None:
        _user_turns.start_user_turn(self, text)

    def user_started_speaking(self, *, interrupt: bool = True) -> None:
        """Voice activity began: barge-in interrupts the agent when allowed.

        With ``interrupt=False`` only the user state changes (nothing is voiced
        while the user speaks): for a front end whose own audio stack decides
        barge-in and reports it through ``interrupt()`` and playout.
        """
        if self._closing:
            return
        self._set_user_state("speaking")
        if interrupt and self._activity is not None:
            self._activity.interrupt_all(force=False)
        self._refresh()

    def user_stopped_speaking(self) -> None:
        if self._closing:
            return
        self._set_user_state("listening")
        self._refresh()

    def _user_went_away(self) -> None:
        if not self._closing:
            self._set_user_state("away")
            self._refresh()

    def _set_user_state(self, state: UserState) -> None:
        old = self._user_state
        if old != state:
            self._user_state = state
            self.emit(UserStateChanged(old=old, new=state))

    # -- testing ----------------------------------------------------------------
    async def run(self, *, user_input: str, timeout: float = 30.0) -> RunResult:
        """Push a user turn and wait until everything it caused has finished.

        Returns a ``RunResult`` with the turn's events and fluent assertions.
        """
        from .run_result import RunResult

        if self._active_run is not None:
            raise RuntimeError("another run() is in progress")
        result = RunResult(self, user_input)
        self._active_run = result
        try:
            self.push_user_turn(user_input)
            await result._wait(timeout)
        finally:
            self._active_run = None
        return result

    async def wait_for_idle(self, timeout: float | None = None) -> bool:
        """Wait until nothing is speaking, queued or owed; False on timeout or close."""
        return await self._wait_for(
            lambda: self._is_idle() and not self._has_followup_work(), timeout=timeout
        )

    # -- derived state ----------------------------------------------------------
    def _derive_agent_state(self) -> AgentState:
        activity = self._activity
        if not self._started or activity is None:
            return "initializing"
        if self._closed:
            return "listening"  # nothing speaks or thinks any more
        cur = activity._current
        if cur is not None and not cur._done:
            return "speaking" if cur._phase == "speaking" else "thinking"
        return "thinking" if self._has_followup_work() else "listening"

    def _work_in_progress(self) -> bool:
        """Unfinished work the session owes before it waits on the user: a user turn
        being processed (or held for a handoff), a handoff or hand-back owed or
        running, or the current agent's ``on_enter`` running.

        The one rule of unfinished work: the agent state, the away timer (through the
        state), ``wait_for_idle()``, ``run()`` and the reply schedulers all read it.
        A paused agent's work does not count: it cannot go on until that agent
        resumes (an ``on_enter`` that waits on an inline task, directly or through a
        speech whose tool awaits it, waits for the user).
        """
        if self._user_turns or self._handoffs_pending or self._switching or self._pending_turns:
            return True
        activity = self._activity
        return activity is not None and activity.entering and not activity.paused

    def _has_followup_work(self) -> bool:
        """Another speech is committed to follow: one rule, used at every speech end."""
        if self._work_in_progress():
            return True
        activity = self._activity
        if activity is not None and activity._queue and not activity._paused:
            return True
        replies = self._tool_runner.scheduler
        if (replies._taking or replies._pending) and replies.owes_reply():
            return True  # (checked first inline: usually nothing is pending)
        return self._background is not None and self._background.owes_reply()

    def _is_idle(self) -> bool:
        """Nothing is speaking, queued or in progress, and the user is not speaking
        (replies the schedulers buffer are not counted: they wait for this)."""
        activity = self._activity
        return (
            self._started
            and not self._closing
            and activity is not None
            and not self._work_in_progress()
            and activity.current_speech is None
            and not activity.queued
            and self._user_state != "speaking"
        )

    def _away_may_arm(self) -> bool:
        activity = self._activity
        return (
            self._agent_state == "listening"  # first: it fails fast all through a turn
            and self._user_state == "listening"
            and self._started
            and not self._closing
            and activity is not None
            and (activity._realtime_listener is None or not activity.realtime_busy)
        )

    def _refresh(self) -> None:
        """Recompute everything derived from state, after any input changed."""
        if self._refreshing:
            self._refresh_again = True
            return
        self._refreshing = True
        try:
            while True:
                self._refresh_again = False
                old = self._agent_state
                new = self._derive_agent_state()
                if new != old and not (self._closing and self._started and not self._closed):
                    # (no churn while closing; the end is true)
                    self._agent_state = new
                    if "agent_state_changed" in self._emitter._listeners:
                        # (to the listeners only: a run() does not collect states)
                        self._emitter.emit(_state_changed(old, new))
                away = self._away
                if self._agent_state == "listening" or away._deadline is not None:
                    away.reevaluate()  # (otherwise it could neither arm nor disarm)
                if self._changed._waiters:
                    self._changed.notify()
                if not self._refresh_again:
                    break
        finally:
            self._refreshing = False

    async def _wait_for(
        self,
        predicate: Callable[[], bool],
        *,
        timeout: float | None = None,
        even_when_closing: bool = False,
    ) -> bool:
        """Wait until ``predicate()`` holds (re-checked at every change).

        One timer bounds the whole wait (not one per wake-up: a turn wakes its
        waiters several times)."""
        if predicate():
            return True
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] | None = None
        expired = False

        def expire() -> None:
            nonlocal expired
            expired = True
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

        if timeout is not None and timeout <= 0:
            return False
        timer = None if timeout is None else loop.call_later(timeout, expire)
        try:
            while True:
                if predicate():
                    return True
                if (self._closing and not even_when_closing) or self._closed:
                    return False
                if expired:
                    return False
                waiter = self._changed.waiter()
                try:
                    await waiter
                except asyncio.CancelledError:
                    self._changed.discard(waiter)
                    raise
        finally:
            if timer is not None:
                timer.cancel()

    # -- history and targets ----------------------------------------------------
    def _add_to_history(self, items: Iterable[ChatItem]) -> None:
        run = self._active_run
        if "conversation_item_added" in self._emitter._listeners:
            for item in self._history.insert(items):
                self.emit(ConversationItemAdded(item=item))  # (a run gets it from emit)
        elif run is not None:
            for item in self._history.insert(items):
                run._on_item(item)  # only the run collects it: no event to build
        elif type(items) is list and len(items) == 1:
            self._history._add(items[0])  # (the usual case, with nobody listening)
        else:
            self._history.insert(items)

    def _target_agent(self) -> Agent:
        if self._activity is None:
            raise RuntimeError("the session has not started")
        return self._activity.agent

    def _speech_created(self, speech: SpeechHandle) -> None:
        """Emit ``speech_created`` (the caller checked ``_wants`` first)."""
        if "speech_created" in self._emitter._listeners:
            self.emit(SpeechCreated(speech=speech, source=speech.source))  # type: ignore[arg-type]
        elif self._active_run is not None:
            self._active_run._watch(speech)  # only the run collects it: no event to build

    def _watch_in_active_run(self, speech: SpeechHandle) -> None:
        if self._active_run is not None:
            self._active_run._watch(speech)

    # -- tools --------------------------------------------------------------------
    def _all_session_tools(self) -> list[FunctionTool]:
        mounted = self._mcp.tools if self._mcp is not None else []
        if self._background is None and not mounted:
            return self._tools
        generated = self._background.tools if self._background is not None else []
        return [*self._tools, *mounted, *generated]

    def _reserved_names(self) -> dict[str, str]:
        return {} if self._background is None else self._background.reserved_names()

    def _check_session_tools(self, tools: list[FunctionTool]) -> None:
        reserved = self._reserved_names()
        for t in tools:
            if t.name in reserved:
                raise ValueError(
                    f"duplicate function name: {t.name} is reserved for {reserved[t.name]}"
                )

    def _check_agent_tools(self, agent: Agent, tools: list[FunctionTool]) -> None:
        reserved = self._reserved_names()
        session_names = {t.name for t in self._tools}
        if self._mcp is not None:
            session_names.update(t.name for t in self._mcp.tools)
        for t in tools:
            if t.name in reserved:
                raise ValueError(
                    f"{agent.label}: duplicate function name: {t.name} is reserved for "
                    f"{reserved[t.name]}"
                )
            if t.name in session_names:
                raise ValueError(
                    f"{agent.label}: tool {t.name!r} has the same name as a session tool"
                )

    # -- handoffs (the switching itself lives in _handoffs.py) ----------------------
    def _request_handoff(self, old: AgentActivity, agent: Agent) -> None:
        _handoffs.request_handoff(self, old, agent)

    async def _run_task(self, parent: AgentActivity, task: AgentTask[Any]) -> Any:
        return await _handoffs.run_task(self, parent, task)

    def _flush_pending_turns(self) -> None:
        _handoffs.flush_pending_turns(self)


# The events a run() collects (RunResult._on_event): the others are built for it only
# when someone listens.
_RUN_EVENTS = frozenset({"conversation_item_added", "agent_handoff", "speech_created", "error"})

_STATE_EVENTS: dict[tuple[AgentState, AgentState], AgentStateChanged] = {}


def _state_changed(old: AgentState, new: AgentState) -> AgentStateChanged:
    """The event of one state change: events are frozen, so one of each is shared
    (three per turn, at no cost but a lookup)."""
    event = _STATE_EVENTS.get((old, new))
    if event is None:
        event = _STATE_EVENTS[old, new] = AgentStateChanged(old=old, new=new)
    return event
