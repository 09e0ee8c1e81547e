"""Wire format of the fake Anthropic server: SSE events, message JSON, request checks."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from ._anthropic_script import AnthropicRequest, AnthropicResponse


@dataclass(frozen=True)
class SseStep:
    """One server-sent event, sent after waiting ``delay`` seconds (``raw``: data sent
    as it is instead of ``data`` as JSON)."""

    delay: float
    event: str
    data: dict[str, Any]
    raw: str | None = None

    def encode(self) -> bytes:
        data = json.dumps(self.data) if self.raw is None else self.raw
        return f"event: {self.event}\ndata: {data}\n\n".encode()


PING = SseStep(0.0, "ping", {"type": "ping"})


def estimate_tokens(value: Any) -> int:
    """A rough token count (4 characters a token), at least 1."""
    if value is None:
        return 1
    text = value if isinstance(value, str) else json.dumps(value)
    return max(1, math.ceil(len(text) / 4))


def text_pieces(content: str, size: int) -> list[str]:
    """``content`` in ``size``-character pieces, or word by word (``size`` 0)."""
    if size > 0:
        return [content[i : i + size] for i in range(0, len(content), size)]
    parts: list[str] = []
    word = ""
    for ch in content:
        word += ch
        if ch == " ":
            parts.append(word)
            word = ""
    if word:
        parts.append(word)
    return parts


def json_pieces(raw: str, pieces: int, size: int) -> list[str]:
    """JSON text split for ``input_json_delta``: ``size`` characters, or ``pieces`` parts."""
    if not raw:
        return []
    if size <= 0:
        size = max(1, math.ceil(len(raw) / max(1, pieces)))
    return [raw[i : i + size] for i in range(0, len(raw), size)]


def _usage(response: AnthropicResponse, request: AnthropicRequest) -> tuple[dict[str, int], int]:
    body = request.body if isinstance(request.body, dict) else {}
    input_tokens = estimate_tokens([body.get("system"), body.get("messages"), body.get("tools")])
    output_tokens = estimate_tokens(
        response.text + "".join(c.name + c.input_json for c in response.tool_calls)
    )
    start = {
        "input_tokens": response.usage.get("input_tokens", input_tokens),
        "cache_creation_input_tokens": response.usage.get("cache_creation_input_tokens", 0),
        "cache_read_input_tokens": response.usage.get("cache_read_input_tokens", 0),
    }
    return start, response.usage.get("output_tokens", output_tokens)


def _message(
    response: AnthropicResponse, request: AnthropicRequest, message_id: str
) -> dict[str, Any]:
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": response.model or request.model or "claude-fake",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
    }


def _blocks(response: AnthropicResponse, tool_ids: list[str]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if response.text:
        blocks.append({"type": "text", "text": response.text})
    for call, call_id in zip(response.tool_calls, tool_ids, strict=True):
        try:
            parsed: Any = json.loads(call.input_json) if call.input_json else {}
        except json.JSONDecodeError:
            parsed = {}
        blocks.append({"type": "tool_use", "id": call_id, "name": call.name, "input": parsed})
    return blocks


def message_json(
    response: AnthropicResponse,
    request: AnthropicRequest,
    *,
    message_id: str,
    tool_ids: list[str],
) -> dict[str, Any]:
    """The non-streaming Messages API answer."""
    start_usage, output_tokens = _usage(response, request)
    message = _message(response, request, message_id)
    message["content"] = _blocks(response, tool_ids)
    message["stop_reason"] = response.effective_stop_reason
    message["usage"] = {**start_usage, "output_tokens": output_tokens}
    return message


def stream_steps(
    response: AnthropicResponse,
    request: AnthropicRequest,
    *,
    message_id: str,
    tool_ids: list[str],
    request_id: str,
) -> list[SseStep]:
    """The server-sent events of a streamed answer, with the waits between them."""
    start_usage, output_tokens = _usage(response, request)
    message = _message(response, request, message_id)
    message["usage"] = {**start_usage, "output_tokens": 1}
    steps = [
        SseStep(0.0, "message_start", {"type": "message_start", "message": message}),
        PING,
    ]
    pause = response.chunk_delay
    index = 0
    if response.text:
        steps.append(
            SseStep(
                0.0,
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                },
            )
        )
        for i, piece in enumerate(text_pieces(response.text, response.chunk_size)):
            steps.append(
                SseStep(
                    pause if i else 0.0,
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": piece},
                    },
                )
            )
        if response.stream_error is None and response.stream_end == "complete":
            steps.append(_block_stop(index))
        index += 1
    if response.stream_error is not None:
        body = response.error_body(request_id)
        steps.append(SseStep(pause, "error", body))
        return steps
    if response.stream_end == "malformed":
        steps.append(SseStep(pause, "content_block_delta", {}, raw=response.malformed_data))
        return steps
    if response.stream_end != "complete":
        return steps  # "stall" and "cut": the server goes on from here
    for call, call_id in zip(response.tool_calls, tool_ids, strict=True):
        steps.append(
            SseStep(
                pause,
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {
                        "type": "tool_use",
                        "id": call_id,
                        "name": call.name,
                        "input": {},
                    },
                },
            )
        )
        pieces = json_pieces(call.input_json, response.json_pieces, response.json_chunk_size)
        for i, piece in enumerate(["", *pieces]):
            steps.append(
                SseStep(
                    pause if i > 1 else 0.0,
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece},
                    },
                )
            )
        steps.append(_block_stop(index))
        index += 1
    steps.append(
        SseStep(
            pause,
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": response.effective_stop_reason, "stop_sequence": None},
                "usage": {**start_usage, "output_tokens": output_tokens},
            },
        )
    )
    steps.append(SseStep(0.0, "message_stop", {"type": "message_stop"}))
    return steps


def _block_stop(index: int) -> SseStep:
    return SseStep(0.0, "content_block_stop", {"type": "content_block_stop", "index": index})


def validate_messages_request(body: Any) -> str | None:
    """What the real API would reject in a Messages request, or ``None``.

    Checks the rules client code most often gets wrong: required fields, empty
    or whitespace-only text blocks, the first turn being the user's, and
    ``tool_use`` / ``tool_result`` pairing (results first in the very next user
    message, each matching a call of the previous assistant message).
    """
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model: Field required"
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        return "max_tokens: Field required (an integer >= 1)"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    turns: list[tuple[int, str, list[dict[str, Any]]]] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in (
            "user",
            "assistant",
            "system",
        ):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        content = message.get("content")
        if isinstance(content, str):
            blocks: list[dict[str, Any]] = [{"type": "text", "text": content}]
        elif isinstance(content, list) and all(isinstance(b, dict) for b in content):
            blocks = content
        else:
            return f"messages.{i}.content: Input should be a string or a list of blocks"
        for j, block in enumerate(blocks):
            if block.get("type") == "text" and not str(block.get("text", "")).strip():
                return (
                    f"messages.{i}.content.{j}: text content blocks must contain "
                    "non-whitespace text"
                )
        if message["role"] != "system":
            turns.append((i, message["role"], blocks))
    if not turns or turns[0][1] != "user":
        return 'messages: the first message must use the "user" role'
    seen_ids: set[str] = set()
    for k, (i, role, blocks) in enumerate(turns):
        if role != "assistant":
            continue
        ids = [str(b.get("id")) for b in blocks if b.get("type") == "tool_use"]
        for call_id in ids:
            if call_id in seen_ids:
                return f"messages.{i}: `tool_use` ids must be unique: {call_id}"
            seen_ids.add(call_id)
        following = turns[k + 1] if k + 1 < len(turns) else None
        results = _leading_results(following[2]) if following and following[1] == "user" else []
        missing = [c for c in ids if c not in results]
        if missing:
            return (
                f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                "corresponding `tool_result` block in the next message."
            )
    for k, (i, role, blocks) in enumerate(turns):
        if role != "user":
            continue
        previous = turns[k - 1] if k > 0 else None
        calls = {
            str(b.get("id"))
            for b in (previous[2] if previous and previous[1] == "assistant" else [])
            if b.get("type") == "tool_use"
        }
        for j, block in enumerate(blocks):
            if block.get("type") != "tool_result":
                continue
            if str(block.get("tool_use_id")) not in calls:
                return (
                    f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` "
                    f"blocks: {block.get('tool_use_id')}. Each `tool_result` block must have a "
                    "corresponding `tool_use` block in the previous message."
                )
        if _leading_results(blocks) != [
            str(b.get("tool_use_id")) for b in blocks if b.get("type") == "tool_result"
        ]:
            return f"messages.{i}: `tool_result` blocks must come before any other content"
    last_i, last_role, last_blocks = turns[-1]
    if last_role == "assistant" and last_blocks and last_blocks[-1].get("type") == "text":
        last_text = str(last_blocks[-1].get("text", ""))
        if last_text != last_text.rstrip():
            return f"messages.{last_i}: final assistant content cannot end with trailing whitespace"
    return _validate_tools(body)


def _leading_results(blocks: list[dict[str, Any]]) -> list[str]:
    ids: list[str] = []
    for block in blocks:
        if block.get("type") != "tool_result":
            break
        ids.append(str(block.get("tool_use_id")))
    return ids


def _validate_tools(body: dict[str, Any]) -> str | None:
    tools = body.get("tools")
    names: list[str] = []
    if tools is not None:
        if not isinstance(tools, list):
            return "tools: Input should be a list"
        for i, tool in enumerate(tools):
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                return f"tools.{i}.name: Field required"
            if "type" not in tool and not isinstance(tool.get("input_schema"), dict):
                return f"tools.{i}.input_schema: Field required"
            names.append(tool["name"])
    choice = body.get("tool_choice")
    if choice is not None:
        kinds = ("auto", "any", "tool", "none")
        if not isinstance(choice, dict) or choice.get("type") not in kinds:
            return "tool_choice: Input tag should be 'auto', 'any', 'tool' or 'none'"
        if choice["type"] == "tool" and choice.get("name") not in names:
            return f"tool_choice: tool {choice.get('name')!r} is not among the request's tools"
    return None
