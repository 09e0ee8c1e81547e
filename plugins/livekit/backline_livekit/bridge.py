"""LiveKitBridge: one backline ``Session`` (the brain) in one LiveKit ``AgentSession`` (the body).

LiveKit does audio in and out: VAD, STT, turn detection, TTS, barge-in, echo
cancellation in its console, rooms and telephony. backline does everything
else: agents, tools, handoffs, background sessions, the reply scheduler, the
owed-reply and user-away rules. The bridge maps one onto the other:

- a user turn LiveKit recognises -> ``Session.push_user_turn`` (through the
  agent's ``llm_node``, see ``_agent.py``);
- each backline output segment -> one LiveKit speech, its playout reported back
  (see ``_output.py``), so an interrupted reply keeps what the user heard;
- LiveKit cutting a speech (barge-in) -> ``Session.interrupt()``; backline
  interrupting -> the LiveKit speech is interrupted;
- user speaking/listening (LiveKit's VAD) -> backline's user state; backline's
  thinking/listening and user-away -> LiveKit's states (see ``_state.py``).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import deque
from typing import Any

from livekit.agents import AgentSession
from livekit.agents.voice import SpeechHandle as LKSpeechHandle
from livekit.agents.voice.events import (
    CloseEvent,
    SpeechCreatedEvent,
    UserStateChangedEvent,
)
from livekit.agents.voice.events import ErrorEvent as LKErrorEvent

from backline import Agent, ErrorEvent, Session, SpeechHandle
from backline.tasks import TaskScope
from backline.voice.events import AgentStateChanged, SpeechCreated, UserStateChanged

from . import _state
from ._agent import BacklineAgent, NoLLM, TurnSlot
from ._output import LiveKitOutput, Segment

logger = logging.getLogger("backline.livekit")

DEFAULT_CLOSE_TIMEOUT = 10.0
"""Seconds a LiveKit front end (``backline-livekit``) waits for LiveKit's own session
to close, after the backline session has closed (itself bounded); past it the close
goes on and a warning is logged."""

ENV_CLOSE_TIMEOUT = "BACKLINE_LIVEKIT_CLOSE_TIMEOUT"
"""Sets the close timeout of bridges built without ``close_timeout=``."""

# backline's agent state -> the state LiveKit shows while no audio plays. Words on
# their way to the TTS are still "thinking" for a listener; LiveKit itself switches
# to "speaking" at the first audio frame.
_LK_STATE: dict[str, _state.AgentState] = {
    "listening": "listening",
    "thinking": "thinking",
    "speaking": "thinking",
}


class LiveKitBridge:
    """Links a backline ``Session`` to a LiveKit ``AgentSession``.

    ```python no-run
    bridge = LiveKitBridge(session)  # installs its output on the session
    lk_session = bridge.agent_session(stt="deepgram/nova-3", tts="cartesia/sonic-3")
    await bridge.start(lk_session, agent, room=ctx.room)
    ...
    await bridge.aclose()  # closes both, bounded
    ```

    Build the ``AgentSession`` with ``agent_session`` (or pass
    ``session_options()`` to it): LiveKit needs a stand-in LLM to ask for
    replies, must not start replies before the turn ends (no preemptive
    generation), and leaves the user-away rule to backline.

    ``close_timeout`` bounds the wait for LiveKit's session to close
    (``DEFAULT_CLOSE_TIMEOUT``); without it, ``BACKLINE_LIVEKIT_CLOSE_TIMEOUT`` or the
    default applies.
    """

    def __init__(self, session: Session[Any], *, close_timeout: float | None = None) -> None:
        self.session = session
        self.close_timeout = _close_timeout(close_timeout)
        """Seconds ``aclose`` waits for LiveKit's session to close (``DEFAULT_CLOSE_TIMEOUT``)."""
        self.output = LiveKitOutput(
            speak=self._speak,
            allow_interruptions=self._allows_interruptions,
            interrupted_by_livekit=self._interrupted_by_livekit,
            failed=self._speech_failed,
        )
        session.output = self.output
        self.agent = BacklineAgent(self._user_turn)
        """The LiveKit agent to start the ``AgentSession`` with."""
        self.lk: AgentSession[Any] | None = None
        self._speeches: dict[str, SpeechHandle] = {}
        self._replies: deque[LKSpeechHandle] = deque()
        self._slot: TurnSlot | None = None
        self._gate: _state.AgentStateGate | None = None
        self._audio_ended = False  # LiveKit's audio stopped; backline's speech not yet
        # The bridge's close, shared by whoever asks for it (aclose(), LiveKit's session
        # ending); they await it and read how it ended.
        self._scope = TaskScope("livekit bridge", log_failures=False)
        self._close_task: asyncio.Task[None] | None = None
        self._close_started = asyncio.Event()
        session.on("speech_created", self._on_speech_created)
        session.on("agent_state_changed", self._on_backline_agent_state)
        session.on("user_state_changed", self._on_backline_user_state)

    # -- building and running -------------------------------------------------------------
    @staticmethod
    def session_options(**overrides: Any) -> dict[str, Any]:
        """``AgentSession`` keyword arguments the bridge needs, merged into ``overrides``."""
        options = dict(overrides)
        options["llm"] = NoLLM()
        options["user_away_timeout"] = None  # backline's away rule (holds, backgrounds) applies
        turn = dict(options.get("turn_handling") or {})
        turn["preemptive_generation"] = {"enabled": False}  # a turn is handed over once, final
        options["turn_handling"] = turn
        return options

    def agent_session(self, **options: Any) -> AgentSession[Any]:
        """A LiveKit ``AgentSession`` for this bridge (``stt``, ``tts``, ``vad``, ...)."""
        return AgentSession(**self.session_options(**options))

    async def start(self, lk_session: AgentSession[Any], agent: Agent, **start: Any) -> None:
        """Start LiveKit (``start`` goes to ``AgentSession.start``: ``room=`` ...), then
        the backline session with ``agent``. On failure both are closed."""
        if self.lk is not None:
            raise RuntimeError("the bridge has already started")
        self.lk = lk_session
        self._gate = _state.AgentStateGate(lk_session, self._livekit_agent_state)
        lk_session.on("speech_created", self._on_lk_speech_created)
        lk_session.on("user_state_changed", self._on_lk_user_state)
        lk_session.on("error", self._on_lk_error)
        lk_session.on("close", self._on_lk_close)
        try:
            await lk_session.start(self.agent, **start)
            await self.session.start(agent)
        except BaseException:
            await self.aclose()
            raise
        self._sync_agent_state()

    @property
    def closed(self) -> bool:
        return self._close_task is not None and self._close_task.done()

    async def aclose(self, *, drain: bool = False) -> None:
        """Close the backline session (with ``drain``, its current speech may finish
        first), then LiveKit's. Idempotent and bounded. A cancelled ``aclose()`` stops
        waiting; the close goes on (bounded: the session's close, then ``close_timeout``)."""
        self._start_closing(drain)
        assert self._close_task is not None
        await asyncio.shield(self._close_task)
        await self._scope.aclose()  # the close is done: nothing of the bridge is left

    def _start_closing(self, drain: bool) -> None:
        if self._close_task is None:
            self._close_task = self._scope.create_task(
                self._aclose(drain), name="livekit bridge close"
            )
            self._close_started.set()

    async def wait_closed(self) -> None:
        """Wait until the bridge has closed (for instance because LiveKit's session ended)."""
        await self._close_started.wait()
        assert self._close_task is not None
        await asyncio.shield(self._close_task)

    async def _aclose(self, drain: bool) -> None:
        try:
            await self.session.aclose(drain=drain)
        finally:
            if self._slot is not None:
                self._slot.give(None)
                self._slot = None
            if self._gate is not None:
                self._gate.remove()  # closing: LiveKit's own states again
            lk = self.lk
            if lk is not None:
                try:
                    await asyncio.wait_for(lk.aclose(), self.close_timeout)
                except TimeoutError:
                    logger.warning(
                        "livekit: the LiveKit session did not close within %gs",
                        self.close_timeout,
                    )

    # -- user turns (LiveKit -> backline) ---------------------------------------------------
    def _on_lk_speech_created(self, ev: SpeechCreatedEvent) -> None:
        if ev.source == "generate_reply":  # a reply LiveKit starts; its llm_node claims it
            self._replies.append(ev.speech_handle)

    def _claim_reply(self) -> LKSpeechHandle | None:
        while self._replies:
            handle = self._replies.popleft()
            if not handle.done():
                return handle
        return None

    def _user_turn(self, text: str) -> TurnSlot | None:
        reply = self._claim_reply()
        if self.session.closed or self._close_task is not None:
            return None
        slot = TurnSlot(reply) if reply is not None else None
        if self._slot is not None:
            self._slot.give(None)
        self._slot = slot
        try:
            self.session.push_user_turn(text)
        except RuntimeError as e:  # not started yet, or closing
            logger.warning("livekit: a user turn was not taken (%s)", e)
            self._slot = None
            return None
        return slot

    # -- speech (backline -> LiveKit) -------------------------------------------------------
    def _on_speech_created(self, ev: SpeechCreated) -> None:
        self._speeches = {k: h for k, h in self._speeches.items() if not h.done()}
        self._speeches[ev.speech.id] = ev.speech

    def _allows_interruptions(self, speech_id: str) -> bool:
        speech = self._speeches.get(speech_id)
        return True if speech is None else speech.allow_interruptions

    def _speak(self, segment: Segment) -> None:
        lk = self.lk
        if lk is None:
            raise RuntimeError("the bridge has not started")
        slot, self._slot = self._slot, None
        if slot is not None and slot.open and not slot.handle.done():
            segment.handle = slot.handle
            if not segment.allow_interruptions:
                slot.handle.allow_interruptions = False
            slot.give(segment)
            return
        if slot is not None:
            slot.give(None)
        segment.handle = lk.say(
            segment.texts(),
            allow_interruptions=segment.allow_interruptions,
            add_to_chat_ctx=True,
        )

    def _interrupted_by_livekit(self) -> None:
        self.session.interrupt()  # barge-in: respects allow_interruptions, like LiveKit did

    def _speech_failed(self, error: BaseException) -> None:
        logger.error("livekit: a speech failed (its words stay in the history): %s", error)
        self.session.emit(ErrorEvent(error=error, recoverable=True, source="livekit"))

    def _on_lk_error(self, ev: LKErrorEvent) -> None:
        error = ev.error if isinstance(ev.error, BaseException) else RuntimeError(str(ev.error))
        recoverable = bool(getattr(ev.error, "recoverable", True))
        self.session.emit(ErrorEvent(error=error, recoverable=recoverable, source="livekit"))

    def _on_lk_close(self, ev: CloseEvent) -> None:
        # LiveKit's session ended (the room closed, the participant left): close backline's
        # too. The task is the bridge's close task, awaited by aclose() / wait_closed().
        self._start_closing(False)

    # -- states ----------------------------------------------------------------------------
    def _on_backline_agent_state(self, ev: AgentStateChanged) -> None:
        if ev.new == "listening" and self._slot is not None:
            self._slot.give(None)  # the turn settled without a word for LiveKit's reply
            self._slot = None
        self._sync_agent_state()

    def _livekit_agent_state(self, proposed: _state.AgentState) -> _state.AgentState | None:
        """What LiveKit shows when it sets its agent state on its own: its *speaking*
        (audio plays), else backline's state. When LiveKit's audio ends before backline
        has heard that its speech ended (a moment later, when the playout is reported),
        LiveKit stays *speaking* until backline settles, and then changes once."""
        if proposed == "speaking":
            self._audio_ended = False
        if proposed not in ("listening", "thinking") or self._close_task is not None:
            return proposed
        lk, backline = self.lk, self.session.agent_state
        if backline == "speaking" and lk is not None and lk.agent_state == "speaking":
            self._audio_ended = True
            return None
        return _LK_STATE.get(backline, proposed)

    def _sync_agent_state(self) -> None:
        """LiveKit shows backline's thinking/listening whenever no audio plays."""
        lk, gate = self.lk, self._gate
        if lk is None or gate is None or self._close_task is not None:
            return
        want = _LK_STATE.get(self.session.agent_state)
        have = lk.agent_state
        if want is None or want == have:
            return
        if have == "speaking" and not self._audio_ended:
            return  # LiveKit's audio plays: its "speaking" stands
        if have not in ("listening", "thinking", "speaking"):
            return  # initializing: LiveKit's own start
        self._audio_ended = False
        gate.set(want)

    def _on_lk_user_state(self, ev: UserStateChangedEvent) -> None:
        if ev.new_state == "speaking":
            self.session.user_started_speaking(interrupt=False)  # LiveKit decides barge-in
        elif ev.new_state == "listening" and self.session.user_state == "speaking":
            self.session.user_stopped_speaking()

    def _on_backline_user_state(self, ev: UserStateChanged) -> None:
        lk = self.lk
        if lk is None or self._close_task is not None:
            return
        if ev.new == "away" and lk.user_state == "listening":
            _state.set_user_state(lk, "away")
        elif ev.old == "away" and lk.user_state == "away":
            _state.set_user_state(lk, "listening")


def _close_timeout(value: float | None) -> float:
    """``value``, else ``BACKLINE_LIVEKIT_CLOSE_TIMEOUT``, else the default; positive."""
    where = "close_timeout"
    if value is None:
        text = os.environ.get(ENV_CLOSE_TIMEOUT, "").strip()
        if not text:
            return DEFAULT_CLOSE_TIMEOUT
        where = ENV_CLOSE_TIMEOUT
        try:
            value = float(text)
        except ValueError:
            raise ValueError(
                f"{ENV_CLOSE_TIMEOUT} must be a positive number of seconds, got {text!r}"
            ) from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{where} must be a positive number of seconds, got {value!r}")
    return float(value)
