"""A model that speaks itself (``AudioDelta``, issue 29): its audio plays as it comes,
nothing is synthesized, the history keeps its transcript, an interrupted reply keeps
what was heard, a text front end shows the transcript, and ``llm_metrics`` has the
time to first audio."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Any

from backline import Agent, InMemoryTextOutput, Session
from backline.llm import (
    AudioDelta,
    ChatChunk,
    ChatContext,
    FunctionTool,
    LLMStream,
    ToolChoice,
    Usage,
)
from backline.speech import AudioFrame, ClockSink, SpeechOutput
from backline.testing.clock import VirtualClock

RATE = 24000
PIECES = ("It is sunny ", "in Oslo today, ", "and the wind ", "is light from the west.")
SECONDS = 1.0  # of audio per piece


class NoSynthesis:
    """A TTS engine the test fails if it is ever used."""

    name = "none"
    sample_rate = RATE

    def synthesize(self, text: str) -> AsyncIterator[AudioFrame]:
        raise AssertionError(f"synthesized {text!r}: the model speaks itself")


class SpeakingModel:
    """Speaks ``PIECES``: each one a second of audio, then its transcript, 50 ms apart."""

    model = "speaking"

    def __init__(self) -> None:
        self.requests = 0

    def chat(
        self,
        chat_ctx: ChatContext,
        *,
        tools: Sequence[FunctionTool] = (),
        tool_choice: ToolChoice | None = None,
    ) -> LLMStream:
        self.requests += 1
        return LLMStream(self._speak())

    async def _speak(self) -> AsyncGenerator[ChatChunk, None]:
        for piece in PIECES:
            await asyncio.sleep(0.05)
            yield AudioDelta(bytes(2 * int(RATE * SECONDS)), RATE)
            yield AudioDelta(b"", RATE, piece)
        yield Usage(input_tokens=10, output_tokens=20)


class Voiced:
    def __init__(self, **session: Any) -> None:
        self.played: list[AudioFrame] = []
        self.sink = ClockSink(on_frame=self.played.append)
        self.output = SpeechOutput(NoSynthesis(), self.sink)
        self.session: Session[Any] = Session(
            SpeakingModel(), output=self.output, user_away_timeout=None, **session
        )

    async def __aenter__(self) -> Voiced:
        await self.session.start(Agent("Answer about the weather."))
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.session.aclose()
        await self.output.aclose()

    def said(self) -> list[tuple[str, str, bool]]:
        return [
            (it.role, it.content, it.interrupted)
            for it in self.session.history.items
            if it.type == "message"
        ]


async def test_the_models_audio_plays_and_its_transcript_is_the_reply(
    virtual_clock: VirtualClock,
) -> None:
    metrics: list[Any] = []
    async with Voiced() as v:
        v.session.on("llm_metrics", metrics.append)
        v.session.push_user_turn("weather?")
        assert await v.session.wait_for_idle(timeout=30)
        assert v.said()[1] == ("assistant", "".join(PIECES), False)
        assert sum(f.duration for f in v.played) == len(PIECES) * SECONDS
        assert {f.sample_rate for f in v.played} == {RATE}
    assert len(metrics) == 1
    assert metrics[0].ttfa is not None and 0.04 < metrics[0].ttfa < 0.1
    assert metrics[0].ttft is not None and metrics[0].ttft <= metrics[0].ttfa


async def test_an_interrupted_spoken_reply_keeps_what_was_heard(
    virtual_clock: VirtualClock,
) -> None:
    async with Voiced() as v:
        speaking = asyncio.Event()
        v.session.on(
            "agent_state_changed", lambda ev: speaking.set() if ev.new == "speaking" else None
        )
        v.session.push_user_turn("weather?")
        await asyncio.wait_for(speaking.wait(), 10)
        # All four pieces are queued by 0.2 s; two seconds play, half the reply.
        await asyncio.sleep(2.0)
        v.session.interrupt()
        assert await v.session.wait_for_idle(timeout=30)
        role, heard, interrupted = v.said()[1]
        assert role == "assistant" and interrupted
        full = "".join(PIECES)
        assert full.startswith(heard)
        # Two seconds of four: about half the transcript, cut back to a word.
        assert len(full) * 0.3 < len(heard) <= len(full) * 0.5


async def test_a_text_front_end_shows_the_transcript(virtual_clock: VirtualClock) -> None:
    output = InMemoryTextOutput()
    session: Session[Any] = Session(SpeakingModel(), output=output, user_away_timeout=None)
    await session.start(Agent("Answer."))
    try:
        session.push_user_turn("weather?")
        assert await session.wait_for_idle(timeout=30)
        assert output.transcript == ["".join(PIECES)]
    finally:
        await session.aclose()
