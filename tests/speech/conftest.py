"""Real engines that need no download: eSpeak NG speaks, PocketSphinx listens."""

from __future__ import annotations

import asyncio
import shutil

import pytest

from backline.speech import AudioFrame, split_frames

pytest.importorskip("pocketsphinx", reason="backline-local-speech's pocketsphinx is not installed")
if shutil.which("espeak-ng") is None:  # pragma: no cover - .ci/run installs it
    pytest.skip("eSpeak NG is not installed (apt install espeak-ng)", allow_module_level=True)

FRAME = 0.02  # seconds per microphone frame

# Phrases eSpeak NG (en-us, 175 wpm) says and PocketSphinx (its English model) hears
# back word for word, measured over 21 phrases: digits in order and short questions
# work; single digits, greetings and names mostly do not.
PHRASES = ("what is the weather", "one two three four five", "how are you", "thank you")


async def speak(text: str) -> AudioFrame:
    """``text`` said by eSpeak NG, as one frame."""
    from backline_local_speech.espeak import EspeakTTS

    frames = [f async for f in EspeakTTS().synthesize(text)]
    return AudioFrame(b"".join(f.data for f in frames), frames[0].sample_rate)


def microphone(*pieces: AudioFrame | float, rate: int = 16000) -> list[AudioFrame]:
    """Frames of ``FRAME`` seconds: speech (frames) and silence (seconds), in order."""
    out: list[AudioFrame] = []
    for piece in pieces:
        audio = AudioFrame.silence(piece, rate) if isinstance(piece, float) else piece
        out.extend(split_frames(audio.resample(rate), FRAME))
    return out


async def play(push: object, frames: list[AudioFrame]) -> None:
    """Push frames as a microphone does: one every ``FRAME`` seconds (loop time)."""
    for frame in frames:
        push(frame)  # type: ignore[operator]
        await asyncio.sleep(frame.duration)
