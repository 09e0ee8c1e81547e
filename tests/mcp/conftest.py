"""Shared pieces of the MCP tests: an attached background, a hosted endpoint, clients."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from backline import BackgroundContext, background
from backline.mcp import Endpoint, Hosting, VoiceChannel, hosted_voice_channel
from backline.testing import BackgroundDriver

WAIT = 20.0  # bounds a hang; every wait below ends on an event


@background("agent", description="A coding agent attached over MCP.", interrupt_grace=0.0)
async def attached(ctx: BackgroundContext) -> None:
    """Reads nothing: the agent takes its messages over MCP."""
    await asyncio.Event().wait()


@pytest.fixture(autouse=True)
def runtime_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Announcements go to a directory of this test only (and no endpoint leaks in)."""
    directory = tmp_path / "runtime"
    monkeypatch.setenv("BACKLINE_RUNTIME_DIR", str(directory))
    for name in ("BACKLINE_MCP_URL", "BACKLINE_MCP_TOKEN", "BACKLINE_MCP_PORT"):
        monkeypatch.delenv(name, raising=False)
    return directory


@pytest.fixture
async def hosting() -> AsyncIterator[Hosting]:
    async with hosted_voice_channel(announce="test front end") as used:
        await used.host()
        yield used


@pytest.fixture
async def driver() -> AsyncIterator[BackgroundDriver]:
    """A session with the ``agent`` background and a scripted voice agent that reads
    spoken updates out verbatim."""
    async with BackgroundDriver(attached, timeout=WAIT, user_away_timeout=None) as made:
        yield made


@contextlib.asynccontextmanager
async def http_client(endpoint: Endpoint | str, token: str | None = None, **kwargs: Any) -> Any:
    """An ``mcp.Client`` over streamable HTTP with the bearer token."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    url = endpoint.url if isinstance(endpoint, Endpoint) else endpoint
    token = endpoint.token if isinstance(endpoint, Endpoint) else token
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with (
        create_mcp_http_client(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http), **kwargs) as client,
    ):
        yield client


@contextlib.asynccontextmanager
async def in_own_task(manager: Any) -> AsyncIterator[Any]:
    """Enter and exit ``manager`` in one task of its own (anyio's cancel scopes need it:
    a fixture's setup and teardown run in different tasks)."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[Any] = loop.create_future()
    leave = asyncio.Event()

    async def hold() -> None:
        async with manager as value:
            ready.set_result(value)
            await leave.wait()

    task = asyncio.create_task(hold(), name="test client")
    await asyncio.wait({ready, task}, return_when=asyncio.FIRST_COMPLETED)
    if not ready.done():
        ready.cancel()
        await task  # raises why it did not start
    try:
        yield ready.result()
    finally:
        leave.set()
        await task


async def until_listening(channel: VoiceChannel) -> None:
    """Wait until an agent waits for the user on ``channel``."""
    listening = asyncio.Event()
    channel.on_listening = lambda now: listening.set() if now else None
    try:
        if not channel.listening:
            await asyncio.wait_for(listening.wait(), WAIT)
    finally:
        channel.on_listening = None


def text_of(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


async def wait_until(predicate: Callable[[], bool], changed: Callable[[], Any]) -> None:
    """Re-check ``predicate`` whenever ``changed()`` (an awaitable factory) resolves."""
    async with asyncio.timeout(WAIT):
        while not predicate():
            await changed()
