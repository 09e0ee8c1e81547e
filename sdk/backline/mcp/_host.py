"""``ChannelHost``: the voice channel over streamable HTTP on 127.0.0.1 (uvicorn).

One MCP server (``_tools``) behind one gate: a request must name this machine
in ``Host`` and, if it has one, in ``Origin`` (else 403: a web page cannot reach
the endpoint through DNS rebinding), and carry ``Authorization: Bearer <token>``
(else 401). The path names the background session (``_registry``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import socket
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import uvicorn
from mcp.server.mcpserver import Context
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..io.web import is_loopback
from ..limits import DEFAULT_LIMITS, Limits
from ._channel import ChannelError, Progress
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
        self._requested_port = port
        self._port: int | None = None
        self._started = asyncio.Event()
        self._server: _QuietServer | None = None
        self._task: asyncio.Task[None] | None = None
        mcp_server = build_channel_server(self._run)
        # Built for its session manager; the routes and the gate are ours.
        mcp_server.streamable_http_app(
            max_sessions=limits.max_mcp_connections,
            # The gate below checks Host and Origin (answering 403, not 421).
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        manager = mcp_server.session_manager

        @contextlib.asynccontextmanager
        async def lifespan(_: Starlette) -> AsyncIterator[None]:
            async with manager.run():
                self._started.set()
                yield

        endpoint = _Endpoint(manager.handle_request)
        app = Starlette(
            routes=[
                Route("/mcp/{background}", endpoint),
                Route("/mcp/{key}/{background}", endpoint),
            ],
            lifespan=lifespan,
        )
        self.app: ASGIApp = _Gate(app, self.token)

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the MCP endpoint is not running")
        return self._port

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
        if self._task is not None:
            raise RuntimeError("the MCP endpoint was already started")
        sock = _bind(self._requested_port)
        self._port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            log_level="warning",
            access_log=False,  # no URLs in logs
            lifespan="on",
            ws="none",
            timeout_graceful_shutdown=int(CLOSE_TIMEOUT) - 2,
        )
        self._server = _QuietServer(config)
        self._task = asyncio.create_task(
            self._server.serve(sockets=[sock]), name="backline MCP endpoint"
        )
        started = asyncio.ensure_future(self._started.wait())
        try:
            await asyncio.wait({started, self._task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not started.done():
                started.cancel()
        if not self._started.is_set():
            sock.close()
            await self._task  # raises what stopped it
            raise RuntimeError("the MCP endpoint stopped while starting")

    async def aclose(self) -> None:
        """Stop serving (bounded); calls in progress end with the connection."""
        server, task = self._server, self._task
        if server is None or task is None:
            return
        server.should_exit = True
        try:
            await asyncio.wait_for(asyncio.shield(task), CLOSE_TIMEOUT)
        except TimeoutError:
            server.force_exit = True
            task.cancel()
            await asyncio.wait([task], timeout=CLOSE_TIMEOUT)
        except Exception:
            logger.exception("the MCP endpoint failed")
        await stop_sse_watchers()

    async def _run(
        self, tool: str, arguments: dict[str, Any], ctx: Context, progress: Progress | None
    ) -> str:
        request = ctx.request_context.request
        params = getattr(request, "path_params", None) or {}
        background = params.get("background")
        if not isinstance(background, str):
            raise ChannelError("This endpoint names no background session.")
        channel = self.registry.channel(params.get("key"), background)
        return await run_on_channel(channel, tool, arguments, progress)


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
    """Host and Origin must be loopback (else 403); the bearer token must match (else 401)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        host = headers.get(b"host", b"").decode("latin-1")
        origin = headers.get(b"origin", b"").decode("latin-1")
        if not _names_loopback(host, with_scheme=False) or (
            origin and not _names_loopback(origin, with_scheme=True)
        ):
            response = PlainTextResponse(FOREIGN_HOST, 403)
        elif not secrets.compare_digest(headers.get(b"authorization", b""), self._expected):
            response = PlainTextResponse(
                UNAUTHORIZED, 401, headers={"WWW-Authenticate": 'Bearer realm="backline"'}
            )
        elif not scope.get("path", "").startswith("/mcp/"):
            response = PlainTextResponse(NOT_FOUND, 404)
        else:
            await self._app(scope, receive, send)
            return
        await response(scope, receive, send)


def _names_loopback(value: str, *, with_scheme: bool) -> bool:
    try:
        parts = urlsplit(value if with_scheme else f"//{value}")
        hostname = parts.hostname
    except ValueError:
        return False
    if with_scheme and parts.scheme not in ("http", "https"):
        return False
    return bool(hostname) and is_loopback(hostname or "")


class _QuietServer(uvicorn.Server):
    """uvicorn without its own signal handling: the front end owns Ctrl-C."""

    @contextlib.contextmanager
    def capture_signals(self) -> Any:
        yield


def _bind(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(128)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock
