"""One browser tab: its own session, the events it forwards and the messages it reads.

What goes to the page waits in a ``BoundedQueue`` (``Limits.max_web_queue_messages`` and
``max_web_queue_bytes``): a page that stops reading cannot grow the server. Background
states coalesce (the latest per background is sent, built when it is sent); a tab
that falls further behind than the bounds is dropped with close code 4008.

When the server listens and speaks for the tab (``--speech``), a ``TabVoice`` takes the
page's microphone (binary messages) and sends the agent's voice (binary messages, a
bounded lead ahead of the page's playback) through the same queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from starlette.websockets import WebSocket, WebSocketDisconnect

from ..._queue import BoundedQueue, QueueFull
from ...limits import DEFAULT_LIMITS, Limits
from ...llm import close_llm
from ...llm.chat_context import AgentHandoff, ChatMessage, FunctionCall, peek_extra
from ...tasks import TaskScope, cancel_and_wait, done_within, first_completed
from .._alerts import TONES
from .._diagnostics import describe_error
from .._view import preview_state, shorten, summarize_state
from . import protocol
from ._output import WebOutput
from ._speech import WebSpeech
from ._voice import TabVoice

if TYPE_CHECKING:
    from ...session import Session
    from ...voice.agent import Agent

logger = logging.getLogger("backline")

CLOSE_TIMEOUT = 10.0
"""A bound on closing one tab's session (``Session.aclose`` is bounded itself)."""
WRITER_DRAIN_TIMEOUT = 2.0
MAX_REMEMBERED_SPEECHES = 256
TOOL_TEXT_WIDTH = 200
CLOSE_TOO_FAR_BEHIND = 4008
"""The close code of a tab dropped because its page stopped reading."""


@dataclass(frozen=True)
class _Close:
    """Send ``last`` (encoded messages), then close the socket with ``code``: the writer's
    last item (one item, so it always fits in the queue)."""

    code: int
    reason: str = ""
    last: tuple[str, ...] = ()


@dataclass(frozen=True)
class _State:
    """A background's latest state, made into a message only when it is sent."""

    background_id: str
    state: Any


_Outgoing: TypeAlias = "str | bytes | _State | _Close"
_SESSION_ENDED = _Close(1000)


def _size(item: _Outgoing) -> int:
    # A state is held once per background (coalesced) and counted when it is encoded.
    return len(item) if isinstance(item, str | bytes) else 0


def state_message(background_id: str, state: Any, max_chars: int) -> protocol.ServerMessage:
    """The page's message for a background's state, its copy cut to ``max_chars`` (built
    when the writer sends it, so a chatty background costs one preview per send)."""
    return protocol.background_state(
        background_id, preview_state(state, max_chars), summarize_state(state)
    )


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
    With ``server_speech``, the server listens and speaks for the tab with
    ``speech``'s engines (``voice``); otherwise the page's browser does.
    """

    def __init__(
        self,
        websocket: WebSocket,
        session: Session[Any],
        agent: Agent,
        tab_id: str,
        *,
        limits: Limits = DEFAULT_LIMITS,
        grant: str | None = None,
        speech: WebSpeech | None = None,
        server_speech: bool = False,
    ) -> None:
        self.id = tab_id
        self.session = session
        self.limits = limits
        self.grant = grant
        """How the page signed in (the token, or which sign-in code)."""
        self._ws = websocket
        self._agent = agent
        self._outbox: BoundedQueue[_Outgoing] = BoundedQueue(
            max_items=limits.max_web_queue_messages, max_cost=limits.max_web_queue_bytes, cost=_size
        )
        self._ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._closed = asyncio.Event()
        self._tasks = TaskScope(f"web tab {tab_id}")  # the writer and the reader
        self._sources: dict[str, str] = {}
        self._background_of: dict[str, str] = {}
        self.speech = speech or WebSpeech()
        self.voice: TabVoice | None = None
        if server_speech:
            self.voice = TabVoice(session, self.speech, self._send, self._enqueue)
        self.output = WebOutput(
            self._send, self._describe, self.voice.output if self.voice else None
        )
        session.output = self.output
        self._listen()

    # -- session → page -----------------------------------------------------------------------
    @property
    def ended(self) -> bool:
        """Whether the server ended this tab (``end``): it sends the page nothing more."""
        return self._ended.done()

    def _send(self, message: protocol.ServerMessage) -> None:
        self._enqueue(protocol.encode(message))

    def _enqueue(self, item: _Outgoing, key: tuple[str, str] | None = None) -> None:
        if self.ended:
            return  # the page will see nothing more: the tab is closing
        try:
            self._outbox.put(item, key=key)
        except QueueFull:
            waiting, size = len(self._outbox), self._outbox.cost
            logger.warning(
                "web: tab %s fell too far behind (%d messages, %d bytes not read by the "
                "page); closing it",
                self.id,
                waiting,
                size,
            )
            self.end(
                f"this page fell too far behind: {waiting} messages ({size:,} bytes) were "
                "waiting to be sent, so the conversation was closed. Reload the page to start "
                "a new one.",
                code=CLOSE_TOO_FAR_BEHIND,
                reason="too_far_behind",
            )

    def end(self, message: str, *, code: int, reason: str) -> None:
        """End the tab from the server's side: what waits for the page is dropped, the page
        gets ``error`` (``message``) and ``closed`` (``reason``), then close ``code``;
        ``run()`` then closes the session."""
        if self.ended:
            return
        self._outbox.clear()
        error = protocol.error(message, source="server", recoverable=False)
        last = (protocol.encode(error), protocol.encode(protocol.closed(reason)))
        self._outbox.put(_Close(code, reason.replace("_", " "), last))
        self._ended.set_result(None)

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
            lambda ev: self._enqueue(
                _State(ev.background_id, ev.state), key=("state", ev.background_id)
            ),
        )
        s.on(
            "background_status",
            lambda ev: self._send(
                protocol.background_status(ev.background_id, ev.status, ev.error)
            ),
        )
        s.on(
            "background_alert",
            lambda ev: self._send(
                protocol.background_alert(ev.background_id, ev.kind, ev.text, TONES[ev.kind])
            ),
        )
        s.on("error", self._on_error)
        s.on("close", self._on_close)
        if self.voice is not None:
            s.on(
                "user_input_transcribed",
                lambda ev: self._send(protocol.interim_transcript(ev.text)),
            )

    def _on_background_reply(self, ev: Any) -> None:
        if ev.speech_id is not None:
            _remember(self._background_of, ev.speech_id, ev.background_id)

    def _on_item(self, ev: Any) -> None:
        item = ev.item
        if isinstance(item, ChatMessage):
            if item.role == "user" and "background_id" not in peek_extra(item):
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
        self._enqueue(_SESSION_ENDED)

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
            speech=self.speech.page_info(self.voice is not None),
        )

    async def _write_loop(self) -> None:
        while True:
            item = await self._outbox.get()
            try:
                if isinstance(item, bytes):
                    await self._ws.send_bytes(item)
                    continue
                if isinstance(item, _Close):
                    for text in item.last:
                        await self._ws.send_text(text)
                    await self._ws.close(item.code, item.reason)
                    return
                if isinstance(item, _State):
                    item = protocol.encode(
                        state_message(
                            item.background_id,
                            item.state,
                            self.session.limits.max_page_state_chars,
                        )
                    )
                await self._ws.send_text(item)
            except (WebSocketDisconnect, RuntimeError, OSError):
                return  # the page is gone; the read loop sees it too

    # -- page → session -----------------------------------------------------------------------
    async def run(self) -> None:
        """Serve the tab until the page goes away; always closes the session (bounded)."""
        writer = self._tasks.create_task(self._write_loop(), name=f"web tab {self.id} writer")
        try:
            self._send(self.hello())
            try:
                await self.session.start(self._agent)
            except Exception as e:
                logger.exception("web: the session of tab %s failed to start", self.id)
                self._send(protocol.error(f"the session failed to start: {e}", source="session"))
                self._send(protocol.closed("error"))
                self._enqueue(_SESSION_ENDED)
                return
            if self.voice is not None:
                self.voice.start()
            await self._read_until_done()
        finally:
            if self.voice is not None:
                self.voice.disconnected()  # the reply playing ends where the page got to
            self.output.disconnected()
            await self.close_session()
            self._enqueue(_SESSION_ENDED)  # flush what is queued, if the page is there
            await done_within(writer, WRITER_DRAIN_TIMEOUT)
            await self._tasks.aclose()  # a writer still blocked on the page is cancelled
            self._closed.set()

    async def _read_until_done(self) -> None:
        """Read until the page goes away, or until the server ends the tab."""
        reader = self._tasks.create_task(self._read(), name=f"web tab {self.id} reader")
        try:
            await first_completed(reader, self._ended)
        finally:
            await cancel_and_wait([reader], owner=f"web tab {self.id}")
        error = reader.result() if reader.done() and not reader.cancelled() else None
        if error is not None:
            raise error  # what broke the read loop

    async def _read(self) -> Exception | None:
        # What breaks the read loop is handed to ``run``'s caller (not logged by the scope).
        try:
            await self._read_loop()
        except Exception as e:
            return e
        return None

    async def wait_closed(self) -> None:
        """Until ``run()`` has returned: the session, its speech and the tab's tasks closed."""
        await self._closed.wait()

    async def close_session(self) -> None:
        """Close this tab's session, then its speech; bounded, idempotent."""
        try:
            await asyncio.wait_for(self.session.aclose(), CLOSE_TIMEOUT)
        except TimeoutError:
            logger.warning(
                "web: closing the session of tab %s took over %.0fs", self.id, CLOSE_TIMEOUT
            )
        await close_llm(self.session.llm)  # a realtime model's socket
        if self.voice is not None:
            try:
                await asyncio.wait_for(self.voice.aclose(), CLOSE_TIMEOUT)
            except TimeoutError:
                logger.warning(
                    "web: closing the speech of tab %s took over %.0fs", self.id, CLOSE_TIMEOUT
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
            try:
                if raw is None:
                    self._audio(message.get("bytes") or b"")
                else:
                    self._dispatch(protocol.parse_client_message(raw, self.limits))
            except protocol.ProtocolError as e:
                self._send(protocol.error(str(e), source="protocol"))

    def _audio(self, data: bytes) -> None:
        """A binary message: the microphone's audio, for a tab the server listens to."""
        if self.session.closed:
            return
        self._require_voice("binary messages (audio)").audio(data)

    def _require_voice(self, what: str) -> TabVoice:
        if self.voice is None:
            raise protocol.ProtocolError(
                f"{what}: the browser listens and speaks in this tab, not the server "
                f"(speech {self.speech.mode}; see hello's speech)"
            )
        return self.voice

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
        elif isinstance(message, protocol.AudioInput):
            self._require_voice("audio_input").audio_input(message.sample_rate)
        elif isinstance(message, protocol.AudioInputEnd):
            self._require_voice("audio_input_end").audio_input_end()
        elif isinstance(message, protocol.AudioPlayed):
            self._require_voice("audio_played").audio_played(
                message.stream, message.seconds, done=message.done
            )
