"""``espeak``: eSpeak NG, the system's text-to-speech (no model to download).

Each sentence is one ``espeak-ng --stdout`` process (bounded; stopped when the
reply is interrupted), whose WAV output is read back as frames. A sentence may be
spoken in another voice (``synthesize(text, voice=...)``: a ``VoicedTTS``); its
``alternate_voices`` are its language's variants (``en-us+f3``, ``en-us+m3`` ...), so
several background agents each speak in their own.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import wave
from collections.abc import Iterator

from backline.speech import AudioFrame, ThreadedTTS

FRAME_SECONDS = 0.1
TIMEOUT = 30.0
VARIANTS = ("f3", "m3", "f2", "m7", "f4", "m5")
"""eSpeak NG's voice variants, most distinct from the default (and each other) first."""
_VOICE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_+/-]*")


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
        _check_voice(voice)
        if not 80 <= speed <= 450:
            raise ValueError(f"espeak: speed is words per minute, 80 to 450; got {speed}")
        self.program = found
        self.voice = voice
        self.speed = speed

    @property
    def alternate_voices(self) -> list[str]:
        """Its language's variants, for other speakers (its own voice left out)."""
        language = self.voice.split("+", 1)[0]
        return [v for v in (f"{language}+{variant}" for variant in VARIANTS) if v != self.voice]

    def synthesize_sync(self, text: str, voice: str | None = None) -> Iterator[AudioFrame]:
        if voice is not None:
            _check_voice(voice)
        # The text goes in on stdin, never as an argument: a reply that starts with "-"
        # would be read as an option (-w FILE writes a file).
        result = subprocess.run(
            [
                self.program,
                "-v",
                voice or self.voice,
                "-s",
                str(self.speed),
                "--stdin",
                "--stdout",
            ],
            input=text.encode(),
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


def _check_voice(voice: str) -> None:
    if not isinstance(voice, str) or not _VOICE.fullmatch(voice):
        raise ValueError(f"espeak: {voice!r} is not a voice name (espeak-ng --voices)")


def espeak_voices() -> list[str]:
    """The languages eSpeak NG has voices for (``espeak-ng --voices``), or none when it
    is not installed."""
    program = find_espeak()
    if program is None:
        return []
    try:
        result = subprocess.run(
            [program, "--voices"], capture_output=True, timeout=10, check=False, text=True
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    lines = result.stdout.splitlines()[1:]
    return [line.split()[1] for line in lines if len(line.split()) > 1]
