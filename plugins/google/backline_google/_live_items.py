"""ChatContext -> what a Gemini Live session is sent, and what it holds.

Pure functions on plain dicts in google-genai's field names (``ContentDict``,
``FunctionResponseDict``, ``ToolDict``); no ``google.genai`` import. The context is cut
into *units*, each with a *signature* (what it says, whitespace-normalized):

- ``user``: a user message (typed, heard, or a background update) — a user turn;
- ``model``: a run of the assistant's messages and tool calls — a model turn (its text
  joined, its calls as a set: the runtime orders one step's text and calls by time);
- ``output``: a tool call's result — a ``FunctionResponse`` (a call the session made)
  or a user turn with a ``functionResponse`` part (any other call).

The Live LLM keeps the signatures of the units the session holds. Gemini Live cannot
delete turns: when those are not a prefix of the context's, the context diverged
(``plan`` gives ``None``) and a new session is seeded with the whole context.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from backline.llm import (
    ChatContext,
    ChatMessage,
    FunctionCall,
    FunctionCallOutput,
    FunctionTool,
    arguments_object,
)

Signature = tuple[Any, ...]

INSTRUCTIONS_PREFIX = "Instructions for your next reply (from the system, not the user):\n"
"""Begins the user turn that carries a reply's own instructions (see ``operations``)."""


def normalized(text: str) -> str:
    """``text`` with its whitespace runs made single spaces (the comparison form)."""
    return " ".join(text.split())


def canonical_args(arguments: str | dict[str, Any]) -> str:
    """A call's arguments as compact JSON with sorted keys (the comparison form)."""
    value = arguments if isinstance(arguments, dict) else arguments_object(arguments)
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class Call:
    call_id: str
    name: str
    args: str  # canonical JSON


@dataclass(frozen=True, slots=True)
class Unit:
    """One unit of the conversation (see the module doc)."""

    kind: Literal["user", "model", "output"]
    text: str = ""
    calls: tuple[Call, ...] = ()
    call_id: str = ""
    name: str = ""
    is_error: bool = False
    silent: bool = False  # a silent background update (its sync never asks a reply of it)
    urgent: bool = False  # an urgent background update (``extra["interrupt"]``)

    @property
    def signature(self) -> Signature:
        if self.kind == "model":
            calls = tuple(sorted((c.call_id, c.name, c.args) for c in self.calls))
            return ("model", normalized(self.text), calls)
        if self.kind == "output":
            return ("output", self.call_id, normalized(self.text), self.is_error)
        return ("user", normalized(self.text))

    def content(self) -> dict[str, Any]:
        """This unit as a ``ContentDict`` (a call's id is never sent in content)."""
        if self.kind == "user":
            return {"role": "user", "parts": [{"text": self.text}]}
        if self.kind == "output":
            return {"role": "user", "parts": [{"function_response": self.function_response()}]}
        parts: list[dict[str, Any]] = []
        if self.text.strip():
            parts.append({"text": self.text})
        for call in self.calls:
            parts.append({"function_call": {"name": call.name, "args": json.loads(call.args)}})
        return {"role": "model", "parts": parts or [{"text": ""}]}

    def function_response(self, scheduling: str | None = None) -> dict[str, Any]:
        """This output as a ``FunctionResponseDict`` (``{"output": text}``, or
        ``{"error": text}`` for a failed tool: the keys Gemini reads)."""
        key = "error" if self.is_error else "output"
        response: dict[str, Any] = {"name": self.name, "response": {key: self.text}}
        if scheduling is not None:
            response["id"] = self.call_id
            response["scheduling"] = scheduling
        return response


def user_unit(text: str, *, silent: bool = False, urgent: bool = False) -> Unit:
    return Unit("user", text=text, silent=silent, urgent=urgent)


def model_unit(text: str, calls: Sequence[Call] = ()) -> Unit:
    return Unit("model", text=text, calls=tuple(calls))


def output_unit(call_id: str, name: str, text: str, is_error: bool = False) -> Unit:
    return Unit("output", text=text, call_id=call_id, name=name, is_error=is_error)


@dataclass(frozen=True, slots=True)
class Converted:
    """A context as the Live session sees it: its ``system`` instruction (the system and
    developer messages before the conversation), its ``units``, and the reply's own
    ``instructions`` (system messages after the conversation started, or after the first
    when there is no conversation yet: the runtime adds them for one reply)."""

    system: str
    units: list[Unit]
    instructions: str


def convert_context(chat_ctx: ChatContext) -> Converted:
    """Cut ``chat_ctx`` into units (see the module doc). Empty messages are left out; a
    call's repeated id counts once; a result whose call is not before it is dropped."""
    system: list[str] = []
    instructions: list[str] = []
    units: list[Unit] = []
    texts: list[str] = []
    calls: list[Call] = []
    seen_calls: dict[str, str] = {}
    answered: set[str] = set()
    started = False

    def close_run() -> None:
        if texts or calls:
            units.append(model_unit("".join(texts), calls))
            texts.clear()
            calls.clear()

    for item in chat_ctx.items:
        if isinstance(item, ChatMessage):
            if item.role in ("system", "developer"):
                if item.content.strip():
                    (instructions if started else system).append(item.content)
                continue
            if not item.content.strip():
                continue
            started = True
            if item.role == "assistant":
                texts.append(item.content)
                continue
            close_run()
            silent, urgent = bool(item.extra.get("silent")), bool(item.extra.get("interrupt"))
            units.append(user_unit(item.content, silent=silent, urgent=urgent))
        elif isinstance(item, FunctionCall):
            if item.call_id in seen_calls:
                continue
            started = True
            seen_calls[item.call_id] = item.name
            calls.append(Call(item.call_id, item.name, canonical_args(item.arguments)))
        elif isinstance(item, FunctionCallOutput):
            if item.call_id not in seen_calls or item.call_id in answered:
                continue
            close_run()
            answered.add(item.call_id)
            name = item.name or seen_calls[item.call_id]
            units.append(output_unit(item.call_id, name, item.output, item.is_error))
    close_run()
    if not started and len(system) > 1:
        # No conversation yet: the first is the agent's, the others the reply's own.
        system, instructions = system[:1], system[1:]
    return Converted("\n\n".join(system), units, "\n\n".join(instructions))


def plan(held: Sequence[Signature], wanted: Sequence[Unit]) -> list[Unit] | None:
    """The units to send when the session holds ``held`` and the context is ``wanted``;
    ``None`` when ``held`` is not a prefix of ``wanted`` (the context diverged)."""
    if len(held) > len(wanted):
        return None
    for signature, unit in zip(held, wanted, strict=False):
        if signature != unit.signature:
            return None
    return list(wanted[len(held) :])


def unheld(held: Sequence[Signature], wanted: Sequence[Unit]) -> list[Unit]:
    """The units of ``wanted`` past the longest prefix it shares with ``held`` (what the
    session has not got, whether or not the context diverged)."""
    shared = 0
    for signature, unit in zip(held, wanted, strict=False):
        if signature != unit.signature:
            break
        shared += 1
    return list(wanted[shared:])


@dataclass(slots=True)
class Op:
    """One message to the session: client content (``turns``, ``turn_complete``) or a
    tool response (``function_responses``, each with its ``scheduling``)."""

    kind: Literal["content", "tool"]
    turns: list[dict[str, Any]] = field(default_factory=list)
    turn_complete: bool = False
    function_responses: list[dict[str, Any]] = field(default_factory=list)
    units: list[Unit] = field(default_factory=list)  # what it adds to the session


def operations(
    new: Sequence[Unit],
    session_calls: set[str],
    instructions: str,
    *,
    running: bool = False,
    seed: bool = False,
    reply: bool = True,
) -> list[Op]:
    """The messages that send ``new`` and ask for one reply (``reply=False``: that only
    add it to the context, every message ``turn_complete=False`` or ``SILENT``).

    An output for a call the session made (``session_calls``) is a tool response, any
    other unit client content (a ``seed`` sends them all in one message). The last
    message asks for the reply: client content with ``turn_complete=True``, or a tool
    response scheduled ``WHEN_IDLE`` (``INTERRUPT`` when the model is ``running`` a turn
    the runtime did not ask for: the result is to be voiced now). The ones before it
    only add to the context: ``turn_complete=False``, ``SILENT``. The reply's
    ``instructions`` go last, as a user turn of their own (not held: the runtime's next
    context does not have them).
    """
    ops: list[Op] = []
    for unit in new:
        if unit.kind == "output" and unit.call_id in session_calls and not seed:
            ops.append(Op("tool", function_responses=[unit.function_response()], units=[unit]))
        elif seed and ops and ops[-1].kind == "content":
            ops[-1].turns.append(unit.content())
            ops[-1].units.append(unit)
        else:
            ops.append(Op("content", turns=[unit.content()], units=[unit]))
    if instructions.strip():
        turn = {"role": "user", "parts": [{"text": INSTRUCTIONS_PREFIX + instructions}]}
        if seed and ops and ops[-1].kind == "content":
            ops[-1].turns.append(turn)
        else:
            ops.append(Op("content", turns=[turn]))
    if not ops and reply:
        ops.append(Op("content"))  # nothing new: only the request for a reply
    for op in ops:
        if op.kind == "tool":
            op.function_responses[0]["id"] = op.units[0].call_id
            op.function_responses[0]["scheduling"] = "SILENT"
    if not reply:
        return ops
    last = ops[-1]
    if last.kind == "tool":
        last.function_responses[0]["scheduling"] = "INTERRUPT" if running else "WHEN_IDLE"
    else:
        last.turn_complete = True
    return ops


def convert_tools(tools: Sequence[FunctionTool]) -> list[dict[str, Any]]:
    """One ``Tool`` whose function declarations are ``NON_BLOCKING`` (the model may go
    on talking while a tool runs), each tool's JSON Schema as ``parameters_json_schema``;
    ``[]`` without tools."""
    if not tools:
        return []
    declarations: list[dict[str, Any]] = []
    for tool in tools:
        declaration: dict[str, Any] = {
            "name": tool.name,
            "behavior": "NON_BLOCKING",
            "parameters_json_schema": tool.parameters,
        }
        if tool.description:
            declaration["description"] = tool.description
        declarations.append(declaration)
    return [{"function_declarations": declarations}]


def tools_signature(tools: Sequence[FunctionTool]) -> str:
    """What the session's declarations depend on, to tell when they changed."""
    return json.dumps(convert_tools(tools), sort_keys=True, default=str)
