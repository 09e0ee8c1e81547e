"""backline: background agents behind a voice conversation.

The public API is re-exported here: the runtime (``Session``, ``Agent``,
``AgentTask``, ``SpeechHandle``, ``RunContext``, events), the model-facing types
(``ChatContext``, ``function_tool``, ``ToolError`` ...), background sessions, and
``get_key`` (an API key: the environment variable, else the stored key).
"""

from typing import TYPE_CHECKING, Any

from .background import (
    UNSET,
    Answer,
    BackgroundContext,
    BackgroundDefinition,
    HandlingOptions,
    ReplyPromptArgs,
    UpdateKind,
    UpdatePromptArgs,
    background,
)
from .keys import KeyStoreError, get_key
from .limits import Limits
from .llm import (
    LLM,
    AgentHandoff,
    ChatContext,
    ChatItem,
    ChatMessage,
    FunctionCall,
    FunctionCallOutput,
    FunctionTool,
    LLMError,
    LLMStream,
    LLMTimeoutError,
    RealtimeSession,
    StopResponse,
    ToolChoice,
    ToolError,
    function_tool,
    named_tool,
)
from .session import Session
from .voice import (
    Agent,
    AgentHandoffEvent,
    AgentState,
    AgentStateChanged,
    AgentTask,
    BackgroundAlert,
    BackgroundMessage,
    BackgroundReply,
    BackgroundState,
    BackgroundStatus,
    CloseEvent,
    ConversationItemAdded,
    ErrorEvent,
    FunctionToolsExecuted,
    InMemoryTextOutput,
    LLMMetrics,
    PlayoutResult,
    RunContext,
    RunResult,
    SessionPart,
    SpeechCreated,
    SpeechHandle,
    TextOutput,
    ToolReply,
    ToolUpdated,
    UserInputTranscribed,
    UserState,
    UserStateChanged,
)

if TYPE_CHECKING:
    from .mcp import MCPServerHTTP, MCPServerStdio
    from .plugins import hookimpl

from ._version import __version__


def __getattr__(name: str) -> Any:
    # ``hookimpl`` is pluggy's marker: loaded on first use, so ``import backline``
    # does not import pluggy (plugin modules, which use it, pay for it).
    if name == "hookimpl":
        from .plugins import hookimpl

        globals()["hookimpl"] = hookimpl
        return hookimpl
    if name in ("MCPServerStdio", "MCPServerHTTP"):  # backline.mcp, loaded on first use
        from . import mcp

        value = getattr(mcp, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "LLM",
    "UNSET",
    "Agent",
    "AgentHandoff",
    "AgentHandoffEvent",
    "AgentState",
    "AgentStateChanged",
    "AgentTask",
    "Answer",
    "BackgroundAlert",
    "BackgroundContext",
    "BackgroundDefinition",
    "BackgroundMessage",
    "BackgroundReply",
    "BackgroundState",
    "BackgroundStatus",
    "ChatContext",
    "ChatItem",
    "ChatMessage",
    "CloseEvent",
    "ConversationItemAdded",
    "ErrorEvent",
    "FunctionCall",
    "FunctionCallOutput",
    "FunctionTool",
    "FunctionToolsExecuted",
    "HandlingOptions",
    "InMemoryTextOutput",
    "KeyStoreError",
    "LLMError",
    "LLMMetrics",
    "LLMStream",
    "LLMTimeoutError",
    "Limits",
    "MCPServerHTTP",
    "MCPServerStdio",
    "PlayoutResult",
    "RealtimeSession",
    "ReplyPromptArgs",
    "RunContext",
    "RunResult",
    "Session",
    "SessionPart",
    "SpeechCreated",
    "SpeechHandle",
    "StopResponse",
    "TextOutput",
    "ToolChoice",
    "ToolError",
    "ToolReply",
    "ToolUpdated",
    "UpdateKind",
    "UpdatePromptArgs",
    "UserInputTranscribed",
    "UserState",
    "UserStateChanged",
    "__version__",
    "background",
    "function_tool",
    "get_key",
    "hookimpl",
    "named_tool",
]
