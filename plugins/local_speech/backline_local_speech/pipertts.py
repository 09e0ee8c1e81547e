"""``piper``: Piper text-to-speech through piper-tts (ONNX Runtime; 22.05 kHz voices).

A voice is two files from the cache (``backline speech download
piper/en_US-lessac-medium``): the model and its ``.onnx.json`` config. Piper cuts the
text into sentences itself and synthesizes one at a time; each sentence's frames are
handed over as soon as it is done.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from backline.speech import AudioFrame, ThreadedTTS
from backline.speech.models import ModelSpec, is_downloaded

from .catalog import PIPER_DEFAULT_VOICE, PIPER_VOICES
from .common import pcm16_frames


def voice_for_language(language: str, voices: Iterable[ModelSpec] = PIPER_VOICES) -> str:
    """The catalog's voice for a language code (``de``, ``en-GB``, ``pt_BR``): one already
    downloaded first, then the first listed (the default for English)."""
    code = language.strip().replace("-", "_")
    primary = code.split("_")[0].lower()
    exact = [v for v in voices if v.name.split("-")[0].lower() == code.lower()]
    same = exact or [v for v in voices if v.name.split("_")[0].lower() == primary]
    if not same:
        raise ValueError(f"piper: no voice in its list speaks {language!r}")
    ready = [v for v in same if is_downloaded(v)]
    return (ready or same)[0].name


def choose_voice(voice: str | None, model: str | None, language: str | None) -> ModelSpec:
    """The catalog voice named by ``voice`` (or ``model``: a Piper voice is its model), else
    the one for ``language``, else the default."""
    name = voice or model or (voice_for_language(language) if language else PIPER_DEFAULT_VOICE)
    found = next((v for v in PIPER_VOICES if v.name == name), None)
    if found is None:
        known = ", ".join(v.name for v in PIPER_VOICES)
        raise ValueError(f"piper: no voice {name!r}; known: {known}")
    return found


class PiperTTS(ThreadedTTS):
    """One Piper voice: ``folder`` holds ``VOICE.onnx`` and ``VOICE.onnx.json``."""

    name = "piper"

    def __init__(self, folder: Path, voice: str) -> None:
        from piper import PiperVoice  # type: ignore[import-not-found, import-untyped, unused-ignore]

        self.voice = voice
        self._voice = PiperVoice.load(
            folder / f"{voice}.onnx", config_path=folder / f"{voice}.onnx.json"
        )
        self.sample_rate = int(self._voice.config.sample_rate)

    def synthesize_sync(self, text: str) -> Iterator[AudioFrame]:
        for chunk in self._voice.synthesize(text):  # one chunk per sentence
            yield from pcm16_frames(chunk.audio_int16_bytes, chunk.sample_rate)
