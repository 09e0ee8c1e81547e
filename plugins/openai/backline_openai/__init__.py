"""backline-openai: any OpenAI-compatible chat endpoint as backline's voice LLM.

``--llm openai -m MODEL`` on any front end; ``--base-url`` (``OPENAI_BASE_URL``)
chooses the endpoint: OpenAI, Groq, Cerebras, OpenRouter, or a local Ollama,
vLLM, llama.cpp or LM Studio server. ``OpenAILLM`` is imported on demand (it pulls
in the ``openai`` package): ``from backline_openai.llm import OpenAILLM``.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .llm import OpenAILLM

__version__ = "0.1.0"
__all__ = ["OpenAILLM", "__version__"]


def __getattr__(name: str) -> Any:
    # ``OpenAILLM`` pulls in ``openai``: loaded on first use, so that loading the
    # plugin (on every ``backline`` start) stays fast.
    if name == "OpenAILLM":
        from .llm import OpenAILLM

        return OpenAILLM
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
