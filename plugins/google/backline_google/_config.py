"""What the plugin knows without ``google-genai``: the default model, the base URL's
variable, where the API key comes from (``backline.keys``), and what a refused Live
connection says.

The plugin's factory checks the key with it before a session is built. Documented in
the plugin's README and docs/providers.md.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from backline.keys import get_key
from backline.llm import LLMError

DEFAULT_MODEL = "gemini-2.5-flash"
"""The model when none is named (``-m`` / ``$BACKLINE_MODEL``): fast, with function
calling, on the Gemini API's stable ``v1``."""

KNOWN_MODELS = (
    "gemini-2.5-flash",
    "gemini-2.5-flash-lite",
    "gemini-2.5-pro",
    "gemini-3.8-flash",  # the model google-genai 3.x's own examples use
)
"""Models ``backline models`` lists (any model the API serves can be named with ``-m``)."""

MODEL_ENV = "BACKLINE_MODEL"
"""The environment variable that chooses the model."""

BASE_URL_ENV = "GOOGLE_GEMINI_BASE_URL"
"""The variable (google-genai's own, and ``--gemini-base-url``'s) that points the adapter
at another endpoint (a proxy, a gateway, a test server)."""

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com/"
"""The Gemini API (google-genai's default)."""

KEY_ENVS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
"""The variables (or stored keys) the API key is read from, in this order."""


@dataclass(frozen=True)
class FoundKey:
    """An API key and the variable (or stored key) it came from."""

    value: str
    name: str


def find_key() -> FoundKey | None:
    """The API key: ``$GEMINI_API_KEY``, else ``$GOOGLE_API_KEY``, else the stored key of
    either name (``backline keys set GEMINI_API_KEY``); ``None`` when there is none."""
    for name in KEY_ENVS:
        value = os.environ.get(name)
        if value:
            return FoundKey(value, name)
    for name in KEY_ENVS:
        value = get_key(name, {})
        if value:
            return FoundKey(value, name)
    return None


def base_url(given: str | None = None) -> str:
    """The endpoint: ``given``, else ``$GOOGLE_GEMINI_BASE_URL``, else the Gemini API."""
    return given or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL


def key_hint(name: str | None) -> str:
    """What to do about a rejected key (never the key itself)."""
    var = name or KEY_ENVS[0]
    return f"{var} is missing or wrong: set it (export {var}=...) or `backline keys set {var}`"


def missing_key_message(url: str) -> str:
    """The message when no key was found."""
    var = KEY_ENVS[0]
    return (
        f"{var} is not set, so the voice agent cannot reach Gemini at {url}. Set it "
        f"(export {var}=...; GOOGLE_API_KEY works too; keys are made at "
        f"https://aistudio.google.com/apikey) or store it with `backline keys set {var}`, "
        "or choose another LLM with --llm (see docs/providers.md)."
    )


LIVE_DEFAULT_MODEL = "gemini-3.1-flash-live-preview"
"""The Gemini Live model when none is named: the one google-genai's own live tests use
on the Gemini API (an audio-native model: it answers in audio, with a transcript)."""

LIVE_KNOWN_MODELS = (
    "gemini-3.1-flash-live-preview",
    "gemini-live-2.5-flash-preview",  # half-cascade: answers in text too
)
"""Live models ``backline models`` lists (any Live model the API serves can be named)."""


def live_open_failure(e: Exception, url: str, model: str, key_name: str | None) -> LLMError:
    """What a refused or failed Gemini Live connection says (never the key)."""
    code = getattr(e, "code", None)
    reason = " ".join(str(getattr(e, "message", None) or e).split())
    where = f"Gemini Live at {url}"
    lowered = reason.lower()
    if "api key" in lowered or code in (401, 403):
        hint = key_hint(key_name)
        return LLMError(f"{where}: the API key was rejected — {hint}. ({reason})", status=401)
    if "model" in lowered or code == 404:
        return LLMError(
            f"{where} refused the model {model!r}: {reason} — check -m MODEL (a Live "
            f"model, e.g. {LIVE_DEFAULT_MODEL}) and --gemini-base-url",
            status=404,
        )
    if isinstance(code, int):
        return LLMError(f"{where} refused the session ({code}): {reason}", retryable=True)
    return LLMError(
        f"Could not open {where}: {e!r} — is the network up, and is --gemini-base-url "
        f"({BASE_URL_ENV}) right, if set?",
        retryable=True,
    )
