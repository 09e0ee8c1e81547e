"""Session: one conversation — the current agent, the history, I/O, timers and events.

The session is the one owner of its state. Its collaborators (each agent's
activity, the tool runner, the reply schedulers, the switches between agents, the
user turns) see it through the narrow interface in ``_runtime.py``: they read what
it lists and change the session only by calling it. The session is assembled from
parts (``backline.voice.parts``): it knows them only through that protocol.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import Any, Generic, TypeVar

from ..limits import DEFAULT_LIMITS, Limits
from ..llm.chat_context import ChatContext
from ..llm.llm import LLM
from ..llm.realtime import RealtimeSession
from ..llm.tools import FunctionTool, ToolChoice
from ..tasks import LazyDeadline, Signal, TaskScope
from . import observers
from ._activity import AgentActivity
from ._away import Hold
from ._closing import Closing
from ._handoffs import Switches
from ._replies import generate
from ._session_tools import SessionTools, taken_by_others
from ._tool_runner import ToolRunner
from ._transcript import Transcript, state_changed
from ._user import USER_AWAY_SIGNALS, UserAwaySignal, UserPresence
from ._user_turns import UserTurns
from .agent import Agent, AgentTask
from .events import (
    AgentState,
    CloseEvent,
    Event,
    EventName,
    UserInputTranscribed,
    UserState,
)
from .io import InMemoryTextOutput, TextOutput
from .parts import SessionPart
from .recorders import ConversationRecorder
from .reply_scheduler import ReplyOwner, ReplyScheduler
from .run_result import RunResult
from .speech_handle import SpeechHandle

logger = logging.getLogger("backline")

UserdataT = TypeVar("UserdataT")

MAX_TOOL_STEPS_MESSAGE = "I'm sorry, I couldn't finish that."


class Session(Generic[UserdataT]):
    """One conversation between a user and a voice agent.

    ``async with Session(llm) as session: await session.start(MyAgent())``. Front
    ends push user turns (``push_user_turn``) and speech signals
    (``user_started_speaking`` / ``user_stopped_speaking``) and receive the
    agent's words through ``output``; tests use ``run(user_input=...)``.
    ``aclose()`` is bounded and never hangs. ``limits`` bounds what the session
    accepts (tool outputs, background sends and state; see ``backline.Limits``).
    ``parts`` (``backline.voice.parts.SessionPart``) start and close with it and
    give every agent their tools: ``backline.Session`` builds them from
    ``background=`` and ``mcp_servers=``.
    """

    def __init__(
        self,
        llm: LLM,
        *,
        tools: Sequence[FunctionTool] = (),
        parts: Iterable[SessionPart] = (),
        user_away_timeout: float | None = 15.0,
        user_away_signal: UserAwaySignal = "audio",
        max_tool_steps: int = 5,
        userdata: UserdataT | None = None,
        output: TextOutput | None = None,
        realtime: RealtimeSession | None = None,
        max_tool_steps_message: str = MAX_TOOL_STEPS_MESSAGE,
        limits: Limits | None = None,
    ) -> None:
        if max_tool_steps < 0:
            raise ValueError("max_tool_steps must be >= 0")
        if user_away_signal not in USER_AWAY_SIGNALS:
            raise ValueError(
                f"user_away_signal must be 'audio' or 'transcript', got {user_away_signal!r}"
            )
        if limits is not None and not isinstance(limits, Limits):
            raise TypeError(f"limits must be a backline.Limits, got {type(limits).__name__}")
        self.limits: Limits = limits if limits is not None else DEFAULT_LIMITS
        self._llm = llm
        self._toolbox = SessionTools(tools, parts)
        self._userdata = userdata
        self._output: TextOutput = output if output is not None else InMemoryTextOutput()
        self._realtime = realtime
        self.max_tool_steps = max_tool_steps
        self.max_tool_steps_message = max_tool_steps_message
        self._transcript = Transcript()
        self._user_away_timeout = user_away_timeout
        self.user_away_signal: UserAwaySignal = user_away_signal
        self._reset_runtime()

    def _reset_runtime(self) -> None:
        """Fresh runtime state: at construction, and when a closed session restarts.
        The history, the event listeners and the configuration are kept."""
        self._scope = TaskScope("session")  # user turns, switches, reply deliveries
        self._agent_state: AgentState = "initializing"
        self._started = False
        self._closing = False
        self._closed = False
        self._changed = Signal()
        self._run_deadline = LazyDeadline()  # bounds each run() (one at a time)
        self._refreshing = False
        self._refresh_again = False
        self._transcript.run = None
        self._tool_runner = ToolRunner(self)
        self._switches = Switches(self, self._tool_runner)
        self._turns = UserTurns(self, self._switches)
        self._user = UserPresence(
            self._user_away_timeout,
            signal=self.user_away_signal,
            should_arm=self._away_may_arm,
            current_owner=self._current_activity,
            emit=self.emit,
            went_away=self._user_went_away,
        )
        self._away = self._user.away
        self._schedulers: list[ReplyScheduler] = [self._tool_runner.scheduler]

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
        return self._transcript.history

    @property
    def current_agent(self) -> Agent:
        if self._switches.current is None:
            raise RuntimeError("the session has not started")
        return self._switches.current.agent

    @property
    def agent_state(self) -> AgentState:
        return self._agent_state

    @property
    def user_state(self) -> UserState:
        return self._user.state

    @property
    def tools(self) -> list[FunctionTool]:
        """The session-level tools every agent sees (its parts' included)."""
        return self._toolbox.all()

    @property
    def parts(self) -> tuple[SessionPart, ...]:
        """The parts this session is assembled from, in start order."""
        return self._toolbox.parts

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def _public(self) -> Session[Any]:
        """This session, as tools and agents are given it (``_runtime.Runtime``)."""
        return self

    # -- for parts (backline.voice.parts) ------------------------------------------
    def away_hold(self) -> Hold:
        """Hold off the user-away timer while some work runs: ``hold.release()`` ends
        it (idempotent). A part holds it while it is busy (a background's turn)."""
        return self._away.take_hold(None)

    def reply_scheduler(self, owner: ReplyOwner, *, name: str, source: str) -> ReplyScheduler:
        """A reply scheduler of this session for ``owner`` (a part that speaks): what it
        enqueues is inserted into the current agent's context at once and voiced as one
        coalesced reply when the session is idle (one at a time with its peers, by
        priority). The session owns it (it counts as owed speech, follows switches of
        agents, and closes with the session)."""
        scheduler = ReplyScheduler(self, owner, name=name, source=source, peers=self._schedulers)
        self._schedulers.append(scheduler)
        return scheduler

    def tools_changed(self) -> None:
        """A part's (or an agent part's) tools changed: agents see the new list at
        their next model request."""
        self._toolbox.changed()

    # -- events -----------------------------------------------------------------
    def on(self, event: EventName, callback: Callable[[Any], Any] | None = None) -> Any:
        """Register ``callback(event)`` for an event name; usable as a decorator."""
        return self._transcript.on(event, callback)

    def off(self, event: EventName, callback: Callable[[Any], Any]) -> None:
        self._transcript.emitter.off(event, callback)

    def emit(self, event: Event) -> None:
        self._transcript.emit(event)

    def add_recorder(self, recorder: ConversationRecorder) -> None:
        """Tell ``recorder`` each fact of a turn directly, as it happens (no event is
        built for it: see ``backline.voice.recorders``). Added once; kept by a restart."""
        self._transcript.add_recorder(recorder)

    def remove_recorder(self, recorder: ConversationRecorder) -> None:
        self._transcript.remove_recorder(recorder)

    # -- lifecycle --------------------------------------------------------------
    async def __aenter__(self) -> Session[UserdataT]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def start(self, agent: Agent) -> None:
        """Start the conversation with ``agent``; returns once the parts have started
        (background entrypoints run to their first await)."""
        if self._closing and not self._closed:
            raise RuntimeError("the session is still closing; await aclose() first")
        if self._closed:
            self._reset_runtime()  # a restart: fresh runtimes, same history
        if self._started or self._switches.current is not None:
            raise RuntimeError("the session has already started")
        activity = AgentActivity(self, agent, self._tool_runner)
        await activity.start()
        self._switches.begin(activity)
        toolbox = self._toolbox
        try:
            for part in toolbox.parts:
                await part.start(self, taken_by_others(part, activity.tool_map(), toolbox))
                toolbox.changed()
        except BaseException:
            await self.aclose()
            raise
        self._started = True
        activity.start_on_enter()
        observers.notify("session_started", self)
        self._refresh()

    async def aclose(self, *, drain: bool = False) -> None:
        """Close the conversation. With ``drain``, current speech may finish first
        (bounded). Idempotent, bounded, and it never hangs.

        One close path (``_closing.py``): every part and agent is told to stop at once;
        one bounded wait for their tasks (their own done callbacks end it: no task of
        its own), then the running tools, then what parts and agents still await."""
        if not self._closing:
            self._closing = True
            self._away.stop()
            self._refresh()
            Closing(
                toolbox=self._toolbox,
                schedulers=self._schedulers,
                session_scope=self._scope,
                switches=self._switches,
                runner=self._tool_runner,
                done=self._end_close,
            ).begin(drain=drain)
        # A cancelled caller stops waiting; the close goes on (it runs in no caller).
        # (No predicate, no timer: the close is bounded itself; thousands may close.)
        while not self._closed:
            await self._changed.wait()

    def _end_close(self, error: BaseException | None) -> None:
        self._closed = True
        self._switches.drop_held_turns()  # turns held for a switch that never comes
        self._away.stop()
        self._run_deadline.cancel()
        self._refresh()  # the state a closed session reports, and wakes waiters (aclose)
        if self._started:
            observers.notify("session_closed", self)
        if self._transcript.wants("close"):
            self.emit(CloseEvent(reason="error" if error else "user", error=error))

    # -- speaking ---------------------------------------------------------------
    def _require_activity(self) -> AgentActivity:
        if self._closing:
            raise RuntimeError("the session is closed")
        if self._switches.current is None:
            raise RuntimeError("the session has not started; call await session.start(agent)")
        return self._switches.current

    def generate_reply(
        self,
        *,
        user_input: str | None = None,
        instructions: str | None = None,
        tool_choice: ToolChoice | None = None,
        allow_interruptions: bool | None = None,
    ) -> SpeechHandle:
        """Ask the current agent for a reply; returns its handle at once."""
        return generate(
            self._require_activity(),
            user_input=user_input,
            instructions=instructions,
            tool_choice=tool_choice,
            allow_interruptions=allow_interruptions,
            source="generate_reply",
        )

    def say(
        self, text: str, *, allow_interruptions: bool | None = None, add_to_chat_ctx: bool = True
    ) -> SpeechHandle:
        """Speak ``text`` as the current agent (no model call)."""
        return self._require_activity().say(
            text, allow_interruptions=allow_interruptions, add_to_chat_ctx=add_to_chat_ctx
        )

    def interrupt(self, *, force: bool = False) -> None:
        """Interrupt the current and queued speech; speeches that disallow
        interruptions are left alone unless ``force``."""
        if self._switches.current is not None:
            self._switches.current.interrupt_all(force=force)

    # -- user input -------------------------------------------------------------
    def push_user_turn(self, text: str) -> None:
        """A final user turn (text or a final transcript): interrupts the agent when
        allowed, then the current agent replies."""
        activity = self._switches.current
        if activity is None or self._closing:
            activity = self._require_activity()  # (raises, saying why)
        user = self._user
        if user.state == "away":
            user.set("listening")
        else:
            # Restart the window: disarm now; the refresh that push_user_turn ends
            # with re-arms a full window if the timer may still run.
            self._away.cancel()
        switches = self._switches
        if switches.switching or switches.owed:
            switches.hold_turn(text)
            self._refresh()
            return
        self._turns.start(text, activity)

    def _start_user_turn(self, text: str) -> None:
        self._turns.start(text, self._require_activity())

    def user_started_speaking(self, *, interrupt: bool = True) -> None:
        """Voice activity began: barge-in interrupts the agent when allowed.

        With ``interrupt=False`` only the user state changes (nothing is voiced
        while the user speaks): for a front end whose own audio stack decides
        barge-in and reports it through ``interrupt()`` and playout.
        """
        if self._closing:
            return
        self._user.speech_started()
        if interrupt and self._switches.current is not None:
            self._switches.current.interrupt_all(force=False)
        self._refresh()

    def user_stopped_speaking(self) -> None:
        if self._closing:
            return
        if self._user.speech_stopped():
            self._refresh()

    def push_interim_transcript(self, text: str) -> None:
        """An interim transcript of what the user is saying (the final one comes as a
        user turn, ``push_user_turn``). Listeners get ``user_input_transcribed``; with
        ``user_away_signal="transcript"`` it holds "away" off."""
        if self._closing:
            return
        if self._transcript.wants("user_input_transcribed"):
            self.emit(UserInputTranscribed(text=text, final=False))
        if self._user.signal == "transcript":
            self._user.interim()
            self._refresh()

    def _user_went_away(self) -> None:
        if not self._closing:
            self._user.set("away")
            self._refresh()

    # -- testing ----------------------------------------------------------------
    async def run(self, *, user_input: str, timeout: float = 30.0) -> RunResult:
        """Push a user turn and wait until everything it caused has finished.

        Returns a ``RunResult`` with the turn's events and fluent assertions.
        """
        transcript = self._transcript
        if transcript.run is not None:
            raise RuntimeError("another run() is in progress")
        result = RunResult(self, user_input)
        transcript.run = result
        try:
            self.push_user_turn(user_input)
            await result._wait(timeout)
        finally:
            transcript.run = None
        return result

    async def wait_for_idle(self, timeout: float | None = None) -> bool:
        """Wait until nothing is speaking, queued or owed; False on timeout or close."""
        return await self._wait_for(
            lambda: self._is_idle() and not self._has_followup_work(), timeout=timeout
        )

    # -- derived state ----------------------------------------------------------
    def _derive_agent_state(self) -> AgentState:
        activity = self._switches.current
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
        being processed (or held for a switch), a handoff or hand-back owed or
        running, or the current agent's ``on_enter`` running.

        The one rule of unfinished work: the agent state, the away timer (through the
        state), ``wait_for_idle()``, ``run()`` and the reply schedulers all read it.
        A paused agent's work does not count: it cannot go on until that agent
        resumes (an ``on_enter`` that waits on an inline task, directly or through a
        speech whose tool awaits it, waits for the user).
        """
        switches = self._switches
        if self._turns.in_progress or switches.owed or switches.switching or switches.held:
            return True
        activity = self._switches.current
        return activity is not None and activity.entering and not activity.paused

    def _has_followup_work(self) -> bool:
        """Another speech is committed to follow: one rule, used at every speech end."""
        if self._work_in_progress():
            return True
        activity = self._switches.current
        if activity is not None and activity._queue and not activity._paused:
            return True
        for scheduler in self._schedulers:
            if (scheduler._taking or scheduler._pending) and scheduler.owes_reply():
                return True  # (checked inline: usually nothing is pending)
        return False

    def _owes_reply_for(self, run: object) -> bool:
        """A reply started during ``run`` is still owed (buffered, or a deferred tool
        it started still works)."""
        for scheduler in self._schedulers:
            if scheduler.owes_reply_for(run):
                return True
        runner = self._tool_runner
        return bool(runner.running) and runner.owed_by_run(run)

    def _is_idle(self) -> bool:
        """Nothing is speaking, queued or in progress, and the user is not speaking
        (replies the schedulers buffer are not counted: they wait for this)."""
        activity = self._switches.current
        return (
            self._started
            and not self._closing
            and activity is not None
            and not self._work_in_progress()
            and activity.current_speech is None
            and not activity.queued
            and self._user.state != "speaking"
        )

    def _away_may_arm(self) -> bool:
        activity = self._switches.current
        return (
            self._agent_state == "listening"  # first: it fails fast all through a turn
            and self._user.lets_timer_run()
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
                    transcript = self._transcript
                    emitter = transcript.emitter
                    if "agent_state_changed" in emitter._listeners:
                        # (to the listeners only: a run() does not collect states)
                        emitter.emit(state_changed(old, new))
                    for recorder in transcript.recorders:
                        try:
                            recorder.agent_state_changed(old, new)
                        except Exception:
                            logger.exception("a conversation recorder raised")
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
        deadline: LazyDeadline | None = None,
    ) -> bool:
        """Wait until ``predicate()`` holds (re-checked at every change); False once
        the session is closing (unless ``even_when_closing``) or closed, or after
        ``timeout`` seconds (``deadline``: the timer of waits that never overlap)."""
        return await self._changed.wait_until(
            predicate,
            timeout=timeout,
            stop=(lambda: self._closed) if even_when_closing else self._closing_or_closed,
            deadline=deadline,
        )

    def _closing_or_closed(self) -> bool:
        return self._closing or self._closed

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        """A task of the session's own (cancelled, and waited for, at close)."""
        return self._scope.create_task(coro, name=name)

    # -- history, agents and targets ------------------------------------------------
    # -- agents and switches ---------------------------------------------------------
    def _current_activity(self) -> AgentActivity | None:
        return self._switches.current

    def _target_agent(self) -> Agent:
        return self._switches.target_agent()

    def _is_current(self, activity: object) -> bool:
        return activity is self._switches.current

    def _switching(self) -> bool:
        switches = self._switches
        return bool(switches.switching or switches.owed)

    def _request_handoff(self, old: AgentActivity, agent: Agent) -> None:
        self._switches.request_handoff(old, agent)

    def _owe_handoff(self) -> None:
        self._switches.owe_handoff()

    async def _run_task(self, parent: AgentActivity, task: AgentTask[Any]) -> Any:
        return await self._switches.run_task(parent, task)

    def _generate_scheduled_reply(self, *, instructions: str, source: str) -> SpeechHandle:
        return generate(
            self._require_activity(), instructions=instructions, tool_choice="none", source=source
        )

    async def _follow_switch(self) -> None:
        """Silent inserts made during a switch reach the agent it made current."""
        for scheduler in list(self._schedulers):
            await scheduler.follow_switch()
