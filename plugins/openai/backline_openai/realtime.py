"""``OpenAIRealtimeLLM``: backline's ``LLM`` protocol on one OpenAI Realtime session.

One persistent WebSocket per instance. Text modality (the console) unless a front end
with a microphone and a speaker calls ``use_audio()`` (``SpeakingModel``): then the
replies are the model's own voice (``AudioDelta``: ``response.output_audio.delta`` and
its transcript) and the user's voice reaches the model (``_realtime_hearing``). Each ``chat()``
syncs the conversation (``conversation.item.create`` for what the server lacks,
``conversation.item.delete`` + create for what the runtime changed, e.g. a reply
truncated to what was heard), then sends ``response.create`` with the instructions and
tools, and streams ``response.output_text.delta`` as text and each
``response.function_call_arguments.done`` as a tool call. Closing the stream early
sends ``response.cancel``; a spoken reply cut to what was heard is cut on the server
with ``conversation.item.truncate``. The object is also the agent's ``RealtimeSession``
(``realtime``): ``background_work_running`` is true while a response.create waits for
its ``response.created``, a response runs, or a function call is open (catalog 132).

Imported on demand (it pulls in ``websockets``). See the plugin's README.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from backline.limits import DEFAULT_LIMITS
from backline.llm import (
    AudioDelta,
    ChatChunk,
    ChatContext,
    FunctionTool,
    LLMError,
    LLMStream,
    LLMTimeoutError,
    TextDelta,
    ToolCallChunk,
    ToolChoice,
    Usage,
    failed_stream,
)
from backline.llm.provider import DeadlinePassed, Deadlines
from backline.speech import SpeechToText
from backline.tasks import TaskScope

from ._endpoints import Endpoint
from ._realtime_hearing import RATE, Ears, HearingStream, RealtimeHearing
from ._realtime_held import Held
from ._realtime_items import (
    convert_context,
    convert_tool_choice,
    convert_tools,
    new_item_id,
    server_item,
    session_config,
)
from ._realtime_socket import RealtimeSocket

__all__ = ["DEFAULT_REALTIME_MODEL", "OpenAIRealtimeLLM"]

log = logging.getLogger(__name__)

DEFAULT_REALTIME_MODEL = "gpt-realtime"
"""The model when none is named (``-m`` / ``model=``)."""
DEFAULT_TRANSCRIPTION_MODEL = "gpt-4o-mini-transcribe"
"""What transcribes the user's voice (the model hears the audio itself)."""

_END = object()  # the response ended (response.done)


class _Response:
    """What the reader hands to the ``chat()`` that waits for one response."""

    __slots__ = ("done", "error", "events", "status", "usage")

    def __init__(self) -> None:
        self.events: asyncio.Queue[ChatChunk | object] = asyncio.Queue()
        self.usage: dict[str, Any] = {}
        self.status: str | None = None
        self.error: LLMError | None = None
        self.done = False


class OpenAIRealtimeLLM:
    """A realtime model as a voice agent's LLM, in text modality.

    ``base_url`` defaults to ``$OPENAI_BASE_URL``, else OpenAI's API; the WebSocket is
    ``<base_url>/realtime?model=MODEL`` (``ws``/``wss``). ``api_key`` defaults to the
    endpoint's key (``OPENAI_API_KEY``); a local server needs none. ``connect_timeout``
    bounds opening the socket and the session's configuration; ``settle_timeout`` the
    wait for a cancelled response to end before the next sync; ``ping_interval`` the
    socket's keepalive pings (``None``: none); ``first_token_timeout``
    and ``response_timeout`` each response (``LLMTimeoutError``). A socket that drops
    fails the response in flight with an ``LLMError``; the next ``chat()`` reconnects
    and sends the whole conversation again. ``voice`` (e.g. ``marin``) and
    ``transcription_model`` apply once ``use_audio()`` was called.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        connect_timeout: float = 10.0,
        settle_timeout: float = 5.0,
        ping_interval: float | None = 20.0,
        first_token_timeout: float | None = DEFAULT_LIMITS.llm_first_token_timeout,
        response_timeout: float | None = DEFAULT_LIMITS.llm_response_timeout,
        voice: str | None = None,
        transcription_model: str = DEFAULT_TRANSCRIPTION_MODEL,
    ) -> None:
        for name, value in (
            ("connect_timeout", connect_timeout),
            ("settle_timeout", settle_timeout),
        ):
            if not value > 0:
                raise ValueError(f"{name} must be a positive number of seconds, got {value}")
        self._endpoint = Endpoint.of(base_url)
        self._model = model or DEFAULT_REALTIME_MODEL
        key = api_key if api_key is not None else self._endpoint.find_key()
        self._key = key
        self._missing_key = self._endpoint.missing_key_message() if key is None else None
        self._connect_timeout = connect_timeout
        self._settle_timeout = settle_timeout
        self._ping_interval = ping_interval
        self._first_token_timeout = first_token_timeout
        self._response_timeout = response_timeout
        self._scope = TaskScope("OpenAIRealtimeLLM")
        self._lock = asyncio.Lock()  # one chat() turn at a time
        self._held = Held()  # the server's items, in order
        self._configured: asyncio.Future[None] | None = None
        self._response: _Response | None = None
        self._pending_create = False
        self._running = False
        self._open_calls: set[str] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._listeners: list[Callable[[bool], None]] = []
        self._busy = False
        self._closed = False
        self._voice = voice
        self._transcription_model = transcription_model
        self._audio = False  # use_audio() was called
        self._configured_audio = False  # the open session was configured for audio
        self._ears = Ears()
        self._connecting = asyncio.Lock()
        self._socket = RealtimeSocket(
            self.url,
            self._endpoint,
            self._model,
            key,
            connect_timeout=connect_timeout,
            ping_interval=ping_interval,
            scope=self._scope,
            on_event=self._on_event,
            on_lost=self._lost,
        )

    # -- properties -------------------------------------------------------------
    @property
    def model(self) -> str:
        return self._model

    @property
    def base_url(self) -> str:
        return self._endpoint.url

    @property
    def url(self) -> str:
        """The WebSocket URL."""
        parts = urlsplit(self._endpoint.url)
        scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
        path = parts.path.rstrip("/") + "/realtime"
        return urlunsplit((scheme, parts.netloc, path, f"model={quote(self._model)}", ""))

    @property
    def connects(self) -> int:
        """How many sockets were opened (a reconnect adds one)."""
        return self._socket.connects

    @property
    def missing_key(self) -> str | None:
        return self._missing_key

    @property
    def realtime(self) -> OpenAIRealtimeLLM:
        """This model as the agent's ``RealtimeSession`` (the runtime reads it)."""
        return self

    def __repr__(self) -> str:
        return f"OpenAIRealtimeLLM(model={self._model!r}, url={self.url!r})"

    # -- SpeakingModel --------------------------------------------------------------
    def use_audio(self) -> SpeechToText:
        """Answer with the model's voice from now on (``AudioDelta``, 24 kHz PCM), and
        give the STT engine whose streams carry the user's voice to the model."""
        self._audio = True
        return RealtimeHearing(self)

    @property
    def audio(self) -> bool:
        """Whether replies are spoken (``use_audio()`` was called)."""
        return self._audio

    def _session_config(self) -> dict[str, Any]:
        return session_config(self._audio, self._voice, self._transcription_model)

    async def append_audio(self, pcm: bytes) -> None:
        await self._connect()
        await self._send(Ears.append_event(pcm))

    async def commit_audio(self, stream: HearingStream) -> None:
        await self._connect()
        self._ears.committing(stream)
        try:
            await self._send({"type": "input_audio_buffer.commit"})
        except LLMError:
            self._ears.uncommit(stream)  # never sent: no item will answer it
            raise

    def forget(self, stream: HearingStream) -> None:
        self._ears.forget(stream)

    # -- RealtimeSession ----------------------------------------------------------
    @property
    def background_work_running(self) -> bool:
        return self._busy

    def add_background_work_listener(self, listener: Callable[[bool], None]) -> None:
        self._listeners.append(listener)

    def remove_background_work_listener(self, listener: Callable[[bool], None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _changed(self) -> None:
        busy = self._pending_create or self._running or bool(self._open_calls)
        if busy == self._busy:
            return
        self._busy = busy
        for listener in list(self._listeners):
            try:
                listener(busy)
            except Exception:
                log.exception("a background-work listener raised")

    def _set_idle(self) -> None:
        if self._pending_create or self._running:
            self._idle.clear()
        else:
            self._idle.set()
        self._changed()

    # -- ContextFollower ------------------------------------------------------------
    def agent_changed(self, chat_ctx: ChatContext, tools: Sequence[FunctionTool]) -> None:
        """Nothing to do ahead: each request carries the instructions and tools, and
        the model answers only when asked (``response.create``)."""

    def context_changed(self, chat_ctx: ChatContext) -> None:
        """Items reached the context with no reply (a silent update): sync them now,
        without a response, when the session is open and nothing runs (else the next
        request brings them)."""
        if self._closed or not self._socket.open_now or self._lock.locked():
            return
        self._scope.create_task(self._sync_now(chat_ctx), name="OpenAIRealtimeLLM silent sync")

    async def _sync_now(self, chat_ctx: ChatContext) -> None:
        if self._lock.locked():
            return  # a request runs: it syncs
        async with self._lock:
            try:
                await self._settle()
                if not self._socket.open_now:
                    return  # the next request reconnects and sends everything
                _, items = convert_context(chat_ctx)
                await self._sync(items)
                self._changed()  # a call whose output it sent is no longer open
            except LLMError as e:
                log.warning("OpenAI Realtime: a silent update waits for the next request (%s)", e)

    # -- lifecycle ----------------------------------------------------------------
    async def aclose(self) -> None:
        """Close the socket and stop reading (bounded)."""
        self._closed = True
        await self._socket.drop(self._connect_timeout)
        await self._scope.aclose()
        self._lost(LLMError("OpenAIRealtimeLLM was closed"))

    async def _connect(self) -> None:
        if self._closed:
            raise LLMError("OpenAIRealtimeLLM is closed")
        if self._socket.open_now:
            if self._audio and not self._configured_audio:
                self._configured_audio = True
                await self._send({"type": "session.update", "session": self._session_config()})
            return
        async with self._connecting:  # a turn and the user's voice may both connect
            if not self._socket.open_now:
                await self._open()

    async def _open(self) -> None:
        self._configured = asyncio.get_running_loop().create_future()
        try:
            async with asyncio.timeout(self._connect_timeout):
                await self._socket.open()
                self._held.clear()
                self._configured_audio = self._audio
                await self._send({"type": "session.update", "session": self._session_config()})
                await self._configured
        except TimeoutError:
            await self._socket.drop()
            raise LLMError(
                f"OpenAI Realtime at {self.url}: no session within {self._connect_timeout:g}s "
                "(is the server up, and is --base-url right?)",
                retryable=True,
            ) from None
        except LLMError:
            await self._socket.drop()
            raise
        finally:
            self._configured = None  # only a connect in progress waits on it

    def _send(self, event: dict[str, Any], item_id: str = "") -> Awaitable[None]:
        return self._socket.send(event, item_id)

    def _lost(self, error: LLMError) -> None:
        """The socket is gone: nothing is held by the server any more."""
        self._held.clear()
        self._ears.lost(str(error))
        self._open_calls.clear()
        self._pending_create = self._running = False
        configured = self._configured
        if configured is not None and not configured.done():
            configured.set_exception(error)
        response, self._response = self._response, None
        if response is not None and not response.done:
            response.error = error
            response.events.put_nowait(_END)
        self._set_idle()

    def _on_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        response = self._response
        if kind == "session.updated":
            if self._configured is not None and not self._configured.done():
                self._configured.set_result(None)
        elif kind == "response.created":
            self._pending_create = False
            self._running = True
            self._set_idle()
        elif kind == "response.output_audio.delta":
            self._audio_delta(event, response)
        elif kind == "response.output_audio_transcript.delta":
            if response is not None and event.get("delta"):
                response.events.put_nowait(AudioDelta(b"", RATE, str(event["delta"])))
        elif kind == "response.output_item.added":
            item = event.get("item") or {}
            if item.get("id"):
                # Its place in the conversation (its content is known at response.done).
                self._held.reserve(str(item["id"]))
            if item.get("type") == "function_call" and item.get("call_id"):
                self._open_calls.add(str(item["call_id"]))
                self._changed()
        elif kind == "response.output_text.delta":
            if response is not None and event.get("delta"):
                response.events.put_nowait(TextDelta(str(event["delta"])))
        elif kind == "response.function_call_arguments.done":
            call_id = str(event.get("call_id") or "")
            self._open_calls.add(call_id)
            self._changed()
            if response is not None:
                args = str(event.get("arguments") or "")
                name = str(event.get("name") or "")
                response.events.put_nowait(ToolCallChunk(call_id, name, args or "{}"))
        elif kind == "response.done":
            self._response_done(event.get("response") or {}, response)
        elif kind == "input_audio_buffer.committed":
            self._ears.on_event(kind, event)
            previous = event.get("previous_item_id")
            self._held.place_after(str(event.get("item_id") or ""), previous and str(previous))
        elif isinstance(kind, str) and kind.startswith("conversation.item.input_audio_"):
            transcript = self._ears.on_event(kind, event)
            if transcript is not None:
                self._held.heard(str(event.get("item_id") or ""), transcript)
        elif kind == "error":
            self._on_error(event.get("error") or {}, response)

    def _audio_delta(self, event: dict[str, Any], response: _Response | None) -> None:
        data = base64.b64decode(str(event.get("delta") or ""))
        item_id = str(event.get("item_id") or "")
        self._held.add_audio(item_id, len(data))
        if response is not None and data:
            if len(data) % 2:  # whole 16-bit samples only (the API sends whole ones)
                data = data[:-1]
            response.events.put_nowait(AudioDelta(data, RATE))

    def _response_done(self, body: dict[str, Any], response: _Response | None) -> None:
        for entry in body.get("output") or ():
            item = server_item(entry) if isinstance(entry, dict) else None
            if item is not None and entry.get("id"):
                self._held.place(str(entry["id"]), item.signature)
                if response is None and entry.get("type") == "function_call":
                    # Its stream was closed (a barge-in): the runtime runs none of its
                    # calls, so none of them is open (the next sync deletes them).
                    self._open_calls.discard(str(entry.get("call_id") or ""))
        self._running = False
        self._pending_create = False
        if response is not None:
            response.usage = body.get("usage") or {}
            response.status = body.get("status")
            response.done = True
            response.events.put_nowait(_END)
            self._response = None
        self._set_idle()

    def _on_error(self, error: dict[str, Any], response: _Response | None) -> None:
        message = str(error.get("message") or error)
        code = str(error.get("code") or error.get("type") or "")
        if code == "response_cancel_not_active":
            return  # a cancel that came after the end: harmless
        log.warning("OpenAI Realtime error (%s): %s", code, message)
        if self._configured is not None and not self._configured.done():
            self._configured.set_exception(LLMError(f"OpenAI Realtime session error: {message}"))
            return
        cause, item_id = self._socket.cause(str(error.get("event_id") or ""))
        if cause == "conversation.item.create":
            # The model will not see that item (warned above). It is not sent again:
            # a refused item would be refused at every sync, and the items after it
            # deleted and created again each time.
            log.warning("OpenAI Realtime refused the item %s; the model does not see it", item_id)
            return
        if cause in ("conversation.item.delete", "response.cancel"):
            return  # already gone
        if cause == "input_audio_buffer.commit":
            self._ears.commit_refused(code, message)
            return
        if cause in ("input_audio_buffer.append", "conversation.item.truncate"):
            return  # an utterance lost (warned above); a cut the server could not make
        if response is not None and not self._running:
            # The request was refused (a bad item, a bad response.create): no response comes.
            self._pending_create = False
            response.error = LLMError(f"OpenAI Realtime at {self.url}: {code}: {message}")
            response.done = True
            response.events.put_nowait(_END)
            self._response = None
            self._set_idle()

    # -- chat ---------------------------------------------------------------------
    def chat(
        self,
        chat_ctx: ChatContext,
        *,
        tools: Sequence[FunctionTool] = (),
        tool_choice: ToolChoice | None = None,
    ) -> LLMStream:
        """Sync ``chat_ctx`` to the session and stream the response to it."""
        if self._missing_key is not None:
            return failed_stream(LLMError(self._missing_key, status=401))
        try:
            instructions, items = convert_context(chat_ctx)
            create: dict[str, Any] = {"output_modalities": ["audio" if self._audio else "text"]}
            if instructions:
                create["instructions"] = instructions
            create["tools"] = convert_tools(tools)
            choice = convert_tool_choice(tool_choice, tools)
            if choice is not None:
                create["tool_choice"] = choice
        except LLMError as e:
            return failed_stream(e)
        return LLMStream(self._turn(items, create))

    async def _turn(
        self, items: list[Any], create: dict[str, Any]
    ) -> AsyncGenerator[ChatChunk, None]:
        loop = asyncio.get_running_loop()
        deadlines = Deadlines(self._first_token_timeout, self._response_timeout)
        async with self._lock:
            await self._settle()
            await self._connect()
            await self._sync(items)
            response = self._response = _Response()
            self._pending_create = True
            self._set_idle()
            try:
                await self._send({"type": "response.create", "response": create})
            except LLMError:
                if self._response is response:
                    self._response = None
                self._pending_create = False
                self._set_idle()
                raise
            ttft: float | None = None
            try:
                while True:
                    chunk = await self._next(response, ttft is not None, deadlines)
                    if chunk is _END:
                        break
                    if ttft is None:
                        ttft = loop.time() - deadlines.start
                    assert isinstance(chunk, TextDelta | AudioDelta | ToolCallChunk)
                    yield chunk
            finally:
                if not response.done:
                    response.done = True
                    if self._response is response:
                        self._response = None
                    if self._socket.open_now and (self._running or self._pending_create):
                        with contextlib.suppress(LLMError):
                            await self._send({"type": "response.cancel"})
        if response.error is not None:
            if ttft is not None:
                raise LLMError(
                    f"{response.error} (the reply was cut off after output had started)",
                    retryable=response.error.retryable,
                )
            raise response.error
        usage = response.usage
        details = usage.get("input_token_details") or {}
        yield Usage(
            input_tokens=int(usage.get("input_tokens") or 0),
            output_tokens=int(usage.get("output_tokens") or 0),
            cache_read_input_tokens=int(details.get("cached_tokens") or 0),
            ttft=ttft,
            stop_reason=response.status,
        )

    async def _next(
        self, response: _Response, started: bool, deadlines: Deadlines
    ) -> ChatChunk | object:
        try:
            return await deadlines.within(response.events.get(), started)
        except DeadlinePassed as e:
            raise LLMTimeoutError(
                f"OpenAI Realtime at {self.url}: nothing within {e.seconds:g}s "
                f"({e.which} of OpenAIRealtimeLLM)"
            ) from None

    async def _settle(self) -> None:
        """Wait (bounded) for a response still ending (a cancel's ``response.done``) and
        for the user's utterances still being transcribed: what those items say must
        be known before the next sync."""
        if self._idle.is_set() and self._ears.settled.is_set():
            return
        try:
            async with asyncio.timeout(self._settle_timeout):
                await self._idle.wait()
                await self._ears.settled.wait()
        except TimeoutError:
            raise LLMError(
                f"OpenAI Realtime at {self.url}: the previous response did not end within "
                f"{self._settle_timeout:g}s of its cancel",
                retryable=True,
            ) from None

    async def _sync(self, wanted: list[Any]) -> None:
        try:
            await self._send_sync(wanted)
        except LLMError:
            # Half a sync leaves what the server holds unknown: start again on a new
            # session at the next request (it sends the whole conversation).
            await self._socket.drop()
            self._lost(LLMError(f"OpenAI Realtime at {self.url}: a sync failed"))
            raise

    async def _send_sync(self, wanted: list[Any]) -> None:
        cut = self._held.truncation(wanted)
        if cut is not None:
            item_id, audio_end_ms = cut
            truncate = {"item_id": item_id, "content_index": 0, "audio_end_ms": audio_end_ms}
            await self._send({"type": "conversation.item.truncate", **truncate}, item_id)
        plan = self._held.plan(wanted)
        for item_id in plan.delete:
            await self._send({"type": "conversation.item.delete", "item_id": item_id}, item_id)
        for item in plan.create:
            item_id = new_item_id()
            self._held.items.append((item_id, item.signature))
            await self._send(
                {"type": "conversation.item.create", "item": {"id": item_id, **item.body}},
                item_id,
            )
            if item.body["type"] == "function_call_output":
                self._open_calls.discard(item.body["call_id"])
        # A call the runtime no longer has is not open either.
        held_calls = self._held.calls()
        self._open_calls &= held_calls
