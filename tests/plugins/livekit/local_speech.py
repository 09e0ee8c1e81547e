"""Real engines that need no download, for the LiveKit adapters' tests: eSpeak NG speaks,
PocketSphinx listens (as in tests/speech). Importing this module skips the test module
when either is missing."""

from __future__ import annotations

import shutil

import pytest
from livekit import rtc

from backline.speech import AudioFrame, split_frames

pytest.importorskip("pocketsphinx", reason="backline-local-speech's pocketsphinx is not installed")
if shutil.which("espeak-ng") is None:  # pragma: no cover - .ci/run installs it
    pytest.skip("eSpeak NG is not installed (apt install espeak-ng)", allow_module_level=True)

from backline_livekit.engines import BackendSTT, to_backline, to_livekit
from backline_local_speech.espeak import EspeakTTS
from backline_local_speech.sphinx import PocketsphinxSTT

RATE = 16000
FRAME = 0.02  # seconds per microphone frame

# Phrases eSpeak NG says and PocketSphinx hears back word for word, through these
# adapters too (tests/speech/conftest.py measured them for backline's own pipeline).
WEATHER = "what is the weather"
HOW_ARE_YOU = "how are you"


async def speak(text: str) -> AudioFrame:
    """``text`` said by eSpeak NG, at the microphone's rate (backline's resampler)."""
    frames = [f async for f in EspeakTTS().synthesize(text)]
    said = AudioFrame(b"".join(f.data for f in frames), frames[0].sample_rate)
    return said.resample(RATE)


def microphone(*pieces: AudioFrame | float) -> list[rtc.AudioFrame]:
    """LiveKit frames of ``FRAME`` seconds: speech (frames) and silence (seconds)."""
    out: list[rtc.AudioFrame] = []
    for piece in pieces:
        audio = AudioFrame.silence(piece, RATE) if isinstance(piece, float) else piece
        out.extend(to_livekit(f) for f in split_frames(audio, FRAME))
    return out


async def transcribe(frames: list[rtc.AudioFrame]) -> str:
    """What PocketSphinx hears in LiveKit frames (its ``recognize``, through the adapter)."""
    event = await BackendSTT(PocketsphinxSTT()).recognize(frames)
    return event.alternatives[0].text


def seconds(frames: list[rtc.AudioFrame]) -> float:
    return sum(f.duration for f in frames)


__all__ = [
    "HOW_ARE_YOU",
    "RATE",
    "WEATHER",
    "EspeakTTS",
    "PocketsphinxSTT",
    "microphone",
    "seconds",
    "speak",
    "to_backline",
    "to_livekit",
    "transcribe",
]
