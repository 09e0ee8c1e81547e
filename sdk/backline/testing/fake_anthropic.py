"""``FakeAnthropicServer``: the Anthropic Messages API on loopback, answering from a script.

A real HTTP server (a background thread, ``127.0.0.1``, an ephemeral port) that
speaks ``POST /v1/messages`` — server-sent events or JSON — so that the real
``anthropic`` client, ``AnthropicLLM`` and the Claude Code CLI can be tested
without the network::

    from backline.testing import fake_anthropic as fa

    script = [fa.text("Hello!"), fa.tool_calls(("get_weather", {"city": "Paris"}))]
    with fa.FakeAnthropicServer(script) as server:
        client = anthropic.Anthropic(base_url=server.url, api_key="test")
        ...
        assert server.requests[0].last_user_text == "hi"

Scripts work like ``ScriptedLLM``: a list of responses (``text``, ``tool_calls``,
``error``, ``stream_error``, ``stalled_stream``, ``cut_stream``, ``malformed_event``
or a plain string) or a callable ``request -> response`` (called on a server
thread, one call at a time). See docs/fake-anthropic.md.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import socket
import threading
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

from ._anthropic_http import Handler, HTTPServer, Output, read_body, shutdown_socket
from ._anthropic_script import (
    MALFORMED_DATA,
    AnthropicRequest,
    AnthropicResponse,
    AnthropicToolCall,
    Responder,
    ResponseLike,
    claude_code_side_request,
    coerce_response,
    cut_stream,
    default_side_response,
    error,
    example_for_schema,
    malformed_event,
    stalled_stream,
    stream_error,
    text,
    tool_calls,
)
from ._anthropic_wire import (
    PING,
    estimate_tokens,
    message_json,
    stream_steps,
    validate_messages_request,
)
from .scripted_llm import ScriptedResponse

__all__ = [
    "CLAUDE_CODE_CLEARED_ENV",
    "MALFORMED_DATA",
    "AnthropicRequest",
    "AnthropicResponse",
    "AnthropicToolCall",
    "FakeAnthropicServer",
    "Responder",
    "ResponseLike",
    "claude_code_side_request",
    "cut_stream",
    "default_side_response",
    "error",
    "example_for_schema",
    "malformed_event",
    "stalled_stream",
    "stream_error",
    "text",
    "tool_calls",
]

log = logging.getLogger(__name__)

#: Models listed by ``GET /v1/models``.
FAKE_MODELS = ("claude-haiku-5-5", "claude-sonnet-5-5", "claude-opus-5-5", "claude-haiku-4-5")

#: Variables ``claude_code_env`` sets to ``""`` (the CLI treats empty as unset): they
#: would otherwise take precedence over ``ANTHROPIC_API_KEY``/``ANTHROPIC_BASE_URL``
#: or pick another provider or model.
CLAUDE_CODE_CLEARED_ENV = (
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "ANTHROPIC_CUSTOM_HEADERS",
    "ANTHROPIC_MODEL",
    "ANTHROPIC_SMALL_FAST_MODEL",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "CLAUDE_CODE_USE_FOUNDRY",
)


_JOIN_TIMEOUT = 5.0  # stop() waits at most this long for request threads


class FakeAnthropicServer:
    """A scripted Anthropic Messages API server on ``127.0.0.1`` (see the module doc).

    ``script``: responses answered in order, or a callable ``request -> response``.
    ``side``: a predicate; matching ``/v1/messages`` requests are answered by
    ``side_response`` instead of the script (``claude_code_side_request`` filters
    the Claude Code CLI's title and quota requests; ``for_claude_code`` sets it).
    ``validate``: answer requests the real API would reject (empty text blocks,
    unpaired ``tool_use``/``tool_result`` …) with a 400, as the API does.

    Use it as a context manager (``with`` or ``async with``) or call ``start()``
    and ``stop()``. All methods are thread-safe.
    """

    def __init__(
        self,
        script: Iterable[ResponseLike] | ResponseLike | Responder = (),
        *,
        side: Callable[[AnthropicRequest], bool] | None = None,
        side_response: Responder = default_side_response,
        validate: bool = True,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self._responder: Responder | None = None
        self._queue: deque[ResponseLike] = deque()
        if isinstance(script, str | AnthropicResponse | ScriptedResponse):
            self._queue.append(script)  # one response, not an iterable of them
        elif callable(script):
            self._responder = script
        else:
            self._queue.extend(script)
        self._side = side
        self._side_response = side_response
        self._validate = validate
        self._host = host
        self._port = port
        self._lock = threading.Lock()
        self._script_lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._requests: list[AnthropicRequest] = []
        self._disconnects: list[AnthropicRequest] = []
        self._connections: set[socket.socket] = set()
        self._ids = {k: itertools.count(1) for k in ("msg", "toolu", "req")}
        self._httpd: HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self.disconnected = threading.Event()
        """Set when a client went away before its response ended."""
        self.script_errors: list[BaseException] = []
        """Exceptions raised by a script callable (each answered with a 500)."""

    @classmethod
    def for_claude_code(
        cls,
        script: Iterable[ResponseLike] | ResponseLike | Responder = (),
        **kwargs: Any,
    ) -> FakeAnthropicServer:
        """A server whose script sees only the Claude Code CLI's agent-loop requests."""
        kwargs.setdefault("side", claude_code_side_request)
        return cls(script, **kwargs)

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> FakeAnthropicServer:
        """Bind and serve on a background thread; returns ``self``. Idempotent."""
        with self._lock:
            if self._httpd is not None:
                return self
            self._stopping.clear()
            httpd = HTTPServer((self._host, self._port), Handler, self)
            self._httpd = httpd
            self._thread = threading.Thread(
                target=httpd.serve_forever,
                kwargs={"poll_interval": 0.01},  # how fast shutdown() returns
                name=f"FakeAnthropicServer:{httpd.server_address[1]}",
                daemon=True,
            )
            self._thread.start()
        log.debug("FakeAnthropicServer listening on %s", self.url)
        return self

    def stop(self) -> None:
        """Stop serving, end open streams and connections, and join the threads."""
        with self._lock:
            httpd, thread = self._httpd, self._thread
            self._httpd = self._thread = None
            if httpd is None:
                return
            self._stopping.set()
        httpd.shutdown()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            shutdown_socket(conn)
        httpd.server_close()
        if thread is not None:
            thread.join()
        stuck = httpd.join_handlers(timeout=_JOIN_TIMEOUT)
        if stuck:  # only a script callable that never returns can do this
            log.warning("FakeAnthropicServer.stop: %d request thread(s) still busy", len(stuck))

    def __enter__(self) -> FakeAnthropicServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> FakeAnthropicServer:
        return self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.stop)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` — the base URL (``ANTHROPIC_BASE_URL``)."""
        httpd = self._httpd
        if httpd is None:
            raise RuntimeError("FakeAnthropicServer is not running; call start() first")
        host, port = httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def claude_code_env(self, home: str | os.PathLike[str]) -> dict[str, str]:
        """Environment for the Claude Code CLI to use this server, with config in ``home``.

        Pass it as ``ClaudeAgentOptions(env=...)`` (merged over ``os.environ``) or
        to a subprocess. ``home`` (a temporary directory) becomes ``HOME`` and holds
        ``CLAUDE_CONFIG_DIR``, so the user's own Claude config is never read or
        written. Non-essential traffic (title generation, the ``/api/hello``
        check, telemetry) and tool search are turned off, which keeps the requests
        deterministic; credentials and overrides in ``CLAUDE_CODE_CLEARED_ENV`` are
        blanked.
        """
        home_dir = Path(home)
        return {
            **dict.fromkeys(CLAUDE_CODE_CLEARED_ENV, ""),
            "ANTHROPIC_BASE_URL": self.url,
            "ANTHROPIC_API_KEY": "sk-ant-fake-key",
            "ENABLE_TOOL_SEARCH": "false",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "HOME": str(home_dir),
            "CLAUDE_CONFIG_DIR": str(home_dir / ".claude"),
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }

    def __repr__(self) -> str:
        where = self.url if self._httpd is not None else "stopped"
        return f"<FakeAnthropicServer {where} requests={len(self._requests)}>"

    # -- script and records ------------------------------------------------------

    def push(self, *responses: ResponseLike) -> None:
        """Append responses to the script."""
        with self._lock:
            self._queue.extend(responses)

    @property
    def remaining(self) -> int:
        """Responses left in the script."""
        with self._lock:
            return len(self._queue)

    @property
    def requests(self) -> list[AnthropicRequest]:
        """Every request received, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def scripted_requests(self) -> list[AnthropicRequest]:
        """The requests answered from the script, in order."""
        with self._lock:
            return [r for r in self._requests if r.scripted]

    @property
    def disconnects(self) -> list[AnthropicRequest]:
        """Requests whose client went away before the response ended."""
        with self._lock:
            return list(self._disconnects)

    def wait_for_requests(
        self, count: int, *, timeout: float = 10.0, scripted: bool = False
    ) -> list[AnthropicRequest]:
        """Block until ``count`` requests (or scripted requests) arrived; return them."""

        def enough() -> bool:
            return len(self._select(scripted)) >= count

        with self._changed:
            if not self._changed.wait_for(enough, timeout):
                got = self._select(scripted)
                raise TimeoutError(
                    f"FakeAnthropicServer: expected {count} {'scripted ' if scripted else ''}"
                    f"requests within {timeout}s, got {len(got)}: {got}"
                )
            return self._select(scripted)

    def wait_for_disconnect(self, timeout: float = 10.0) -> AnthropicRequest:
        """Block until a client went away mid-response; return that request."""
        with self._changed:
            if not self._changed.wait_for(lambda: bool(self._disconnects), timeout):
                raise TimeoutError(f"FakeAnthropicServer: no client disconnected within {timeout}s")
            return self._disconnects[0]

    async def wait_for_disconnect_async(
        self,
        timeout: float = 10.0,
    ) -> AnthropicRequest:
        """``wait_for_disconnect`` without blocking the event loop."""
        return await asyncio.to_thread(self.wait_for_disconnect, timeout)

    def _select(self, scripted: bool) -> list[AnthropicRequest]:
        return [r for r in self._requests if r.scripted or not scripted]

    # -- request handling (server threads) ---------------------------------------

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            if not add:
                self._connections.discard(conn)
            elif self._stopping.is_set():
                shutdown_socket(conn)
            else:
                self._connections.add(conn)

    def _record(self, handler: Handler, method: str) -> AnthropicRequest:
        raw = read_body(handler)
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
        path, _, query = handler.path.partition("?")
        with self._changed:
            request = AnthropicRequest(
                index=len(self._requests) + 1,
                method=method,
                path=path,
                query=query,
                headers={k.lower(): v for k, v in handler.headers.items()},
                body=body,
            )
            self._requests.append(request)
            self._changed.notify_all()
        log.debug("FakeAnthropicServer <- %r", request)
        return request

    def _next_id(self, kind: str) -> str:
        with self._lock:
            return f"{kind}_fake{next(self._ids[kind]):04d}"

    def _respond(self, request: AnthropicRequest) -> AnthropicResponse:
        """The answer to a valid Messages request: from the side responder or the script."""
        try:
            if self._side is not None and self._side(request):
                return coerce_response(self._side_response(request))
            return self._scripted(request)
        except Exception as e:
            log.exception("FakeAnthropicServer: the script failed for %r", request)
            with self._lock:
                self.script_errors.append(e)
            return _internal_error(f"FakeAnthropicServer: the script raised {e!r}")

    def _scripted(self, request: AnthropicRequest) -> AnthropicResponse:
        with self._script_lock:  # one script step at a time, in arrival order
            with self._lock:
                request.scripted = True
                responder = self._responder
                item = self._queue.popleft() if responder is None and self._queue else None
            if responder is not None:
                return coerce_response(responder(request))
        if item is not None:
            return coerce_response(item)
        return _internal_error(
            f"FakeAnthropicServer: no response scripted for request #{request.index} "
            f"({request.method} {request.path}, model {request.model!r}, last user text "
            f"{request.last_user_text[:80]!r}); push() more responses or pass a callable"
        )

    def _handle(self, handler: Handler, method: str) -> None:
        try:
            request = self._record(handler, method)
        except (ValueError, OSError, EOFError) as e:
            handler.close_connection = True
            log.debug("FakeAnthropicServer: unreadable request: %r", e)
            return
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
                    self.disconnected.set()
                elif not out.aborted:
                    request.completed = True
                self._changed.notify_all()

    def _dispatch(self, request: AnthropicRequest, out: Output) -> None:
        request_id = self._next_id("req")
        path, method = request.path.rstrip("/"), request.method
        if path == "/v1/messages" and method == "POST":
            problem = validate_messages_request(request.body) if self._validate else None
            if problem is not None:
                response = error(400, "invalid_request_error", problem)
            else:
                response = self._respond(request)
            self._answer(request, response, out, request_id)
        elif path == "/v1/messages/count_tokens" and method == "POST":
            body = request.body if isinstance(request.body, dict) else {}
            tokens = estimate_tokens([body.get("system"), body.get("messages"), body.get("tools")])
            out.json(200, {"input_tokens": tokens}, request_id)
        elif path == "/api/hello" and method in ("GET", "HEAD"):
            out.json(200, {}, request_id, head=method == "HEAD")
        elif path == "/v1/models" and method == "GET":
            data = [_model_info(m) for m in FAKE_MODELS]
            page = {"data": data, "has_more": False, "first_id": data[0]["id"]}
            out.json(200, {**page, "last_id": data[-1]["id"]}, request_id)
        elif path.startswith("/v1/models/") and method == "GET":
            out.json(200, _model_info(path.rsplit("/", 1)[1]), request_id)
        else:
            body = error(404, "not_found_error", f"Not found: {method} {path}").error_body(
                request_id
            )
            out.json(404, body, request_id, head=method == "HEAD")

    def _answer(
        self,
        request: AnthropicRequest,
        response: AnthropicResponse,
        out: Output,
        request_id: str,
    ) -> None:
        if not out.wait(response.delay):
            return
        headers = dict(response.headers)
        if response.is_error or (response.stream_error is not None and not request.stream):
            body = response.error_body(request_id)
            out.json(response.error_status(), body, request_id, headers=headers)
            return
        message_id = self._next_id("msg")
        tool_ids = [c.id or self._next_id("toolu") for c in response.tool_calls]
        end = response.stream_end
        if not request.stream:
            if end == "stall":
                while out.wait(response.ping_interval):
                    pass
            elif end == "cut":
                out.abort()
            elif end == "malformed":
                out.body(200, response.malformed_data.encode(), request_id, headers=headers)
            else:
                body = message_json(response, request, message_id=message_id, tool_ids=tool_ids)
                out.json(200, body, request_id, headers=headers)
            return
        steps = stream_steps(
            response, request, message_id=message_id, tool_ids=tool_ids, request_id=request_id
        )
        out.start_stream(request_id, headers)
        for step in steps:
            if not out.wait(step.delay) or not out.chunk(step.encode()):
                return
        if end == "stall":
            ping = PING.encode()
            while out.wait(response.ping_interval) and out.chunk(ping):
                pass
        elif end == "cut":
            out.abort()
        else:
            out.end_stream()


def _internal_error(message: str) -> AnthropicResponse:
    return error(500, "api_error", message, headers={"x-should-retry": "false"})


def _model_info(model_id: str) -> dict[str, Any]:
    return {
        "type": "model",
        "id": model_id,
        "display_name": model_id,
        "created_at": "2025-01-01T00:00:00Z",
    }
