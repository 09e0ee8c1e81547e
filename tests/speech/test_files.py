"""Audio from and to WAV files (issue 28): ``WavInput`` plays a recording as the
microphone on the loop's clock; ``WavOutput`` writes exactly what played, on the
conversation's timeline."""

from __future__ import annotations

import asyncio
import math
import wave
from pathlib import Path

import pytest

from backline.speech import AudioFrame, AudioSink, AudioSource, WavInput, WavOutput, write_wav
from backline.testing.clock import VirtualClock

RATE = 16000


def tone(seconds: float, freq: float, rate: int = RATE, amplitude: int = 8000) -> AudioFrame:
    n = round(seconds * rate)
    return AudioFrame.from_samples(
        (round(amplitude * math.sin(2 * math.pi * freq * i / rate)) for i in range(n)), rate
    )


def read(path: Path) -> tuple[bytes, int, int]:
    with wave.open(str(path), "rb") as f:
        return f.readframes(f.getnframes()), f.getframerate(), f.getnchannels()


def samples(seconds: float) -> int:
    return round(seconds * RATE) * 2  # bytes


# -- WavInput -------------------------------------------------------------------------------------
async def test_a_recording_plays_as_the_microphone_on_the_loop_clock(
    tmp_path: Path, virtual_clock: VirtualClock
) -> None:
    recording = tone(0.5, 440, rate=22050)
    stereo = AudioFrame(
        b"".join(recording.data[i : i + 2] * 2 for i in range(0, len(recording.data), 2)),
        22050,
        2,
    )
    write_wav(tmp_path / "in.wav", [stereo])
    source = WavInput(tmp_path / "in.wav", sample_rate=RATE, frame_seconds=0.02, then_silence=0.1)
    assert isinstance(source, AudioSource)
    arrivals: list[tuple[float, AudioFrame]] = []
    async with source:
        start = virtual_clock.now()
        async for frame in source:
            arrivals.append((virtual_clock.now() - start, frame))
    assert source.duration == pytest.approx(0.5, abs=1e-3)
    assert len(arrivals) == 30  # 0.5 s of recording and 0.1 s of silence, 20 ms each
    for i, (at, frame) in enumerate(arrivals):
        # A frame arrives when a microphone would deliver it: once it is recorded.
        assert at == pytest.approx(0.02 * (i + 1), abs=1e-6)
        assert (frame.sample_rate, frame.channels) == (RATE, 1)
        assert frame.duration == pytest.approx(0.02)
    audio = AudioFrame(b"".join(f.data for _, f in arrivals[:25]), RATE)
    assert audio.rms() == pytest.approx(recording.rms(), rel=0.02)  # the tone, resampled
    assert all(not f.data.strip(b"\0") for _, f in arrivals[25:])  # then silence


async def test_a_late_reader_gets_the_frames_it_missed_at_once_and_none_is_lost(
    tmp_path: Path, virtual_clock: VirtualClock
) -> None:
    write_wav(tmp_path / "in.wav", [tone(0.2, 300)])
    arrivals: list[float] = []
    async with WavInput(tmp_path / "in.wav", then_silence=0) as source:
        start = virtual_clock.now()
        async for _ in source:
            arrivals.append(round(virtual_clock.now() - start, 6))
            if len(arrivals) == 2:
                await asyncio.sleep(0.1)  # the reader is busy for 5 frames' time
    assert len(arrivals) == 10
    assert arrivals[:2] == [0.02, 0.04]
    assert arrivals[2:7] == [0.14] * 5  # the frames due meanwhile come at once
    assert arrivals[7:] == [0.16, 0.18, 0.2]  # then the pace again


async def test_not_realtime_gives_every_frame_without_waiting(
    tmp_path: Path, virtual_clock: VirtualClock
) -> None:
    write_wav(tmp_path / "in.wav", [tone(1.0, 300)])
    source = WavInput(tmp_path / "in.wav", realtime=False, then_silence=0.5)
    frames = [f async for f in source]  # starts itself when iterated
    assert virtual_clock.elapsed == 0
    assert sum(f.duration for f in frames) == pytest.approx(1.5)


async def test_closing_the_input_ends_the_iteration(
    tmp_path: Path, virtual_clock: VirtualClock
) -> None:
    write_wav(tmp_path / "in.wav", [tone(5.0, 300)])
    got = 0
    async with WavInput(tmp_path / "in.wav") as source:
        async for _ in source:
            got += 1
            if got == 3:
                await source.aclose()
    assert got == 3
    assert virtual_clock.elapsed == pytest.approx(0.06)


def test_the_silence_after_must_be_bounded(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="then_silence"):
        WavInput(tmp_path / "in.wav", then_silence=math.inf)


async def test_a_file_that_is_not_16_bit_pcm_says_so(tmp_path: Path) -> None:
    with wave.open(str(tmp_path / "in.wav"), "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(1)
        f.setframerate(8000)
        f.writeframes(bytes(800))
    with pytest.raises(ValueError, match="8-bit samples; backline reads 16-bit PCM WAV"):
        await WavInput(tmp_path / "in.wav").start()


# -- WavOutput ------------------------------------------------------------------------------------
async def test_the_file_holds_what_played_on_the_conversation_timeline(
    tmp_path: Path, virtual_clock: VirtualClock
) -> None:
    a, b, c = tone(1.0, 300), tone(0.3, 500), tone(0.1, 700)
    heard: list[AudioFrame] = []
    sink = WavOutput(tmp_path / "out.wav", on_played=heard.append)
    assert isinstance(sink, AudioSink)
    async with sink:  # time zero of the file
        await asyncio.sleep(0.1)  # nothing plays yet
        for piece in [a.data[i : i + samples(0.1)] for i in range(0, len(a.data), samples(0.1))]:
            sink.write(AudioFrame(piece, RATE))  # ten frames of 0.1 s, queued at once
        await asyncio.sleep(0.55)  # five and a half frames play
        sink.clear()  # the user interrupts: mid-frame
        assert sink.played == pytest.approx(0.55)
        sink.write(b)
        await sink.drained()
        await asyncio.sleep(0.2)  # quiet between replies
        sink.write(c)
        await sink.drained()
        assert sink.played == pytest.approx(0.95)
    data, rate, channels = read(tmp_path / "out.wav")
    assert (rate, channels) == (RATE, 1)
    expected = bytes(samples(0.1)) + a.data[: samples(0.55)] + b.data + bytes(samples(0.2)) + c.data
    assert len(data) == len(expected)  # 1.25 s: the file's second t is the conversation's
    assert data == expected
    # As it played, without the silence between: what an echo canceller is told.
    assert b"".join(f.data for f in heard) == a.data[: samples(0.55)] + b.data + c.data


async def test_closing_keeps_only_what_has_played_and_frames_are_resampled(
    tmp_path: Path, virtual_clock: VirtualClock
) -> None:
    sink = WavOutput(tmp_path / "out.wav", sample_rate=RATE)
    sink.write(tone(1.0, 300, rate=24000))  # time zero: the first write
    await asyncio.sleep(0.4)
    await sink.aclose()  # the rest never played
    data, rate, _ = read(tmp_path / "out.wav")
    assert rate == RATE
    assert len(data) == samples(0.4)
    assert AudioFrame(data, RATE).rms() == pytest.approx(tone(0.4, 300).rms(), rel=0.02)
    with pytest.raises(RuntimeError, match="closed"):
        sink.write(tone(0.1, 300))


async def test_an_output_where_nothing_played_is_an_empty_wav(
    tmp_path: Path, virtual_clock: VirtualClock
) -> None:
    async with WavOutput(tmp_path / "out.wav") as sink:
        sink.clear()
    assert read(tmp_path / "out.wav") == (b"", RATE, 1)
