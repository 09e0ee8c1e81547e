"""The ``local_speech`` plugin: registers the engines of this package.

Nothing heavy is imported here: each factory imports its engine's library when a
front end builds it, and ``unavailable`` checks only what is installed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import backline
from backline.plugins import RegisterSpeech
from backline.speech.models import ModelSpec

from .catalog import (
    KOKORO_DEFAULT_VOICE,
    KOKORO_MODEL,
    KOKORO_VOICES,
    PIPER_DEFAULT_VOICE,
    PIPER_VOICES,
    SILERO_FILE,
    SILERO_MODEL,
    WHISPER_DEFAULT,
    WHISPER_MODELS,
)
from .common import download_hint, first_downloaded, installed, missing_package, model_folder
from .espeak import EspeakTTS, espeak_voices, find_espeak


def _pocketsphinx(*, model: str | None = None, language: str | None = None) -> Any:
    from .sphinx import PocketsphinxSTT

    if language not in (None, "en", "en-us"):
        raise ValueError(f"pocketsphinx: its bundled model is English (en), not {language!r}")
    return PocketsphinxSTT()


def _pocketsphinx_missing() -> str | None:
    if not installed("pocketsphinx"):
        return "the pocketsphinx package is not installed (pip install pocketsphinx)"
    return None


def _espeak(
    *, model: str | None = None, voice: str | None = None, language: str | None = None
) -> EspeakTTS:
    return EspeakTTS(voice=voice or language or "en-us")


def _espeak_missing() -> str | None:
    if find_espeak() is None:
        return "eSpeak NG is not installed (apt install espeak-ng; brew install espeak-ng)"
    return None


def _find(specs: Sequence[ModelSpec], name: str, engine: str) -> ModelSpec:
    found = next((s for s in specs if s.name == name), None)
    if found is None:
        known = ", ".join(s.name for s in specs)
        raise ValueError(f"{engine}: no model {name!r}; known: {known}")
    return found


def _nothing_downloaded(specs: Sequence[ModelSpec], default: ModelSpec, what: str) -> str | None:
    if first_downloaded(specs) is None:
        return f"no {what} is downloaded: {download_hint(default)}"
    return None


def _whisper(*, model: str | None = None, language: str | None = None) -> Any:
    from .whispercpp import WhisperSTT, model_path, whisper_language

    name = model or WHISPER_DEFAULT
    spec = _find(WHISPER_MODELS, name, "whisper")
    code = whisper_language(name, language)  # an English-only model refuses French here
    return WhisperSTT(model_path(model_folder(spec), name), language=code)


def _whisper_missing() -> str | None:
    default = _find(WHISPER_MODELS, WHISPER_DEFAULT, "whisper")
    return missing_package("pywhispercpp", "pywhispercpp", "whisper") or _nothing_downloaded(
        WHISPER_MODELS, default, "whisper model"
    )


def _kokoro(
    *, model: str | None = None, voice: str | None = None, language: str | None = None
) -> Any:
    from .kokoro import KokoroTTS

    spec = _find((KOKORO_MODEL,), model or KOKORO_MODEL.name, "kokoro")
    return KokoroTTS(model_folder(spec), voice=voice, language=language)


def _kokoro_missing() -> str | None:
    return missing_package("kokoro_onnx", "kokoro-onnx", "kokoro") or _nothing_downloaded(
        (KOKORO_MODEL,), KOKORO_MODEL, "Kokoro model"
    )


def _piper(
    *, model: str | None = None, voice: str | None = None, language: str | None = None
) -> Any:
    from .pipertts import PiperTTS, choose_voice

    spec = choose_voice(voice, model, language)
    return PiperTTS(model_folder(spec), spec.name)


def _piper_missing() -> str | None:
    default = _find(PIPER_VOICES, PIPER_DEFAULT_VOICE, "piper")
    return missing_package("piper", "piper-tts", "piper") or _nothing_downloaded(
        PIPER_VOICES, default, "Piper voice"
    )


def _silero(*, model: str | None = None) -> Any:
    from .silero import SileroVAD

    spec = _find((SILERO_MODEL,), model or SILERO_MODEL.name, "silero")
    return SileroVAD(model_folder(spec) / SILERO_FILE)


def _silero_missing() -> str | None:
    return missing_package("onnxruntime", "onnxruntime", "silero") or _nothing_downloaded(
        (SILERO_MODEL,), SILERO_MODEL, "Silero model"
    )


@backline.hookimpl
def register_stt(register: RegisterSpeech) -> None:
    register(
        "pocketsphinx",
        _pocketsphinx,
        description="CMU PocketSphinx: English, its model ships in the wheel (no download); "
        "fast, less accurate than whisper",
        rank=10,
        unavailable=_pocketsphinx_missing,
        models=("en-us",),
        default_model="en-us",
    )
    register(
        "whisper",
        _whisper,
        description="whisper.cpp (pywhispercpp): accurate, English-only or 99 languages; "
        "a model from tiny (78 MB) to large-v3 (3.1 GB), base.en by default",
        rank=20,
        unavailable=_whisper_missing,
        models=WHISPER_MODELS,
        default_model=WHISPER_DEFAULT,
    )


@backline.hookimpl
def register_tts(register: RegisterSpeech) -> None:
    register(
        "espeak",
        _espeak,
        description="eSpeak NG, the system's synthesiser: no download, instant, robotic",
        rank=10,
        unavailable=_espeak_missing,
        voices=espeak_voices,
        default_voice="en-us",
    )
    register(
        "kokoro",
        _kokoro,
        description="Kokoro-82M (kokoro-onnx): natural voices, 54 of them in 9 languages; "
        "a 354 MB model",
        rank=30,
        unavailable=_kokoro_missing,
        models=(KOKORO_MODEL,),
        default_model=KOKORO_MODEL.name,
        voices=KOKORO_VOICES,
        default_voice=KOKORO_DEFAULT_VOICE,
    )
    register(
        "piper",
        _piper,
        description="Piper (piper-tts): fast natural voices, one 63 MB model per voice "
        "(English, German, French, Italian, Spanish listed)",
        rank=20,
        unavailable=_piper_missing,
        models=PIPER_VOICES,
        default_model=PIPER_DEFAULT_VOICE,
        voices=tuple(v.name for v in PIPER_VOICES),
        default_voice=PIPER_DEFAULT_VOICE,
    )


@backline.hookimpl
def register_vad(register: RegisterSpeech) -> None:
    register(
        "silero",
        _silero,
        description="Silero VAD (ONNX Runtime): tells speech from noise; a 2.3 MB model",
        rank=10,
        unavailable=_silero_missing,
        models=(SILERO_MODEL,),
        default_model=SILERO_MODEL.name,
    )
