"""A fake Gemini Live server on loopback: TLS WebSocket (``websockets``), the
BidiGenerateContent JSON messages as google-genai sends and parses them.

google-genai opens ``wss://<base_url host>/ws/google.ai.generativelanguage.<version>.
GenerativeService.BidiGenerateContent`` (always ``wss``: the server speaks TLS with the
self-signed ``live_cert.pem``, trusted through ``SSL_CERT_FILE``), the key in
``x-goog-api-key``. The client sends ``setup`` first (answered ``setupComplete``), then
``client_content`` / ``realtime_input`` / ``tool_response`` / ``contextUpdate`` (the top
key and the fields inside in either spelling, as the real server's JSON parser takes
them). The server sends ``serverContent`` (``modelTurn`` parts, ``outputTranscription``,
``inputTranscription``, ``interrupted``, ``turnComplete``), ``toolCall``,
``toolCallCancellation``, ``usageMetadata``, ``sessionResumptionUpdate`` (a handle after
each turn; a resumed session keeps its history) and ``goAway``. Refusals close the
socket with a code and a reason, as the real server does.

The user's voice (``realtimeInput``): with automatic activity detection disabled in the
setup, ``activityStart`` opens an utterance (and interrupts a turn being generated, as
``START_OF_ACTIVITY_INTERRUPTS``, the default, does), ``audio`` blobs
(``audio/pcm;rate=16000``, base64) are its PCM, ``activityEnd`` closes it: its
transcription (the next of ``hear``) comes as ``inputTranscription`` pieces, then the
model answers it by itself (the next script step). Activity signals with automatic
detection on, audio outside an activity, another rate: errors.

A script step is a list of parts: ``("text", str)``, ``("call", name, args)``,
``("audio", transcript)`` (PCM at 24 kHz and its transcription), ``("wait", Event)``
(hold; an interruption ends the turn), ``("drop",)`` (abort the socket),
``("goaway",)``. A step answers each request for a turn: client content with
``turnComplete``, a tool response not ``SILENT``, an ``activityEnd``. Client content
(with ``turnComplete`` or not: "A message here will interrupt any current model
generation", google-genai's ``LiveClientContent``), a request for a turn, or
``activityStart`` while a turn is generated interrupts it: the cut turn keeps what was
sent of it, before what interrupted it, and ends with ``interrupted``, then
``turnComplete``; the next step answers a request.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import re
import ssl
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve

from tests.plugins.realtime_kit import OnItsOwnLoop

HERE = Path(__file__).parent
CERT = HERE / "live_cert.pem"
KEY = HERE / "live_key.pem"
PATH = re.compile(
    r"^/ws/google\.ai\.generativelanguage\.(\w+)\.GenerativeService\.BidiGenerateContent$"
)
AUDIO_PER_WORD = 2 * 2400  # bytes of 24 kHz PCM per word (0.1 s)
SAMPLE = 4096  # the value of every sample of the model's voice
INPUT_MIME = "audio/pcm;rate=16000"

Part = tuple[Any, ...]


def text(value: str) -> list[Part]:
    return [("text", value)]


def call(name: str, **arguments: Any) -> list[Part]:
    return [("call", name, arguments)]


def audio(transcript: str) -> list[Part]:
    return [("audio", transcript)]


def get(obj: Any, camel: str) -> Any:
    """A field in either spelling (``turnComplete`` / ``turn_complete``)."""
    if not isinstance(obj, dict):
        return None
    if camel in obj:
        return obj[camel]
    snake = re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), camel)
    return obj.get(snake)


class _Session:
    """What one server session holds (kept across resumptions by its handle)."""

    def __init__(self, setup: dict[str, Any]) -> None:
        self.setup = setup
        self.history: list[dict[str, Any]] = []  # {"role", "parts"} as received or made
        self.open_calls: dict[str, str] = {}  # id -> name


class FakeLiveServer:
    def __init__(self, api_key: str = "gemini-test-key") -> None:
        self.api_key = api_key
        self.script: deque[list[Part]] = deque()
        self.received: list[tuple[str, Any]] = []  # (kind, body), every connection
        self.probe: Callable[[str, Any], None] | None = None  # called per message received
        self.setups: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.errors: list[str] = []
        self.audio_in: list[tuple[str, bytes]] = []  # (mime type, PCM)
        self.utterances: list[bytes] = []  # the PCM of each activity, start to end
        self.hear: deque[str] = deque()  # what each utterance is transcribed as
        self.hear_finished = False  # the transcription's last piece says finished
        self.drop_in_activity = False  # abort the socket at an utterance's first audio
        self.dropped = asyncio.Event()
        self._activity: bytearray | None = None
        self.refuse_handles = False
        self.hold_setup: asyncio.Event | None = None  # setupComplete waits for it
        self.refuse_text = False  # as audio-native models refuse the TEXT modality
        self.connections = 0
        self.session: _Session | None = None  # the current connection's
        self.turn_started = asyncio.Event()
        self.interrupted = asyncio.Event()
        self._sessions: dict[str, _Session] = {}
        self._handles = itertools.count(1)
        self._calls = itertools.count(1)
        self._server: Server | None = None
        self._turn: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    async def __aenter__(self) -> FakeLiveServer:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(CERT, KEY)
        self._server = await serve(self._serve, "127.0.0.1", 0, ssl=context, ping_interval=None)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._turn is not None:
            self._turn.cancel()
            with contextlib.suppress(BaseException):
                await self._turn
        assert self._server is not None
        self._server.close()
        await asyncio.wait_for(self._server.wait_closed(), 5)

    @property
    def url(self) -> str:
        assert self._server is not None
        port = next(iter(self._server.sockets)).getsockname()[1]
        return f"https://127.0.0.1:{port}"

    def push(self, *steps: list[Part]) -> None:
        self.script.extend(steps)

    def sent(self, kind: str) -> list[Any]:
        """What the client sent of ``kind`` (``clientContent``, ``toolResponse``...)."""
        return [body for k, body in self.received if k == kind]

    def _receive(self, kind: str, body: Any) -> None:
        self.received.append((kind, body))
        if self.probe is not None:
            self.probe(kind, body)

    def texts(self, turn: dict[str, Any]) -> str:
        return "".join(str(get(p, "text") or "") for p in get(turn, "parts") or ())

    # -- the connection -------------------------------------------------------------
    async def _serve(self, ws: ServerConnection) -> None:
        assert ws.request is not None
        self.connections += 1
        self.paths.append(ws.request.path)
        headers = {k.lower(): v for k, v in ws.request.headers.raw_items()}
        self.headers.append(headers)
        if not PATH.match(ws.request.path):
            await ws.close(1008, f"no such method {ws.request.path}")
            return
        try:
            setup = get(json.loads(await ws.recv()), "setup")
            if headers.get("x-goog-api-key") != self.api_key:
                await ws.close(1008, "API key not valid. Please pass a valid API key.")
                return
            if not await self._setup(ws, setup):
                return
            async for raw in ws:
                await self._handle(ws, json.loads(raw))
        except Exception:
            pass  # a dropped client ends its connection
        finally:
            self._activity = None
            if self._turn is not None and not self._turn.done():
                self._turn.cancel()

    async def _setup(self, ws: ServerConnection, setup: dict[str, Any]) -> bool:
        self.setups.append(setup)
        self._receive("setup", setup)
        modalities = get(get(setup, "generationConfig"), "responseModalities") or []
        if self.refuse_text and "TEXT" in modalities:
            reason = "The requested combination of response modalities (TEXT) is not supported"
            await ws.close(1007, reason + " by the model.")
            return False
        handle = get(get(setup, "sessionResumption"), "handle")
        if handle:
            if self.refuse_handles or handle not in self._sessions:
                self.errors.append(f"refused handle {handle}")
                await ws.close(1008, "Session resumption handle is invalid or expired.")
                return False
            self.session = self._sessions[handle]
            self.session.setup = setup
        else:
            self.session = _Session(setup)
        if self.hold_setup is not None:
            await self.hold_setup.wait()
        await self._emit(ws, {"setupComplete": {}})
        return True

    async def _emit(self, ws: ServerConnection, message: dict[str, Any]) -> None:
        await ws.send(json.dumps(message))

    async def _handle(self, ws: ServerConnection, message: dict[str, Any]) -> None:
        session = self.session
        assert session is not None
        for key in ("clientContent", "realtimeInput", "toolResponse", "contextUpdate"):
            body = get(message, key)
            if body is not None:
                break
        else:
            self.errors.append(f"unknown message {list(message)}")
            return
        self._receive(key, body)
        if key == "clientContent":
            await self._interrupt()  # the cut turn comes before what interrupted it
            session.history.extend(get(body, "turns") or [])
            if get(body, "turnComplete"):
                await self._answer(ws)
        elif key == "toolResponse":
            ask = False
            for response in get(body, "functionResponses") or []:
                call_id = get(response, "id")
                if call_id not in session.open_calls:
                    self.errors.append(f"a response for no open call: {call_id}")
                    await ws.close(1007, f"Function response id {call_id} not found.")
                    return
                del session.open_calls[call_id]
                session.history.append({"role": "user", "parts": [{"functionResponse": response}]})
                if (get(response, "scheduling") or "WHEN_IDLE") != "SILENT":
                    ask = True
            if ask:
                await self._answer(ws)
        elif key == "contextUpdate":
            if get(body, "systemInstruction") is not None:
                session.setup["systemInstruction"] = get(body, "systemInstruction")
            if get(body, "tools") is not None:
                session.setup["tools"] = get(get(body, "tools"), "tools")
        else:
            await self._realtime(ws, body)

    async def _realtime(self, ws: ServerConnection, body: dict[str, Any]) -> None:
        assert self.session is not None
        detection = get(
            get(self.session.setup, "realtimeInputConfig"), "automaticActivityDetection"
        )
        manual = bool(get(detection, "disabled"))
        blob = get(body, "audio")
        if blob is not None:
            mime, pcm = get(blob, "mimeType"), _bytes(get(blob, "data"))
            self.audio_in.append((mime, pcm))
            if mime != INPUT_MIME:
                self.errors.append(f"audio as {mime}")
            if self._activity is None:
                self.errors.append("audio outside an activity")
                return
            self._activity += pcm
            if self.drop_in_activity:
                self._activity = None
                self.dropped.set()
                ws.transport.abort()
        elif get(body, "activityStart") is not None or get(body, "activityEnd") is not None:
            if not manual:
                self.errors.append("an activity signal with automatic activity detection on")
                await ws.close(
                    1007,
                    "Explicit activity control is not supported when automatic activity "
                    "detection is enabled.",
                )
                return
            if get(body, "activityStart") is not None:
                await self._activity_start()
            else:
                await self._activity_end(ws)
        else:
            self.errors.append(f"unexpected realtime input {list(body)}")

    async def _activity_start(self) -> None:
        if self._activity is not None:
            self.errors.append("activityStart in an activity")
        self._activity = bytearray()
        await self._interrupt()  # the user's voice interrupts the model

    async def _activity_end(self, ws: ServerConnection) -> None:
        assert self.session is not None
        if self._activity is None:
            self.errors.append("activityEnd without activityStart")
            return
        self.utterances.append(bytes(self._activity))
        self._activity = None
        heard = self.hear.popleft() if self.hear else ""
        if heard:
            pieces = _pieces(heard)
            for n, word in enumerate(pieces):
                heard_piece: dict[str, Any] = {"text": word}
                if self.hear_finished and n == len(pieces) - 1:
                    heard_piece["finished"] = True
                await self._emit(ws, {"serverContent": {"inputTranscription": heard_piece}})
            self.session.history.append({"role": "user", "parts": [{"text": heard}]})
        await self._answer(ws)

    async def _interrupt(self) -> None:
        """Cut the turn being generated, if any (it ends as it was sent)."""
        if self._turn is not None and not self._turn.done():
            self._stop.set()
            with contextlib.suppress(BaseException):
                await self._turn

    async def _answer(self, ws: ServerConnection) -> None:
        await self._interrupt()
        step = self.script.popleft() if self.script else text("(no script)")
        self._stop = asyncio.Event()
        self._turn = asyncio.create_task(self._respond(ws, step, self._stop))

    async def _respond(self, ws: ServerConnection, step: list[Part], stop: asyncio.Event) -> None:
        session = self.session
        assert session is not None
        self.turn_started.set()
        parts: list[dict[str, Any]] = []
        said = ""
        for part in step:
            if part[0] == "drop":
                ws.transport.abort()
                return
            if part[0] == "goaway":
                await self._emit(ws, {"goAway": {"timeLeft": "5s"}})
            elif part[0] == "wait":
                waiter = asyncio.ensure_future(part[1].wait())
                stopper = asyncio.ensure_future(stop.wait())
                try:
                    await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
                finally:  # also when the connection ends (this turn is cancelled)
                    waiter.cancel()
                    stopper.cancel()
                if stop.is_set():
                    session.history.append({"role": "model", "parts": [{"text": said}]})
                    self.interrupted.set()
                    # google-genai: an interrupted turn "will go through interrupted >
                    # turn_complete" (LiveServerContent.generation_complete).
                    await self._emit(ws, {"serverContent": {"interrupted": True}})
                    await self._emit(ws, {"serverContent": {"turnComplete": True}})
                    return
            elif part[0] == "text":
                for piece in _pieces(part[1]):
                    said += piece
                    turn = {"modelTurn": {"role": "model", "parts": [{"text": piece}]}}
                    await self._emit(ws, {"serverContent": turn})
            elif part[0] == "audio":
                for piece in _pieces(part[1]):
                    said += piece
                    pcm = SAMPLE.to_bytes(2, "little") * (AUDIO_PER_WORD // 2)
                    data = base64.b64encode(pcm).decode()
                    blob = {"mimeType": "audio/pcm;rate=24000", "data": data}
                    turn = {"modelTurn": {"role": "model", "parts": [{"inlineData": blob}]}}
                    await self._emit(ws, {"serverContent": turn})
                    await self._emit(
                        ws, {"serverContent": {"outputTranscription": {"text": piece}}}
                    )
            else:
                _, name, arguments = part
                call_id = f"function-call-{next(self._calls)}"
                session.open_calls[call_id] = name
                function_call = {"id": call_id, "name": name, "args": arguments}
                parts.append({"functionCall": function_call})
                await self._emit(ws, {"toolCall": {"functionCalls": [function_call]}})
        session.history.append({"role": "model", "parts": [{"text": said}, *parts]})
        usage = {"promptTokenCount": 21, "responseTokenCount": 7, "totalTokenCount": 28}
        await self._emit(ws, {"usageMetadata": usage})
        # The handle first: a client that saw the turn end knows it (the real server's
        # updates come at any point).
        handle = f"handle-{next(self._handles)}"
        self._sessions[handle] = session
        update = {"newHandle": handle, "resumable": True}
        await self._emit(ws, {"sessionResumptionUpdate": update})
        await self._emit(ws, {"serverContent": {"turnComplete": True}})


def _bytes(data: str) -> bytes:
    """A JSON ``bytes`` field: base64, standard or URL-safe (google-genai sends URL-safe;
    the server's proto JSON parser takes both)."""
    return base64.urlsafe_b64decode(data.replace("+", "-").replace("/", "_"))


def _pieces(value: str) -> list[str]:
    words = value.split(" ")
    return [word if n == 0 else " " + word for n, word in enumerate(words)]


class ThreadedLiveServer(OnItsOwnLoop[FakeLiveServer]):
    """A ``FakeLiveServer`` on its own event loop in a thread (``OnItsOwnLoop``)."""

    def __init__(self, api_key: str = "gemini-test-key") -> None:
        super().__init__(FakeLiveServer(api_key))
