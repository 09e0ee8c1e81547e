"""``whisper``: whisper.cpp speech-to-text through pywhispercpp.

The model is a ggml file from the cache (``backline speech download whisper/base.en``),
passed to pywhispercpp by its path: pywhispercpp downloads a model it is given by
*name*, never one given as an existing file. Each utterance (16 kHz mono) is
transcribed in a worker thread, one at a time per engine.
"""

from __future__ import annotations

import logging
import re
import threading
from pathlib import Path
from typing import Any

from backline.speech import AudioFrame, BatchSTT

from .catalog import whisper_file
from .common import to_float

logger = logging.getLogger(__name__)

MIN_SECONDS = 1.1  # whisper.cpp refuses shorter input: it is padded with silence
# What whisper writes for no speech or for sounds: [BLANK_AUDIO], (music), *coughs*, ♪.
_NOT_SPEECH = re.compile(r"\[[^\]]*\]|\([^)]*\)|\*[^*]*\*|♪+")
_WARN = 3  # ggml_log_level: 1 debug, 2 info, 3 warn, 4 error, 5 continuation


def english_only(model: str) -> bool:
    return model.endswith(".en")


def whisper_language(model: str, language: str | None) -> str:
    """The language code whisper.cpp is given: ``en`` for an English-only model, the
    primary subtag of ``language`` (``fr-FR`` -> ``fr``), else ``auto`` (detected)."""
    code = (language or "").strip().lower().replace("_", "-").split("-")[0]
    if english_only(model):
        if code not in ("", "en"):
            raise ValueError(
                f"whisper: {model} understands English only, not {language!r}; choose a "
                f"multilingual model (--stt-model {model.removesuffix('.en')})"
            )
        return "en"
    return code or "auto"


def clean(text: str) -> str:
    """A transcript without whisper's non-speech annotations, on one line."""
    return " ".join(_NOT_SPEECH.sub(" ", text).split())


class WhisperSTT(BatchSTT):
    """whisper.cpp on one model file. ``language``: a code (``en``, ``fr``) or ``auto``;
    ``threads``: CPU threads for one transcription (whisper.cpp's default when None)."""

    name = "whisper"
    sample_rate = 16000

    def __init__(
        self,
        model_path: Path,
        *,
        language: str = "auto",
        threads: int | None = None,
        interim_every: float | None = None,
    ) -> None:
        if not model_path.is_file():  # pywhispercpp would download a model by that name
            raise RuntimeError(f"whisper: no model file at {model_path}")
        from pywhispercpp.model import Model  # type: ignore[import-not-found, import-untyped, unused-ignore]

        if language != "auto" and language not in Model.available_languages():
            raise ValueError(f"whisper: {language!r} is not a language whisper knows")
        _quiet_whisper_logs()
        params: dict[str, Any] = {
            "language": language,
            "print_progress": False,
            "print_realtime": False,
            "print_timestamps": False,
            "no_context": True,
        }
        if threads is not None:
            params["n_threads"] = threads
        self.model_path = model_path
        self.language = language
        self.interim_every = interim_every
        self._model = Model(str(model_path), **params)
        self._lock = threading.Lock()

    def transcribe(self, frame: AudioFrame) -> str:
        import numpy as np  # type: ignore[import-not-found, import-untyped, unused-ignore]

        if frame.sample_rate != self.sample_rate or frame.channels != 1:
            frame = frame.resample(self.sample_rate)
        audio = to_float(frame)
        short = round(MIN_SECONDS * self.sample_rate) - audio.size
        if short > 0:
            audio = np.concatenate([audio, np.zeros(short, dtype=np.float32)])
        with self._lock:
            segments = self._model.transcribe(audio)
        return clean(" ".join(segment.text for segment in segments))


def model_path(folder: Path, model: str) -> Path:
    return folder / whisper_file(model)


_logs_quiet = False


def _quiet_whisper_logs() -> None:
    """whisper.cpp logs every model load and transcription on stderr (a terminal front
    end's screen): only its warnings and errors go on, to the ``logging`` module."""
    global _logs_quiet
    if _logs_quiet:
        return
    import _pywhispercpp as pw  # type: ignore[import-not-found]  # the binding pywhispercpp wraps

    if hasattr(pw, "whisper_log_set"):
        pw.whisper_log_set(_log)
    _logs_quiet = True


def _log(level: int, text: str) -> None:
    if level >= _WARN and level != 5 and text.strip():
        logger.warning("whisper.cpp: %s", text.strip())
