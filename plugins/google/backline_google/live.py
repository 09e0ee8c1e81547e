"""``GeminiLiveLLM``: backline's ``LLM`` protocol on one Gemini Live session.

One session (``client.aio.live.connect``) per instance, kept between turns. Each
``chat()`` brings the session in line with the context and streams the model's turn.
Gemini Live cannot delete turns: what was sent stays. When the runtime's context no
longer starts with what the session holds (a reply cut to what was heard, a turn the
runtime dropped), a new session is opened and seeded with the whole context in one
``send_client_content``. New user turns (typed, or a background's updates) go as
client content; a result of a call the model made as ``send_tool_response`` (its
scheduling: see ``_live_items.operations``). Functions are ``NON_BLOCKING``. A turn the
runtime stopped reading is waited for before the next sync, except by an urgent
background update (``extra["interrupt"]``), sent at once: see ``_live_follow._sync_turns``.

The session is configured with ``session_resumption``: the latest handle is kept, and
after a dropped socket or a ``go_away`` the next ``chat()`` reconnects with it (the
turn in flight fails with an ``LLMError``); a refused handle falls back to a fresh
session seeded with the context. The object is the agent's ``RealtimeSession``
(``background_work_running``: a turn asked for and not complete, or a call open), a
``ContextFollower`` (the agent's setup and silent updates ahead of the requests; see
``_live_follow``) and a ``SpeakingModel`` (``use_audio()``: replies as audio, the
user's voice sent to the model; see ``_live_audio``, which also says how a spoken
turn's reply is made).

Imported on demand (it pulls in ``google-genai``). See the plugin's README.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Sequence
from typing import Any

from google import genai
from google.genai import types

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
    check_tool_choice,
    failed_stream,
)
from backline.llm.provider import DeadlinePassed, Deadlines
from backline.tasks import TaskScope

from . import _config
from ._live_follow import LiveFollower
from ._live_items import (
    Converted,
    Op,
    convert_context,
    convert_tools,
    operations,
    plan,
    tools_signature,
)
from ._live_turns import END, Turn

__all__ = ["LIVE_DEFAULT_MODEL", "GeminiLiveLLM"]

log = logging.getLogger(__name__)

LIVE_DEFAULT_MODEL = _config.LIVE_DEFAULT_MODEL
OUTPUT_RATE = 24000  # Gemini Live's audio out: 16-bit PCM, 24 kHz, mono


def _audio_native(model: str) -> bool:
    """Whether ``model`` is known to refuse the ``TEXT`` modality (it answers in audio
    only): the native-audio models and the Live models from Gemini 3 on."""
    name = model.removeprefix("models/")
    return "native-audio" in name or (name.startswith("gemini-3") and "live" in name)


class GeminiLiveLLM(LiveFollower):
    """A Gemini Live model as a voice agent's LLM.

    ``model`` defaults to ``LIVE_DEFAULT_MODEL``; ``api_key`` to ``$GEMINI_API_KEY``,
    else ``$GOOGLE_API_KEY``, else the stored key; ``base_url`` to
    ``$GOOGLE_GEMINI_BASE_URL``, else the Gemini API (google-genai opens
    ``wss://<host>/ws/google.ai.generativelanguage.<api_version>.GenerativeService.BidiGenerateContent``
    and verifies TLS with ``$SSL_CERT_FILE`` or certifi). ``api_version`` is
    google-genai's unless given. Text replies (no ``use_audio()``): ``text_modality``
    ``True`` asks for ``TEXT``; ``False`` for ``AUDIO`` with its transcript, shown as
    text (audio-native models refuse ``TEXT``); ``None`` chooses by the model's name and
    falls back to the transcript when the server refuses ``TEXT``. ``voice`` names a
    prebuilt voice for audio replies. ``connect_timeout`` bounds opening a session and
    each send; ``settle_timeout`` the wait for a turn the runtime stopped reading to end;
    ``first_token_timeout`` and ``response_timeout`` each turn (``LLMTimeoutError``);
    ``hearing_timeout`` the wait for the transcript of what the user said.
    ``client=`` uses a ``genai.Client`` of yours (``aclose`` leaves it open).
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        api_version: str | None = None,
        text_modality: bool | None = None,
        voice: str | None = None,
        connect_timeout: float = 10.0,
        settle_timeout: float = 5.0,
        hearing_timeout: float = 10.0,
        first_token_timeout: float | None = DEFAULT_LIMITS.llm_first_token_timeout,
        response_timeout: float | None = DEFAULT_LIMITS.llm_response_timeout,
        client: genai.Client | None = None,
    ) -> None:
        for name, value in (
            ("connect_timeout", connect_timeout),
            ("settle_timeout", settle_timeout),
            ("hearing_timeout", hearing_timeout),
        ):
            if not value > 0:
                raise ValueError(f"{name} must be a positive number of seconds, got {value}")
        if client is not None and (api_key is not None or base_url is not None):
            raise ValueError("pass either client= or api_key=/base_url=, not both")
        super().__init__()
        self._model = model or LIVE_DEFAULT_MODEL
        self._missing_key: str | None = None
        self._key_name: str | None = None
        self._own_client = client is None
        if client is None:
            self._url = _config.base_url(base_url)
            key = api_key
            if key is None:
                found = _config.find_key()
                key, self._key_name = (found.value, found.name) if found else (None, None)
            if not key:
                self._missing_key = _config.missing_key_message(self._url)
            options = types.HttpOptions(base_url=self._url)
            if api_version is not None:
                options.api_version = api_version
            client = genai.Client(api_key=key or "unused", vertexai=False, http_options=options)
        else:
            self._url = "the Gemini API (a given client)"
        self._client = client
        self._text_modality = (
            text_modality if text_modality is not None else not _audio_native(self._model)
        )
        self._auto_modality = text_modality is None
        self._voice = voice
        self._connect_timeout = connect_timeout
        self._settle_timeout = settle_timeout
        self.hearing_timeout = hearing_timeout
        self._first_token_timeout = first_token_timeout
        self._response_timeout = response_timeout
        self._scope = TaskScope("GeminiLiveLLM")
        self._lock = asyncio.Lock()  # one chat() turn at a time
        self._connecting = asyncio.Lock()  # one connect at a time (chat, the voice)
        self._session: Any = None  # google.genai.live.AsyncSession
        self._exit: contextlib.AsyncExitStack | None = None
        self._reader: asyncio.Task[None] | None = None
        self._generation = 0  # one per session: a stale reader's news is dropped
        self._system: str | None = None  # what the session was set up or updated with
        self._tools: list[FunctionTool] = []
        self._tools_key = ""
        self._session_audio = False  # the open session was set up for audio
        self._closed = False
        self.connects = 0  # sessions opened (a resumption adds one)
        self.resumed = 0  # of which with a resumption handle

    # -- properties -------------------------------------------------------------
    @property
    def model(self) -> str:
        return self._model

    @property
    def base_url(self) -> str:
        return self._url

    @property
    def client(self) -> genai.Client:
        return self._client

    @property
    def missing_key(self) -> str | None:
        return self._missing_key

    @property
    def realtime(self) -> GeminiLiveLLM:
        """This model as the agent's ``RealtimeSession`` (the runtime reads it)."""
        return self

    @property
    def resumption_handle(self) -> str | None:
        """The latest resumption handle the server gave (``None``: none yet)."""
        return self._handle

    def __repr__(self) -> str:
        return f"GeminiLiveLLM(model={self._model!r}, base_url={self._url!r})"

    # -- lifecycle ----------------------------------------------------------------
    async def aclose(self) -> None:
        """Close the session and the client this object made (bounded)."""
        self._closed = True
        await self._close_session(LLMError("GeminiLiveLLM was closed"))
        await self._scope.aclose()
        if self._session is not None or self._exit is not None:  # a follow task's, meanwhile
            await self._close_session(LLMError("GeminiLiveLLM was closed"))
        if self._own_client:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._client.aio.aclose(), self._connect_timeout)
            with contextlib.suppress(Exception):
                self._client.close()

    def _config(self, system: str, tools: Sequence[FunctionTool]) -> types.LiveConnectConfig:
        config: dict[str, Any] = {
            "session_resumption": {"handle": self._handle} if self._handle else {},
        }
        if self._audio or not self._text_modality:
            config["response_modalities"] = ["AUDIO"]
            config["output_audio_transcription"] = {}
        else:
            config["response_modalities"] = ["TEXT"]
        if self._audio:
            config["input_audio_transcription"] = {}
            config["realtime_input_config"] = {"automatic_activity_detection": {"disabled": True}}
            if self._voice:
                voice = {"prebuilt_voice_config": {"voice_name": self._voice}}
                config["speech_config"] = {"voice_config": voice}
        if system:
            config["system_instruction"] = system
        declared = convert_tools(tools)
        if declared:
            config["tools"] = declared
        return types.LiveConnectConfig.model_validate(config)

    async def _open(self, system: str, tools: Sequence[FunctionTool]) -> None:
        """Open a session (resumed with the handle if there is one; a refused handle,
        or a refused ``TEXT`` modality, is tried once more without it)."""
        if self._closed:
            raise LLMError("GeminiLiveLLM is closed")
        if self._missing_key is not None:
            raise LLMError(self._missing_key, status=401)
        for _ in range(3):
            handle = self._handle
            try:
                if not await self._connect(system, tools):
                    return  # opened meanwhile (the voice and a chat() both asked)
            except LLMError as e:
                if handle is not None:
                    log.warning("Gemini Live refused the resumption handle (%s): a new session", e)
                    self._handle = None
                    continue
                if self._auto_modality and self._text_modality and "modalit" in str(e).lower():
                    log.info("%s answers in audio only: its transcript is the text", self._model)
                    self._text_modality = False
                    continue
                raise
            if handle is None:
                self._held = []
                self._session_calls.clear()
            else:
                self.resumed += 1
            return
        raise LLMError(f"Gemini Live at {self._url}: no session could be opened")

    async def _connect(self, system: str, tools: Sequence[FunctionTool]) -> bool:
        async with self._connecting:
            if self._session is not None:
                return False
            stack = contextlib.AsyncExitStack()
            config = self._config(system, tools)
            try:
                async with asyncio.timeout(self._connect_timeout):
                    session = await stack.enter_async_context(
                        self._client.aio.live.connect(model=self._model, config=config)
                    )
            except TimeoutError:
                await _close_stack(stack, self._connect_timeout)
                raise LLMError(
                    f"Gemini Live at {self._url}: no session within {self._connect_timeout:g}s "
                    "(is the server up, and is --gemini-base-url right?)",
                    retryable=True,
                ) from None
            except Exception as e:
                await _close_stack(stack, self._connect_timeout)
                raise _config.live_open_failure(e, self._url, self._model, self._key_name) from e
            self._generation += 1
            self._session, self._exit = session, stack
            self._system, self._tools = system, list(tools)
            self._tools_key = tools_signature(tools)
            self._going_away = False
            self._stray_complete = False
            self._session_audio = self._audio
            self.connects += 1
            self._reader = self._scope.create_task(
                self._read(session, self._generation), name="GeminiLiveLLM reader"
            )
            return True

    async def _close_session(self, error: LLMError | None) -> None:
        """Close the session (bounded); its turns end with ``error``."""
        self._generation += 1
        reader, self._reader = self._reader, None
        stack, self._exit = self._exit, None
        self._session = None
        if reader is not None and not reader.done():
            reader.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(reader), self._connect_timeout)
        if stack is not None:
            await _close_stack(stack, self._connect_timeout)
        self._drop_turns(error or LLMError(f"Gemini Live at {self._url}: the session was closed"))

    # -- the reader ---------------------------------------------------------------
    async def _read(self, session: Any, generation: int) -> None:
        error: LLMError
        try:
            while True:
                async for message in session.receive():
                    if generation != self._generation:
                        return
                    self._on_message(message)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            code = getattr(e, "code", None)
            reason = " ".join(str(getattr(e, "message", None) or e).split())
            error = LLMError(
                f"Gemini Live at {self._url}: the connection was lost ({code}: {reason}); "
                "the next request resumes the session",
                retryable=True,
            )
        if generation == self._generation:
            self._generation += 1
            self._session = None
            self._reader = None
            stack, self._exit = self._exit, None
            if stack is not None:
                self._scope.create_task(
                    _close_stack(stack, self._connect_timeout), name="GeminiLiveLLM close"
                )
            self._drop_turns(error)

    # -- chat ---------------------------------------------------------------------
    def chat(
        self,
        chat_ctx: ChatContext,
        *,
        tools: Sequence[FunctionTool] = (),
        tool_choice: ToolChoice | None = None,
    ) -> LLMStream:
        """Bring the session in line with ``chat_ctx`` and stream the model's turn."""
        if self._missing_key is not None:
            return failed_stream(LLMError(self._missing_key, status=401))
        try:
            converted = convert_context(chat_ctx)
            choice = check_tool_choice(tool_choice, tools)
        except LLMError as e:
            return failed_stream(e)
        if choice == "none":
            # The runtime asks for a reply without tools (a background update's): the
            # session keeps its declarations (each change would be a context update).
            tools = self._tools
            converted = _with_instruction(converted, "Do not call any function now.")
        elif choice is not None and choice != "auto":
            name = getattr(choice, "name", None)
            what = f"the function {name}" if name else "one of your functions"
            converted = _with_instruction(converted, f"Call {what} now.")
        return LLMStream(self._turn(converted, list(tools)))

    async def _turn(
        self, converted: Converted, tools: list[FunctionTool]
    ) -> AsyncGenerator[ChatChunk, None]:
        loop = asyncio.get_running_loop()
        deadlines = Deadlines(self._first_token_timeout, self._response_timeout)
        async with self._lock:
            turn = await self._request(converted, tools)
            ttft: float | None = None
            try:
                while True:
                    chunk = await self._next(turn, ttft is not None, deadlines)
                    if chunk is END:
                        break
                    if ttft is None:
                        ttft = loop.time() - deadlines.start
                    assert isinstance(chunk, TextDelta | ToolCallChunk | AudioDelta)
                    yield chunk
            finally:
                if not turn.done:
                    turn.claimed = False
                    turn.abandoned = True
        if turn.error is not None:
            if ttft is not None:
                raise LLMError(
                    f"{turn.error} (the reply was cut off after output had started)",
                    retryable=turn.error.retryable,
                )
            raise turn.error
        yield Usage(
            input_tokens=turn.usage.get("input", 0),
            output_tokens=turn.usage.get("output", 0),
            cache_read_input_tokens=turn.usage.get("cached", 0),
            ttft=ttft,
            stop_reason="interrupted" if turn.interrupted else "turn_complete",
        )

    async def _request(self, converted: Converted, tools: list[FunctionTool]) -> Turn:
        """Sync the session and ask for the turn (or claim the voice's answer)."""
        await self._sync_turns(converted)
        if self._going_away and self._session is not None and self._handle is not None:
            await self._close_session(None)  # the server goes away: resume elsewhere
        await self._for_audio()
        if self._session is None:
            await self._open(converted.system, tools)
        answered = self._pending_answer()
        if converted.system != self._system or tools_signature(tools) != self._tools_key:
            if answered is not None:
                # The voice was answered under other instructions or tools (another
                # agent's, a setup not brought in line ahead): not this reply. A new
                # session, seeded with the context, makes it.
                log.info("the user's voice was answered with another setup: a new session")
                self._handle = None
                await self._close_session(None)
                await self._open(converted.system, tools)
                answered = None
            else:
                await self._update_context(converted.system, tools)
        new = plan(self._held, converted.units)
        if answered is not None:
            if new == [] and not converted.instructions.strip():
                answered.claimed = True
                if answered.done:
                    self._answered = None
                    self._hold(answered)
                return answered
            self._give_up(answered)
            new = plan(self._held, converted.units)
        if new is None:
            log.info("the context differs from the Gemini Live session's: a new session")
            self._handle = None
            await self._close_session(None)
            await self._open(converted.system, tools)
            new = list(converted.units)
        seed = not self._held  # a new session gets the whole context in one message
        self._open_calls &= _running_calls(converted)
        ops = operations(
            new,
            self._session_calls,
            converted.instructions,
            running=any(not t.done for t in self._turns),
            seed=seed,
        )
        turn = Turn(claimed=True)
        self._turns.append(turn)
        self._changed()
        try:
            for op in ops:
                await self._send(op)
        except LLMError:
            with contextlib.suppress(ValueError):
                self._turns.remove(turn)
            turn.end()
            await self._close_session(None)
            raise
        return turn

    async def _send_realtime(self, what: str, **realtime_input: Any) -> None:
        session = self._session
        if session is None:
            raise LLMError("Gemini Live: the session this utterance went to was lost")
        try:
            await self._guarded(session.send_realtime_input(**realtime_input), what)
        except LLMError as e:
            if self._session is session:
                await self._close_session(e)  # the socket is broken: the next use resumes
            raise

    async def _update_context(self, system: str, tools: list[FunctionTool]) -> None:
        """New instructions or tools (a handoff): a context update, in order."""
        update: dict[str, Any] = {"system_instruction": system or " "}
        key = tools_signature(tools)
        if key != self._tools_key:
            update["tools"] = convert_tools(tools)
        await self._guarded(self._session.send_context_update(**update), "contextUpdate")
        self._system, self._tools, self._tools_key = system, list(tools), key

    async def _send(self, op: Op) -> None:
        session = self._session
        if op.kind == "tool":
            responses = [types.FunctionResponse.model_validate(r) for r in op.function_responses]
            await self._guarded(
                session.send_tool_response(function_responses=responses), "toolResponse"
            )
            for unit in op.units:
                self._session_calls.discard(unit.call_id)
                self._open_calls.discard(unit.call_id)
            self._changed()
        else:
            turns = [types.Content.model_validate(t) for t in op.turns] or None
            await self._guarded(
                session.send_client_content(turns=turns, turn_complete=op.turn_complete),
                "clientContent",
            )
            for unit in op.units:
                if unit.kind == "output":
                    self._open_calls.discard(unit.call_id)
        self._held.extend(unit.signature for unit in op.units)

    async def _guarded(self, sending: Any, what: str) -> None:
        try:
            await asyncio.wait_for(sending, self._connect_timeout)
        except Exception as e:
            raise LLMError(
                f"Gemini Live at {self._url}: could not send {what} ({e!r}); the next "
                "request resumes the session",
                retryable=True,
            ) from e

    async def _next(self, turn: Turn, started: bool, deadlines: Deadlines) -> ChatChunk | object:
        try:
            return await deadlines.within(turn.events.get(), started)
        except DeadlinePassed as e:
            raise LLMTimeoutError(
                f"Gemini Live at {self._url}: nothing within {e.seconds:g}s "
                f"({e.which} of GeminiLiveLLM)"
            ) from None


def _running_calls(converted: Converted) -> set[str]:
    """The calls of the context without a result: only these can still be open."""
    calls = {c.call_id for u in converted.units if u.kind == "model" for c in u.calls}
    return calls - {u.call_id for u in converted.units if u.kind == "output"}


def _with_instruction(converted: Converted, text: str) -> Converted:
    joined = f"{converted.instructions}\n\n{text}" if converted.instructions else text
    return Converted(converted.system, converted.units, joined)


async def _close_stack(stack: contextlib.AsyncExitStack, timeout: float) -> None:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(stack.aclose(), timeout)
