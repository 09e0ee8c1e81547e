"""The web front end's server: the page, its assets and one WebSocket per tab (Starlette,
served by ``backline.http_host``), behind an access gate (``_access``: Host and Origin
checks, the access token, sign-in codes and cookies).

``WebServer`` is the server as an async context manager (tests, embedding);
``serve_web`` runs one until Ctrl-C, printing the URL as notebook servers do.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import itertools
import logging
import secrets
import signal
import sys
import webbrowser
from collections.abc import Awaitable, Callable, Iterable
from importlib import resources
from typing import TYPE_CHECKING, Any, TextIO, TypeAlias
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.types import ASGIApp
from starlette.websockets import WebSocket

from ...http_host import WILDCARD_HOSTS, HttpHost, is_loopback
from ...limits import DEFAULT_LIMITS, Limits
from . import protocol
from ._access import Access, AccessGate, check_token, grant_of
from ._speech import WebSpeech
from ._tab import CLOSE_TIMEOUT, WebTab

if TYPE_CHECKING:
    from ...session import Session
    from ...voice.agent import Agent

logger = logging.getLogger("backline")

TabFactory: TypeAlias = Callable[
    [], "tuple[Session[Any], Agent] | Awaitable[tuple[Session[Any], Agent]]"
]
"""Builds one tab's unstarted session and its first agent (called once per tab)."""

DEFAULT_MAX_TABS = 8
STATIC_TYPES = {
    "app.css": "text/css; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "speech.js": "text/javascript; charset=utf-8",
    "voice.js": "text/javascript; charset=utf-8",
    "microphone.js": "text/javascript; charset=utf-8",
    "alerts.js": "text/javascript; charset=utf-8",
}
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
    "Permissions-Policy": "microphone=(self)",
}
CLOSE_SIGNED_OUT = 4003
"""The close code of a tab whose sign-in was revoked (its sign-in link was used twice)."""
STOP_TIMEOUT = CLOSE_TIMEOUT + 5
"""How long stopping waits for the tabs' handlers (each closes its session, bounded by
``CLOSE_TIMEOUT``) before the server is forced down."""


class WebServer:
    """Serves the page and one session per tab; ``async with`` runs and stops it.

    ``factory()`` builds each tab's unstarted session and agent (it may be async).
    The URL (``url``) carries the token; requests without it (or the cookie the page
    gets) get 403, and so do requests naming another host or coming from another site
    (``allow_hosts`` adds names, for a reverse proxy; see ``_access``).
    ``sign_in_url()`` is a one-time link without the token, for opening a browser. At
    most ``max_tabs`` tabs run at once; closing a tab closes its session (bounded),
    and leaving the context closes every session. ``limits`` bounds what each tab
    reads and queues (``Limits.web_*``, ``max_user_turn_chars``).

    ``speech`` says who listens and speaks (``WebSpeech``; default: the browser): with
    the server's engines, a tab whose page asks for them (``/ws?speech=server``: it
    has no speech recognition of its own), or every tab (mode ``server``), streams its
    microphone to the server and plays the server's voice.
    """

    def __init__(
        self,
        factory: TabFactory,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        max_tabs: int = DEFAULT_MAX_TABS,
        allow_hosts: Iterable[str] = (),
        limits: Limits = DEFAULT_LIMITS,
        speech: WebSpeech | None = None,
    ) -> None:
        check_token(token, limits)
        if max_tabs < 1:
            raise ValueError("max_tabs must be at least 1")
        self.host = host
        self.token = token or secrets.token_urlsafe(24)
        self.max_tabs = max_tabs
        self.limits = limits
        self.speech = speech or WebSpeech()
        self.access = Access(self.token, bind_host=host, allow_hosts=allow_hosts, limits=limits)
        self.access.port = port or None  # a free port is known once bound
        self.access.on_revoke = self._signed_out
        self._factory = factory
        self._tabs: set[WebTab] = set()
        self._slots = 0
        self._ids = itertools.count(1)
        self._stopping = False
        self._page = _read_static("index.html")
        self.app: ASGIApp = AccessGate(self._build_app(), self.access, SECURITY_HEADERS)
        self._http = HttpHost(
            self.app,
            host=host,
            port=port,
            name="the web server",
            stop_timeout=STOP_TIMEOUT,
            after_stop=self._close_tabs,
            after_stop_timeout=CLOSE_TIMEOUT + 2,
            ws="websockets-sansio",
            ws_max_size=limits.max_web_message_bytes,
        )

    # -- public state ---------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._http.port

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT`` (for a wildcard host, the loopback address)."""
        return self._http.base_url

    @property
    def url(self) -> str:
        """The page's URL, with the token (keep it private: it is the password)."""
        return f"{self.base_url}/?token={quote(self.token, safe='')}"

    def sign_in_url(self) -> str:
        """A new one-time link to the page, without the token (what ``open_browser``
        opens): it works once, within ``Limits.web_sign_in_timeout``, and signs that
        browser in with a cookie."""
        return f"{self.base_url}/?code={self.access.new_code()}"

    @property
    def tabs(self) -> list[WebTab]:
        """The tabs connected now (each with its ``session``)."""
        return list(self._tabs)

    # -- lifecycle ------------------------------------------------------------------------------
    async def __aenter__(self) -> WebServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Bind the socket and start serving (returns once requests are accepted)."""
        await self._http.start()
        self.access.port = self._http.port

    async def wait(self, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set (or the server fails, which raises)."""
        await self._http.wait(stop)

    async def aclose(self) -> None:
        """Stop accepting, close every tab's session (bounded) and stop the server; a
        close that is itself cancelled still does, then lets the cancellation on."""
        self._stopping = True
        await self._http.aclose()

    async def _close_tabs(self) -> None:
        # Tabs whose handlers uvicorn cancelled still own sessions.
        tabs, self._tabs = list(self._tabs), set()
        await asyncio.gather(*(tab.close_session() for tab in tabs))

    # -- the app --------------------------------------------------------------------------------
    def _build_app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/", self._index),
                Route("/static/{name}", self._static),
                WebSocketRoute("/ws", self._tab),
            ]
        )

    async def _index(self, request: Request) -> Response:
        return Response(self._page, media_type="text/html; charset=utf-8", headers=SECURITY_HEADERS)

    async def _static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC_TYPES:
            return PlainTextResponse("404 Not Found\n", 404, headers=SECURITY_HEADERS)
        return Response(_read_static(name), media_type=STATIC_TYPES[name], headers=SECURITY_HEADERS)

    async def _tab(self, websocket: WebSocket) -> None:
        offered = list(websocket.scope.get("subprotocols", []))
        if offered and protocol.SUBPROTOCOL not in offered:
            await websocket.accept()
            await _refuse(
                websocket,
                f"unsupported protocol {', '.join(offered)}; this server speaks "
                f"{protocol.SUBPROTOCOL}",
                code=4002,
            )
            return
        await websocket.accept(subprotocol=protocol.SUBPROTOCOL if offered else None)
        if self._stopping:
            await _refuse(websocket, "the server is shutting down", code=1001)
            return
        if self._slots >= self.max_tabs:
            await _refuse(
                websocket,
                f"too many tabs: this server hosts at most {self.max_tabs} conversations at "
                "once; close one and reload",
                code=1013,
            )
            return
        self._slots += 1  # taken before the factory runs, so a slow factory cannot overbook
        try:
            await self._serve_tab(websocket, f"tab-{next(self._ids)}")
        finally:
            self._slots -= 1

    async def _serve_tab(self, websocket: WebSocket, tab_id: str) -> None:
        server_speech = self.speech.server_for(websocket.query_params.get("speech"))
        try:
            built = self._factory()
            session, agent = await built if inspect.isawaitable(built) else built
        except Exception as e:
            logger.exception("web: building the session of %s failed", tab_id)
            await _refuse(websocket, f"could not build the session: {e}", code=1011)
            return
        tab = WebTab(
            websocket,
            session,
            agent,
            tab_id,
            limits=self.limits,
            grant=grant_of(websocket.scope),
            speech=self.speech,
            server_speech=server_speech,
        )
        self._tabs.add(tab)
        try:
            await tab.run()
        finally:
            self._tabs.discard(tab)

    def _signed_out(self, grant: str) -> None:
        for tab in list(self._tabs):
            if tab.grant == grant:
                tab.end(
                    "this page was signed out: its one-time sign-in link was used twice. "
                    "Open the URL backline web printed in its terminal.",
                    code=CLOSE_SIGNED_OUT,
                    reason="signed_out",
                )


async def _refuse(websocket: WebSocket, message: str, *, code: int) -> None:
    with contextlib.suppress(Exception):
        await websocket.send_text(
            protocol.encode(protocol.error(message, source="server", recoverable=False))
        )
        await websocket.close(code)


@functools.cache
def _read_static(name: str) -> bytes:
    return resources.files(__package__).joinpath("static", name).read_bytes()


async def serve_web(
    factory: TabFactory,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    token: str | None = None,
    open_browser: bool = False,
    max_tabs: int = DEFAULT_MAX_TABS,
    allow_hosts: Iterable[str] = (),
    limits: Limits = DEFAULT_LIMITS,
    speech: WebSpeech | None = None,
    ready: Callable[[WebServer], None] | None = None,
    out: TextIO | None = None,
) -> None:
    """Serve the voice page until Ctrl-C (SIGINT) or SIGTERM; then close every session.

    Prints the URL with its token (to ``out``, default stdout) and, with
    ``open_browser``, opens a one-time sign-in link (``sign_in_url``), so the token
    never appears on the browser's command line. Binding to a host other than
    loopback prints a warning. ``ready(server)`` is called once requests are accepted.
    With ``speech`` (``WebSpeech``), a line says who listens and speaks.
    """
    out = out or sys.stdout
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    handled: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
            handled.append(sig)
    try:
        async with WebServer(
            factory,
            host=host,
            port=port,
            token=token,
            max_tabs=max_tabs,
            allow_hosts=allow_hosts,
            limits=limits,
            speech=speech,
        ) as server:
            if not is_loopback(host):
                names = "any of its IP addresses" if host in WILDCARD_HOSTS else host
                print(
                    f"backline web: WARNING: listening on {host or '0.0.0.0'}, not loopback: "
                    "anyone who can reach this address and has the token can talk to your "
                    f"agents. Browsers may reach it as {names} or localhost; add a host name "
                    "with --allow-host NAME. Prefer 127.0.0.1 behind a TLS reverse proxy "
                    "(see docs/web.md).",
                    file=out,
                    flush=True,
                )
            if speech is not None:
                print(f"backline web: {speech.start_line()}", file=out, flush=True)
            print(f"backline web: open {server.url}", file=out, flush=True)
            print("backline web: press Ctrl-C to stop", file=out, flush=True)
            if ready is not None:
                ready(server)
            if open_browser:
                await asyncio.to_thread(webbrowser.open, server.sign_in_url())
            await server.wait(stop)
            print("backline web: closing…", file=out, flush=True)
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)
