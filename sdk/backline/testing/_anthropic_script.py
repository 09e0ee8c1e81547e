"""Scripting types for ``FakeAnthropicServer``: responses, builders, the request view."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from .scripted_llm import ScriptedResponse

#: The error ``type`` Anthropic sends with each HTTP status.
ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}

_ERROR_MESSAGES: dict[str, str] = {
    "invalid_request_error": "Invalid request.",
    "authentication_error": "invalid x-api-key",
    "billing_error": "Your credit balance is too low.",
    "permission_error": "Your API key does not have permission to use the specified resource.",
    "not_found_error": "Not found.",
    "timeout_error": "Request timed out.",
    "request_too_large": "Request exceeds the maximum allowed number of bytes.",
    "rate_limit_error": "Number of request tokens has exceeded your per-minute rate limit.",
    "api_error": "Internal server error.",
    "overloaded_error": "Overloaded",
}

_STATUS_OF_TYPE: dict[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "timeout_error": 504,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}


StreamEnd: TypeAlias = Literal["complete", "stall", "cut", "malformed"]

#: What ``malformed_event`` sends by default: a text delta cut off mid-JSON.
MALFORMED_DATA = '{"type": "content_block_delta", "index": 0, "delta": {"type": "text_del'


@dataclass(frozen=True)
class AnthropicToolCall:
    """One ``tool_use`` block. ``input`` as a dict, or raw JSON text sent verbatim."""

    name: str
    input: Mapping[str, Any] | str
    id: str | None = None

    @property
    def input_json(self) -> str:
        """The input as JSON text (as streamed in ``input_json_delta`` pieces)."""
        if isinstance(self.input, str):
            return self.input
        return json.dumps(dict(self.input), separators=(",", ":"))


@dataclass(frozen=True)
class AnthropicResponse:
    """One scripted answer of the fake server.

    A 200 message (``text`` then ``tool_calls``), an HTTP error (``status`` >= 400),
    or a stream that fails with an ``error`` event after its content
    (``stream_error``). ``stream_end`` says how a stream ends after its text:
    ``"complete"`` (the API's events through ``message_stop``), ``"stall"`` (only
    ``ping`` events every ``ping_interval`` seconds, never an end), ``"cut"`` (the
    connection is closed mid-body) or ``"malformed"`` (an event whose data is
    ``malformed_data``, not JSON). ``delay`` is waited before the status line,
    ``chunk_delay`` between streamed deltas. Text is streamed word by word, or
    ``chunk_size`` characters at a time; tool inputs in ``json_pieces``
    ``input_json_delta`` pieces (or ``json_chunk_size`` characters at a time).
    """

    text: str = ""
    tool_calls: tuple[AnthropicToolCall, ...] = ()
    stop_reason: str | None = None
    usage: Mapping[str, int] = field(default_factory=dict)
    model: str | None = None
    status: int = 200
    error_type: str | None = None
    error_message: str | None = None
    stream_error: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    chunk_delay: float = 0.0
    chunk_size: int = 0
    json_pieces: int = 3
    json_chunk_size: int = 0
    stream_end: StreamEnd = "complete"
    ping_interval: float = 0.5
    malformed_data: str = ""

    @property
    def is_error(self) -> bool:
        return self.status >= 400

    @property
    def effective_stop_reason(self) -> str:
        if self.stop_reason is not None:
            return self.stop_reason
        return "tool_use" if self.tool_calls else "end_turn"

    def error_body(self, request_id: str) -> dict[str, Any]:
        """Anthropic's error JSON for this response (HTTP errors and ``error`` events)."""
        etype = self.stream_error or self.error_type or ERROR_TYPES.get(self.status, "api_error")
        message = self.error_message or _ERROR_MESSAGES.get(etype, "Error.")
        return {
            "type": "error",
            "error": {"type": etype, "message": message},
            "request_id": request_id,
        }

    def error_status(self) -> int:
        """The HTTP status for an error; a ``stream_error`` maps to its type's status."""
        if self.is_error:
            return self.status
        return _STATUS_OF_TYPE.get(self.stream_error or "", 500)


def text(
    content: str,
    *,
    stop_reason: str | None = None,
    usage: Mapping[str, int] | None = None,
    model: str | None = None,
    delay: float = 0.0,
    chunk_delay: float = 0.0,
    chunk_size: int = 0,
) -> AnthropicResponse:
    """A text reply (``stop_reason`` ``end_turn`` unless given, e.g. ``"max_tokens"``)."""
    return AnthropicResponse(
        text=content,
        stop_reason=stop_reason,
        usage=dict(usage or {}),
        model=model,
        delay=delay,
        chunk_delay=chunk_delay,
        chunk_size=chunk_size,
    )


def tool_calls(
    *calls: tuple[str, Mapping[str, Any] | str] | tuple[str, Mapping[str, Any] | str, str],
    text: str = "",
    stop_reason: str | None = None,
    usage: Mapping[str, int] | None = None,
    model: str | None = None,
    delay: float = 0.0,
    chunk_delay: float = 0.0,
    json_pieces: int = 3,
    json_chunk_size: int = 0,
) -> AnthropicResponse:
    """``tool_use`` blocks (``stop_reason`` ``tool_use``), with optional preamble ``text``.

    Each call is ``(name, input)`` or ``(name, input, id)``; ids default to
    ``toolu_fake0001``, ``toolu_fake0002``, … counted per server.
    """
    parsed = tuple(
        AnthropicToolCall(name=c[0], input=c[1], id=(c[2] if len(c) > 2 else None)) for c in calls
    )
    return AnthropicResponse(
        text=text,
        tool_calls=parsed,
        stop_reason=stop_reason,
        usage=dict(usage or {}),
        model=model,
        delay=delay,
        chunk_delay=chunk_delay,
        json_pieces=json_pieces,
        json_chunk_size=json_chunk_size,
    )


def error(
    status: int,
    type: str | None = None,
    message: str | None = None,
    *,
    headers: Mapping[str, str] | None = None,
    delay: float = 0.0,
) -> AnthropicResponse:
    """An HTTP error with Anthropic's error body, e.g. ``error(529)`` or
    ``error(400, "invalid_request_error", "model: claude-nope")``.

    ``type`` defaults to the status's usual type (529 ``overloaded_error``, 429
    ``rate_limit_error``, 401 ``authentication_error`` …).
    """
    if status < 400:
        raise ValueError(f"error status must be >= 400, got {status}")
    return AnthropicResponse(
        status=status,
        error_type=type,
        error_message=message,
        headers=dict(headers or {}),
        delay=delay,
    )


def stream_error(
    type: str = "overloaded_error",
    message: str | None = None,
    *,
    text: str = "",
    delay: float = 0.0,
    chunk_delay: float = 0.0,
) -> AnthropicResponse:
    """A 200 stream that sends ``text`` and then an ``error`` event of ``type``.

    A non-streaming request gets the matching HTTP error instead.
    """
    return AnthropicResponse(
        text=text,
        stream_error=type,
        error_message=message,
        delay=delay,
        chunk_delay=chunk_delay,
    )


def stalled_stream(
    *,
    text: str = "",
    ping_interval: float = 0.5,
    delay: float = 0.0,
    chunk_delay: float = 0.0,
) -> AnthropicResponse:
    """A 200 stream that sends ``message_start``, then ``text`` (if any), then only
    ``ping`` events, one every ``ping_interval`` seconds, and never ends: until the
    client goes away or the server stops. A non-streaming request waits the same way
    and is never answered."""
    return AnthropicResponse(
        text=text,
        stream_end="stall",
        ping_interval=ping_interval,
        delay=delay,
        chunk_delay=chunk_delay,
    )


def cut_stream(
    *, text: str = "", delay: float = 0.0, chunk_delay: float = 0.0
) -> AnthropicResponse:
    """A 200 stream that sends ``text`` and then closes the connection mid-body: no
    ``content_block_stop``, ``message_delta`` or ``message_stop``, and no end of the
    chunked body (a dropped connection). A non-streaming request's connection is
    closed without an answer."""
    return AnthropicResponse(text=text, stream_end="cut", delay=delay, chunk_delay=chunk_delay)


def malformed_event(
    data: str = MALFORMED_DATA,
    *,
    text: str = "",
    delay: float = 0.0,
    chunk_delay: float = 0.0,
) -> AnthropicResponse:
    """A 200 stream that sends ``text``, then a ``content_block_delta`` event whose
    ``data`` is ``data`` (by default JSON cut off mid-way), then ends the body. A
    non-streaming request gets a 200 whose body is ``data``."""
    return AnthropicResponse(
        text=text,
        stream_end="malformed",
        malformed_data=data,
        delay=delay,
        chunk_delay=chunk_delay,
    )


ResponseLike: TypeAlias = AnthropicResponse | ScriptedResponse | str


def coerce_response(value: ResponseLike) -> AnthropicResponse:
    """Accept a plain string (text) or a ``ScriptedLLM`` response as well."""
    if isinstance(value, AnthropicResponse):
        return value
    if isinstance(value, str):
        return text(value)
    if isinstance(value, ScriptedResponse):
        if value.error is not None:
            status = getattr(value.error, "status", None)
            code = status if isinstance(status, int) and status >= 400 else 500
            if value.text:  # fails after its text: an ``error`` event mid-stream
                return stream_error(
                    ERROR_TYPES.get(code, "api_error"),
                    str(value.error),
                    text=value.text,
                    delay=value.delay,
                    chunk_delay=value.chunk_delay,
                )
            return error(code, message=str(value.error), delay=value.delay)
        return AnthropicResponse(
            text=value.text,
            tool_calls=tuple(
                AnthropicToolCall(name=c.name, input=c.arguments, id=c.call_id)
                for c in value.tool_calls
            ),
            delay=value.delay,
            chunk_delay=value.chunk_delay,
            chunk_size=value.chunk_size,
        )
    raise TypeError(
        "a FakeAnthropicServer script item must be text(...), tool_calls(...), error(...), "
        "stream_error(...), stalled_stream(...), cut_stream(...), malformed_event(...) or a "
        f"string, got {type(value).__name__}"
    )


_UPDATE = re.compile(
    r"Background session `[^`]*` sent an update:\n(.*?)(?=\nBackground session `|\Z)", re.S
)


@dataclass(eq=False)
class AnthropicRequest:
    """One HTTP request the fake server received.

    ``body`` is the parsed JSON (``None`` when empty, the text when not JSON);
    ``headers`` have lower-case names. ``scripted`` says whether the answer came
    from the script (rather than the side responder or a built-in endpoint);
    ``disconnected`` whether the client went away before the response ended.
    """

    index: int
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: Any
    scripted: bool = False
    disconnected: bool = False
    completed: bool = False

    @property
    def is_messages(self) -> bool:
        """``POST /v1/messages``."""
        return self.method == "POST" and self.path == "/v1/messages"

    @property
    def _body(self) -> dict[str, Any]:
        return self.body if isinstance(self.body, dict) else {}

    @property
    def model(self) -> str | None:
        model = self._body.get("model")
        return model if isinstance(model, str) else None

    @property
    def stream(self) -> bool:
        return bool(self._body.get("stream"))

    @property
    def max_tokens(self) -> int | None:
        value = self._body.get("max_tokens")
        return value if isinstance(value, int) else None

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages = self._body.get("messages")
        return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []

    @property
    def system(self) -> str:
        """The top-level system prompt as text (text blocks joined by newlines)."""
        system = self._body.get("system")
        if isinstance(system, str):
            return system
        if isinstance(system, list):
            return "\n".join(
                b["text"] for b in system if isinstance(b, dict) and isinstance(b.get("text"), str)
            )
        return ""

    @property
    def tools(self) -> list[dict[str, Any]]:
        tools = self._body.get("tools")
        return [t for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []

    @property
    def tool_names(self) -> list[str]:
        return [str(t.get("name")) for t in self.tools]

    @property
    def tool_choice(self) -> dict[str, Any] | None:
        choice = self._body.get("tool_choice")
        return choice if isinstance(choice, dict) else None

    @property
    def output_format(self) -> dict[str, Any] | None:
        """``output_config.format`` (structured output), if any."""
        config = self._body.get("output_config")
        fmt = config.get("format") if isinstance(config, dict) else None
        return fmt if isinstance(fmt, dict) else None

    @property
    def last_user_text(self) -> str:
        """The text of the latest user message that has text.

        Text blocks are joined by newlines; ``<system-reminder>`` blocks (which
        Claude Code adds) are left out.
        """
        for message in reversed(self.messages):
            if message.get("role") != "user":
                continue
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                texts = [
                    b["text"]
                    for b in content
                    if isinstance(b, dict)
                    and b.get("type") == "text"
                    and isinstance(b.get("text"), str)
                    and not b["text"].lstrip().startswith("<system-reminder>")
                ]
                if texts:
                    return "\n".join(texts)
        return ""

    def background_updates(self, after: str | None = None) -> list[str]:
        """The background updates in user messages, oldest first, as their text alone.

        Only updates worded by the default template (``Background session `ID` sent
        an update:``) are found. With ``after``, only those that came after the last
        assistant text starting with ``after`` (the last relay, when a voice script
        relays with a fixed prefix): an update can land in the context while a reply
        is still running and be followed by that reply's own words, so the relay
        after it must look further back than the last user message.
        """
        texts: list[str] = []
        for message in self.messages:
            content = message.get("content")
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            said = [
                b["text"]
                for b in (content if isinstance(content, list) else [])
                if isinstance(b, dict)
                and b.get("type") == "text"
                and isinstance(b.get("text"), str)
            ]
            if message.get("role") == "user":
                texts.extend(said)
            elif after is not None and any(t.startswith(after) for t in said):
                texts = []
        return [u.strip() for t in texts for u in _UPDATE.findall(t)]

    @property
    def tool_results(self) -> list[dict[str, Any]]:
        """The ``tool_result`` blocks of the last user message."""
        for message in reversed(self.messages):
            if message.get("role") != "user":
                continue
            content = message.get("content")
            if not isinstance(content, list):
                return []
            return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
        return []

    @property
    def api_key(self) -> str | None:
        """The credential sent: ``x-api-key``, else an ``Authorization: Bearer`` token."""
        key = self.headers.get("x-api-key")
        if key:
            return key
        scheme, _, token = self.headers.get("authorization", "").partition(" ")
        return token if scheme.lower() == "bearer" and token else None

    def __repr__(self) -> str:
        extra = f" model={self.model!r}" if self.is_messages else ""
        return f"<AnthropicRequest #{self.index} {self.method} {self.path}{extra}>"


Responder: TypeAlias = Callable[[AnthropicRequest], ResponseLike]


def claude_code_side_request(request: AnthropicRequest) -> bool:
    """Whether a Messages request from the Claude Code CLI is a side request.

    Side requests are the CLI's own helpers (session title, quota check,
    classifiers, summaries): they ask for structured output
    (``output_config.format``), send no tools, or ask for a single token. The
    CLI's agent loop always sends its tools, so with the CLI's built-in tools
    (or MCP tools) enabled only agent-loop requests reach the script.
    """
    if not request.is_messages:
        return True
    if request.output_format is not None:
        return True
    if not request.tools:
        return True
    max_tokens = request.max_tokens
    return max_tokens is not None and max_tokens <= 1


def default_side_response(request: AnthropicRequest) -> AnthropicResponse:
    """Answer a side request: a JSON instance of a requested output schema, else ``ok``."""
    fmt = request.output_format
    if fmt is not None and isinstance(fmt.get("schema"), dict):
        return text(json.dumps(example_for_schema(fmt["schema"])))
    return text("ok")


def example_for_schema(schema: Mapping[str, Any]) -> Any:
    """A small value that satisfies a simple JSON Schema (for structured outputs)."""
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list) and options and isinstance(options[0], dict):
            return example_for_schema(options[0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties")
        props = props if isinstance(props, dict) else {}
        return {
            name: example_for_schema(sub if isinstance(sub, dict) else {})
            for name, sub in props.items()
        }
    if kind == "array":
        return []
    if kind == "string":
        return "Fake title"
    if kind in ("integer", "number"):
        return 0
    if kind == "boolean":
        return False
    return None
