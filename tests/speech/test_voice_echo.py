"""Open speakers (issue 28): the agent's own voice comes back into the microphone. With
echo cancellation it does not interrupt itself; without it, it does (the control).

A room on the virtual clock: the microphone hears the user's recording (silence here)
plus what the speaker plays, ``DELAY`` later at ``GAIN``: the real loop between the
speaker and the microphone, fed by what ``WavOutput`` reports as played."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from backline_local_speech.espeak import EspeakTTS
from backline_local_speech.sphinx import PocketsphinxSTT

from backline import Agent, Session
from backline.io.voice import TerminalVoice
from backline.speech import (
    AudioFrame,
    EchoCanceller,
    EnergyVAD,
    SpeechOutput,
    WavInput,
    WavOutput,
    echo_canceller,
    echo_unavailable,
    write_wav,
)
from backline.testing import ScriptedLLM, text
from backline.testing.clock import VirtualClock

RATE = 16000
DELAY = 0.08  # seconds from the speaker to the microphone
GAIN = 0.5  # how loud the speaker arrives at the microphone
REPLY = (
    "It is sunny in Oslo today. The wind is light from the west. "
    "Tomorrow brings rain in the morning and clouds after noon."
)


class Room:
    """An ``AudioSource``: the user's recording, with the speaker's sound mixed in."""

    def __init__(self, user: WavInput) -> None:
        self._user = user
        self._far = bytearray(int(DELAY * RATE) * 2)  # the delay, as silence first

    def played(self, frame: AudioFrame) -> None:
        self._far += frame.to_mono().resample(RATE).data

    async def start(self) -> None:
        await self._user.start()

    async def aclose(self) -> None:
        await self._user.aclose()

    async def __aiter__(self) -> AsyncIterator[AudioFrame]:
        async for frame in self._user:
            n = len(frame.data)
            far, self._far = bytes(self._far[:n]).ljust(n, b"\0"), self._far[n:]
            echo = AudioFrame(far, RATE).samples()
            mixed = [u + round(e * GAIN) for u, e in zip(frame.samples(), echo, strict=True)]
            yield AudioFrame.from_samples(mixed, RATE)


async def converse(tmp_path: Path, echo: EchoCanceller | None) -> tuple[Any, Session[Any]]:
    """The agent answers at length while the room echoes it; returns its reply."""
    write_wav(tmp_path / "silence.wav", [AudioFrame.silence(15.0, RATE)])
    room = Room(WavInput(tmp_path / "silence.wav", then_silence=0.0))

    def played(frame: AudioFrame) -> None:
        room.played(frame)
        if echo is not None:
            echo.far_end(frame)

    sink = WavOutput(tmp_path / "out.wav", on_played=played)
    tts = EspeakTTS()
    output = SpeechOutput(tts, sink)
    session: Session[Any] = Session(
        ScriptedLLM([text(REPLY), text("Sorry?")]), output=output, user_away_timeout=None
    )
    voice = TerminalVoice(
        session,
        stt=PocketsphinxSTT(),
        tts=tts,
        vad=EnergyVAD(),
        source=room,
        sink=sink,
        echo=echo,
        ends=True,
    )
    async with session:
        await session.start(Agent("Answer about the weather."))
        sink.start()
        await voice.start(lambda line: None)
        session.push_user_turn("tell me the weather")
        await voice.finished(60.0)
        assert await session.wait_for_idle(timeout=60)
        await voice.aclose()
    await output.aclose()
    await sink.aclose()
    (reply, *_) = [
        it for it in session.history.items if it.type == "message" and it.role == "assistant"
    ]
    return reply, session


async def test_with_echo_cancellation_the_agent_does_not_interrupt_itself(
    virtual_clock: VirtualClock, tmp_path: Path
) -> None:
    if echo_unavailable() is not None:
        pytest.skip(f"no echo canceller here: {echo_unavailable()}")
    reply, _ = await converse(tmp_path, echo_canceller(sample_rate=RATE))
    assert (reply.content, reply.interrupted) == (REPLY, False)


async def test_without_it_the_echo_interrupts_the_agent(
    virtual_clock: VirtualClock, tmp_path: Path
) -> None:
    reply, _ = await converse(tmp_path, None)
    assert reply.interrupted and REPLY.startswith(str(reply.content))
    assert len(str(reply.content)) < len(REPLY)
