"""A microphone that stops mid-conversation: ``backline voice`` says so once and the
conversation goes on (typing still works)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from backline_local_speech.espeak import EspeakTTS
from backline_local_speech.sphinx import PocketsphinxSTT

from backline import Agent, Session
from backline.io.voice import TerminalVoice
from backline.speech import AudioFrame, ClockSink, DeviceError, EnergyVAD, InMemoryTextOutput
from backline.testing import ScriptedLLM, text
from backline.testing.clock import VirtualClock


class Unplugged:
    """Three frames of silence, then the device is gone."""

    async def start(self) -> None:
        pass

    async def aclose(self) -> None:
        pass

    async def __aiter__(self) -> AsyncIterator[AudioFrame]:
        for _ in range(3):
            yield AudioFrame.silence(0.02, 16000)
        raise DeviceError("the microphone stopped delivering audio (unplugged?)")


async def test_a_microphone_that_stops_is_said_once_and_typing_goes_on(
    virtual_clock: VirtualClock,
) -> None:
    session: Session[Any] = Session(
        ScriptedLLM([text("Still here.")]), output=InMemoryTextOutput(), user_away_timeout=None
    )
    voice = TerminalVoice(
        session,
        stt=PocketsphinxSTT(),
        tts=EspeakTTS(),
        vad=EnergyVAD(),
        source=Unplugged(),
        sink=ClockSink(),
        ends=True,
    )
    lines: list[str] = []
    async with session:
        await session.start(Agent("Answer briefly."))
        await voice.start(lines.append)
        await voice.finished(10.0)
        result = await session.run(user_input="are you there?")  # typed
        await voice.aclose()
    assert voice.frames == 3
    assert lines == [
        "[voice] the microphone stopped (the microphone stopped delivering audio "
        "(unplugged?)); you can still type\n"
    ]
    assert result.final_output == "Still here."
