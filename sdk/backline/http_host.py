"""One loopback HTTP host: an ASGI app served by uvicorn on a socket of its own.

``HttpHost`` binds (port 0: any free port), serves the app with uvicorn without
uvicorn's own signal handling (the front end owns Ctrl-C), ``start()`` returns
once requests are accepted (or raises what stopped it), ``wait()`` serves until
told to stop, and ``aclose()`` stops it within a bound, also when the closer is
itself cancelled. The web page (``backline.io.web``) and the MCP voice channel
(``backline.mcp``) are both served by it.

The loopback helpers (``is_loopback``, ``host_is_loopback``,
``origin_is_loopback``, ``hostname_of``) say whether a name, a ``Host`` header
or an ``Origin`` names only this machine: what a server that answers local
programs only checks against DNS rebinding and cross-site requests.

uvicorn is imported when a host starts, so the helpers stay light.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
import logging
import socket
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, Literal, TypeAlias
from urllib.parse import urlsplit

from .tasks import CLOSE_TIMEOUT, TaskScope, cancel_and_wait, done_within, first_completed

if TYPE_CHECKING:
    import uvicorn
    from starlette.types import ASGIApp

__all__ = [
    "STOP_TIMEOUT",
    "WILDCARD_HOSTS",
    "HttpHost",
    "WebSockets",
    "host_is_loopback",
    "hostname_of",
    "is_ip_address",
    "is_loopback",
    "origin_is_loopback",
]

logger = logging.getLogger("backline")

STOP_TIMEOUT = 5.0
"""How long a graceful stop may take by default before the server is forced down."""
WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})
"""Bind addresses that mean every interface of this machine."""
_GRACE_MARGIN = 2.0  # of the stop bound, left for uvicorn's own shutdown after its grace

WebSockets: TypeAlias = Literal["none", "auto", "websockets", "websockets-sansio", "wsproto"]
"""Which WebSocket implementation uvicorn uses (``"none"``: no WebSockets)."""


# -- names --------------------------------------------------------------------------------------
def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_ip_address(host: str) -> bool:
    """Whether ``host`` is an IP address (an IPv6 one with or without brackets)."""
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def hostname_of(netloc: str) -> str:
    """``host`` of ``host:port`` / ``[v6]:port`` (lower case, brackets kept off; ``""``
    when it is not a valid one)."""
    try:
        name = urlsplit(f"//{netloc}").hostname
    except ValueError:
        return ""
    return (name or "").lower()


def host_is_loopback(host_header: str) -> bool:
    """Whether a request's ``Host`` header (``name[:port]``) names only this machine."""
    name = hostname_of(host_header)
    return bool(name) and is_loopback(name)


def origin_is_loopback(origin: str) -> bool:
    """Whether a request's ``Origin`` is an ``http(s)://`` origin on this machine."""
    try:
        parts = urlsplit(origin)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and host_is_loopback(parts.netloc)


# -- the host -----------------------------------------------------------------------------------
class HttpHost:
    """Serves ``app`` (ASGI, speaking the lifespan protocol: Starlette apps do) with
    uvicorn on ``host:port``; ``async with`` starts and stops it.

    ``name`` says what it is in errors and logs (``"the web server"``). A stop waits
    ``stop_timeout`` seconds for requests in flight (uvicorn's graceful shutdown gets
    all but two of them), then forces the server down and cancels it (bounded too).
    ``after_stop()``, if given, runs once the server has stopped (closing what its
    requests left behind), bounded by ``after_stop_timeout``. ``ws`` and
    ``ws_max_size`` are uvicorn's WebSocket settings (no WebSockets by default).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        name: str = "the HTTP host",
        stop_timeout: float = STOP_TIMEOUT,
        after_stop: Callable[[], Awaitable[None]] | None = None,
        after_stop_timeout: float = CLOSE_TIMEOUT,
        ws: WebSockets = "none",
        ws_max_size: int = 16 * 1024 * 1024,
    ) -> None:
        if stop_timeout <= _GRACE_MARGIN:
            raise ValueError(f"stop_timeout must be over {_GRACE_MARGIN:g} s, got {stop_timeout}")
        self.app = app
        self.host = host
        self.name = name
        self.stop_timeout = stop_timeout
        self.after_stop_timeout = after_stop_timeout
        self._after_stop = after_stop
        self._requested_port = port
        self._ws = ws
        self._ws_max_size = ws_max_size
        self._port: int | None = None
        self._scope = TaskScope(name)
        self._server: uvicorn.Server | None = None
        self._serving: asyncio.Task[None] | None = None
        self._started: asyncio.Future[None] | None = None
        self._failure: BaseException | None = None
        self._closing: asyncio.Task[None] | None = None

    # -- where it serves ----------------------------------------------------------------------
    @property
    def port(self) -> int:
        """The port it listens on (known once started)."""
        if self._port is None:
            raise RuntimeError(f"{self.name} is not running")
        return self._port

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT`` (for a wildcard host, the loopback address)."""
        host = self.host
        if host in ("", "0.0.0.0"):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    @property
    def close_bound(self) -> float:
        """The most ``aclose()`` takes: the graceful stop, a forced one, ``after_stop``."""
        return self.stop_timeout + CLOSE_TIMEOUT + self.after_stop_timeout

    @property
    def running(self) -> bool:
        """Whether it serves now (started, not stopped)."""
        return self._serving is not None and not self._serving.done()

    # -- lifecycle ----------------------------------------------------------------------------
    async def __aenter__(self) -> HttpHost:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Bind the socket and serve; returns once requests are accepted, or raises what
        stopped the server (``OSError`` when the address is taken, for one)."""
        if self._serving is not None or self._closing is not None:
            raise RuntimeError(f"{self.name} was already started")
        import uvicorn

        sock = _bind(self.host, self._requested_port)
        self._port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            log_level="warning",
            access_log=False,  # URLs may carry tokens
            lifespan="on",
            ws=self._ws,
            ws_max_size=self._ws_max_size,
            timeout_graceful_shutdown=max(1, int(self.stop_timeout - _GRACE_MARGIN)),
        )
        started = self._started = asyncio.get_running_loop().create_future()
        self._server = _quiet_server_class()(config, started)
        self._serving = self._scope.create_task(self._serve(self._server, sock), name=self.name)
        await first_completed(started, self._serving)
        if not started.done():
            raise self._take_failure() or RuntimeError(f"{self.name} stopped while starting")

    async def wait(self, stop: asyncio.Event | None = None) -> None:
        """Serve until ``stop`` is set (without it, until the server stops); raises what
        stopped the server if it failed."""
        serving = self._serving
        if serving is None:
            raise RuntimeError(f"{self.name} is not running")
        waiter = None if stop is None else self._scope.create_task(stop.wait(), name="stop")
        try:
            await first_completed(serving, *([] if waiter is None else [waiter]))
        finally:
            if waiter is not None:
                await cancel_and_wait([waiter], owner=self.name)
        failure = self._take_failure() if serving.done() else None
        if failure is not None:
            raise failure

    async def aclose(self) -> None:
        """Stop serving (bounded by ``close_bound``); idempotent. A close that is itself
        cancelled still stops the server, then lets the cancellation on."""
        if self._closing is None:
            self._closing = self._scope.create_task(self._close(), name=f"{self.name} close")
        closing = self._closing
        try:
            await asyncio.shield(closing)
        except asyncio.CancelledError:
            if not closing.done():
                await done_within(closing, self.close_bound)
            raise

    # -- inside -------------------------------------------------------------------------------
    async def _serve(self, server: uvicorn.Server, sock: socket.socket) -> None:
        try:
            await server.serve(sockets=[sock])
        except SystemExit as e:  # uvicorn's way to say its startup failed
            self._failure = RuntimeError(f"{self.name} could not start (exit status {e.code})")
        except Exception as e:
            self._failure = e
        finally:
            sock.close()

    def _take_failure(self) -> BaseException | None:
        failure, self._failure = self._failure, None  # raised once, not logged at close too
        return failure

    async def _close(self) -> None:
        server, serving = self._server, self._serving
        if server is not None and serving is not None:
            server.should_exit = True
            if not await done_within(serving, self.stop_timeout):
                server.force_exit = True
                await cancel_and_wait([serving], timeout=CLOSE_TIMEOUT, owner=self.name)
            if self._failure is not None:
                logger.error("%s failed", self.name, exc_info=self._failure)
                self._failure = None
            if self._after_stop is not None:
                try:
                    async with asyncio.timeout(self.after_stop_timeout):
                        await self._after_stop()
                except TimeoutError:
                    logger.warning(
                        "%s: cleaning up after the stop took over %.1fs; left behind",
                        self.name,
                        self.after_stop_timeout,
                    )
                except Exception:
                    logger.exception("%s: cleaning up after the stop failed", self.name)
        await self._scope.aclose()  # a stop waiter left over, if any (never the close itself)


def _bind(host: str, port: int) -> socket.socket:
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


@functools.cache
def _quiet_server_class() -> type[Any]:
    """uvicorn's ``Server`` without its signal handling (the front end owns Ctrl-C),
    resolving a future once it accepts requests (defined on first use: uvicorn loads
    when a host starts)."""
    import uvicorn

    class QuietServer(uvicorn.Server):
        def __init__(self, config: uvicorn.Config, accepting: asyncio.Future[None]) -> None:
            super().__init__(config)
            self._accepting = accepting

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if not self.should_exit and not self._accepting.done():
                self._accepting.set_result(None)

    return QuietServer
