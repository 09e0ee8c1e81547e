"""ChatContext, tools and tool choice -> Anthropic Messages API request fields.

Pure functions on plain dicts (no ``anthropic`` import), so the rules are easy to
test and read. See docs/anthropic.md for the rules in prose.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .chat_context import ChatContext, ChatMessage, FunctionCall, FunctionCallOutput
from .llm import LLMError
from .tools import FunctionTool, NamedToolChoice, ToolChoice

#: The user turn inserted when the conversation would start with the assistant.
START_PLACEHOLDER = "(The conversation starts.)"
#: The user turn appended when the conversation would end with the assistant.
CONTINUE_PLACEHOLDER = "(continue)"
#: The result given to a tool call that has no output in the context.
MISSING_RESULT = "No result is available for this call (it was cancelled or is still running)."


@dataclass
class _Turn:
    role: str
    blocks: list[dict[str, Any]] = field(default_factory=list)
    call_ids: list[str] = field(default_factory=list)


def convert_context(chat_ctx: ChatContext) -> tuple[str, list[dict[str, Any]]]:
    """The system prompt and the ``messages`` list for ``chat_ctx``.

    - system/developer messages, in order, joined by a blank line, are the system prompt;
    - other items become content blocks; consecutive same-role blocks share a message;
    - a ``FunctionCall`` is an assistant ``tool_use`` block (``input`` = parsed arguments);
    - its ``FunctionCallOutput`` is a ``tool_result`` block placed first in the user
      message right after that assistant message (wherever the output sits in the
      context), ``is_error`` kept;
    - a call without an output gets a synthetic result (``MISSING_RESULT``); an output
      without a call, a repeated call id, and ``AgentHandoff`` items are dropped;
    - empty or whitespace-only messages are left out;
    - the messages start and end with a user turn (placeholders are inserted if needed).
    """
    system_parts: list[str] = []
    outputs: dict[str, FunctionCallOutput] = {}
    output_at: dict[str, int] = {}
    for i, item in enumerate(chat_ctx.items):
        if isinstance(item, FunctionCallOutput) and item.call_id not in outputs:
            outputs[item.call_id] = item
            output_at[item.call_id] = i

    turns: list[_Turn] = []
    seen_calls: set[str] = set()
    placed: set[str] = set()  # calls whose results are already in a user turn

    def turn(role: str) -> _Turn:
        if turns and turns[-1].role == role:
            return turns[-1]
        previous = turns[-1] if turns else None
        new = _Turn(role)
        turns.append(new)
        if previous is not None and previous.call_ids:
            new.blocks.extend(_result_block(c, outputs.get(c)) for c in previous.call_ids)
            placed.update(previous.call_ids)
        return new

    for i, item in enumerate(chat_ctx.items):
        if isinstance(item, ChatMessage):
            if item.role in ("system", "developer"):
                if item.content.strip():
                    system_parts.append(item.content)
            elif item.content.strip():
                last = turns[-1] if turns else None
                if (
                    item.role == "assistant"
                    and last is not None
                    and any(output_at.get(c, i) < i for c in last.call_ids)
                ):
                    turn("user")  # a result came before this text: close the calls' turn
                turn(item.role).blocks.append({"type": "text", "text": item.content})
        elif isinstance(item, FunctionCall):
            if item.call_id in seen_calls:
                continue
            seen_calls.add(item.call_id)
            assistant = turn("assistant")
            assistant.blocks.append(
                {
                    "type": "tool_use",
                    "id": item.call_id,
                    "name": item.name,
                    "input": _parse_arguments(item.arguments),
                }
            )
            assistant.call_ids.append(item.call_id)
        elif (
            isinstance(item, FunctionCallOutput)
            and item.call_id in seen_calls
            and item.call_id not in placed
        ):
            # Results go right after their calls' assistant turn: the first output
            # of that turn closes it. An output seen before its call is placed when
            # the call's turn closes; an orphan output is never placed.
            turn("user")
        # AgentHandoff: skipped.

    if not turns or turns[0].role != "user":
        turns.insert(0, _Turn("user", [{"type": "text", "text": START_PLACEHOLDER}]))
    if turns[-1].role == "assistant":
        if turns[-1].call_ids:
            turn("user")  # the results of the trailing calls
        else:
            turns.append(_Turn("user", [{"type": "text", "text": CONTINUE_PLACEHOLDER}]))
    messages = [{"role": t.role, "content": t.blocks} for t in turns]
    return "\n\n".join(system_parts), messages


def _parse_arguments(arguments: str) -> dict[str, Any]:
    if not arguments.strip():
        return {}
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError:
        return {"_invalid_arguments": arguments}
    return parsed if isinstance(parsed, dict) else {"_invalid_arguments": arguments}


def _result_block(call_id: str, output: FunctionCallOutput | None) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id}
    if output is None:
        block["content"] = MISSING_RESULT
        return block
    if output.output.strip():
        block["content"] = output.output
    if output.is_error:
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
    when there are no tools or no choice (the API then defaults to ``auto``)."""
    if tool_choice is None or not tools:
        if isinstance(tool_choice, NamedToolChoice) or tool_choice == "required":
            raise LLMError(f"tool_choice {tool_choice!r} needs tools, but none were given")
        return None
    if isinstance(tool_choice, NamedToolChoice):
        names = [t.name for t in tools]
        if tool_choice.name not in names:
            raise LLMError(
                f"tool_choice names the tool {tool_choice.name!r}, which is not among the "
                f"tools given: {names}"
            )
        return {"type": "tool", "name": tool_choice.name}
    if tool_choice == "required":
        return {"type": "any"}
    if tool_choice in ("auto", "none"):
        return {"type": tool_choice}
    raise LLMError(f"unknown tool_choice {tool_choice!r}")
