"""What the speech engines know before ``openai`` is imported: the endpoint, its key,
its default models and voices, and whether the engines can run here.

The endpoint is ``base_url=``, else ``$OPENAI_AUDIO_BASE_URL`` (speech on another
server than the chat model: Speaches, whisper.cpp's server, Kokoro-FastAPI), else
``$OPENAI_BASE_URL`` (what ``--base-url`` sets), else OpenAI's API. Keys are the
LLM's (``Endpoint``): a hosted API needs its own key (the variable, else ``backline
keys``); a server of your own needs none, and gets ``OPENAI_API_KEY`` when it is set.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import replace

from ._endpoints import Endpoint

AUDIO_BASE_URL_ENV = "OPENAI_AUDIO_BASE_URL"
"""The variable that chooses the audio endpoint (before ``OPENAI_BASE_URL``)."""

STT_MODELS = ("gpt-4o-mini-transcribe", "gpt-4o-transcribe", "whisper-1")
TTS_MODELS = ("gpt-4o-mini-tts", "tts-1", "tts-1-hd")
VOICES = (
    "alloy",
    "ash",
    "ballad",
    "coral",
    "echo",
    "fable",
    "nova",
    "onyx",
    "sage",
    "shimmer",
    "verse",
    "marin",
    "cedar",
)
"""OpenAI's built-in voices (``ballad``, ``verse``, ``marin`` and ``cedar``: not on
``tts-1``/``tts-1-hd``)."""

DEFAULT_STT_MODEL = "gpt-4o-mini-transcribe"
DEFAULT_TTS_MODEL = "gpt-4o-mini-tts"
DEFAULT_VOICE = "alloy"

# Defaults by endpoint name; elsewhere the names OpenAI-compatible servers know best
# (whisper.cpp's server ignores the model; Kokoro-FastAPI takes tts-1).
_STT_DEFAULTS = {"OpenAI": DEFAULT_STT_MODEL, "Groq": "whisper-large-v3-turbo"}
_TTS_DEFAULTS = {"OpenAI": DEFAULT_TTS_MODEL}
_OTHER_STT_MODEL = "whisper-1"
_OTHER_TTS_MODEL = "tts-1"

_SERVERS = "Speaches, whisper.cpp's server or Kokoro-FastAPI"


class OpenAISpeechError(RuntimeError):
    """A speech request that failed, or an engine that cannot be built: the message says
    what failed and what to do (never the key). ``status``: the HTTP status, if any."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def audio_endpoint(base_url: str | None = None) -> Endpoint:
    """The endpoint of the audio API (see the module doc). A server of your own is
    named "OpenAI-compatible" (its port says which chat server it may be, not which
    speech server)."""
    endpoint = Endpoint.of(base_url or os.environ.get(AUDIO_BASE_URL_ENV) or None)
    if endpoint.key_required:  # a hosted API: OpenAI, Groq ...
        return endpoint
    return replace(endpoint, name="OpenAI-compatible", model_hint="")


def default_stt_model(endpoint: Endpoint) -> str:
    return _STT_DEFAULTS.get(endpoint.name, _OTHER_STT_MODEL)


def default_tts_model(endpoint: Endpoint) -> str:
    return _TTS_DEFAULTS.get(endpoint.name, _OTHER_TTS_MODEL)


def default_response_format(endpoint: Endpoint) -> str:
    """Raw PCM on OpenAI's API (24 kHz, documented); WAV elsewhere, whose header says
    the rate (a local server's voices are not all 24 kHz)."""
    return "pcm" if endpoint.name == "OpenAI" else "wav"


def known_voices() -> list[str]:
    """OpenAI's voices on OpenAI's API; elsewhere none are listed, so any voice the
    server has (Kokoro's ``af_heart`` ...) can be named."""
    return list(VOICES) if audio_endpoint().name == "OpenAI" else []


def missing_key_message(endpoint: Endpoint, what: str) -> str | None:
    """What to do when ``endpoint`` needs a key and none is found, else ``None``."""
    if not endpoint.key_required or endpoint.find_key() is not None:
        return None
    env = endpoint.key_env
    return (
        f"{env} is not set, so the openai {what} engine cannot reach {endpoint.name} at "
        f"{endpoint.url}: set it (export {env}=...) or store it with `backline keys set "
        f"{env}`, or point {AUDIO_BASE_URL_ENV} at a server of your own ({_SERVERS})"
    )


def unavailable() -> str | None:
    """One sentence saying what stops the engines here, or ``None``."""
    if importlib.util.find_spec("openai") is None:
        return "the openai package is not installed (pip install openai)"
    endpoint = audio_endpoint()
    if endpoint.key_required and endpoint.find_key() is None:
        env = endpoint.key_env
        return (
            f"{env} is not set for {endpoint.name} at {endpoint.url} (export it, or "
            f"`backline keys set {env}`; a server of your own at {AUDIO_BASE_URL_ENV} "
            "needs none)"
        )
    return None
