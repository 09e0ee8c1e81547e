from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect

from backline.io.web import SUBPROTOCOL, WebServer

from .browser import find_chromium
from .scenario import Controls, make_factory

TIMEOUT = 10.0


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say plainly whether the browser tests ran (``make test`` shows this line)."""
    chromium = find_chromium()
    if chromium is None:
        terminalreporter.write_line(
            "web browser tests: SKIPPED, no Chromium found "
            "(apt-get install chromium, or set BACKLINE_CHROMIUM)"
        )
    else:
        terminalreporter.write_line(f"web browser tests: using {chromium}")


class Client:
    """A protocol client over a real WebSocket: send messages, wait for the ones you expect."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.seen: list[dict[str, Any]] = []
        self.audio: list[bytes] = []
        """Binary messages (the server's voice), in order."""

    async def send(self, **message: Any) -> None:
        await self.ws.send(json.dumps(message))

    async def _next(self) -> dict[str, Any]:
        """The next JSON message (binary ones are kept in ``audio``)."""
        while True:
            raw = await self.ws.recv()
            if isinstance(raw, bytes):
                self.audio.append(raw)
                continue
            message: dict[str, Any] = json.loads(raw)
            self.seen.append(message)
            return message

    def audio_seconds(self, rate: int) -> float:
        """Seconds of the server's voice received (16-bit mono at ``rate``)."""
        return sum(len(a) for a in self.audio) / 2 / rate

    async def expect_audio(self, seconds: float, rate: int) -> None:
        """Read until ``seconds`` of the server's voice have come (JSON messages are kept
        in ``seen``)."""
        async with asyncio.timeout(TIMEOUT):
            while self.audio_seconds(rate) < seconds:
                raw = await self.ws.recv()
                if isinstance(raw, bytes):
                    self.audio.append(raw)
                else:
                    self.seen.append(json.loads(raw))

    async def expect(
        self, kind: str, where: Callable[[dict[str, Any]], bool] = lambda m: True
    ) -> dict[str, Any]:
        """The next message of type ``kind`` matching ``where`` (others are kept in ``seen``)."""
        async with asyncio.timeout(TIMEOUT):
            while True:
                message = await self._next()
                if message["type"] == kind and where(message):
                    return message

    async def segment(self) -> tuple[int, str]:
        """Read one whole segment (start, text, end): its number and text."""
        start = await self.expect("segment_start")
        parts: list[str] = []
        while True:
            message = await self.expect_any()
            if message["type"] == "segment_text":
                parts.append(message["text"])
            elif message["type"] == "segment_end":
                return start["segment"], "".join(parts)

    async def expect_any(self) -> dict[str, Any]:
        async with asyncio.timeout(TIMEOUT):
            return await self._next()


@pytest.fixture
def controls() -> Controls:
    return Controls()


@pytest.fixture
async def server(controls: Controls) -> AsyncIterator[WebServer]:
    async with WebServer(make_factory(controls), max_tabs=3) as web:
        yield web


def ws_url(server: WebServer, token: str | None = None) -> str:
    return f"ws://127.0.0.1:{server.port}/ws?token={token or server.token}"


@pytest.fixture
def open_client(server: WebServer) -> Callable[..., Any]:
    """``async with open_client() as client``: a connected protocol client."""

    def opener(token: str | None = None, subprotocols: list[str] | None = None) -> Any:
        return _Connection(ws_url(server, token), subprotocols or [SUBPROTOCOL])

    return opener


class _Connection:
    def __init__(self, url: str, subprotocols: list[str]) -> None:
        self._cm = connect(url, subprotocols=subprotocols, open_timeout=TIMEOUT)  # type: ignore[arg-type]

    async def __aenter__(self) -> Client:
        return Client(await self._cm.__aenter__())

    async def __aexit__(self, *exc: Any) -> None:
        await self._cm.__aexit__(*exc)
