"""Fakes and helpers for testing backline code and plugins.

``ScriptedLLM`` (with ``text``, ``tool_calls``, ``error``), ``FakeAnthropicServer``,
``virtual_clock``; the pytest fixtures ``scripted_llm``, ``fake_anthropic`` and
``virtual_clock`` are registered automatically when backline is installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .clock import VirtualClock, virtual_clock
from .fake_realtime import FakeRealtimeSession
from .scripted_llm import (
    LLMRequest,
    ScriptedLLM,
    ScriptedResponse,
    ScriptedToolCall,
    error,
    text,
    tool_calls,
)

if TYPE_CHECKING:
    from .fake_anthropic import FakeAnthropicServer

__all__ = [
    "FakeAnthropicServer",
    "FakeRealtimeSession",
    "LLMRequest",
    "ScriptedLLM",
    "ScriptedResponse",
    "ScriptedToolCall",
    "VirtualClock",
    "error",
    "text",
    "tool_calls",
    "virtual_clock",
]


def __getattr__(name: str) -> Any:
    if name == "FakeAnthropicServer":
        from .fake_anthropic import FakeAnthropicServer

        return FakeAnthropicServer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
