"""What the plugin knows about endpoints: their names, key variables and defaults.

No ``openai`` import: the plugin's factory checks the key with it before a session
is built. The table is documented in docs/providers.md.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import urlsplit

from backline.keys import get_key

DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""OpenAI's own API: the endpoint when neither ``base_url=`` nor ``OPENAI_BASE_URL`` is set."""

BASE_URL_ENV = "OPENAI_BASE_URL"
"""The variable (and the ``--base-url`` option's) that chooses the endpoint."""

OPENAI_KEY_ENV = "OPENAI_API_KEY"

DEFAULT_MODEL = "gpt-4.1-mini"
"""The model on OpenAI's own API when none is named: fast, without reasoning (a voice
agent needs a short time to first token). Other endpoints need ``-m MODEL``."""

_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0", "host.docker.internal"})


@dataclass(frozen=True)
class _Provider:
    name: str
    key_env: str
    default_model: str | None
    example_model: str
    max_tokens_field: str = "max_tokens"


# Hosted APIs, by host: each is sent only its own key.
_HOSTED = {
    "api.openai.com": _Provider(
        "OpenAI", OPENAI_KEY_ENV, DEFAULT_MODEL, DEFAULT_MODEL, "max_completion_tokens"
    ),
    "api.groq.com": _Provider(
        "Groq", "GROQ_API_KEY", None, "llama-3.3-70b-versatile", "max_completion_tokens"
    ),
    "api.cerebras.ai": _Provider(
        "Cerebras", "CEREBRAS_API_KEY", None, "llama3.1-8b", "max_completion_tokens"
    ),
    "openrouter.ai": _Provider("OpenRouter", "OPENROUTER_API_KEY", None, "openai/gpt-4.1-mini"),
}

# Local servers, by their usual port (only for names and hints).
_LOCAL_PORTS = {
    11434: (
        "Ollama",
        "llama3.2",
        " (Ollama: `ollama pull MODEL` first; `ollama list` shows yours)",
    ),
    1234: ("LM Studio", "qwen2.5-7b-instruct", " (LM Studio: load the model first)"),
    8080: ("llama.cpp", "default", ""),
    8000: ("vLLM", "Qwen/Qwen2.5-7B-Instruct", " (vLLM serves the model it was started with)"),
}


@dataclass(frozen=True)
class Endpoint:
    """An endpoint's URL and what follows from it: its name, its key, its defaults."""

    url: str
    name: str
    key_env: str
    key_required: bool
    default_model: str | None
    example_model: str
    max_tokens_field: str
    model_hint: str

    @classmethod
    def of(cls, base_url: str | None) -> Endpoint:
        """The endpoint for ``base_url`` (``None``: ``$OPENAI_BASE_URL``, else OpenAI's)."""
        url = (base_url or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL).rstrip("/")
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        hosted = _HOSTED.get(host)
        if hosted is not None:
            return cls(
                url=url,
                name=hosted.name,
                key_env=hosted.key_env,
                key_required=True,
                default_model=hosted.default_model,
                example_model=hosted.example_model,
                max_tokens_field=hosted.max_tokens_field,
                model_hint="",
            )
        local = host in _LOCAL_HOSTS or host.startswith("127.")
        try:
            port = parts.port
        except ValueError:
            port = None
        name, example, hint = _LOCAL_PORTS.get(port or 0, ("OpenAI-compatible", "MODEL", ""))
        return cls(
            url=url,
            name=name if local else "OpenAI-compatible",
            key_env=OPENAI_KEY_ENV,
            key_required=False,
            default_model=None,
            example_model=example,
            max_tokens_field="max_tokens",
            model_hint=hint if local else "",
        )

    def find_key(self) -> str | None:
        """This endpoint's API key: the variable, else the stored key, else ``None``."""
        return get_key(self.key_env)

    def key_hint(self) -> str:
        """What to do about the key, for error messages (never the key itself)."""
        return (
            f"{self.key_env} is missing or wrong: set it (export {self.key_env}=...) or "
            f"store it with `backline keys set {self.key_env}`"
        )

    def missing_key_message(self) -> str | None:
        """A clear message when the endpoint needs a key and there is none, else ``None``."""
        if not self.key_required:
            return None
        return (
            f"{self.key_env} is not set, so the voice agent cannot reach {self.name} at "
            f"{self.url}. Set it (export {self.key_env}=...) or store it with `backline keys "
            f"set {self.key_env}`, or use another endpoint with --base-url (see "
            "docs/providers.md)."
        )
