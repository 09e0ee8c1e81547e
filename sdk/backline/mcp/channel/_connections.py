"""Agents' connections to the voice-channel endpoint: each request's client, each session's life.

An ASGI layer in front of the ``mcp`` package's streamable-HTTP session manager:

- **A call lives as long as its client.** Every request gets an event (``client_gone``)
  set when its client disconnects or its response can no longer be written (the
  connection closed, the session was ended, a transport error). The channel's calls
  (``_host``) are cancelled when it is set, so a ``wait_for_user`` whose agent died
  takes none of the user's words. (The ``mcp`` package does this itself for the
  per-request protocol of 2026, not for the initialize handshake agents speak today.)
- **Abandoned sessions are reclaimed.** An MCP session (the handshake's
  ``Mcp-Session-Id``) that has nothing in flight (no call, no open event stream) for
  ``Limits.mcp_session_idle_timeout`` is ended, the way a client ends its own (a
  ``DELETE`` through the session manager). At ``Limits.max_mcp_connections`` open
  sessions, a new agent's session is admitted by ending the one idle the longest;
  only when none is idle is the new agent refused (503).

Sessions are learnt from the manager's answers (the ``Mcp-Session-Id`` it gives an
initialize request) and forgotten when it ends them (a ``DELETE`` answered, a request
answered 404); the manager keeps its own limit and idle timeout as a backstop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ...tasks import Signal, TaskScope

logger = logging.getLogger("backline.mcp")

GONE_KEY = "backline.client_gone"
"""The ASGI scope key of a request's ``asyncio.Event``: set once its client is gone."""
SESSION_HEADER = b"mcp-session-id"
VERSION_HEADER = b"mcp-protocol-version"
END_TIMEOUT = 5.0
"""How long ending one session (its ``DELETE``) may take."""


def client_gone(request: Any) -> asyncio.Event | None:
    """The event set when the client of ``request`` (a Starlette request, as the
    ``mcp`` package hands it to a tool) is gone; ``None`` outside this endpoint."""
    scope = getattr(request, "scope", None)
    gone = scope.get(GONE_KEY) if isinstance(scope, dict) else None
    return gone if isinstance(gone, asyncio.Event) else None


@dataclass
class _Session:
    """One MCP session the manager opened: requests in flight, idle since when."""

    id: str
    in_flight: int
    idle_since: float


class Connections:
    """The ASGI layer (see the module doc) in front of ``app``, the session manager.

    ``async with connections.running():`` reclaims idle sessions while it runs;
    ``open_sessions`` counts the sessions agents hold, ``reclaimed`` and ``evicted``
    the ones it ended, and ``ended`` is notified whenever it ends one.
    """

    def __init__(self, app: ASGIApp, *, limit: int, idle_timeout: float) -> None:
        self._app = app
        self._limit = limit
        self._idle_timeout = idle_timeout
        self._sessions: dict[str, _Session] = {}
        self._opening = 0  # requests that may open a session, answered not yet
        self._changed = Signal()
        self.ended = Signal()
        self.reclaimed = 0
        self.evicted = 0

    @property
    def open_sessions(self) -> int:
        return len(self._sessions)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Reclaim idle sessions until the block ends."""
        scope = TaskScope("backline MCP idle sessions")
        scope.create_task(self._reclaim_idle(), name="backline MCP idle sessions")
        try:
            yield
        finally:
            await scope.aclose()

    # -- each request -------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        gone = asyncio.Event()
        scope[GONE_KEY] = gone
        headers = dict(scope.get("headers") or [])
        raw_id = headers.get(SESSION_HEADER)
        session_id = raw_id.decode("latin-1") if raw_id is not None else None
        session = self._sessions.get(session_id) if session_id is not None else None
        opening = session_id is None and _may_open_a_session(scope["method"], headers)
        if opening:
            if not await self._make_room():
                await _busy(self._limit)(scope, receive, send)
                return
            self._opening += 1
        elif session is not None:
            session.in_flight += 1
        status = 0

        async def watched_receive() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect":
                gone.set()
            return message

        async def watched_send(message: Message) -> None:
            nonlocal status, session
            if message["type"] == "http.response.start":
                status = int(message["status"])
                if opening and status < 400:
                    session = self._opened(message)
            try:
                await send(message)
            except BaseException:
                gone.set()  # the answer cannot reach the client
                raise

        try:
            await self._app(scope, watched_receive, watched_send)
        finally:
            gone.set()  # the response ended: nothing more reaches this client
            if opening:
                self._opening -= 1
            if session is not None:
                self._settled(session, scope["method"], status)

    def _opened(self, start: Message) -> _Session | None:
        for name, value in start.get("headers") or ():
            if name.lower() == SESSION_HEADER:
                session = _Session(value.decode("latin-1"), in_flight=1, idle_since=0.0)
                self._sessions[session.id] = session
                return session
        return None

    def _settled(self, session: _Session, method: str, status: int) -> None:
        session.in_flight -= 1
        if status == 404 or (method == "DELETE" and 200 <= status < 300):
            self._sessions.pop(session.id, None)  # the manager no longer has it
        elif session.in_flight == 0:
            session.idle_since = asyncio.get_running_loop().time()
        self._changed.notify()

    # -- ending sessions ----------------------------------------------------------------------
    async def _make_room(self) -> bool:
        """Room for one more session: ends the one idle the longest while at the limit.
        False when every open session is busy."""
        while len(self._sessions) + self._opening >= self._limit:
            idle = [s for s in self._sessions.values() if s.in_flight == 0]
            if not idle:
                return False
            oldest = min(idle, key=lambda s: s.idle_since)
            await self._end(oldest)
            self.evicted += 1
            logger.info(
                "MCP session %s (idle) ended to admit a new agent: %d sessions is the limit "
                "(Limits.max_mcp_connections)",
                oldest.id[:8],
                self._limit,
            )
        return True

    async def _reclaim_idle(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            expired = [s for s in self._sessions.values() if self._expired(s, loop.time())]
            for session in expired:
                if session.id in self._sessions and self._expired(session, loop.time()):
                    await self._end(session)
                    self.reclaimed += 1
                    logger.info(
                        "MCP session %s ended: idle for %g s (Limits.mcp_session_idle_timeout)",
                        session.id[:8],
                        self._idle_timeout,
                    )
            deadlines = [
                s.idle_since + self._idle_timeout
                for s in self._sessions.values()
                if s.in_flight == 0
            ]
            timeout = max(0.0, min(deadlines) - loop.time()) if deadlines else None
            changed = self._changed.waiter()  # a request that starts or ends re-plans
            try:
                await asyncio.wait({changed}, timeout=timeout)
            finally:
                self._changed.discard(changed)

    def _expired(self, session: _Session, now: float) -> bool:
        return session.in_flight == 0 and now - session.idle_since >= self._idle_timeout

    async def _end(self, session: _Session) -> None:
        """End ``session`` as its client would (``DELETE``); it is forgotten at once."""
        self._sessions.pop(session.id, None)
        try:
            async with asyncio.timeout(END_TIMEOUT):
                await self._app(_delete_scope(session.id), _no_body(), _discard)
        except Exception:
            logger.warning("ending MCP session %s failed", session.id[:8], exc_info=True)
        self.ended.notify()


def _may_open_a_session(method: str, headers: dict[bytes, bytes]) -> bool:
    """A POST without a session id on the handshake protocols (the manager's own rule:
    other protocol versions are served per request, without a session)."""
    if method != "POST":
        return False
    version = headers.get(VERSION_HEADER)
    return version is None or version.decode("latin-1") in HANDSHAKE_PROTOCOL_VERSIONS


def _delete_scope(session_id: str) -> Scope:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "DELETE",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "root_path": "",
        "query_string": b"",
        "headers": [(SESSION_HEADER, session_id.encode("latin-1"))],
        "client": None,
        "server": None,
    }


def _no_body() -> Receive:
    """An empty request body, then the end of the exchange (as a server says it once the
    response is complete)."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": b"", "more_body": False}
        return {"type": "http.disconnect"}

    return receive


async def _discard(message: Message) -> None:
    return None


def _busy(limit: int) -> Response:
    body = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32603,
            "message": (
                f"This backline endpoint has {limit} agent connections open and busy "
                "(Limits.max_mcp_connections): try again when one ends."
            ),
        },
    }
    return Response(json.dumps(body), status_code=503, media_type="application/json")
