"""The voice pipeline with real engines (issue 27): spoken words become a user turn,
the reply is spoken sentence by sentence, barge-in needs enough speech, and an
interrupted reply keeps only what was heard."""

from __future__ import annotations

import asyncio
from typing import Any

from backline_local_speech.espeak import EspeakTTS
from backline_local_speech.sphinx import PocketsphinxSTT

from backline import Agent, Session
from backline.speech import AudioFrame, ClockSink, EnergyVAD, SpeechInput, SpeechOutput
from backline.testing import ScriptedLLM, text
from backline.testing.clock import VirtualClock

from .conftest import microphone, play, speak

LONG_REPLY = (
    "It is sunny in Oslo today. The wind is light from the west. "
    "Tomorrow brings rain in the morning and clouds after noon. "
    "The weekend looks dry and a little warmer than this week."
)


class Voice:
    """A session with a speaking output, and the audio it played."""

    def __init__(self, llm: ScriptedLLM, **session: Any) -> None:
        self.played: list[AudioFrame] = []
        self.sink = ClockSink(on_frame=self.played.append)
        self.output = SpeechOutput(EspeakTTS(), self.sink)
        self.session: Session[Any] = Session(
            llm, output=self.output, user_away_timeout=None, **session
        )
        self.input = SpeechInput(self.session, stt=PocketsphinxSTT(), vad=EnergyVAD())

    async def __aenter__(self) -> Voice:
        await self.session.start(Agent("Answer about the weather."))
        self.input.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.input.aclose()
        await self.session.aclose()
        await self.output.aclose()

    async def speaking(self) -> None:
        """Until the agent speaks."""
        started = asyncio.Event()

        def on_state(ev: Any) -> None:
            if ev.new == "speaking":
                started.set()

        self.session.on("agent_state_changed", on_state)
        try:
            await asyncio.wait_for(started.wait(), 30)
        finally:
            self.session.off("agent_state_changed", on_state)

    def said(self) -> list[tuple[str, str, bool]]:
        return [
            (it.role, it.content, it.interrupted)
            for it in self.session.history.items
            if it.type == "message"
        ]


async def test_spoken_words_become_a_turn_and_the_reply_is_spoken(
    virtual_clock: VirtualClock,
) -> None:
    question = await speak("what is the weather")
    llm = ScriptedLLM([text("It is sunny in Oslo today. The wind is light.")])
    async with Voice(llm) as v:
        await play(v.input.push, microphone(0.5, question, 1.0))
        assert await v.session.wait_for_idle(timeout=30)
        assert v.said() == [
            ("user", "what is the weather", False),
            ("assistant", "It is sunny in Oslo today. The wind is light.", False),
        ]
        played = sum(f.duration for f in v.played)
        assert played > 1.5  # two sentences of eSpeak audio
        assert llm.requests[0].last_message is not None


async def test_talking_over_the_agent_interrupts_it_and_it_keeps_what_was_heard(
    virtual_clock: VirtualClock,
) -> None:
    question = await speak("how are you")
    llm = ScriptedLLM([text(LONG_REPLY), text("I am fine.")])
    async with Voice(llm) as v:
        v.session.push_user_turn("tell me the weather")
        await v.speaking()
        await asyncio.sleep(2.0)  # the first sentence plays
        await play(v.input.push, microphone(question, 1.0))
        assert await v.session.wait_for_idle(timeout=30)
        said = v.said()
        assert said[0] == ("user", "tell me the weather", False)
        role, heard, interrupted = said[1]
        assert role == "assistant" and interrupted
        assert heard and LONG_REPLY.startswith(heard) and len(heard) < len(LONG_REPLY)
        assert said[2:] == [("user", "how are you", False), ("assistant", "I am fine.", False)]


async def test_a_cough_does_not_cut_the_agent_off(virtual_clock: VirtualClock) -> None:
    cough = AudioFrame.from_samples(
        [(9000 if (i // 7) % 2 else -9000) for i in range(int(0.15 * 16000))], 16000
    )
    llm = ScriptedLLM([text(LONG_REPLY)])
    async with Voice(llm) as v:
        v.session.push_user_turn("tell me the weather")
        await v.speaking()
        await play(v.input.push, microphone(cough, 0.5))
        assert await v.session.wait_for_idle(timeout=60)
        assert v.said()[1] == ("assistant", LONG_REPLY, False)
        assert v.input.turns == 0
