"""Tool calls paired with their outputs: the provider-neutral turns of a chat context.

Model APIs (Anthropic's Messages, OpenAI's Chat Completions, most others) require
every tool call to be answered right after the assistant turn that made it, and a
conversation that starts and ends with the user. A ``ChatContext`` holds what
happened in the order it happened (the user may speak while a tool runs; a call may
still be running, or cancelled). ``pair_tool_calls`` reshapes it once, by one rule,
into ``Turn`` s an adapter only has to spell in its vendor's format. See
docs/providers.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from .chat_context import ChatContext, ChatMessage, FunctionCall, FunctionCallOutput

__all__ = [
    "CONTINUE_PLACEHOLDER",
    "MISSING_RESULT",
    "START_PLACEHOLDER",
    "PairedContext",
    "ToolResult",
    "Turn",
    "TurnPart",
    "arguments_object",
    "pair_tool_calls",
]

#: The user turn inserted when the conversation would start with the assistant.
START_PLACEHOLDER = "(The conversation starts.)"
#: The user turn appended when the conversation would end with the assistant.
CONTINUE_PLACEHOLDER = "(continue)"
#: The result given to a tool call that has no output in the context.
MISSING_RESULT = "No result is available for this call (it was cancelled or is still running)."


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool call's result, placed right after the turn that made the call.

    ``missing`` is true when the context has no output for the call (still running, or
    cancelled): ``output`` is then ``MISSING_RESULT``.
    """

    call_id: str
    name: str
    output: str
    is_error: bool = False
    missing: bool = False


#: A part of a turn: a message's text, a tool call (the context's own item), a result.
TurnPart: TypeAlias = str | FunctionCall | ToolResult


@dataclass(slots=True)
class Turn:
    """One turn, in order: a user turn starts with the results of the calls the
    assistant turn before it made (in call order), then the user's texts; an assistant
    turn is texts and calls as they came."""

    role: Literal["user", "assistant"]
    parts: list[TurnPart] = field(default_factory=list)

    @property
    def texts(self) -> list[str]:
        return [p for p in self.parts if isinstance(p, str)]

    @property
    def calls(self) -> list[FunctionCall]:
        return [p for p in self.parts if isinstance(p, FunctionCall)]

    @property
    def results(self) -> list[ToolResult]:
        return [p for p in self.parts if isinstance(p, ToolResult)]


@dataclass(frozen=True, slots=True)
class PairedContext:
    """A chat context as a provider sends it: the system prompt and the turns."""

    system: str
    turns: list[Turn]


def pair_tool_calls(chat_ctx: ChatContext) -> PairedContext:
    """The system prompt and the turns of ``chat_ctx``.

    - system/developer messages, in order, joined by a blank line, are the system prompt;
    - user and assistant messages are text parts; consecutive parts of one role share
      a turn; empty or whitespace-only messages are left out;
    - each ``FunctionCall`` is paired with its ``FunctionCallOutput`` wherever the output
      sits in the context: the result is placed first in the user turn right after the
      call's assistant turn (so the user's words said while a tool ran come after it);
    - a call without an output gets a synthetic result (``MISSING_RESULT``); an output
      without a call is dropped; a repeated call id is sent once (the first call, the
      first output); ``AgentHandoff`` items are skipped;
    - the turns start and end with a user turn: ``START_PLACEHOLDER`` is inserted
      before an assistant first turn, ``CONTINUE_PLACEHOLDER`` after assistant text
      at the end (trailing calls end with their results).
    """
    system_parts: list[str] = []
    outputs: dict[str, FunctionCallOutput] = {}
    output_at: dict[str, int] = {}
    items = chat_ctx.items
    for i, item in enumerate(items):
        if isinstance(item, FunctionCallOutput) and item.call_id not in outputs:
            outputs[item.call_id] = item
            output_at[item.call_id] = i

    turns: list[Turn] = []
    pending: list[FunctionCall] = []  # the calls of the last turn, waiting for results
    seen_calls: set[str] = set()
    placed: set[str] = set()  # calls whose results are already in a user turn

    def turn(role: Literal["user", "assistant"]) -> Turn:
        nonlocal pending
        if turns and turns[-1].role == role:
            return turns[-1]
        new = Turn(role)
        if pending:  # the turn after the calls' turn starts with their results
            new.parts.extend(_result(c, outputs.get(c.call_id)) for c in pending)
            placed.update(c.call_id for c in pending)
            pending = []
        turns.append(new)
        return new

    for i, item in enumerate(items):
        if isinstance(item, ChatMessage):
            if not item.content.strip():
                continue
            if item.role == "system" or item.role == "developer":
                system_parts.append(item.content)
            elif item.role == "user":
                turn("user").parts.append(item.content)
            else:
                if any(output_at.get(c.call_id, i) < i for c in pending):
                    turn("user")  # a result came before this text: close the calls' turn
                turn("assistant").parts.append(item.content)
        elif isinstance(item, FunctionCall):
            if item.call_id in seen_calls:
                continue
            seen_calls.add(item.call_id)
            turn("assistant").parts.append(item)
            pending.append(item)
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
        turns.insert(0, Turn("user", [START_PLACEHOLDER]))
    if turns[-1].role == "assistant":
        if pending:
            turn("user")  # the results of the trailing calls
        else:
            turns.append(Turn("user", [CONTINUE_PLACEHOLDER]))
    return PairedContext("\n\n".join(system_parts), turns)


def _result(call: FunctionCall, output: FunctionCallOutput | None) -> ToolResult:
    if output is None:
        return ToolResult(call.call_id, call.name, MISSING_RESULT, missing=True)
    return ToolResult(call.call_id, call.name, output.output, is_error=output.is_error)


def arguments_object(arguments: str) -> dict[str, Any]:
    """A call's ``arguments`` as the JSON object a request carries: the parsed object;
    ``{}`` when empty; ``{"_invalid_arguments": "<the text>"}`` when not a JSON object
    (a model's broken call is still sent back, and the model sees what it sent)."""
    if not arguments.strip():
        return {}
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError:
        return {"_invalid_arguments": arguments}
    return parsed if isinstance(parsed, dict) else {"_invalid_arguments": arguments}
