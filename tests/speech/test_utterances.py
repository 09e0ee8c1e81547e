"""Where an utterance ends: the voice activity detector's silence, a push-to-talk key
let go (``end_utterance``), or ``max_utterance`` seconds of speech or noise."""

from __future__ import annotations

import math
from typing import Any

from backline.speech import AudioFrame, BatchSTT, EnergyVAD, SpeechInput, split_frames
from backline.testing.clock import VirtualClock

from .conftest import play

RATE = 16000


class Counting(BatchSTT):
    """Says how much audio it was given: "n seconds"."""

    name = "counting"

    def __init__(self) -> None:
        self.lengths: list[float] = []

    def transcribe(self, frame: AudioFrame) -> str:
        self.lengths.append(round(frame.duration, 1))
        return f"heard {len(self.lengths)}"


class Sink:
    agent_state = "listening"

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def user_started_speaking(self, *, interrupt: bool = True) -> None:
        self.calls.append(("started", None))

    def user_stopped_speaking(self) -> None:
        self.calls.append(("stopped", None))

    def push_interim_transcript(self, text: str) -> None:
        pass

    def push_user_turn(self, text: str) -> None:
        self.calls.append(("turn", text))

    def interrupt(self, *, force: bool = False) -> None:
        pass


def tone(seconds: float) -> list[AudioFrame]:
    n = int(seconds * RATE)
    audio = AudioFrame.from_samples(
        [int(6000 * math.sin(2 * math.pi * 220 * i / RATE)) for i in range(n)], RATE
    )
    return list(split_frames(audio, 0.02))


def silence(seconds: float) -> list[AudioFrame]:
    return list(split_frames(AudioFrame.silence(seconds, RATE), 0.02))


async def test_a_long_utterance_is_transcribed_in_bounded_pieces(
    virtual_clock: VirtualClock,
) -> None:
    stt, sink = Counting(), Sink()
    speech = SpeechInput(sink, stt=stt, vad=EnergyVAD(), max_utterance=1.0)
    speech.start()
    try:
        await play(speech.push, silence(0.5) + tone(3.3) + silence(1.0))
        await speech.settled()
    finally:
        await speech.aclose()
    first, *rest = stt.lengths  # the first piece has the audio before the detector's start
    assert first <= 1.6 and rest and all(length <= 1.0 for length in rest), stt.lengths
    assert len(stt.lengths) >= 3
    assert [c for c in sink.calls if c[0] != "turn"] == [("started", None), ("stopped", None)]


async def test_end_utterance_ends_it_at_once_and_the_detector_s_end_is_not_a_second_one(
    virtual_clock: VirtualClock,
) -> None:
    stt, sink = Counting(), Sink()
    speech = SpeechInput(sink, stt=stt, vad=EnergyVAD())
    speech.start()
    try:
        await play(speech.push, silence(0.5) + tone(1.0))
        assert speech.speaking
        speech.end_utterance()  # the key let go while the sound goes on
        assert not speech.speaking
        await speech.settled()
        assert sink.calls == [("started", None), ("stopped", None), ("turn", "heard 1")]
        await play(speech.push, tone(0.3) + silence(1.0))  # then the detector's end
        await play(speech.push, tone(0.6) + silence(1.0))  # and a new utterance
        await speech.settled()
    finally:
        await speech.aclose()
    assert sink.calls[3:] == [("started", None), ("stopped", None), ("turn", "heard 2")]
