"""Fakes and helpers for testing backline code and plugins.

``ScriptedLLM`` (with ``text``, ``tool_calls``, ``error``), ``FakeAnthropicServer``,
``virtual_clock``; for plugin authors ``BackgroundDriver``, ``drive_background``
and ``SessionFactory``. The pytest fixtures ``scripted_llm``, ``fake_anthropic``,
``virtual_clock``, ``make_session``, ``plugin_manager`` and ``drive_background``
are registered automatically when backline is installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .clock import VirtualClock, virtual_clock
from .fake_realtime import FakeRealtimeSession
from .plugin_kit import (
    BackgroundDriver,
    BackgroundRun,
    ScriptedVoiceAgent,
    SessionFactory,
    drive_background,
)
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
    "BackgroundDriver",
    "BackgroundRun",
    "FakeAnthropicServer",
    "FakeRealtimeSession",
    "LLMRequest",
    "ScriptedLLM",
    "ScriptedResponse",
    "ScriptedToolCall",
    "ScriptedVoiceAgent",
    "SessionFactory",
    "VirtualClock",
    "drive_background",
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
