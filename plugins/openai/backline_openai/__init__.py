"""backline-openai: any OpenAI-compatible chat endpoint as backline's voice LLM, and
OpenAI-compatible audio endpoints as speech engines.

``--llm openai -m MODEL`` on any front end (``--llm openai-realtime``: OpenAI Realtime,
one WebSocket session, text modality); ``--base-url`` (``OPENAI_BASE_URL``)
chooses the endpoint: OpenAI, Groq, Cerebras, OpenRouter, or a local Ollama,
vLLM, llama.cpp or LM Studio server. The ``openai`` speech-to-text and text-to-speech
engines speak ``/audio/transcriptions`` and ``/audio/speech`` (OpenAI, Groq, Speaches,
whisper.cpp's server, Kokoro-FastAPI; ``OPENAI_AUDIO_BASE_URL`` when speech is served
elsewhere than chat). ``OpenAILLM``, ``OpenAIRealtimeLLM``, ``OpenAISTT`` and
``OpenAITTS`` are imported on demand (they pull in ``openai`` or ``websockets``):
``from backline_openai.llm import OpenAILLM``.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .llm import OpenAILLM
    from .realtime import OpenAIRealtimeLLM
    from .stt import OpenAISTT
    from .tts import OpenAITTS

__version__ = "0.1.0"
__all__ = ["OpenAILLM", "OpenAIRealtimeLLM", "OpenAISTT", "OpenAITTS", "__version__"]

_LAZY = {
    "OpenAILLM": "llm",
    "OpenAIRealtimeLLM": "realtime",
    "OpenAISTT": "stt",
    "OpenAITTS": "tts",
}


def __getattr__(name: str) -> Any:
    # These pull in ``openai``: loaded on first use, so that loading the plugin (on
    # every ``backline`` start) stays fast.
    module = _LAZY.get(name)
    if module is not None:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{module}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
