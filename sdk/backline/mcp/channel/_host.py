"""``ChannelHost``: the voice channel over streamable HTTP on 127.0.0.1 (``backline.http_host``).

One MCP server (``_tools``) behind one gate: a request must name this machine
in ``Host`` and, if it has one, in ``Origin`` (else 403: a web page cannot reach
the endpoint through DNS rebinding), and carry ``Authorization: Bearer <token>``
(else 401, and the conversations served are told once that an agent was refused).
The path names the background session (``_registry``); ``GET /mcp`` with the token
answers what the endpoint serves (``backline mcp status`` checks a token with it).
Behind the gate, ``_connections`` ends a call whose client is gone and reclaims
abandoned sessions.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import weakref
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from mcp.server.mcpserver import Context
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ...http_host import HttpHost, host_is_loopback, origin_is_loopback
from ...limits import DEFAULT_LIMITS, Limits
from ...tasks import TaskScope
from ...voice.events import ErrorEvent
from ._channel import ChannelError, Progress, TokenRefused
from ._connections import Connections, client_gone
from ._registry import SessionRegistry
from ._tools import build_channel_server, run_on_channel

logger = logging.getLogger("backline.mcp")

CLOSE_TIMEOUT = 5.0
UNAUTHORIZED = (
    "401 Unauthorized: this backline MCP endpoint needs its bearer token "
    "(Authorization: Bearer <token>). `backline mcp config` prints a working configuration.\n"
)
FOREIGN_HOST = (
    "403 Forbidden: this backline MCP endpoint only answers requests addressed to this "
    "machine (Host and Origin must be 127.0.0.1, localhost or ::1).\n"
)
NOT_FOUND = (
    "404 Not Found: backline's MCP endpoints are /mcp/<background> and "
    "/mcp/<session>/<background>.\n"
)


class ChannelHost:
    """Serves the voice channel of every session in ``registry`` on ``127.0.0.1``.

    ``async with ChannelHost(registry) as host:``; ``host.url`` is the base URL
    (``http://127.0.0.1:PORT``) and ``host.token`` the bearer token.
    """

    def __init__(
        self,
        registry: SessionRegistry,
        *,
        token: str | None = None,
        port: int = 0,
        limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        if token is not None and not token.strip():
            raise ValueError("the MCP endpoint's token must not be blank")
        self.registry = registry
        self.token = token or secrets.token_urlsafe(24)
        self.refused = 0
        """Requests refused for a missing or wrong token."""
        self._told: weakref.WeakSet[Any] = weakref.WeakSet()  # sessions told of a refusal
        self._warned = False
        mcp_server = build_channel_server(self._run)
        # Built for its session manager; the routes, the gate and the connections are
        # ours. The manager's own limit and idle timeout stay as a backstop.
        mcp_server.streamable_http_app(
            max_sessions=limits.max_mcp_connections,
            # The gate below checks Host and Origin (answering 403, not 421).
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        manager = mcp_server.session_manager
        self.connections = Connections(
            manager.handle_request,
            limit=limits.max_mcp_connections,
            idle_timeout=limits.mcp_session_idle_timeout,
        )

        @contextlib.asynccontextmanager
        async def lifespan(_: Starlette) -> AsyncIterator[None]:
            async with manager.run(), self.connections.running():
                yield

        endpoint = _Endpoint(self.connections)
        app = Starlette(
            routes=[
                Route("/mcp/{background}", endpoint),
                Route("/mcp/{key}/{background}", endpoint),
            ],
            lifespan=lifespan,
        )
        self.app: ASGIApp = _Gate(app, self.token, self._refused, self.registry.backgrounds)
        self._http = HttpHost(
            self.app,
            port=port,
            name="the MCP endpoint",
            stop_timeout=CLOSE_TIMEOUT,
            after_stop=stop_sse_watchers,
            after_stop_timeout=CLOSE_TIMEOUT,
        )

    @property
    def port(self) -> int:
        return self._http.port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    def endpoint(self, background_id: str, key: str | None = None) -> str:
        """The URL of one background session's channel (of one session, with ``key``)."""
        middle = f"{key}/" if key else ""
        return f"{self.url}/mcp/{middle}{background_id}"

    async def __aenter__(self) -> ChannelHost:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Bind 127.0.0.1 and serve (returns once requests are accepted)."""
        await self._http.start()

    async def aclose(self) -> None:
        """Stop serving (bounded); calls in progress end with the connection.

        A close that is itself cancelled (a background's entrypoint cancelled while it
        leaves its ``async with``) still stops the server, then lets the cancellation on.
        """
        await self._http.aclose()

    async def _run(
        self, tool: str, arguments: dict[str, Any], ctx: Context, progress: Progress | None
    ) -> str:
        request = ctx.request_context.request
        params = getattr(request, "path_params", None) or {}
        background = params.get("background")
        if not isinstance(background, str):
            raise ChannelError("This endpoint names no background session.")
        channel = self.registry.channel(params.get("key"), background)
        call = run_on_channel(channel, tool, arguments, progress)
        gone = client_gone(request)
        if gone is None:
            return await call
        return await _while_connected(call, gone)

    def _refused(self) -> None:
        """A request without the right token: each conversation served is told once (an
        ``ErrorEvent`` its front end shows); with none, a warning is logged once."""
        self.refused += 1
        told = False
        for session in self.registry.live_sessions():
            if session in self._told:
                continue
            self._told.add(session)
            told = True
            session.emit(ErrorEvent(TokenRefused(), recoverable=True, source="mcp"))
        if not told and not self._warned and not self._told:
            self._warned = True
            logger.warning("%s", TokenRefused())


async def _while_connected(call: Coroutine[Any, Any, str], gone: asyncio.Event) -> str:
    """``call``'s answer, or ``ChannelError`` once its client is gone (the call is then
    cancelled: a wait ends, and takes none of the user's messages)."""
    scope = TaskScope("voice channel call", log_failures=False)
    task = scope.create_task(call, name="voice channel call")
    watch = scope.create_task(gone.wait(), name="voice channel client")
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        await scope.aclose()  # the call too, when its client went first (or we are cancelled)
    if task.cancelled():
        raise ChannelError("The agent's connection closed, so the call was cancelled.")
    return task.result()


async def stop_sse_watchers() -> None:
    """End ``sse_starlette``'s shutdown watcher (which the MCP transport's event streams
    start, one per event loop, and which ends only at a signal-driven uvicorn shutdown):
    call it once every server of this loop that streams events has stopped. A later
    stream starts a new one."""
    watchers = [
        task
        for task in asyncio.all_tasks()
        if getattr(task.get_coro(), "__qualname__", "") == "_shutdown_watcher"
        and "sse_starlette" in getattr(getattr(task.get_coro(), "cr_code", None), "co_filename", "")
    ]
    for task in watchers:
        task.cancel()
    if watchers:
        await asyncio.wait(watchers, timeout=CLOSE_TIMEOUT)


class _Endpoint:
    """An ASGI endpoint for Starlette's router (the MCP session manager)."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._handle(scope, receive, send)


class _Gate:
    """Host and Origin must be loopback (else 403); the bearer token must match (else 401,
    and ``on_refused()``). ``GET /mcp`` with the token answers what is served."""

    def __init__(
        self,
        app: ASGIApp,
        token: str,
        on_refused: Callable[[], None],
        backgrounds: Callable[[], list[str]],
    ) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()
        self._on_refused = on_refused
        self._backgrounds = backgrounds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        host = headers.get(b"host", b"").decode("latin-1")
        origin = headers.get(b"origin", b"").decode("latin-1")
        response: Response
        if not host_is_loopback(host) or (origin and not origin_is_loopback(origin)):
            response = PlainTextResponse(FOREIGN_HOST, 403)
        elif not secrets.compare_digest(headers.get(b"authorization", b""), self._expected):
            response = PlainTextResponse(
                UNAUTHORIZED, 401, headers={"WWW-Authenticate": 'Bearer realm="backline"'}
            )
            try:
                self._on_refused()
            except Exception:
                logger.exception("telling of a refused MCP token failed")
        elif scope.get("path", "") in ("/mcp", "/mcp/") and scope.get("method") == "GET":
            response = JSONResponse({"server": "backline", "backgrounds": self._backgrounds()})
        elif not scope.get("path", "").startswith("/mcp/"):
            response = PlainTextResponse(NOT_FOUND, 404)
        else:
            await self._app(scope, receive, send)
            return
        await response(scope, receive, send)
