"""A sink's ``mix(frame)`` (issue 30: an alert's sound over the agent's voice): the sound
plays at once, added to what is queued, and delays nothing. ``WavOutput`` on the
virtual clock (what the file holds), ``ClockSink``, and ``Speaker`` over the stand-in
for sounddevice."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest

from backline.speech import AudioFrame, ClockSink, Speaker, WavOutput, read_wav
from backline.testing.clock import VirtualClock

from .test_devices import StandIn, left, stand_in  # noqa: F401 - the fixture

RATE = 16000


def tone(seconds: float, freq: float, loudness: int = 8000, rate: int = RATE) -> AudioFrame:
    n = round(seconds * rate)
    return AudioFrame.from_samples(
        (round(loudness * math.sin(2 * math.pi * freq * i / rate)) for i in range(n)), rate
    )


def added(under: list[int], over: list[int]) -> list[int]:
    return [max(-32768, min(32767, a + b)) for a, b in zip(under, over, strict=True)]


async def test_the_file_holds_the_sound_added_to_the_voice_and_nothing_is_delayed(
    virtual_clock: VirtualClock, tmp_path: Path
) -> None:
    voice, cue = tone(1.0, 300.0), tone(0.2, 1000.0, loudness=30000)
    out = WavOutput(tmp_path / "out.wav")
    out.write(voice)
    await asyncio.sleep(0.3)
    out.mix(cue)  # plays from 0.3 s, over the voice
    assert out.played == pytest.approx(0.3)  # the voice's own accounting is unchanged
    await asyncio.sleep(0.6)
    out.mix(cue)  # from 0.9 s: it outlasts the voice by 0.1 s
    await out.drained()
    await out.aclose()
    heard = list(read_wav(tmp_path / "out.wav").samples())
    v, c = list(voice.samples()), list(cue.samples())
    at = [round(s * RATE) for s in (0.3, 0.5, 0.9)]
    assert len(heard) == round(1.1 * RATE)
    assert heard[: at[0]] == v[: at[0]]
    assert heard[at[0] : at[1]] == added(v[at[0] : at[1]], c)  # clipped where loud
    assert heard[at[1] : at[2]] == v[at[1] : at[2]]
    assert heard[at[2] : RATE] == added(v[at[2] :], c[: RATE - at[2]])
    assert heard[RATE:] == c[RATE - at[2] :]


async def test_a_clock_sink_plays_a_mixed_sound_without_counting_it(
    virtual_clock: VirtualClock,
) -> None:
    mixed: list[AudioFrame] = []
    sink = ClockSink(on_mix=mixed.append)
    sink.write(tone(0.5, 300.0))
    cue = tone(1.0, 1000.0)
    sink.mix(cue)
    assert mixed == [cue]
    await asyncio.sleep(0.6)
    assert sink.played == pytest.approx(0.5)  # what was written, all of it played
    start = asyncio.get_running_loop().time()
    await sink.drained()  # the sound plays to its end
    assert asyncio.get_running_loop().time() - start == pytest.approx(0.4)


async def test_the_speaker_mixes_the_sound_into_what_plays_next(
    stand_in: StandIn,  # noqa: F811 - the fixture
) -> None:
    voice, cue = tone(0.5, 300.0, rate=48000), tone(0.1, 1000.0, rate=48000)
    async with Speaker(sample_rate=48000) as speaker:
        stream = stand_in.streams[0]
        speaker.write(voice)
        first = await asyncio.to_thread(stream.play, 4800)  # 0.1 s plays
        speaker.mix(cue)  # over the next 0.1 s
        assert speaker.queued == pytest.approx(0.4)  # nothing delayed
        second = await asyncio.to_thread(stream.play, 4800)
        third = await asyncio.to_thread(stream.play, 4800)
    v, c = list(voice.samples()), list(cue.samples())
    assert list(AudioFrame(left(first), 48000).samples()) == v[:4800]
    assert list(AudioFrame(left(second), 48000).samples()) == added(v[4800:9600], c)
    assert list(AudioFrame(left(third), 48000).samples()) == v[9600:14400]
