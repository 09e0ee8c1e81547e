"""ChatContext, tools and tool choice -> Chat Completions request fields.

Pure functions on plain dicts (no ``openai`` import). The pairing of tool calls and
results is the SDK's provider kit (``backline.llm.pairing``: one rule, one place): its
turns are spelled as Chat Completions messages. See the plugin's README.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from backline.llm import (
    ChatContext,
    FunctionTool,
    NamedToolChoice,
    ToolChoice,
    ToolResult,
    arguments_object,
    check_tool_choice,
    pair_tool_calls,
)

#: Put before the output of a tool that failed (Chat Completions has no error flag).
ERROR_PREFIX = "Error: "


def convert_context(chat_ctx: ChatContext) -> list[dict[str, Any]]:
    """The ``messages`` list for ``chat_ctx``.

    - one ``system`` message first: the system/developer messages, in order, joined by
      a blank line (none when there are none);
    - user and assistant text; consecutive messages of one role are joined by a blank
      line (strict chat templates of local servers need alternating roles);
    - an assistant message carries its ``tool_calls`` (``arguments`` is JSON text: the
      call's own when it is a JSON object, ``{}`` when empty, else
      ``{"_invalid_arguments": "<text>"}``);
    - each call's result is a ``tool`` message right after that assistant message, in
      call order, wherever it sits in the context; a call without a result gets a
      synthetic one, an orphan result is dropped, a repeated call id is sent once;
      an error result starts with ``ERROR_PREFIX``;
    - the conversation starts and ends with a user turn (placeholders as for Claude).
    """
    paired = pair_tool_calls(chat_ctx)
    messages: list[dict[str, Any]] = (
        [{"role": "system", "content": paired.system}] if paired.system else []
    )
    for turn in paired.turns:
        texts = turn.texts
        if turn.role == "assistant":
            message: dict[str, Any] = {"role": "assistant", "content": "\n\n".join(texts) or None}
            calls = [_tool_call(c.call_id, c.name, c.arguments) for c in turn.calls]
            if calls:
                message["tool_calls"] = calls
            messages.append(message)
            continue
        messages.extend(_tool_message(r) for r in turn.results)
        if texts:
            messages.append({"role": "user", "content": "\n\n".join(texts)})
    return messages


def _tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    normalized = json.dumps(arguments_object(arguments), ensure_ascii=False, separators=(",", ":"))
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": normalized}}


def _tool_message(result: ToolResult) -> dict[str, Any]:
    content = result.output if result.output.strip() else ""
    if result.is_error:
        content = ERROR_PREFIX + content
    return {"role": "tool", "tool_call_id": result.call_id, "content": content}


def convert_tools(tools: Sequence[FunctionTool]) -> list[dict[str, Any]]:
    """``{"type": "function", "function": {"name", "description", "parameters"}}`` each."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        function: dict[str, Any] = {"name": tool.name, "parameters": tool.parameters}
        if tool.description:
            function["description"] = tool.description
        out.append({"type": "function", "function": function})
    return out


def convert_tool_choice(
    tool_choice: ToolChoice | None, tools: Sequence[FunctionTool]
) -> str | dict[str, Any] | None:
    """``"auto"`` / ``"none"`` / ``"required"`` / ``{"type": "function", "function":
    {"name"}}``; ``None`` without tools or choice. Bad choices raise ``LLMError``."""
    checked = check_tool_choice(tool_choice, tools)
    if isinstance(checked, NamedToolChoice):
        return {"type": "function", "function": {"name": checked.name}}
    return checked
