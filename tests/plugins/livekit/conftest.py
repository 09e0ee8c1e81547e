"""The LiveKit harness: a backline Session bridged into a LiveKit AgentSession, offline.

Text mode is LiveKit's own test setup: an ``AgentSession`` with no room and no
audio, driven by ``AgentSession.run(user_input=...)``. The audio path uses the
fake STT/TTS/VAD in ``fakes.py``. Everything runs on the real clock (LiveKit
times its pipeline with ``time.time``); waits are on events, bounded.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from backline_livekit import LiveKitBridge
from livekit.agents import AgentSession

from backline import Agent, BackgroundDefinition, Session
from backline.llm.llm import LLM

WAIT = 10.0  # bounds a hang; the tests take milliseconds


@dataclass
class Bridged:
    session: Session[Any]
    bridge: LiveKitBridge
    lk: AgentSession[Any]
    lk_speeches: list[Any] = field(default_factory=list)
    lk_agent_states: list[str] = field(default_factory=list)
    lk_user_states: list[str] = field(default_factory=list)

    def lk_messages(self, role: str = "assistant") -> list[tuple[str, bool]]:
        """LiveKit's history: (text, interrupted) of each message with ``role``."""
        return [
            (it.text_content or "", it.interrupted)
            for it in self.lk.history.items
            if it.type == "message" and it.role == role
        ]

    def messages(self, role: str = "assistant") -> list[tuple[str, bool]]:
        """backline's history: (text, interrupted) of each message with ``role``."""
        return [
            (str(it.content), it.interrupted)
            for it in self.session.history.items
            if it.type == "message" and it.role == role
        ]

    def output_so_far(self) -> str:
        """The words of the segment backline is writing now."""
        return self.bridge.output.segment_text

    async def idle(self) -> None:
        assert await self.session.wait_for_idle(timeout=WAIT)
        await asyncio.wait_for(_lk_idle(self.lk), WAIT)


async def _lk_idle(lk: AgentSession[Any]) -> None:
    while lk.current_speech is not None:
        await lk.current_speech.wait_for_playout()


def said(expect: Any) -> str:
    """LiveKit's ``expect``: the next event is an assistant message; its text."""
    event = expect.next_event().is_message(role="assistant").event()
    return str(event.item.text_content)


async def wait_until(predicate: Any, what: str, timeout: float = WAIT) -> None:
    """Poll a condition LiveKit gives no event for (bounded)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


@asynccontextmanager
async def bridged(
    llm: LLM,
    agent: Agent,
    *,
    background: Iterable[BackgroundDefinition] = (),
    user_away_timeout: float | None = None,
    audio_input: Any = None,
    audio_output: Any = None,
    **lk_options: Any,
) -> AsyncIterator[Bridged]:
    """A started bridge (text mode unless ``lk_options`` give audio: a microphone hearing
    silence, or ``audio_input``, and a real-time speaker, or ``audio_output``); closed
    after, and then nothing may be left running."""
    before = set(asyncio.all_tasks())
    closers: list[Any] = []
    session: Session[Any] = Session(
        llm, background=list(background) or None, user_away_timeout=user_away_timeout
    )
    bridge = LiveKitBridge(session)
    lk_options.setdefault("vad", None)
    lk_options.setdefault("turn_handling", {"turn_detection": None})
    lk = bridge.agent_session(**lk_options)
    if lk_options.get("tts") is not None:  # the audio path: a microphone and a speaker
        from livekit.agents.voice.transcription import TranscriptSynchronizer

        from .fakes import FakeAudioInput, FakeAudioOutput

        sync = TranscriptSynchronizer(
            next_in_chain_audio=audio_output or FakeAudioOutput(), next_in_chain_text=None
        )
        closers.append(sync)
        lk.input.audio = audio_input or FakeAudioInput()
        lk.output.audio = sync.audio_output
        lk.output.transcription = sync.text_output
    b = Bridged(session, bridge, lk)
    lk.on("speech_created", lambda ev: b.lk_speeches.append(ev.speech_handle))
    lk.on("agent_state_changed", lambda ev: b.lk_agent_states.append(ev.new_state))
    lk.on("user_state_changed", lambda ev: b.lk_user_states.append(ev.new_state))
    try:
        await bridge.start(lk, agent)
        yield b
    finally:
        await asyncio.wait_for(bridge.aclose(), WAIT)
        for closer in closers:
            await asyncio.wait_for(closer.aclose(), WAIT)
        await assert_nothing_left(before)


async def assert_nothing_left(before: set[asyncio.Task[Any]]) -> None:
    for _ in range(20):
        await asyncio.sleep(0)
    me = asyncio.current_task()
    alive = [t for t in asyncio.all_tasks() if t not in before and t is not me and not t.done()]
    assert not alive, f"tasks left running: {[t.get_name() for t in alive]}"


@pytest.fixture
async def loop_errors() -> AsyncIterator[list[dict[str, Any]]]:
    """What reached the event loop's exception handler during the test (must stay empty)."""
    loop = asyncio.get_running_loop()
    # Garbage of earlier tests first: HTTP clients left unclosed (an AnthropicLLM's, in
    # other test modules) close in __del__ with a task on whatever loop runs then, which
    # fails ("Event loop is closed"). Collect them, let those tasks run and be collected,
    # under the previous handler, before this test's own record starts.
    gc.collect()
    for _ in range(5):
        await asyncio.sleep(0)
    gc.collect()
    seen: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: seen.append(context))
    yield seen
    loop.set_exception_handler(previous)
    assert not seen, f"reached the loop's exception handler: {seen}"
