"""ChatContext, tools and tool choice -> ``generate_content`` arguments.

Pure functions on plain dicts in google-genai's own field names (``ContentDict``,
``ToolDict``, ``ToolConfigDict``: the SDK validates them and spells them on the wire);
no ``google.genai`` import. The pairing of tool calls and results is the SDK's provider
kit (``backline.llm.pairing``): its turns are spelled as Gemini ``contents``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from backline.llm import (
    ChatContext,
    FunctionCall,
    FunctionTool,
    NamedToolChoice,
    ToolChoice,
    ToolResult,
    arguments_object,
    check_tool_choice,
    pair_tool_calls,
)

#: How many of the model's own tool calls are remembered (their ids and signatures).
MAX_REMEMBERED_CALLS = 4096


class CallMemory:
    """The tool calls Gemini made, by call id: whether the id is Gemini's own (it is sent
    back with the call and its result; a call id another model or backline made is not)
    and the call's ``thoughtSignature`` (Gemini's thinking models need it sent back with
    the call). Bounded: the oldest are forgotten first."""

    def __init__(self, limit: int = MAX_REMEMBERED_CALLS) -> None:
        self._limit = limit
        self._calls: OrderedDict[str, tuple[bool, bytes | None]] = OrderedDict()

    def remember(self, call_id: str, *, own_id: bool, signature: bytes | None) -> None:
        self._calls[call_id] = (own_id, signature)
        self._calls.move_to_end(call_id)
        while len(self._calls) > self._limit:
            self._calls.popitem(last=False)

    def own_id(self, call_id: str) -> bool:
        known = self._calls.get(call_id)
        return known is not None and known[0]

    def signature(self, call_id: str) -> bytes | None:
        known = self._calls.get(call_id)
        return known[1] if known is not None else None


def convert_context(
    chat_ctx: ChatContext, memory: CallMemory | None = None
) -> tuple[str | None, list[dict[str, Any]]]:
    """The system instruction (``None`` when there is none) and the ``contents``.

    - the system/developer messages, in order, joined by a blank line, are the
      ``system_instruction``;
    - a user turn (role ``user``) starts with a ``function_response`` part per result
      of the calls before it, in call order, then its text (consecutive messages joined
      by a blank line); a model turn (role ``model``) is its text and ``function_call``
      parts as they came;
    - a call's ``args`` is its arguments as a JSON object (``{}`` when empty,
      ``{"_invalid_arguments": "<text>"}`` when not an object); a result's ``response``
      is ``{"output": text}``, or ``{"error": text}`` for a failed call (the two keys
      the API reads);
    - a call's id, and its result's, are sent only when Gemini made it (``memory``),
      with its thought signature;
    - the turns start and end with a user turn (the kit's placeholders).
    """
    memory = memory if memory is not None else CallMemory()
    paired = pair_tool_calls(chat_ctx)
    contents: list[dict[str, Any]] = []
    for turn in paired.turns:
        parts: list[dict[str, Any]] = []
        if turn.role == "assistant":
            texts: list[str] = []
            for part in turn.parts:
                if isinstance(part, str):
                    texts.append(part)
                elif isinstance(part, FunctionCall):
                    if texts:
                        parts.append({"text": "\n\n".join(texts)})
                        texts = []
                    parts.append(_call_part(part, memory))
            if texts:
                parts.append({"text": "\n\n".join(texts)})
            contents.append({"role": "model", "parts": parts})
            continue
        parts.extend(_response_part(r, memory) for r in turn.results)
        if turn.texts:
            parts.append({"text": "\n\n".join(turn.texts)})
        contents.append({"role": "user", "parts": parts})
    return (paired.system or None), contents


def _call_part(call: FunctionCall, memory: CallMemory) -> dict[str, Any]:
    function_call: dict[str, Any] = {"name": call.name, "args": arguments_object(call.arguments)}
    if memory.own_id(call.call_id):
        function_call["id"] = call.call_id
    part: dict[str, Any] = {"function_call": function_call}
    signature = memory.signature(call.call_id)
    if signature is not None:
        part["thought_signature"] = signature
    return part


def _response_part(result: ToolResult, memory: CallMemory) -> dict[str, Any]:
    key = "error" if result.is_error else "output"
    response: dict[str, Any] = {"name": result.name, "response": {key: result.output}}
    if memory.own_id(result.call_id):
        response["id"] = result.call_id
    return {"function_response": response}


def convert_tools(tools: Sequence[FunctionTool]) -> list[dict[str, Any]]:
    """One ``Tool`` with a function declaration per tool (its JSON Schema as
    ``parameters_json_schema``, which the API takes as it is); ``[]`` without tools."""
    if not tools:
        return []
    declarations: list[dict[str, Any]] = []
    for tool in tools:
        declaration: dict[str, Any] = {
            "name": tool.name,
            "parameters_json_schema": tool.parameters,
        }
        if tool.description:
            declaration["description"] = tool.description
        declarations.append(declaration)
    return [{"function_declarations": declarations}]


def convert_tool_choice(
    tool_choice: ToolChoice | None, tools: Sequence[FunctionTool]
) -> dict[str, Any] | None:
    """The ``tool_config``: ``AUTO`` / ``NONE`` / ``ANY`` (``required``) / ``ANY`` with
    the one allowed name (a named tool); ``None`` without tools or choice. Bad choices
    raise ``LLMError`` (before any request)."""
    checked = check_tool_choice(tool_choice, tools)
    if checked is None:
        return None
    if isinstance(checked, NamedToolChoice):
        config: dict[str, Any] = {"mode": "ANY", "allowed_function_names": [checked.name]}
    else:
        config = {"mode": {"auto": "AUTO", "none": "NONE", "required": "ANY"}[checked]}
    return {"function_calling_config": config}
