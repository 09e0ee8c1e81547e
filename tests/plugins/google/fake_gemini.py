"""A fake Gemini API on loopback, answering from a script.

``POST /{version}/models/{model}:streamGenerateContent?alt=sse`` answered as the Gemini
API streams: server-sent events, each ``data: {GenerateContentResponse}`` (camelCase,
``candidates[0].content.parts[]`` with ``text`` or ``functionCall``, ``usageMetadata`` on
every chunk, ``finishReason`` on the last candidate chunk), ``\\r\\n\\r\\n`` between
events. Errors are Google's ``{"error": {"code", "message", "status", "details"}}`` with
their HTTP status, or such an object as an event inside a 200 stream. The key comes in
``x-goog-api-key``; a wrong one gets the API's ``400 INVALID_ARGUMENT`` "API key not
valid". Requests the real API rejects get a 400, so conversion mistakes fail the test:
roles other than ``user``/``model``, empty parts, a ``functionResponse`` that does not
answer the ``functionCall`` s of the model turn before it (their count, names and ids),
a call the server gave a ``thoughtSignature`` sent back without it. The script builders
share the conformance suite's names and shapes (``text``, ``tool_calls``, ``error``,
``stream_error``). The HTTP layer is the fake Anthropic server's.
"""

from __future__ import annotations

import asyncio
import base64
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

_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_MESSAGES = {
    400: "Request contains an invalid argument.",
    401: "Request had invalid authentication credentials.",
    403: "The caller does not have permission",
    404: "Requested entity was not found.",
    429: "Resource has been exhausted (e.g. check quota).",
    500: "An internal error has occurred. Please retry or report in "
    "https://developers.generativeai.google/guide/troubleshooting",
    503: "The model is overloaded. Please try again later.",
}
BAD_KEY = "API key not valid. Please pass a valid API key."


@dataclass
class GeminiResponse:
    """One scripted answer (build it with ``text``, ``tool_calls``, ``error``...)."""

    text: str = ""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    call_ids: bool = True  # functionCall parts carry an "id"
    signature: bytes | None = None  # the first call's thoughtSignature
    thought: str = ""  # a thought summary part first (never spoken)
    finish_reason: str = "STOP"
    usage: dict[str, int] = field(default_factory=dict)
    delay: float = 0.0
    chunk_delay: float = 0.0
    status: int = 200
    message: str | None = None
    details: list[dict[str, Any]] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    stream_error: int | None = None  # an error event inside the stream, after the text
    cut: bool = False  # end the stream without a finishReason
    malformed: bool = False  # after the text, a data line that is not JSON
    block_reason: str | None = None  # promptFeedback.blockReason, no candidates

    def error_body(self) -> dict[str, Any]:
        status = self.stream_error or self.status
        return {
            "error": {
                "code": status,
                "message": self.message or _MESSAGES.get(status, "Error."),
                "status": _STATUS_NAMES.get(status, "UNKNOWN"),
                "details": self.details,
            }
        }


def text(
    content: str,
    *,
    usage: Mapping[str, int] | None = None,
    finish_reason: str = "STOP",
    thought: str = "",
    delay: float = 0.0,
    chunk_delay: float = 0.0,
) -> GeminiResponse:
    """A text reply, streamed word by word. ``usage`` takes ``input_tokens`` /
    ``output_tokens`` / ``cached_tokens`` / ``thoughts_tokens`` (sent as Gemini's
    ``promptTokenCount`` ...)."""
    return GeminiResponse(
        text=content,
        usage=dict(usage or {}),
        finish_reason=finish_reason,
        thought=thought,
        delay=delay,
        chunk_delay=chunk_delay,
    )


def tool_calls(
    *calls: tuple[str, Mapping[str, Any]],
    text: str = "",
    usage: Mapping[str, int] | None = None,
    ids: bool = True,
    signature: bytes | None = None,
    json_chunk_size: int = 0,  # the suite's; Gemini sends each call whole in one part
    delay: float = 0.0,
    chunk_delay: float = 0.0,
) -> GeminiResponse:
    """Function calls (each a whole ``functionCall`` part), after an optional ``text``;
    ``ids=False`` leaves their ``id`` out; ``signature`` is the first call's
    ``thoughtSignature`` (then it must come back with the call)."""
    return GeminiResponse(
        text=text,
        calls=[(name, dict(args)) for name, args in calls],
        call_ids=ids,
        signature=signature,
        usage=dict(usage or {}),
        delay=delay,
        chunk_delay=chunk_delay,
    )


def error(
    status: int,
    message: str | None = None,
    *,
    details: list[dict[str, Any]] | None = None,
    headers: Mapping[str, str] | None = None,
) -> GeminiResponse:
    """An HTTP error with Google's error body, e.g. ``error(429)``."""
    if status < 400:
        raise ValueError(f"error status must be >= 400, got {status}")
    return GeminiResponse(
        status=status, message=message, details=list(details or []), headers=dict(headers or {})
    )


def stream_error(
    status: int = 500, message: str | None = None, *, text: str = ""
) -> GeminiResponse:
    """A 200 stream that sends ``text`` and then an ``{"error": ...}`` event, and ends."""
    return GeminiResponse(text=text, stream_error=status, message=message)


def cut_stream(content: str = "") -> GeminiResponse:
    """A stream that sends ``content`` and ends without a ``finishReason``."""
    return GeminiResponse(text=content, cut=True)


def malformed_stream(content: str = "") -> GeminiResponse:
    """A stream that sends ``content`` and then a ``data:`` line that is not JSON."""
    return GeminiResponse(text=content, malformed=True)


def blocked(reason: str = "SAFETY") -> GeminiResponse:
    """The prompt blocked: one chunk with ``promptFeedback.blockReason``, no candidates."""
    return GeminiResponse(block_reason=reason)


@dataclass
class GeminiRequest:
    """One request as received."""

    index: int
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    completed: bool = False
    disconnected: bool = False

    @property
    def model(self) -> str:
        return self.path.partition("/models/")[2].partition(":")[0]

    @property
    def contents(self) -> list[dict[str, Any]]:
        return list(self.body.get("contents", [])) if isinstance(self.body, dict) else []

    def parts(self, key: str) -> list[dict[str, Any]]:
        """Every part's ``key`` object (``functionCall``, ``functionResponse``), in order."""
        return [p[key] for c in self.contents for p in c.get("parts", []) if key in p]


def _pieces(content: str) -> list[str]:
    parts: list[str] = []
    word = ""
    for ch in content:
        word += ch
        if ch == " ":
            parts.append(word)
            word = ""
    return [*parts, word] if word else parts


def _tokens(value: Any) -> int:
    return max(1, math.ceil(len(value if isinstance(value, str) else json.dumps(value)) / 4))


def _get(obj: dict[str, Any], camel: str, snake: str) -> Any:
    return obj.get(camel, obj.get(snake))


class FakeGeminiServer:
    """A scripted Gemini API on ``127.0.0.1`` (``url`` is the base URL, no version).

    Use it as a context manager. ``push(*responses)`` appends to the script (a plain
    string is ``text(string)``); ``requests`` are the requests received. ``api_key``:
    the only key accepted (``None``: any).
    """

    def __init__(
        self, script: Iterable[GeminiResponse | str] = (), *, api_key: str | None = None
    ) -> None:
        self._queue: deque[GeminiResponse | str] = deque(script)
        self.api_key = api_key
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._requests: list[GeminiRequest] = []
        self._disconnects: list[GeminiRequest] = []
        self._connections: set[socket.socket] = set()
        self._signatures: dict[str, str] = {}  # the calls given a signature, by their key
        self._stopping = threading.Event()
        self._httpd: HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------
    def start(self) -> FakeGeminiServer:
        httpd = HTTPServer(("127.0.0.1", 0), Handler, self)
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.01},
            name=f"FakeGeminiServer:{httpd.server_address[1]}",
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

    def __enter__(self) -> FakeGeminiServer:
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
            raise RuntimeError("FakeGeminiServer is not running")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    # -- script and records ------------------------------------------------------
    def push(self, *responses: GeminiResponse | str) -> None:
        with self._lock:
            self._queue.extend(responses)

    @property
    def requests(self) -> list[GeminiRequest]:
        with self._lock:
            return list(self._requests)

    def wait_for_disconnect(self, timeout: float = 10.0) -> GeminiRequest:
        with self._changed:
            if not self._changed.wait_for(lambda: bool(self._disconnects), timeout):
                raise TimeoutError(f"FakeGeminiServer: no client disconnected within {timeout}s")
            return self._disconnects[0]

    async def wait_for_disconnect_async(self, timeout: float = 10.0) -> GeminiRequest:
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
            request = GeminiRequest(
                index=len(self._requests) + 1,
                method=method,
                path=handler.path,
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

    def _dispatch(self, request: GeminiRequest, out: Output) -> None:
        request_id = f"req_fake{request.index:04d}"
        path, _, query = request.path.partition("?")
        version, _, rest = path.lstrip("/").partition("/")
        if (
            request.method != "POST"
            or version not in ("v1", "v1beta")
            or not rest.startswith("models/")
            or not rest.endswith(":streamGenerateContent")
            or query != "alt=sse"
        ):
            message = f"Invalid URL: {request.method} {request.path}"
            self._answer(request, error(404, message), out, request_id)
            return
        key = request.headers.get("x-goog-api-key")
        if not key or (self.api_key is not None and key != self.api_key):
            bad = error(400, BAD_KEY, details=[{"reason": "API_KEY_INVALID"}])
            self._answer(request, bad, out, request_id)
            return
        problem = self._validate(request.body)
        response = self._scripted(request) if problem is None else error(400, problem)
        self._answer(request, response, out, request_id)

    def _validate(self, body: Any) -> str | None:
        """What the real API would reject, or ``None``."""
        if not isinstance(body, dict):
            return "Invalid JSON payload received."
        contents = body.get("contents")
        if not isinstance(contents, list) or not contents:
            return "* GenerateContentRequest.contents: contents is not specified"
        open_calls: list[dict[str, Any]] = []
        for i, content in enumerate(contents):
            role = content.get("role")
            parts = content.get("parts") or []
            if role not in ("user", "model"):
                return f"Please use a valid role: user, model. (contents[{i}].role: {role!r})"
            if not parts:
                return f"* GenerateContentRequest.contents[{i}].parts: must not be empty."
            calls = [_get(p, "functionCall", "function_call") for p in parts]
            answers = [_get(p, "functionResponse", "function_response") for p in parts]
            if open_calls:
                given = [a for a in answers if a is not None]
                if role != "user" or len(given) != len(open_calls):
                    return (
                        "Please ensure that the number of function response parts is equal to "
                        "the number of function call parts of the function call turn."
                    )
                for call, answer in zip(open_calls, given, strict=True):
                    if answer.get("name") != call.get("name") or answer.get("id") != call.get("id"):
                        return f"contents[{i}]: function response does not match its call: {answer}"
                    if not isinstance(answer.get("response"), dict):
                        return f"contents[{i}]: functionResponse.response must be an object"
            elif any(a is not None for a in answers):
                return f"contents[{i}]: a function response with no function call before it"
            open_calls = []
            for j, (part, call) in enumerate(zip(parts, calls, strict=True)):
                if call is None:
                    continue
                if role != "model":
                    return f"contents[{i}]: only model turns may have function calls"
                if not isinstance(call.get("args", {}), dict):
                    return f"contents[{i}].parts[{j}].functionCall.args must be an object"
                wanted = self._signatures.get(_call_key(call))
                given_signature = _get(part, "thoughtSignature", "thought_signature")
                if wanted is not None and given_signature != wanted:
                    return (
                        f"Function call is missing a thought_signature in functionCall parts "
                        f"(contents[{i}].parts[{j}])."
                    )
                open_calls.append(call)
        if open_calls:
            return "the last function call turn has no function responses"
        if contents[-1].get("role") != "user":
            return "the conversation must end with a user turn"
        for tool in body.get("tools") or []:
            for declaration in _get(tool, "functionDeclarations", "function_declarations") or []:
                schema = _get(declaration, "parametersJsonSchema", "parameters_json_schema")
                if not declaration.get("name") or not isinstance(schema, dict | None):
                    return f"invalid function declaration: {declaration}"
        return None

    def _scripted(self, request: GeminiRequest) -> GeminiResponse:
        with self._lock:
            item = self._queue.popleft() if self._queue else None
        if item is None:
            return error(
                500,
                f"FakeGeminiServer: no response scripted for request #{request.index}; push() "
                "more responses",
                headers={"x-should-retry": "false"},
            )
        return text(item) if isinstance(item, str) else item

    def _answer(
        self, request: GeminiRequest, response: GeminiResponse, out: Output, request_id: str
    ) -> None:
        if not out.wait(response.delay):
            return
        if response.status >= 400:
            out.json(response.status, response.error_body(), request_id, headers=response.headers)
            return
        out.start_stream(request_id, response.headers)
        for delay, data in self._events(request, response):
            if not out.wait(delay) or not out.chunk(data):
                return
        out.end_stream()

    def _events(
        self, request: GeminiRequest, response: GeminiResponse
    ) -> list[tuple[float, bytes]]:
        """The ``(delay, bytes)`` of each server-sent event, as the Gemini API sends them."""
        model = request.model
        prompt = response.usage.get("input_tokens", _tokens(request.contents))
        output = response.usage.get("output_tokens", _tokens(response.text or response.calls))
        thoughts = response.usage.get("thoughts_tokens", 0)
        cached = response.usage.get("cached_tokens", 0)

        def event(parts: list[dict[str, Any]] | None, last: bool = False) -> bytes:
            usage: dict[str, Any] = {"promptTokenCount": prompt, "totalTokenCount": prompt}
            data: dict[str, Any] = {
                "modelVersion": model,
                "responseId": f"resp_fake{request.index:04d}",
                "usageMetadata": usage,
            }
            if parts is not None:
                candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
                if last:
                    candidate["finishReason"] = response.finish_reason
                    usage["candidatesTokenCount"] = output
                    usage["totalTokenCount"] = prompt + output + thoughts
                    if thoughts:
                        usage["thoughtsTokenCount"] = thoughts
                    if cached:
                        usage["cachedContentTokenCount"] = cached
                candidate["index"] = 0
                data["candidates"] = [candidate]
            return _sse(data)

        if response.block_reason is not None:
            blocked = {"promptFeedback": {"blockReason": response.block_reason}}
            return [(0.0, _sse({**blocked, "usageMetadata": {"promptTokenCount": prompt}}))]
        pace = response.chunk_delay
        pieces: list[list[dict[str, Any]]] = []
        if response.thought:
            pieces.append([{"text": response.thought, "thought": True}])
        pieces.extend([{"text": piece}] for piece in _pieces(response.text))
        call_parts: list[dict[str, Any]] = []
        for i, (name, args) in enumerate(response.calls):
            call: dict[str, Any] = {"name": name, "args": args}
            if response.call_ids:
                call["id"] = f"fc_{request.index:02d}{i:02d}"
            part: dict[str, Any] = {"functionCall": call}
            if i == 0 and response.signature is not None:
                signature = base64.b64encode(response.signature).decode()
                part["thoughtSignature"] = signature
                with self._lock:
                    self._signatures[_call_key(call)] = signature
            call_parts.append(part)
        if call_parts:
            pieces.append(call_parts)
        events: list[tuple[float, bytes]] = []
        if response.stream_error is not None:
            events = [(pace if i else 0.0, event(p)) for i, p in enumerate(pieces)]
            return [*events, (pace, _sse(response.error_body()))]
        if response.cut or response.malformed:
            events = [(pace if i else 0.0, event(p)) for i, p in enumerate(pieces)]
            broken = b'data: {"candidates": [{"content":\r\n\r\n'
            return [*events, (pace, broken)] if response.malformed else events
        if not pieces:
            pieces = [[{"text": ""}]]
        for i, piece in enumerate(pieces):
            events.append((pace if i else 0.0, event(piece, last=i == len(pieces) - 1)))
        return events


def _call_key(call: dict[str, Any]) -> str:
    return json.dumps([call.get("name"), call.get("args") or {}], sort_keys=True)


def _sse(data: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\r\n\r\n"
