"""ChatContext -> OpenAI Realtime conversation items, and the request's other fields.

Pure functions on plain dicts (no ``openai`` or ``websockets`` import). Each item has a
*signature*: what it says, without its id. The realtime LLM keeps the signatures of the
items the server holds, and a sync sends only the difference (see ``plan_sync``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from backline.llm import (
    ChatContext,
    ChatMessage,
    FunctionCall,
    FunctionCallOutput,
    FunctionTool,
    NamedToolChoice,
    ToolChoice,
    arguments_object,
    check_tool_choice,
)

#: Put before the output of a tool that failed (the protocol has no error flag).
ERROR_PREFIX = "Error: "

Signature = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Item:
    """One conversation item: its signature, and its body for ``conversation.item.create``
    (without an id: one is given when it is sent)."""

    signature: Signature
    body: dict[str, Any]


def new_item_id() -> str:
    """A client-chosen item id (the protocol allows up to 32 characters)."""
    return "bl_" + uuid.uuid4().hex[:24]


def _arguments(arguments: str) -> str:
    return json.dumps(arguments_object(arguments), ensure_ascii=False, separators=(",", ":"))


def message_item(role: str, text: str) -> Item:
    kind = "output_text" if role == "assistant" else "input_text"
    return Item(
        ("message", role, text),
        {"type": "message", "role": role, "content": [{"type": kind, "text": text}]},
    )


def call_item(call_id: str, name: str, arguments: str) -> Item:
    args = _arguments(arguments)
    return Item(
        ("function_call", call_id, name, args),
        {"type": "function_call", "call_id": call_id, "name": name, "arguments": args},
    )


def output_item(call_id: str, output: str) -> Item:
    return Item(
        ("function_call_output", call_id, output),
        {"type": "function_call_output", "call_id": call_id, "output": output},
    )


def convert_context(chat_ctx: ChatContext) -> tuple[str, list[Item]]:
    """The instructions (system/developer messages, in order, joined by a blank line)
    and the conversation items, in the context's order: one message item per user or
    assistant message (empty ones left out), one ``function_call`` per call (a repeated
    call id once), one ``function_call_output`` per result whose call came before it
    (others dropped: the server refuses an output for an unknown call). An error result
    starts with ``ERROR_PREFIX``. A call still running has no output yet: it stays open."""
    system: list[str] = []
    items: list[Item] = []
    calls: set[str] = set()
    outputs: set[str] = set()
    for entry in chat_ctx.items:
        if isinstance(entry, ChatMessage):
            if entry.role in ("system", "developer"):
                if entry.content.strip():
                    system.append(entry.content)
            elif entry.content.strip():
                items.append(message_item(entry.role, entry.content))
        elif isinstance(entry, FunctionCall):
            if entry.call_id not in calls:
                calls.add(entry.call_id)
                items.append(call_item(entry.call_id, entry.name, entry.arguments))
        elif (
            isinstance(entry, FunctionCallOutput)
            and entry.call_id in calls
            and entry.call_id not in outputs
        ):
            outputs.add(entry.call_id)
            text = (ERROR_PREFIX if entry.is_error else "") + entry.output
            items.append(output_item(entry.call_id, text))
    return "\n\n".join(system), items


def server_item(item: dict[str, Any]) -> Item | None:
    """The signature of an item the server made (``response.done``'s output), or
    ``None`` for one that is not part of the text conversation."""
    kind = item.get("type")
    if kind == "function_call":
        return call_item(
            str(item.get("call_id") or ""),
            str(item.get("name") or ""),
            str(item.get("arguments") or ""),
        )
    if kind == "message":
        texts = [
            str(part.get("text") or part.get("transcript") or "")
            for part in item.get("content") or ()
            if isinstance(part, dict)
        ]
        return message_item(str(item.get("role") or "assistant"), "".join(texts))
    return None


@dataclass(frozen=True, slots=True)
class SyncPlan:
    """What one sync sends: the server items to delete (ids), then the items to create."""

    keep: int
    delete: list[str]
    create: list[Item]


def _common_prefix(held: Sequence[tuple[str, Signature]], wanted: Sequence[Item]) -> int:
    """How many of the first items the server holds say what the context's do."""
    keep = 0
    for (_, signature), item in zip(held, wanted, strict=False):
        if signature != item.signature:
            break
        keep += 1
    return keep


def plan_sync(held: Sequence[tuple[str, Signature]], wanted: Sequence[Item]) -> SyncPlan:
    """The server holds ``held`` (id, signature), in order; the runtime's context is
    ``wanted``. The longest common prefix stays; the server's items after it are
    deleted and the context's items after it are created (an interrupted reply
    truncated to what was heard, a tool result that replaced nothing: both differ from
    what the server holds, and are replaced)."""
    keep = _common_prefix(held, wanted)
    return SyncPlan(keep, [item_id for item_id, _ in held[keep:]], list(wanted[keep:]))


def plan_truncation(
    held: Sequence[tuple[str, Signature]],
    wanted: Sequence[Item],
    audio_ms: dict[str, float],
) -> tuple[int, int, Signature] | None:
    """Where a spoken reply was cut: the first item that differs is an assistant message
    the server holds with audio (``audio_ms``: its milliseconds), and the context has it
    cut to a prefix of its transcript (what the user heard). Returns its index, the
    ``audio_end_ms`` for ``conversation.item.truncate`` (the heard share of its audio,
    in proportion to the text: the output cut it the same way) and its signature after
    the cut; ``None`` when there is no such item."""
    keep = _common_prefix(held, wanted)
    if keep >= len(held) or keep >= len(wanted):
        return None
    item_id, signature = held[keep]
    cut = wanted[keep].signature
    total = audio_ms.get(item_id)
    if (
        total is None
        or signature[:2] != ("message", "assistant")
        or cut[:2] != ("message", "assistant")
    ):
        return None
    full, heard = signature[2].strip(), cut[2].strip()
    if not full or not heard or heard == full or not full.startswith(heard):
        return None
    return keep, max(1, int(total * len(heard) / len(full))), cut


def session_config(audio: bool, voice: str | None, transcription_model: str) -> dict[str, Any]:
    """``session.update``'s session: text, or (``audio``) 24 kHz PCM in and out, the
    input transcribed, and no turn detection (backline's voice pipeline ends turns)."""
    if not audio:
        return {"type": "realtime", "output_modalities": ["text"]}
    pcm = {"type": "audio/pcm", "rate": 24000}
    output: dict[str, Any] = {"format": pcm}
    if voice:
        output["voice"] = voice
    return {
        "type": "realtime",
        "output_modalities": ["audio"],
        "audio": {
            "input": {
                "format": pcm,
                "transcription": {"model": transcription_model},
                "turn_detection": None,
            },
            "output": output,
        },
    }


def convert_tools(tools: Sequence[FunctionTool]) -> list[dict[str, Any]]:
    """``{"type": "function", "name", "description", "parameters"}`` each."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        spec: dict[str, Any] = {"type": "function", "name": tool.name}
        if tool.description:
            spec["description"] = tool.description
        spec["parameters"] = tool.parameters
        out.append(spec)
    return out


def convert_tool_choice(
    tool_choice: ToolChoice | None, tools: Sequence[FunctionTool]
) -> str | dict[str, Any] | None:
    """``"auto"`` / ``"none"`` / ``"required"`` / ``{"type": "function", "name"}``;
    ``None`` without tools or choice. Bad choices raise ``LLMError``."""
    checked = check_tool_choice(tool_choice, tools)
    if isinstance(checked, NamedToolChoice):
        return {"type": "function", "name": checked.name}
    return checked
