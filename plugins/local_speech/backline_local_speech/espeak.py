"""``espeak``: eSpeak NG, the system's text-to-speech (no model to download).

Each sentence is one ``espeak-ng --stdout`` process (bounded; stopped when the
reply is interrupted), whose WAV output is read back as frames.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import wave
from collections.abc import Iterator

from backline.speech import AudioFrame, ThreadedTTS

FRAME_SECONDS = 0.1
TIMEOUT = 30.0


def find_espeak() -> str | None:
    """The eSpeak NG program, or None."""
    return shutil.which("espeak-ng") or shutil.which("espeak")


class EspeakTTS(ThreadedTTS):
    """eSpeak NG. ``voice``: an eSpeak voice (``en-us``, ``en-gb``, ``fr`` ...; ``espeak-ng
    --voices`` lists them); ``speed``: words per minute."""

    name = "espeak"
    sample_rate = 22050

    def __init__(self, *, voice: str = "en-us", speed: int = 175, program: str | None = None):
        found = program or find_espeak()
        if found is None:
            raise RuntimeError(
                "eSpeak NG is not installed: install it (Debian/Ubuntu: apt install espeak-ng; "
                "macOS: brew install espeak-ng), or choose another --tts"
            )
        if not 80 <= speed <= 450:
            raise ValueError(f"espeak: speed is words per minute, 80 to 450; got {speed}")
        self.program = found
        self.voice = voice
        self.speed = speed

    def synthesize_sync(self, text: str) -> Iterator[AudioFrame]:
        result = subprocess.run(
            [self.program, "-v", self.voice, "-s", str(self.speed), "--stdout", text],
            capture_output=True,
            timeout=TIMEOUT,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"espeak-ng failed ({result.returncode}): {result.stderr.decode(errors='replace')}"
            )
        with wave.open(io.BytesIO(result.stdout), "rb") as f:
            rate, channels = f.getframerate(), f.getnchannels()
            step = max(1, round(rate * FRAME_SECONDS))
            while chunk := f.readframes(step):
                yield AudioFrame(chunk, rate, channels)
