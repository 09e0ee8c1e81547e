"""One WebSocket to the OpenAI Realtime API: opened within a bound (a failure said
plainly, never with the key), events sent with an id each (remembered, so an error
the server sends can name the client event that caused it), events read and handed
on, and the end of the connection reported once."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from backline.llm import LLMError
from backline.tasks import TaskScope

from ._endpoints import Endpoint

if TYPE_CHECKING:
    from websockets.asyncio.client import ClientConnection

_REMEMBERED_EVENTS = 256  # client events whose errors can still be attributed


class RealtimeSocket:
    """``open()``, ``send()``, ``drop()``; ``on_event(event)`` for each server event and
    ``on_lost(error)`` once when an open connection ends (not after ``drop``)."""

    def __init__(
        self,
        url: str,
        endpoint: Endpoint,
        model: str,
        key: str | None,
        *,
        connect_timeout: float,
        ping_interval: float | None,
        scope: TaskScope,
        on_event: Callable[[dict[str, Any]], None],
        on_lost: Callable[[LLMError], None],
    ) -> None:
        self.url = url
        self._endpoint = endpoint
        self._model = model
        self._key = key
        self._connect_timeout = connect_timeout
        self._ping_interval = ping_interval
        self._scope = scope
        self._on_event = on_event
        self._on_lost = on_lost
        self.ws: ClientConnection | None = None
        self.connects = 0  # how many sockets were opened (a reconnect adds one)
        self._event_ids = itertools.count(1)
        self._sent: dict[str, tuple[str, str]] = {}  # event_id -> (type, item id), recent

    @property
    def open_now(self) -> bool:
        return self.ws is not None

    async def open(self) -> None:
        """Open the socket and start reading (raises ``LLMError``)."""
        from websockets.asyncio.client import connect

        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        try:
            ws = await connect(
                self.url,
                additional_headers=headers,
                open_timeout=self._connect_timeout,
                max_size=None,
                proxy=None,
                ping_interval=self._ping_interval,
            )
        except Exception as e:
            raise self._open_failure(e) from e
        self.ws = ws
        self.connects += 1
        self._scope.create_task(self._read(ws), name="OpenAIRealtimeLLM reader")

    def cause(self, event_id: str) -> tuple[str, str]:
        """The type and item id of the client event ``event_id`` (``("", "")``: unknown)."""
        return self._sent.get(event_id, ("", ""))

    async def send(self, event: dict[str, Any], item_id: str = "") -> None:
        ws = self.ws
        if ws is None:
            raise LLMError(f"OpenAI Realtime at {self.url}: the connection is closed")
        event_id = event["event_id"] = f"bl_evt_{next(self._event_ids)}"
        self._sent[event_id] = (str(event["type"]), item_id)
        if len(self._sent) > _REMEMBERED_EVENTS:
            del self._sent[next(iter(self._sent))]
        try:
            await asyncio.wait_for(ws.send(json.dumps(event)), self._connect_timeout)
        except Exception as e:
            raise LLMError(
                f"OpenAI Realtime at {self.url}: could not send {event['type']} ({e!r})",
                retryable=True,
            ) from e

    async def drop(self, timeout: float = 1.0) -> None:
        """Close the socket (bounded); its end is not reported."""
        ws, self.ws = self.ws, None
        if ws is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(ws.close(), timeout)

    async def _read(self, ws: ClientConnection) -> None:
        error: LLMError
        try:
            async for raw in ws:
                event = json.loads(raw)
                if isinstance(event, dict):
                    self._on_event(event)
            error = LLMError(
                f"OpenAI Realtime at {self.url}: the server closed the connection "
                f"(code {ws.close_code}); the next request reconnects",
                retryable=True,
            )
        except asyncio.CancelledError:
            raise
        except Exception as e:
            error = LLMError(
                f"OpenAI Realtime at {self.url}: the connection was lost ({e!r}); the next "
                "request reconnects",
                retryable=True,
            )
        if self.ws is ws:
            self.ws = None
            self._on_lost(error)

    def _open_failure(self, e: Exception) -> LLMError:
        """What a failed handshake or connection says (never the key)."""
        status = getattr(getattr(e, "response", None), "status_code", None)
        where = f"OpenAI Realtime at {self.url}"
        if not isinstance(status, int):
            return LLMError(
                f"Could not open {where}: {e!r} — is the server running, and is --base-url "
                "(OPENAI_BASE_URL) right?",
                retryable=True,
            )
        if status == 401:
            hint = self._endpoint.key_hint()
            return LLMError(f"{where}: the API key was rejected (HTTP 401) — {hint}", status=401)
        if status == 403:
            message = f"{where}: HTTP 403 (the API key may not have access to realtime models)"
            return LLMError(message, status=403)
        if status == 404:
            return LLMError(
                f"{where}: not found (HTTP 404) — check -m MODEL ({self._model!r}) and "
                "--base-url (the socket is <base-url>/realtime; the base URL usually ends in /v1)",
                status=404,
            )
        retryable = status in (408, 409, 429) or status >= 500
        return LLMError(
            f"{where} refused the connection: HTTP {status}", retryable=retryable, status=status
        )
