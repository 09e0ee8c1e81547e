"""backline-google: Google's Gemini models as backline's voice LLM, through google-genai.

``--llm gemini [-m MODEL]`` on any front end; the key is ``GEMINI_API_KEY`` (or
``GOOGLE_API_KEY``, or a stored key: ``backline keys set GEMINI_API_KEY``);
``--gemini-base-url`` (``GOOGLE_GEMINI_BASE_URL``) points it at another endpoint.
``GeminiLLM`` is imported on demand (it pulls in ``google-genai``): ``from
backline_google.llm import GeminiLLM``. Gemini Live, the realtime model, comes next.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .llm import GeminiLLM

__version__ = "0.1.0"
__all__ = ["GeminiLLM", "__version__"]


def __getattr__(name: str) -> Any:
    # ``GeminiLLM`` pulls in google-genai: loaded on first use, so that loading the
    # plugin (on every ``backline`` start) stays fast.
    if name == "GeminiLLM":
        from .llm import GeminiLLM

        return GeminiLLM
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
