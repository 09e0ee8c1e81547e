"""The plugin: registers the ``openai`` LLM and the ``--base-url`` front-end option.

Nothing here imports ``openai``: the factory does, when a session is built.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from backline import hookimpl
from backline.llm import LLMError

from ._endpoints import BASE_URL_ENV, DEFAULT_BASE_URL, Endpoint

if TYPE_CHECKING:
    from backline.plugins import RegisterLLM, RegisterOption

    from .llm import OpenAILLM

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


@hookimpl
def register_llms(register: RegisterLLM) -> None:
    register(
        "openai",
        openai_llm,
        description=DESCRIPTION,
        models=known_models,
        default_model=configured_model,
    )


@hookimpl
def register_options(register: RegisterOption) -> None:
    register(
        "--base-url",
        envvar=BASE_URL_ENV,
        metavar="URL",
        help=(
            "The OpenAI-compatible endpoint for --llm openai, e.g. "
            f"http://localhost:11434/v1 for Ollama (default: {DEFAULT_BASE_URL})."
        ),
    )
