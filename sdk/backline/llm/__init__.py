"""Model-facing types: the chat context, function tools, the LLM protocol.

The Anthropic adapter lives in ``backline.llm.anthropic`` and is imported on
demand (it pulls in the ``anthropic`` package).
"""

from .chat_context import (
    AgentHandoff,
    ChatContext,
    ChatItem,
    ChatMessage,
    FunctionCall,
    FunctionCallOutput,
    Role,
    item_to_dict,
)
from .llm import (
    LLM,
    ChatChunk,
    LLMError,
    LLMStream,
    LLMTimeoutError,
    TextDelta,
    ToolCallChunk,
    Usage,
)
from .realtime import RealtimeSession
from .tool_output import (
    JsonSnapshot,
    is_valid_tool_output,
    json_snapshot,
    render_tool_output,
    serialize_tool_output,
    snapshot_tool_output,
    validate_tool_output,
)
from .tools import (
    FunctionTool,
    NamedToolChoice,
    StopResponse,
    ToolArgumentsError,
    ToolChoice,
    ToolError,
    find_function_tools,
    function_tool,
    named_tool,
)

__all__ = [
    "LLM",
    "AgentHandoff",
    "ChatChunk",
    "ChatContext",
    "ChatItem",
    "ChatMessage",
    "FunctionCall",
    "FunctionCallOutput",
    "FunctionTool",
    "JsonSnapshot",
    "LLMError",
    "LLMStream",
    "LLMTimeoutError",
    "NamedToolChoice",
    "RealtimeSession",
    "Role",
    "StopResponse",
    "TextDelta",
    "ToolArgumentsError",
    "ToolCallChunk",
    "ToolChoice",
    "ToolError",
    "Usage",
    "find_function_tools",
    "function_tool",
    "is_valid_tool_output",
    "item_to_dict",
    "json_snapshot",
    "named_tool",
    "render_tool_output",
    "serialize_tool_output",
    "snapshot_tool_output",
    "validate_tool_output",
]
