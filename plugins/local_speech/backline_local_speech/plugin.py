"""The ``local_speech`` plugin: registers the engines of this package.

Nothing heavy is imported here: each factory imports its engine's library when a
front end builds it, and ``unavailable`` checks only what is installed.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import backline
from backline.plugins import RegisterSpeech

from .espeak import EspeakTTS, espeak_voices, find_espeak


def _pocketsphinx(*, model: str | None = None, language: str | None = None) -> Any:
    from .sphinx import PocketsphinxSTT

    if language not in (None, "en", "en-us"):
        raise ValueError(f"pocketsphinx: its bundled model is English (en), not {language!r}")
    return PocketsphinxSTT()


def _pocketsphinx_missing() -> str | None:
    if importlib.util.find_spec("pocketsphinx") is None:
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
