"""Model-facing types: the chat context, function tools, the LLM protocol, the provider kit.

The provider kit (``backline.llm.provider``: retries, deadlines, the attempt loop;
``backline.llm.pairing``: tool calls paired with their outputs) is what every model
adapter is built on; its main names are re-exported here, loaded on first use: only
adapters need them, and adapters are imported on demand, so ``import backline`` does
not pay for the kit. The Anthropic adapter lives in ``backline.llm.anthropic`` and is
imported on demand (it pulls in the ``anthropic`` package).
"""

from typing import TYPE_CHECKING, Any

from .chat_context import (
    AgentHandoff,
    ChatContext,
    ChatItem,
    ChatMessage,
    FunctionCall,
    FunctionCallOutput,
    Role,
    item_to_dict,
    peek_extra,
)
from .llm import (
    LLM,
    AudioDelta,
    ChatChunk,
    LLMError,
    LLMStream,
    LLMTimeoutError,
    TextDelta,
    ToolCallChunk,
    Usage,
    close_llm,
    llm_label,
    warm_up_llm,
)
from .realtime import ContextFollower, RealtimeSession
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

if TYPE_CHECKING:
    from .pairing import PairedContext, ToolResult, Turn, arguments_object, pair_tool_calls
    from .provider import (
        BrokenStream,
        ProviderFailure,
        ProviderStreams,
        RequestPolicy,
        StreamDecoder,
        check_tool_choice,
        failed_stream,
        retry_after_seconds,
        retryable_status,
    )

# The provider kit's names, and the module of each (loaded by ``__getattr__``).
_KIT = {
    **dict.fromkeys(
        ("PairedContext", "ToolResult", "Turn", "arguments_object", "pair_tool_calls"),
        "pairing",
    ),
    **dict.fromkeys(
        (
            "BrokenStream",
            "ProviderFailure",
            "ProviderStreams",
            "RequestPolicy",
            "StreamDecoder",
            "check_tool_choice",
            "failed_stream",
            "retry_after_seconds",
            "retryable_status",
        ),
        "provider",
    ),
}

__all__ = [
    "LLM",
    "AgentHandoff",
    "AudioDelta",
    "BrokenStream",
    "ChatChunk",
    "ChatContext",
    "ChatItem",
    "ChatMessage",
    "ContextFollower",
    "FunctionCall",
    "FunctionCallOutput",
    "FunctionTool",
    "JsonSnapshot",
    "LLMError",
    "LLMStream",
    "LLMTimeoutError",
    "NamedToolChoice",
    "PairedContext",
    "ProviderFailure",
    "ProviderStreams",
    "RealtimeSession",
    "RequestPolicy",
    "Role",
    "StopResponse",
    "StreamDecoder",
    "TextDelta",
    "ToolArgumentsError",
    "ToolCallChunk",
    "ToolChoice",
    "ToolError",
    "ToolResult",
    "Turn",
    "Usage",
    "arguments_object",
    "check_tool_choice",
    "close_llm",
    "failed_stream",
    "find_function_tools",
    "function_tool",
    "is_valid_tool_output",
    "item_to_dict",
    "json_snapshot",
    "llm_label",
    "named_tool",
    "pair_tool_calls",
    "peek_extra",
    "render_tool_output",
    "retry_after_seconds",
    "retryable_status",
    "serialize_tool_output",
    "snapshot_tool_output",
    "validate_tool_output",
    "warm_up_llm",
]


def __getattr__(name: str) -> Any:
    module = _KIT.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if module == "pairing":
        from . import pairing

        value = getattr(pairing, name)
    else:
        from . import provider

        value = getattr(provider, name)
    globals()[name] = value  # found directly from now on
    return value
