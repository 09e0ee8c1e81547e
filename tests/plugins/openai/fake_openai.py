"""A fake OpenAI-compatible Chat Completions server on loopback, answering from a script.

``POST /v1/chat/completions`` streamed exactly as OpenAI streams it (``data: {chunk}``
lines, ``usage: null`` on every chunk and the usage in a last chunk with no choices
when ``stream_options.include_usage`` is set, ``data: [DONE]``), or as one JSON
object; errors as OpenAI's ``{"error": {...}}`` with their HTTP status, or as an
``error`` object inside the stream. Requests the real API would reject (a ``tool``
message not answering a call, a call left unanswered) get a 400, so conversion
mistakes fail the test. The script builders mirror ``backline.testing.fake_anthropic``
(``text``, ``tool_calls``, ``error``, ``stream_error``) so the shared conformance suite
drives both fakes the same way.

The HTTP layer (a thread per connection, disconnect detection) is the fake Anthropic
server's.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import socket
import threading
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from backline.testing._anthropic_http import (
    Handler,
    HTTPServer,
    Output,
    read_body,
    shutdown_socket,
)

CREATED = 1_767_225_600  # a fixed "created" timestamp: chunks are byte-for-byte stable
FINGERPRINT = "fp_fake0001"

_TYPE_OF_STATUS = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "invalid_request_error",
    404: "invalid_request_error",
    429: "rate_limit_exceeded",
}
_CODE_OF_STATUS = {401: "invalid_api_key", 429: "rate_limit_exceeded"}
_MESSAGES = {
    401: "Incorrect API key provided: sk-fake***. You can find your API key at "
    "https://platform.openai.com/account/api-keys.",
    429: "Rate limit reached for requests. Please try again in 1s.",
    500: "The server had an error while processing your request. Sorry about that!",
    503: "The engine is currently overloaded, please try again later.",
    529: "The engine is currently overloaded, please try again later.",
}


@dataclass
class OpenAIResponse:
    """One scripted answer (build it with ``text``, ``tool_calls``, ``error``...)."""

    text: str = ""
    tool_calls: list[tuple[str, str]] = field(default_factory=list)  # (name, JSON text)
    finish_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    delay: float = 0.0
    chunk_delay: float = 0.0
    chunk_size: int = 0
    json_chunk_size: int = 0
    json_pieces: int = 3
    status: int = 200
    error_type: str | None = None
    error_message: str | None = None
    error_code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    stream_error: str | None = None  # an error object inside the stream, after the text
    index: bool = True  # tool-call pieces carry their "index" (some servers leave it out)
    name_chunk_size: int = 0  # split each call's id and name into pieces this long
    repeat_ids: bool = False  # every piece repeats the call's id, type and name (Fireworks)
    cut: bool = False  # end the stream with neither a finish_reason nor [DONE]
    malformed: bool = False  # after the text, a data line that is not JSON

    @property
    def is_error(self) -> bool:
        return self.status >= 400

    def error_body(self) -> dict[str, Any]:
        status = self.status if self.is_error else 500
        etype = self.stream_error or self.error_type or _TYPE_OF_STATUS.get(status, "server_error")
        return {
            "error": {
                "message": self.error_message or _MESSAGES.get(status, "Error."),
                "type": etype,
                "param": None,
                "code": self.error_code or _CODE_OF_STATUS.get(status),
            }
        }


def text(
    content: str,
    *,
    usage: Mapping[str, int] | None = None,
    finish_reason: str | None = None,
    delay: float = 0.0,
    chunk_delay: float = 0.0,
    chunk_size: int = 0,
) -> OpenAIResponse:
    """A text reply, streamed word by word (or ``chunk_size`` characters a chunk).

    ``usage`` takes ``input_tokens``/``output_tokens``/``cached_tokens`` (the
    conformance suite's names) and is sent as OpenAI's ``prompt_tokens``...
    """
    return OpenAIResponse(
        text=content,
        usage=dict(usage or {}),
        finish_reason=finish_reason,
        delay=delay,
        chunk_delay=chunk_delay,
        chunk_size=chunk_size,
    )


def tool_calls(
    *calls: tuple[str, Mapping[str, Any] | str],
    text: str = "",
    usage: Mapping[str, int] | None = None,
    delay: float = 0.0,
    chunk_delay: float = 0.0,
    json_pieces: int = 3,
    json_chunk_size: int = 0,
    index: bool = True,
    name_chunk_size: int = 0,
    repeat_ids: bool = False,
) -> OpenAIResponse:
    """Parallel tool calls (``finish_reason`` ``tool_calls``), after an optional ``text``;
    each call's arguments are streamed in pieces (``json_chunk_size`` characters each,
    else ``json_pieces`` parts). OpenAI sends a call's id and name whole in its first
    piece; ``name_chunk_size`` splits them over the first pieces instead, as some
    compatible servers do, and ``repeat_ids`` repeats them in every piece, as others do."""
    parsed = [
        (name, args if isinstance(args, str) else json.dumps(dict(args), separators=(",", ":")))
        for name, args in calls
    ]
    return OpenAIResponse(
        text=text,
        tool_calls=parsed,
        usage=dict(usage or {}),
        delay=delay,
        chunk_delay=chunk_delay,
        json_pieces=json_pieces,
        json_chunk_size=json_chunk_size,
        index=index,
        name_chunk_size=name_chunk_size,
        repeat_ids=repeat_ids,
    )


def error(
    status: int,
    type: str | None = None,
    message: str | None = None,
    *,
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
    delay: float = 0.0,
) -> OpenAIResponse:
    """An HTTP error with OpenAI's error body, e.g. ``error(429)`` or
    ``error(404, message="The model `x` does not exist", code="model_not_found")``."""
    if status < 400:
        raise ValueError(f"error status must be >= 400, got {status}")
    return OpenAIResponse(
        status=status,
        error_type=type,
        error_message=message,
        error_code=code,
        headers=dict(headers or {}),
        delay=delay,
    )


def stream_error(
    type: str = "server_error",
    message: str | None = None,
    *,
    text: str = "",
    delay: float = 0.0,
    chunk_delay: float = 0.0,
) -> OpenAIResponse:
    """A 200 stream that sends ``text`` and then an ``error`` object, and ends."""
    return OpenAIResponse(
        text=text, stream_error=type, error_message=message, delay=delay, chunk_delay=chunk_delay
    )


def malformed_stream(content: str = "") -> OpenAIResponse:
    """A stream that sends ``content`` and then a ``data:`` line that is not JSON."""
    return OpenAIResponse(text=content, malformed=True)


def cut_stream(content: str = "") -> OpenAIResponse:
    """A stream that sends ``content`` and ends without a ``finish_reason`` or ``[DONE]``."""
    return OpenAIResponse(text=content, cut=True)


@dataclass
class OpenAIRequest:
    """One request as received."""

    index: int
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    scripted: bool = False
    completed: bool = False
    disconnected: bool = False

    @property
    def api_key(self) -> str | None:
        auth = self.headers.get("authorization", "")
        return auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", [])) if isinstance(self.body, dict) else []


def _pieces(content: str, size: int) -> list[str]:
    if size > 0:
        return [content[i : i + size] for i in range(0, len(content), size)]
    parts: list[str] = []
    word = ""
    for ch in content:
        word += ch
        if ch == " ":
            parts.append(word)
            word = ""
    return [*parts, word] if word else parts


def _estimate_tokens(value: Any) -> int:
    return max(1, math.ceil(len(value if isinstance(value, str) else json.dumps(value)) / 4))


def validate_chat_request(body: Any) -> str | None:
    """What the real API would reject in a Chat Completions request, or ``None``."""
    if not isinstance(body, dict):
        return "We could not parse the JSON body of your request."
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "you must provide a model parameter"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "[] is too short - 'messages'"
    open_calls: list[str] = []
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("system", "developer", "user", "assistant", "tool"):
            return f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', ..."
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in open_calls:
                return (
                    f"Invalid parameter: messages with role 'tool' must be a response to a "
                    f"preceeding message with 'tool_calls'. (messages[{i}])"
                )
            open_calls.remove(call_id)
            if not isinstance(message.get("content"), str):
                return f"Invalid type for 'messages[{i}].content': expected a string."
            continue
        if open_calls:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages "
                f"responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(open_calls)}"
            )
        calls = message.get("tool_calls") or []
        if calls and role != "assistant":
            return f"messages[{i}]: only assistant messages may have tool_calls"
        for call in calls:
            try:
                json.loads(call["function"]["arguments"])
            except (KeyError, TypeError, ValueError):
                return f"messages[{i}].tool_calls: arguments must be JSON text"
            open_calls.append(call["id"])
        if not calls and not isinstance(message.get("content"), str):
            return f"Invalid type for 'messages[{i}].content': expected a string."
    if open_calls:
        return (
            "An assistant message with 'tool_calls' must be followed by tool messages "
            f"responding to each 'tool_call_id': {', '.join(open_calls)}"
        )
    return None


class FakeOpenAIServer:
    """A scripted OpenAI-compatible server on ``127.0.0.1`` (``url`` ends in ``/v1``).

    Use it as a context manager. ``push(*responses)`` appends to the script (a plain
    string is ``text(string)``); ``requests`` are the requests received.
    """

    def __init__(self, script: Iterable[OpenAIResponse | str] = (), *, validate: bool = True):
        self._queue: deque[OpenAIResponse | str] = deque(script)
        self._validate = validate
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._requests: list[OpenAIRequest] = []
        self._disconnects: list[OpenAIRequest] = []
        self._connections: set[socket.socket] = set()
        self._ids = itertools.count(1)
        self._stopping = threading.Event()
        self._httpd: HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------
    def start(self) -> FakeOpenAIServer:
        httpd = HTTPServer(("127.0.0.1", 0), Handler, self)
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.01},
            name=f"FakeOpenAIServer:{httpd.server_address[1]}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        self._httpd = self._thread = None
        self._stopping.set()
        httpd.shutdown()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            shutdown_socket(conn)
        httpd.server_close()
        if thread is not None:
            thread.join()
        httpd.join_handlers(timeout=5.0)

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("FakeOpenAIServer is not running")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    # -- script and records ------------------------------------------------------
    def push(self, *responses: OpenAIResponse | str) -> None:
        with self._lock:
            self._queue.extend(responses)

    @property
    def requests(self) -> list[OpenAIRequest]:
        with self._lock:
            return list(self._requests)

    def wait_for_disconnect(self, timeout: float = 10.0) -> OpenAIRequest:
        with self._changed:
            if not self._changed.wait_for(lambda: bool(self._disconnects), timeout):
                raise TimeoutError(f"FakeOpenAIServer: no client disconnected within {timeout}s")
            return self._disconnects[0]

    async def wait_for_disconnect_async(self, timeout: float = 10.0) -> OpenAIRequest:
        return await asyncio.to_thread(self.wait_for_disconnect, timeout)

    # -- the HTTP host (server threads) --------------------------------------------
    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            if not add:
                self._connections.discard(conn)
            elif self._stopping.is_set():
                shutdown_socket(conn)
            else:
                self._connections.add(conn)

    def _handle(self, handler: Handler, method: str) -> None:
        raw = read_body(handler)
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        with self._changed:
            request = OpenAIRequest(
                index=len(self._requests) + 1,
                method=method,
                path=handler.path.partition("?")[0],
                headers={k.lower(): v for k, v in handler.headers.items()},
                body=body,
            )
            self._requests.append(request)
            self._changed.notify_all()
        out = Output(handler, self._stopping)
        try:
            self._dispatch(request, out)
        except OSError:
            out.gone = True
        finally:
            with self._changed:
                if out.gone:
                    handler.close_connection = True
                    request.disconnected = True
                    self._disconnects.append(request)
                else:
                    request.completed = True
                self._changed.notify_all()

    def _dispatch(self, request: OpenAIRequest, out: Output) -> None:
        request_id = f"req_fake{request.index:04d}"
        if request.path.rstrip("/") != "/v1/chat/completions" or request.method != "POST":
            body = {
                "error": {
                    "message": f"Invalid URL ({request.method} {request.path})",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": None,
                }
            }
            out.json(404, body, request_id)
            return
        problem = validate_chat_request(request.body) if self._validate else None
        response = self._scripted(request) if problem is None else error(400, message=problem)
        self._answer(request, response, out, request_id)

    def _scripted(self, request: OpenAIRequest) -> OpenAIResponse:
        with self._lock:
            request.scripted = True
            item = self._queue.popleft() if self._queue else None
        if item is None:
            return error(
                500,
                "server_error",
                f"FakeOpenAIServer: no response scripted for request #{request.index}; push() "
                "more responses",
                headers={"x-should-retry": "false"},
            )
        return text(item) if isinstance(item, str) else item

    def _answer(
        self, request: OpenAIRequest, response: OpenAIResponse, out: Output, request_id: str
    ) -> None:
        if not out.wait(response.delay):
            return
        body = request.body if isinstance(request.body, dict) else {}
        if response.is_error or (response.stream_error and not body.get("stream")):
            out.json(
                response.status if response.is_error else 500,
                response.error_body(),
                request_id,
                headers=response.headers,
            )
            return
        completion_id = f"chatcmpl-fake{next(self._ids):04d}"
        call_ids = [f"call_fake{request.index:02d}{i:02d}" for i in range(len(response.tool_calls))]
        if not body.get("stream"):
            out.json(
                200,
                completion_json(response, body, completion_id, call_ids),
                request_id,
                headers=response.headers,
            )
            return
        out.start_stream(request_id, response.headers)
        for delay, data in stream_events(response, body, completion_id, call_ids):
            if not out.wait(delay) or not out.chunk(data):
                return
        out.end_stream()


def _usage(response: OpenAIResponse, body: dict[str, Any]) -> dict[str, Any]:
    prompt = response.usage.get("input_tokens", _estimate_tokens(body.get("messages")))
    completion = response.usage.get(
        "output_tokens",
        _estimate_tokens(response.text + "".join(n + a for n, a in response.tool_calls)),
    )
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {
            "cached_tokens": response.usage.get("cached_tokens", 0),
            "audio_tokens": 0,
        },
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _finish(response: OpenAIResponse) -> str:
    return response.finish_reason or ("tool_calls" if response.tool_calls else "stop")


def completion_json(
    response: OpenAIResponse, body: dict[str, Any], completion_id: str, call_ids: list[str]
) -> dict[str, Any]:
    """The non-streaming answer."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": response.text or None,
        "refusal": None,
        "annotations": [],
    }
    if response.tool_calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
            for cid, (name, args) in zip(call_ids, response.tool_calls, strict=True)
        ]
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": CREATED,
        "model": body.get("model", "gpt-fake"),
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": _finish(response)}
        ],
        "usage": _usage(response, body),
        "service_tier": "default",
        "system_fingerprint": FINGERPRINT,
    }


def _call_heads(
    index: int, call_id: str, name: str, response: OpenAIResponse
) -> list[dict[str, Any]]:
    """A call's first pieces: its id and name whole (OpenAI), or split in pieces."""
    size = response.name_chunk_size
    if not size:
        head = {"index": index, "id": call_id, "type": "function"}
        return [{**head, "function": {"name": name, "arguments": ""}}]
    ids = [call_id[j : j + size] for j in range(0, len(call_id), size)]
    names = [name[j : j + size] for j in range(0, len(name), size)]
    heads: list[dict[str, Any]] = []
    for k in range(max(len(ids), len(names))):
        piece: dict[str, Any] = {"index": index, "function": {}}
        if k < len(ids):
            piece["id"] = ids[k]
        if k == 0:
            piece["type"] = "function"
            piece["function"]["arguments"] = ""
        if k < len(names):
            piece["function"]["name"] = names[k]
        heads.append(piece)
    return heads


def stream_events(
    response: OpenAIResponse, body: dict[str, Any], completion_id: str, call_ids: list[str]
) -> list[tuple[float, bytes]]:
    """The ``(delay, bytes)`` of each server-sent event, as OpenAI sends them."""
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    model = body.get("model", "gpt-fake")

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": model,
            "service_tier": "default",
            "system_fingerprint": FINGERPRINT,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if include_usage:
            data["usage"] = None
        return data

    def encode(data: dict[str, Any]) -> bytes:
        return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"

    pace = response.chunk_delay
    events: list[tuple[float, bytes]] = [
        (0.0, encode(chunk({"role": "assistant", "content": "", "refusal": None})))
    ]
    for i, piece in enumerate(_pieces(response.text, response.chunk_size)):
        events.append((pace if i else 0.0, encode(chunk({"content": piece}))))  # pace between
    if response.stream_error:
        events.append((pace, encode(response.error_body())))
        return events
    if response.cut:
        return events
    if response.malformed:
        return [*events, (pace, b'data: {"id":"chatcmpl-x","choices":[{"delta":\n\n')]
    for i, (name, args) in enumerate(response.tool_calls):
        size = response.json_chunk_size or max(1, math.ceil(len(args) / response.json_pieces))
        pieces: list[dict[str, Any]] = _call_heads(i, call_ids[i], name, response) + [
            {"index": i, "function": {"arguments": args[j : j + size]}}
            for j in range(0, len(args), size)
        ]
        for piece in pieces:
            if response.repeat_ids:
                piece.update(id=call_ids[i], type="function")
                piece["function"]["name"] = name
            if not response.index:
                del piece["index"]
            events.append((pace, encode(chunk({"tool_calls": [piece]}))))
    events.append((pace, encode(chunk({}, _finish(response)))))
    if include_usage:
        last = chunk({})
        last["choices"] = []
        last["usage"] = _usage(response, body)
        events.append((0.0, encode(last)))
    events.append((0.0, b"data: [DONE]\n\n"))
    return events
