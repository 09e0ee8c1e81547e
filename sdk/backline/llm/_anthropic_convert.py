"""ChatContext, tools and tool choice -> Anthropic Messages API request fields.

Pure functions on plain dicts (no ``anthropic`` import), so the rules are easy to
test and read. The pairing of tool calls and results is the kit's
(``backline.llm.pairing``); this spells its turns as Anthropic content blocks. See
docs/anthropic.md for the rules in prose.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .chat_context import ChatContext, FunctionCall
from .pairing import ToolResult, TurnPart, arguments_object, pair_tool_calls
from .provider import check_tool_choice
from .tools import FunctionTool, NamedToolChoice, ToolChoice


def convert_context(chat_ctx: ChatContext) -> tuple[str, list[dict[str, Any]]]:
    """The system prompt and the ``messages`` list for ``chat_ctx``.

    Each turn of ``pair_tool_calls`` is one message: text is a ``text`` block, a call a
    ``tool_use`` block (``input`` = ``arguments_object``), a result a ``tool_result``
    block (``is_error`` kept; an empty output is sent without ``content``).
    """
    paired = pair_tool_calls(chat_ctx)
    messages = [
        {"role": turn.role, "content": [_block(part) for part in turn.parts]}
        for turn in paired.turns
    ]
    return paired.system, messages


def _block(part: TurnPart) -> dict[str, Any]:
    if isinstance(part, str):
        return {"type": "text", "text": part}
    if isinstance(part, FunctionCall):
        return {
            "type": "tool_use",
            "id": part.call_id,
            "name": part.name,
            "input": arguments_object(part.arguments),
        }
    return _result_block(part)


def _result_block(result: ToolResult) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": result.call_id}
    if result.output.strip():
        block["content"] = result.output
    if result.is_error:
        block["is_error"] = True
    return block


def convert_tools(tools: Sequence[FunctionTool]) -> list[dict[str, Any]]:
    """Anthropic tool definitions: ``name``, ``description``, ``input_schema``."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        spec: dict[str, Any] = {"name": tool.name, "input_schema": tool.parameters}
        if tool.description:
            spec["description"] = tool.description
        out.append(spec)
    return out


def convert_tool_choice(
    tool_choice: ToolChoice | None, tools: Sequence[FunctionTool]
) -> dict[str, Any] | None:
    """``auto`` / ``any`` (required) / ``none`` / ``{"type": "tool", "name"}``; ``None``
    when there are no tools or no choice (the API then defaults to ``auto``). Bad
    choices raise ``LLMError`` (``check_tool_choice``)."""
    checked = check_tool_choice(tool_choice, tools)
    if checked is None:
        return None
    if isinstance(checked, NamedToolChoice):
        return {"type": "tool", "name": checked.name}
    return {"type": "any" if checked == "required" else checked}
