"""One browser tab: its own session, the events it forwards and the messages it reads."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import TYPE_CHECKING, Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from ...llm.chat_context import AgentHandoff, ChatMessage, FunctionCall
from .._diagnostics import describe_error
from .._view import shorten, summarize_state
from . import protocol
from ._output import WebOutput

if TYPE_CHECKING:
    from ...voice.agent import Agent
    from ...voice.session import Session

logger = logging.getLogger("backline")

CLOSE_TIMEOUT = 10.0
"""A bound on closing one tab's session (``Session.aclose`` is bounded itself)."""
WRITER_DRAIN_TIMEOUT = 2.0
MAX_REMEMBERED_SPEECHES = 256
TOOL_TEXT_WIDTH = 200

_CLOSE_SOCKET = object()


def _remember(table: dict[str, str], key: str, value: str) -> None:
    table[key] = value
    while len(table) > MAX_REMEMBERED_SPEECHES:
        del table[next(iter(table))]


def describe_call(name: str, arguments: str) -> str:
    """``name(key=value, ...)`` for a tool call whose arguments are a JSON object."""
    try:
        parsed = json.loads(arguments)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        return f"{name}({arguments})"
    args = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in parsed.items())
    return f"{name}({args})"


class WebTab:
    """Serves one WebSocket: session events become messages, messages drive the session.

    ``run()`` sends ``hello``, starts the session, reads client messages until
    the page goes away (or the server stops), then closes the session (bounded).
    """

    def __init__(
        self, websocket: WebSocket, session: Session[Any], agent: Agent, tab_id: str
    ) -> None:
        self.id = tab_id
        self.session = session
        self._ws = websocket
        self._agent = agent
        self._outbox: asyncio.Queue[object] = asyncio.Queue()
        self._sources: dict[str, str] = {}
        self._background_of: dict[str, str] = {}
        self.output = WebOutput(self._send, self._describe)
        session.output = self.output
        self._listen()

    # -- session → page -----------------------------------------------------------------------
    def _send(self, message: protocol.ServerMessage) -> None:
        self._outbox.put_nowait(message)

    def _describe(self, speech_id: str) -> tuple[str | None, str | None]:
        return self._sources.get(speech_id), self._background_of.get(speech_id)

    def _listen(self) -> None:
        s = self.session
        s.on("agent_state_changed", lambda ev: self._send(protocol.agent_state(ev.new)))
        s.on("user_state_changed", lambda ev: self._send(protocol.user_state(ev.new)))
        s.on("speech_created", lambda ev: _remember(self._sources, ev.speech.id, ev.source))
        s.on("background_reply", self._on_background_reply)
        s.on("conversation_item_added", self._on_item)
        s.on("background_message", self._on_background_message)
        s.on(
            "background_state",
            lambda ev: self._send(
                protocol.background_state(ev.background_id, ev.state, summarize_state(ev.state))
            ),
        )
        s.on(
            "background_status",
            lambda ev: self._send(
                protocol.background_status(ev.background_id, ev.status, ev.error)
            ),
        )
        s.on("error", self._on_error)
        s.on("close", self._on_close)

    def _on_background_reply(self, ev: Any) -> None:
        if ev.speech_id is not None:
            _remember(self._background_of, ev.speech_id, ev.background_id)

    def _on_item(self, ev: Any) -> None:
        item = ev.item
        if isinstance(item, ChatMessage):
            if item.role == "user" and "background_id" not in item.extra:
                self._send(protocol.transcript("user", item.id, item.content))
            elif item.role == "assistant":
                self._send(self._agent_entry(item))
        elif isinstance(item, FunctionCall):
            text = shorten(describe_call(item.name, item.arguments), TOOL_TEXT_WIDTH)
            self._send(protocol.transcript("tool", item.id, text, name=item.name))
        elif isinstance(item, AgentHandoff):
            text = f"{item.old_agent or 'start'} → {item.new_agent}"
            self._send(protocol.transcript("handoff", item.id, text))

    def _agent_entry(self, item: ChatMessage) -> protocol.ServerMessage:
        # The runtime records an assistant message right after its segment's playout.
        played, self.output.last_played = self.output.last_played, None
        segment, speech_id = played if played is not None else (None, None)
        source, background_id = self._describe(speech_id) if speech_id else (None, None)
        return protocol.transcript(
            "agent",
            item.id,
            item.content,
            interrupted=item.interrupted,
            segment=segment,
            speech_id=speech_id,
            source=source,
            background_id=background_id,
        )

    def _on_background_message(self, ev: Any) -> None:
        self._send(
            protocol.transcript(
                "background",
                ev.message_id,
                ev.content,
                background_id=ev.background_id,
                silent=ev.silent,
            )
        )

    def _on_error(self, ev: Any) -> None:
        message = describe_error(ev.error)  # worded for the user; the server log has details
        self._send(protocol.error(message, source=ev.source, recoverable=ev.recoverable))

    def _on_close(self, ev: Any) -> None:
        self._send(protocol.closed(ev.reason))
        self._outbox.put_nowait(_CLOSE_SOCKET)

    def hello(self) -> protocol.ServerMessage:
        s = self.session
        backgrounds = []
        if s.background is not None:
            described = {d.id: d.description for d in s.background.definitions}
            for bid in s.background.sorted_ids():
                backgrounds.append(
                    protocol.background_entry(bid, described.get(bid, ""), "starting", None, None)
                )
        return protocol.hello(
            session_id=self.id,
            agent_state=s.agent_state,
            user_state=s.user_state,
            backgrounds=backgrounds,
        )

    async def _write_loop(self) -> None:
        while True:
            message = await self._outbox.get()
            try:
                if message is _CLOSE_SOCKET:
                    await self._ws.close(1000)
                    return
                assert isinstance(message, dict)
                await self._ws.send_text(protocol.encode(message))
            except (WebSocketDisconnect, RuntimeError, OSError):
                return  # the page is gone; the read loop sees it too

    # -- page → session -----------------------------------------------------------------------
    async def run(self) -> None:
        """Serve the tab until the page goes away; always closes the session (bounded)."""
        writer = asyncio.create_task(self._write_loop(), name=f"web tab {self.id} writer")
        try:
            self._send(self.hello())
            try:
                await self.session.start(self._agent)
            except Exception as e:
                logger.exception("web: the session of tab %s failed to start", self.id)
                self._send(protocol.error(f"the session failed to start: {e}", source="session"))
                self._send(protocol.closed("error"))
                self._outbox.put_nowait(_CLOSE_SOCKET)
                return
            await self._read_loop()
        finally:
            self.output.disconnected()
            await self.close_session()
            self._outbox.put_nowait(_CLOSE_SOCKET)  # flush what is queued, if the page is there
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(writer, WRITER_DRAIN_TIMEOUT)

    async def close_session(self) -> None:
        """Close this tab's session; bounded, idempotent."""
        try:
            await asyncio.wait_for(self.session.aclose(), CLOSE_TIMEOUT)
        except TimeoutError:
            logger.warning(
                "web: closing the session of tab %s took over %.0fs", self.id, CLOSE_TIMEOUT
            )

    async def _read_loop(self) -> None:
        while True:
            try:
                message = await self._ws.receive()
            except (WebSocketDisconnect, RuntimeError):
                return
            if message["type"] == "websocket.disconnect":
                return
            raw = message.get("text")
            if raw is None:
                raw = message.get("bytes") or b""
            try:
                self._dispatch(protocol.parse_client_message(raw))
            except protocol.ProtocolError as e:
                self._send(protocol.error(str(e), source="protocol"))

    def _dispatch(self, message: protocol.ClientMessage) -> None:
        s = self.session
        if s.closed:
            return
        if isinstance(message, protocol.UserTurn):
            with contextlib.suppress(RuntimeError):  # closing: the turn has nowhere to go
                s.push_user_turn(message.text)
        elif isinstance(message, protocol.UserStartedSpeaking):
            s.user_started_speaking()
        elif isinstance(message, protocol.UserStoppedSpeaking):
            s.user_stopped_speaking()
        elif isinstance(message, protocol.Playout):
            self.output.page_reported(
                message.segment, message.text, interrupted=message.interrupted
            )
        elif isinstance(message, protocol.Interrupt):
            s.interrupt()
