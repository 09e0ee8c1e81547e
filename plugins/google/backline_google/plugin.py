"""The plugin: registers the ``gemini`` and ``gemini-live`` LLMs and the
``--gemini-base-url`` option.

Nothing here imports ``google-genai``: the factory does, when a session is built.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from backline import hookimpl
from backline.llm import LLMError

from . import _config
from ._config import (
    BASE_URL_ENV,
    DEFAULT_MODEL,
    KNOWN_MODELS,
    LIVE_DEFAULT_MODEL,
    LIVE_KNOWN_MODELS,
    MODEL_ENV,
)

if TYPE_CHECKING:
    from backline.plugins import RegisterLLM, RegisterOption

    from .live import GeminiLiveLLM
    from .llm import GeminiLLM

DESCRIPTION = (
    "Google's Gemini models through the Gemini API (GEMINI_API_KEY or GOOGLE_API_KEY; "
    f"-m MODEL, default {DEFAULT_MODEL}; --gemini-base-url for another endpoint)"
)


def gemini_llm(model: str | None = None, **options: Any) -> GeminiLLM:
    """Build ``GeminiLLM(model, **options)``; a missing key is an ``LLMError`` that says
    what to do (the CLI shows it before the session starts)."""
    # The key is checked before google-genai is even imported.
    given = options.get("client") is not None or options.get("api_key") is not None
    if not given and _config.find_key() is None:
        raise LLMError(
            _config.missing_key_message(_config.base_url(options.get("base_url"))), status=401
        )
    from .llm import GeminiLLM

    try:
        return GeminiLLM(model, **options)
    except ValueError as e:
        raise LLMError(str(e)) from None


LIVE_DESCRIPTION = (
    "Gemini Live, Google's realtime model, over one WebSocket session (GEMINI_API_KEY or "
    f"GOOGLE_API_KEY; -m MODEL, default {LIVE_DEFAULT_MODEL}; --gemini-base-url for another "
    "endpoint): hears you and speaks in its own voice (backline voice/web), NON_BLOCKING "
    "functions, session resumption"
)


def gemini_live_llm(model: str | None = None, **options: Any) -> GeminiLiveLLM:
    """Build ``GeminiLiveLLM(model, **options)``; a missing key is an ``LLMError`` that
    says what to do (the CLI shows it before the session starts)."""
    given = options.get("client") is not None or options.get("api_key") is not None
    if not given and _config.find_key() is None:
        raise LLMError(
            _config.missing_key_message(_config.base_url(options.get("base_url"))), status=401
        )
    from .live import GeminiLiveLLM

    try:
        return GeminiLiveLLM(model, **options)
    except ValueError as e:
        raise LLMError(str(e)) from None


def configured_model() -> str:
    """The model used without ``-m``: ``$BACKLINE_MODEL``, else ``DEFAULT_MODEL``."""
    return os.environ.get(MODEL_ENV) or DEFAULT_MODEL


@hookimpl
def register_llms(register: RegisterLLM) -> None:
    register(
        "gemini",
        gemini_llm,
        description=DESCRIPTION,
        models=KNOWN_MODELS,
        default_model=configured_model,
    )
    register(
        "gemini-live",
        gemini_live_llm,
        description=LIVE_DESCRIPTION,
        models=LIVE_KNOWN_MODELS,
        default_model=LIVE_DEFAULT_MODEL,
        speaks=True,  # hears the user's voice and answers in its own (use_audio())
    )


@hookimpl
def register_options(register: RegisterOption) -> None:
    register(
        "--gemini-base-url",
        envvar=BASE_URL_ENV,
        metavar="URL",
        help=(
            "The endpoint for --llm gemini and gemini-live: a proxy or gateway that speaks the "
            "Gemini API (default: Google's, https://generativelanguage.googleapis.com/)."
        ),
    )
