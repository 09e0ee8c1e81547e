"""The plugin: registers the ``openai`` LLM, the ``openai`` speech-to-text and
text-to-speech engines, and the ``--base-url`` front-end option.

Nothing here imports ``openai``: the factories do, when a session or an engine is built.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from backline import hookimpl
from backline.llm import LLMError

from . import _audio
from ._endpoints import BASE_URL_ENV, DEFAULT_BASE_URL, Endpoint

if TYPE_CHECKING:
    from backline.plugins import RegisterLLM, RegisterOption, RegisterSpeech

    from .llm import OpenAILLM
    from .realtime import OpenAIRealtimeLLM
    from .stt import OpenAISTT
    from .tts import OpenAITTS

DESCRIPTION = (
    "any OpenAI-compatible Chat Completions endpoint: OpenAI, Groq, Cerebras, OpenRouter, "
    "Ollama, vLLM, llama.cpp, LM Studio (--base-url / OPENAI_BASE_URL; -m MODEL)"
)


def openai_llm(model: str | None = None, **options: Any) -> OpenAILLM:
    """Build ``OpenAILLM(model, **options)``; a missing key or model is an ``LLMError``
    that says what to do (the CLI shows it before the session starts)."""
    from .llm import OpenAILLM

    try:
        llm = OpenAILLM(model, **options)
    except ValueError as e:
        raise LLMError(str(e)) from None
    if llm.missing_key is not None:
        raise LLMError(llm.missing_key, status=401)
    return llm


def known_models() -> list[str]:
    """The models the configured endpoint is known to serve: OpenAI's default on OpenAI's
    API (``--base-url`` / ``$OPENAI_BASE_URL`` elsewhere: the server's own list)."""
    default = Endpoint.of(None).default_model
    return [default] if default else []


def configured_model() -> str | None:
    """The model used without ``-m``: ``$BACKLINE_MODEL``, else the endpoint's default
    (OpenAI's API has one; other endpoints need a model named)."""
    return os.environ.get("BACKLINE_MODEL") or Endpoint.of(None).default_model


REALTIME_DESCRIPTION = (
    "OpenAI Realtime (gpt-realtime) or a compatible endpoint as the voice agent's model, "
    "one WebSocket session: text in the console, its own ears and voice in voice front "
    "ends (--base-url / OPENAI_BASE_URL; -m MODEL; --realtime-voice)"
)
REALTIME_VOICE_ENV = "OPENAI_REALTIME_VOICE"


def openai_realtime_llm(model: str | None = None, **options: Any) -> OpenAIRealtimeLLM:
    """Build ``OpenAIRealtimeLLM(model, **options)`` (its voice: ``--realtime-voice`` /
    ``$OPENAI_REALTIME_VOICE``); a missing key is an ``LLMError``."""
    from .realtime import OpenAIRealtimeLLM

    options.setdefault("voice", os.environ.get(REALTIME_VOICE_ENV) or None)
    try:
        llm = OpenAIRealtimeLLM(model, **options)
    except ValueError as e:
        raise LLMError(str(e)) from None
    if llm.missing_key is not None:
        raise LLMError(llm.missing_key, status=401)
    return llm


@hookimpl
def register_llms(register: RegisterLLM) -> None:
    register(
        "openai",
        openai_llm,
        description=DESCRIPTION,
        models=known_models,
        default_model=configured_model,
    )
    register(
        "openai-realtime",
        openai_realtime_llm,
        description=REALTIME_DESCRIPTION,
        models=("gpt-realtime", "gpt-realtime-mini"),
        default_model="gpt-realtime",
        speaks=True,
    )


REALTIME_VOICES = (
    "alloy",
    "ash",
    "ballad",
    "cedar",
    "coral",
    "echo",
    "marin",
    "sage",
    "shimmer",
    "verse",
)


@hookimpl
def register_options(register: RegisterOption) -> None:
    register(
        "--base-url",
        envvar=BASE_URL_ENV,
        metavar="URL",
        help=(
            "The OpenAI-compatible endpoint for --llm openai, e.g. "
            f"http://localhost:11434/v1 for Ollama (default: {DEFAULT_BASE_URL}); "
            "also the openai speech engines' unless OPENAI_AUDIO_BASE_URL is set."
        ),
    )
    register(
        "--realtime-voice",
        envvar=REALTIME_VOICE_ENV,
        metavar="VOICE",
        help=(
            "The voice of --llm openai-realtime in voice front ends (backline voice, "
            f"backline web): {', '.join(REALTIME_VOICES)} (default: the model's)."
        ),
    )


STT_DESCRIPTION = (
    "OpenAI's transcription API or any compatible server (Groq, Speaches, whisper.cpp's "
    "server); the endpoint: OPENAI_AUDIO_BASE_URL, else --base-url / OPENAI_BASE_URL"
)
TTS_DESCRIPTION = (
    "OpenAI's speech API or any compatible server (Kokoro-FastAPI, Speaches), streamed; "
    "the endpoint: OPENAI_AUDIO_BASE_URL, else --base-url / OPENAI_BASE_URL"
)


def openai_stt(
    *, model: str | None = None, language: str | None = None, **options: Any
) -> OpenAISTT:
    """Build ``OpenAISTT``; a hosted endpoint without its key is an ``OpenAISpeechError``
    that says what to do."""
    from .stt import OpenAISTT

    return OpenAISTT(model, language=language, **options)


def openai_tts(
    *,
    model: str | None = None,
    voice: str | None = None,
    language: str | None = None,  # the API speaks the text's language: nothing to send
    **options: Any,
) -> OpenAITTS:
    """Build ``OpenAITTS`` (see ``openai_stt``)."""
    from .tts import OpenAITTS

    return OpenAITTS(model, voice=voice, **options)


@hookimpl
def register_stt(register: RegisterSpeech) -> None:
    register(
        "openai",
        openai_stt,
        description=STT_DESCRIPTION,
        local=False,
        rank=0,
        unavailable=_audio.unavailable,
        models=_audio.STT_MODELS,
        default_model=_audio.DEFAULT_STT_MODEL,
    )


@hookimpl
def register_tts(register: RegisterSpeech) -> None:
    register(
        "openai",
        openai_tts,
        description=TTS_DESCRIPTION,
        local=False,
        rank=0,
        unavailable=_audio.unavailable,
        models=_audio.TTS_MODELS,
        default_model=_audio.DEFAULT_TTS_MODEL,
        voices=_audio.known_voices,
        default_voice=_audio.DEFAULT_VOICE,
    )
