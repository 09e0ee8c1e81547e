"""``kokoro``: Kokoro-82M text-to-speech through kokoro-onnx (ONNX Runtime, 24 kHz).

The model and its voices are two files from the cache (``backline speech download
kokoro/v1.0``). The text is cut into sentences and each is synthesized in turn, its
frames handed over as soon as it is done, so a long reply starts playing after its
first sentence.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from backline.speech import AudioFrame, SentenceSplitter, ThreadedTTS

from .catalog import (
    KOKORO_DEFAULT_VOICE,
    KOKORO_LANGUAGES,
    KOKORO_ONNX,
    KOKORO_VOICES,
    KOKORO_VOICES_FILE,
)
from .common import pcm16_frames, to_pcm16

SAMPLE_RATE = 24000
_SAYABLE = re.compile(r"\w")  # a sentence of only punctuation or emoji has nothing to say


def language_entry(language: str) -> tuple[str, tuple[str, ...], str] | None:
    """The Kokoro language (eSpeak code, codes, default voice) of a code such as ``fr``,
    ``en-GB`` or ``pt_BR``; None when Kokoro has no voice for it."""
    code = language.strip().lower().replace("_", "-")
    for entry in KOKORO_LANGUAGES.values():
        if code in entry[1]:
            return entry
    primary = code.split("-")[0]
    return next((e for e in KOKORO_LANGUAGES.values() if primary in e[1]), None)


def choose_voice(voice: str | None, language: str | None) -> tuple[str, str]:
    """The voice and the eSpeak language to speak with: a voice speaks its own language
    unless one is given; a language alone takes that language's default voice."""
    entry = None
    if language:
        entry = language_entry(language)
        if entry is None:
            raise ValueError(f"kokoro: no voice speaks {language!r}")
    if voice is None:
        voice = entry[2] if entry is not None else KOKORO_DEFAULT_VOICE
    elif voice not in KOKORO_VOICES:
        raise ValueError(f"kokoro: no voice {voice!r} (`backline speech list --kind tts`)")
    espeak = entry[0] if entry is not None else KOKORO_LANGUAGES[voice[0]][0]
    return voice, espeak


class KokoroTTS(ThreadedTTS):
    """Kokoro on the model folder's two files. ``speed``: 0.5 to 2.0."""

    name = "kokoro"
    sample_rate = SAMPLE_RATE

    def __init__(
        self,
        folder: Path,
        *,
        voice: str | None = None,
        language: str | None = None,
        speed: float = 1.0,
    ) -> None:
        if not 0.5 <= speed <= 2.0:
            raise ValueError(f"kokoro: speed is 0.5 to 2.0, got {speed}")
        self.voice, self.lang = choose_voice(voice, language)
        self.speed = speed
        from kokoro_onnx import Kokoro  # type: ignore[import-not-found, import-untyped, unused-ignore]

        self._kokoro = Kokoro(str(folder / KOKORO_ONNX), str(folder / KOKORO_VOICES_FILE))

    def synthesize_sync(self, text: str) -> Iterator[AudioFrame]:
        splitter = SentenceSplitter()
        for sentence in splitter.push(text) + splitter.flush():
            if not _SAYABLE.search(sentence):
                continue
            audio, rate = self._kokoro.create(
                sentence, voice=self.voice, speed=self.speed, lang=self.lang
            )
            yield from pcm16_frames(to_pcm16(audio), rate)
