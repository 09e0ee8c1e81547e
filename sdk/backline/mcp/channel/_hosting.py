"""The process's voice-channel endpoint: started on first use, shared, stopped by its last user.

``async with hosted_voice_channel() as hosting:`` is how a front end (and a
background that runs agents, like ``cli_agent``) gets the endpoint. The first
user on an event loop starts it; later users share it; the last one to leave
stops it. It starts in a task of its own (importing ``mcp`` takes about a second
of the event loop once per process); ``await hosting.endpoint(ctx)`` waits for it.

The conversations it serves: every session with background sessions that starts
on the event loop while it is in use (the ``session_started`` observer), and any
session handed to it, ``hosting.serve(session)`` or ``await hosting.endpoint(ctx)``
(the way a session started before the endpoint is served).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import weakref
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...background.runtime import background_of
from ...limits import DEFAULT_LIMITS, Limits
from ...tasks import TaskScope, done_within
from ...voice.observers import add_session_observer, remove_session_observer
from ._discovery import ENV_PORT, ENV_TOKEN, announce, withdraw
from ._registry import SessionRegistry

if TYPE_CHECKING:
    from ...background.context import BackgroundContext
    from ...voice.session import Session
    from ._host import ChannelHost

logger = logging.getLogger("backline.mcp")

START_TIMEOUT = 60.0
"""How long ``endpoint()`` waits for the endpoint to start (importing ``mcp`` included)."""
STOP_TIMEOUT = 5.0
"""How long closing waits for a start still in progress to give up."""
CLOSE_BOUND = STOP_TIMEOUT + 35.0
"""The most a close takes: a start giving up, then the host's own bounded stop."""


@dataclass(frozen=True)
class Endpoint:
    """Where an agent reaches one background session's voice channel over HTTP."""

    url: str
    token: str
    background_id: str

    @property
    def headers(self) -> dict[str, str]:
        """The HTTP headers every request needs."""
        return {"Authorization": f"Bearer {self.token}"}


class _Shared:
    """The endpoint of one event loop, and who uses it."""

    def __init__(self, limits: Limits) -> None:
        self.registry = SessionRegistry()
        self.users = 0
        self.limits = limits
        self.announce_as: str | None = None
        self.announcement: Path | None = None
        self.on_ready: list[Callable[[ChannelHost], None]] = []
        self.host: ChannelHost | None = None
        self.failure: BaseException | None = None
        self._tasks = TaskScope("backline MCP endpoint")  # its start, then its close
        self.task: asyncio.Task[ChannelHost | None] = self._tasks.create_task(
            self._start(), name="backline MCP endpoint start"
        )
        self._closing: asyncio.Task[None] | None = None
        add_session_observer(self._observe)

    def _observe(self, hook: str, session: Any) -> None:
        if hook == "session_started" and background_of(session) is not None:
            self.registry.add(session)

    async def _start(self) -> ChannelHost | None:
        """The running host, or ``None`` when it could not start (``failure`` says why;
        a warning is logged: everything but MCP agents works without it)."""
        try:
            host = await self._started_host()
        except Exception as e:
            self.failure = e
            logger.warning(
                "the MCP voice-channel endpoint did not start (%s: %s): agents cannot connect "
                "over MCP; everything else works",
                type(e).__name__,
                e,
            )
            return None
        self.host = host
        self._announce()
        for callback in self.on_ready:
            _call(callback, host)
        return host

    async def _started_host(self) -> ChannelHost:
        # Imported here, on the event loop's thread: importing in another thread races
        # with imports of the same packages elsewhere (claude-agent-sdk imports mcp too),
        # and Python's import locks then fail one of them.
        module = importlib.import_module("backline.mcp.channel._host")
        token = os.environ.get(ENV_TOKEN) or None
        port = _port_from_env()
        host: ChannelHost = module.ChannelHost(
            self.registry, token=token, port=port, limits=self.limits
        )
        try:
            await host.start()
        except BaseException:
            await host.aclose()
            raise
        return host

    def want_announcement(self, front_end: str) -> None:
        self.announce_as = self.announce_as or front_end
        self._announce()

    def _announce(self) -> None:
        host = self.host
        if host is None or self.announce_as is None or self.announcement is not None:
            return
        try:
            self.announcement = announce(host.url, host.token, self.announce_as)
        except OSError as e:
            logger.warning(
                "could not announce the MCP endpoint (%s): `backline mcp serve` will not find "
                "this front end; set BACKLINE_RUNTIME_DIR to a writable directory",
                e,
            )

    async def aclose(self) -> None:
        """Stop the endpoint (bounded); a close that is itself cancelled (a background's
        entrypoint cancelled as it leaves its ``async with``) still stops it, then lets
        the cancellation on."""
        if self._closing is None:
            self._closing = self._tasks.create_task(
                self._close(), name="backline MCP endpoint close"
            )
        closing = self._closing
        try:
            await asyncio.shield(closing)
        except asyncio.CancelledError:
            await done_within(closing, CLOSE_BOUND)
            raise

    async def _close(self) -> None:
        remove_session_observer(self._observe)
        if self.announcement is not None:
            withdraw(self.announcement)
        if not self.task.done():
            self.task.cancel()
        await done_within(self.task, STOP_TIMEOUT)  # a failure to start was logged
        if self.host is not None:
            await self.host.aclose()
        await self._tasks.aclose()  # a start that ignored its cancellation (never this close)


def _call(callback: Callable[[ChannelHost], None], host: ChannelHost) -> None:
    try:
        callback(host)
    except Exception:
        logger.exception("an on_ready callback of the MCP endpoint raised")


def _port_from_env() -> int:
    raw = os.environ.get(ENV_PORT, "").strip()
    if not raw:
        return 0
    try:
        port = int(raw)
    except ValueError:
        raise ValueError(f"{ENV_PORT} must be a port number, got {raw!r}") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"{ENV_PORT} must be a port number (0-65535), got {port}")
    return port


_shared: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Shared] = weakref.WeakKeyDictionary()


class Hosting:
    """One use of the process's voice-channel endpoint (see ``hosted_voice_channel``)."""

    def __init__(self, shared: _Shared) -> None:
        self._shared = shared

    @property
    def registry(self) -> SessionRegistry:
        return self._shared.registry

    async def host(self) -> ChannelHost:
        """The running endpoint (waits, bounded, until it serves). Raises
        ``RuntimeError`` saying why when it could not start."""
        shared = self._shared
        task = shared.task
        try:
            host = await asyncio.wait_for(asyncio.shield(task), START_TIMEOUT)
        except TimeoutError:
            raise RuntimeError(
                f"the MCP endpoint did not start within {START_TIMEOUT:g} s"
            ) from None
        except asyncio.CancelledError:
            if task.cancelled():
                raise RuntimeError("the MCP endpoint was stopped") from None
            raise
        if host is None:
            e = shared.failure
            raise RuntimeError(f"the MCP endpoint did not start: {type(e).__name__}: {e}") from e
        return host

    def serve(self, session: Session[Any]) -> None:
        """Serve ``session`` too (idempotent): a session started before this endpoint.
        Sessions that start while it is in use are served without asking."""
        self._shared.registry.add(session)

    async def endpoint(self, ctx: BackgroundContext) -> Endpoint:
        """The URL and token that reach ``ctx``'s voice channel (its own session's path)."""
        host = await self.host()
        key = self._shared.registry.add(ctx.session)
        return Endpoint(host.endpoint(ctx.id, key), host.token, ctx.id)


@contextlib.asynccontextmanager
async def hosted_voice_channel(
    *,
    announce: str | None = None,
    limits: Limits | None = None,
    on_ready: Callable[[ChannelHost], None] | None = None,
) -> AsyncIterator[Hosting]:
    """Use the voice-channel endpoint of this event loop (starting it if needed).

    ``announce`` (a front end's name, like ``"backline console"``) also writes the
    0600 announcement ``backline mcp serve`` finds; the endpoint is stopped and the
    announcement removed when the last user leaves. ``on_ready(host)`` is called once
    it serves (at once if it already does).
    """
    loop = asyncio.get_running_loop()
    shared = _shared.get(loop)
    if shared is None:
        shared = _shared[loop] = _Shared(limits or DEFAULT_LIMITS)
    shared.users += 1
    if announce is not None:
        shared.want_announcement(announce)
    if on_ready is not None:
        if shared.host is not None:
            _call(on_ready, shared.host)
        else:
            shared.on_ready.append(on_ready)
    try:
        yield Hosting(shared)
    finally:
        shared.users -= 1
        if shared.users == 0:
            if _shared.get(loop) is shared:
                del _shared[loop]
            await shared.aclose()
