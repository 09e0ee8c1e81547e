"""A fake OpenAI Realtime server on loopback (``websockets``), answering from a script.

It speaks the documented GA events (names as in the installed ``openai`` package's
``types/realtime``): ``session.created`` on connect, ``session.updated`` for
``session.update``; ``conversation.item.added``/``.done`` for
``conversation.item.create``, ``conversation.item.deleted`` for
``conversation.item.delete``; for ``response.create``: ``response.created``,
``response.output_item.added``, ``response.output_text.delta`` pieces,
``response.output_text.done``, ``response.function_call_arguments.delta``/``.done``,
``response.output_item.done``, ``response.done`` (status, output, usage); for
``response.cancel``: ``response.done`` with status ``cancelled``. What the real server
would refuse (an output for an unknown call, deleting an unknown item, a response
while one runs) is an ``error`` event, and is recorded in ``errors``.

Audio (when ``session.update`` or ``response.create`` asks for ``output_modalities``
``["audio"]``): a text part is spoken, ``WORD_MS`` of PCM per word
(``response.output_audio.delta``, base64) with its transcript
(``response.output_audio_transcript.delta``); the item's content is ``output_audio``
with the transcript. ``input_audio_buffer.append``/``.commit`` make a user item
(``input_audio_buffer.committed``, ``conversation.item.added``) transcribed as the
next of ``transcripts`` (``conversation.item.input_audio_transcription.delta``,
``.completed``); less than 100 ms of audio is refused
(``input_audio_buffer_commit_empty``). ``conversation.item.truncate`` cuts an audio
item (recorded in ``truncated``; past its audio is refused). ``drop_on_commit`` drops
the socket after a commit, before its transcript.

A script step is a list of parts: ``("text", str)``, ``("call", name, arguments)``,
``("wait", asyncio.Event)`` (hold there; a cancel ends it), ``("drop",)`` (close the
socket abruptly).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
from collections import deque
from collections.abc import Callable
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.http11 import Request, Response

from tests.plugins.realtime_kit import OnItsOwnLoop

Part = tuple[Any, ...]
WORD_MS = 200  # of audio per spoken word
BYTES_PER_MS = 48  # 24 kHz, 16-bit mono
SPOKEN = (4096).to_bytes(2, "little", signed=True)  # each sample of the model's voice


def text(value: str) -> list[Part]:
    return [("text", value)]


def call(name: str, **arguments: Any) -> list[Part]:
    return [("call", name, arguments)]


class FakeRealtimeServer:
    def __init__(self) -> None:
        self.script: deque[list[Part]] = deque()
        self.received: list[dict[str, Any]] = []  # every client event, all connections
        self.errors: list[str] = []
        self.connections = 0
        self.conversation: list[dict[str, Any]] = []  # the current connection's items
        self.probe: Callable[[dict[str, Any]], None] | None = None  # called per event
        self.cancelled = asyncio.Event()
        self.hold_cancel: asyncio.Event | None = None  # a cancel's response.done waits on it
        self.refuse_next: str | None = None  # the next response.create gets this error
        self.refuse_text: str | None = None  # a message item with this text is refused
        self.reject_status: int | None = None  # refuse the handshake with this status
        self.headers: list[dict[str, str]] = []  # each handshake's request headers
        self.paths: list[str] = []  # and its path (with the query)
        self.session: dict[str, Any] = {}  # the current connection's configuration
        self.transcripts: deque[str] = deque()  # what each committed utterance says
        self.input_audio = bytearray()  # the input buffer
        self.heard: list[bytes] = []  # the audio of each committed utterance
        self.truncated: list[tuple[str, int]] = []  # (item id, audio_end_ms)
        self.audio_ms: dict[str, int] = {}  # spoken item id -> ms of its audio
        self.modalities: list[str] = ["text"]  # the response being made
        self.drop_on_commit = False  # drop the socket once an utterance is committed
        self.open_connections = 0
        self.all_closed = asyncio.Event()  # set whenever no client is connected
        self._server: Server | None = None
        self._ids = itertools.count(1)
        self._response: asyncio.Task[None] | None = None
        self._cancel = asyncio.Event()

    async def __aenter__(self) -> FakeRealtimeServer:
        self._server = await serve(
            self._serve, "127.0.0.1", 0, ping_interval=None, process_request=self._handshake
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._response is not None:
            self._response.cancel()
            with contextlib.suppress(BaseException):
                await self._response
        assert self._server is not None
        self._server.close()
        await asyncio.wait_for(self._server.wait_closed(), 5)

    def _handshake(self, ws: ServerConnection, request: Request) -> Response | None:
        self.headers.append({k.lower(): v for k, v in request.headers.raw_items()})
        self.paths.append(request.path)
        if self.reject_status is None:
            return None
        return ws.respond(self.reject_status, '{"error": {"message": "rejected"}}\n')

    @property
    def url(self) -> str:
        assert self._server is not None
        port = next(iter(self._server.sockets)).getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    def push(self, *steps: list[Part]) -> None:
        self.script.extend(steps)

    def sent(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.received if e.get("type") == kind]

    def _id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids)}"

    async def _serve(self, ws: ServerConnection) -> None:
        self.connections += 1
        self.open_connections += 1
        self.all_closed.clear()
        self.conversation = []
        self.session = {}
        self.input_audio = bytearray()
        await self._emit(ws, {"type": "session.created", "session": {"type": "realtime"}})
        try:
            async for raw in ws:
                event = json.loads(raw)
                self.received.append(event)
                if self.probe is not None:
                    self.probe(event)
                await self._handle(ws, event)
        except Exception:
            pass  # a dropped client ends its connection
        finally:
            if self._response is not None and not self._response.done():
                self._response.cancel()
            self.open_connections -= 1
            if not self.open_connections:
                self.all_closed.set()

    async def _emit(self, ws: ServerConnection, event: dict[str, Any]) -> None:
        event.setdefault("event_id", self._id("event"))
        await ws.send(json.dumps(event))

    async def _error(
        self,
        ws: ServerConnection,
        code: str,
        message: str,
        cause: dict[str, Any] | None = None,
    ) -> None:
        self.errors.append(f"{code}: {message}")
        error = {"type": "invalid_request_error", "code": code, "message": message}
        if cause is not None and cause.get("event_id"):
            error["event_id"] = cause["event_id"]  # the client event that caused it
        await self._emit(ws, {"type": "error", "error": error})

    async def _handle(self, ws: ServerConnection, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "session.update":
            self.session = dict(event["session"])
            session = {"type": "realtime", **event["session"]}
            await self._emit(ws, {"type": "session.updated", "session": session})
        elif kind == "conversation.item.create":
            item = dict(event["item"])
            if self.refuse_text and any(
                self.refuse_text in str(c.get("text")) for c in item.get("content") or ()
            ):
                await self._error(ws, "invalid_value", "this item is refused", event)
                return
            if item["type"] == "function_call_output" and not any(
                i.get("call_id") == item["call_id"] and i["type"] == "function_call"
                for i in self.conversation
            ):
                await self._error(ws, "invalid_call_id", f"no call {item['call_id']}")
                return
            item.setdefault("id", self._id("item"))
            previous = self.conversation[-1]["id"] if self.conversation else None
            self.conversation.append(item)
            added = {"type": "conversation.item.added", "previous_item_id": previous, "item": item}
            await self._emit(ws, added)
            await self._emit(ws, {"type": "conversation.item.done", "item": item})
        elif kind == "conversation.item.delete":
            ids = [i["id"] for i in self.conversation]
            if event["item_id"] not in ids:
                await self._error(ws, "item_not_found", f"no item {event['item_id']}")
                return
            self.conversation.pop(ids.index(event["item_id"]))
            await self._emit(ws, {"type": "conversation.item.deleted", "item_id": event["item_id"]})
        elif kind == "response.create":
            if self.refuse_next is not None:
                message, self.refuse_next = self.refuse_next, None
                await self._emit(
                    ws,
                    {
                        "type": "error",
                        "error": {
                            "type": "invalid_request_error",
                            "code": "invalid_request",
                            "message": message,
                        },
                    },
                )
                return
            if self._response is not None and not self._response.done():
                await self._error(ws, "conversation_already_has_active_response", "busy")
                return
            step = self.script.popleft() if self.script else text("(no script)")
            asked = event.get("response", {}).get("output_modalities")
            self.modalities = asked or self.session.get("output_modalities") or ["text"]
            self._cancel = asyncio.Event()
            self._response = asyncio.create_task(self._respond(ws, step, self._cancel))
        elif kind == "input_audio_buffer.append":
            self.input_audio += base64.b64decode(event["audio"])
        elif kind == "input_audio_buffer.commit":
            await self._commit(ws, event)
        elif kind == "conversation.item.truncate":
            item = next((i for i in self.conversation if i["id"] == event["item_id"]), None)
            if item is None or event["item_id"] not in self.audio_ms:
                await self._error(ws, "invalid_value", "not an audio item", event)
                return
            if event["audio_end_ms"] > self.audio_ms[event["item_id"]]:
                await self._error(ws, "invalid_value", "audio_end_ms past the audio", event)
                return
            self.truncated.append((event["item_id"], event["audio_end_ms"]))
            item["content"][0]["transcript"] = ""  # the server drops the transcript
            truncated = {"item_id": event["item_id"], "content_index": 0}
            await self._emit(
                ws,
                {"type": "conversation.item.truncated", **truncated, "audio_end_ms": 0},
            )
        elif kind == "response.cancel":
            if self._response is None or self._response.done():
                await self._error(ws, "response_cancel_not_active", "no active response")
                return
            self.cancelled.set()
            self._cancel.set()

    async def _commit(self, ws: ServerConnection, event: dict[str, Any]) -> None:
        audio, self.input_audio = bytes(self.input_audio), bytearray()
        if len(audio) < 100 * BYTES_PER_MS:
            await self._error(ws, "input_audio_buffer_commit_empty", "too little audio", event)
            return
        self.heard.append(audio)
        item_id = self._id("item")
        previous = self.conversation[-1]["id"] if self.conversation else None
        item = {
            "id": item_id,
            "type": "message",
            "role": "user",
            "content": [{"type": "input_audio", "transcript": None}],
        }
        self.conversation.append(item)
        committed = {"item_id": item_id, "previous_item_id": previous}
        await self._emit(ws, {"type": "input_audio_buffer.committed", **committed})
        await self._emit(
            ws, {"type": "conversation.item.added", "previous_item_id": previous, "item": item}
        )
        if self.drop_on_commit:
            ws.transport.abort()  # before the transcript
            return
        said = self.transcripts.popleft() if self.transcripts else ""
        at = {"item_id": item_id, "content_index": 0}
        for word in said.split(" ")[:-1]:
            delta = {"type": "conversation.item.input_audio_transcription.delta", "delta": word}
            await self._emit(ws, {**delta, **at})
        item["content"][0]["transcript"] = said
        done = {"type": "conversation.item.input_audio_transcription.completed"}
        await self._emit(ws, {**done, **at, "transcript": said})

    async def _respond(self, ws: ServerConnection, step: list[Part], cancel: asyncio.Event) -> None:
        rid = self._id("resp")
        base = {"response_id": rid}
        await self._emit(ws, {"type": "response.created", "response": {"id": rid}})
        output: list[dict[str, Any]] = []
        status = "completed"
        for index, part in enumerate(step):
            if part[0] == "drop":
                ws.transport.abort()
                return
            if part[0] == "wait":
                waiter = asyncio.ensure_future(part[1].wait())
                canceller = asyncio.ensure_future(cancel.wait())
                await asyncio.wait({waiter, canceller}, return_when=asyncio.FIRST_COMPLETED)
                waiter.cancel()
                canceller.cancel()
                if cancel.is_set():
                    status = "cancelled"
                    break
                continue
            item_id = self._id("item")
            at = {**base, "output_index": index, "item_id": item_id}
            if part[0] == "text" and self.modalities == ["audio"]:
                item = await self._speak(ws, part[1], index, item_id, base, output)
            elif part[0] == "text":
                item: dict[str, Any] = {
                    "id": item_id,
                    "type": "message",
                    "role": "assistant",
                    "status": "in_progress",
                    "content": [],
                }
                output.append(item)
                added = {**base, "output_index": index, "item": item}
                await self._emit(ws, {"type": "response.output_item.added", **added})
                words = part[1].split(" ")
                sent = ""
                for n, word in enumerate(words):
                    delta = word if n == 0 else " " + word
                    sent += delta
                    delta_event = {"content_index": 0, "delta": delta}
                    await self._emit(
                        ws, {"type": "response.output_text.delta", **at, **delta_event}
                    )
                item["content"] = [{"type": "output_text", "text": sent}]
                await self._emit(
                    ws,
                    {"type": "response.output_text.done", **at, "content_index": 0, "text": sent},
                )
            else:
                _, name, arguments = part
                call_id = self._id("call")
                args = json.dumps(arguments)
                item = {
                    "id": item_id,
                    "type": "function_call",
                    "call_id": call_id,
                    "name": name,
                    "arguments": "",
                    "status": "in_progress",
                }
                output.append(item)
                added = {**base, "output_index": index, "item": dict(item)}
                await self._emit(ws, {"type": "response.output_item.added", **added})
                for piece in (args[: len(args) // 2], args[len(args) // 2 :]):
                    piece_event = {"call_id": call_id, "delta": piece}
                    await self._emit(
                        ws, {"type": "response.function_call_arguments.delta", **at, **piece_event}
                    )
                item["arguments"] = args
                done = {"call_id": call_id, "name": name, "arguments": args}
                await self._emit(
                    ws, {"type": "response.function_call_arguments.done", **at, **done}
                )
            item["status"] = "completed"
            await self._emit(ws, {"type": "response.output_item.done", **base, "item": item})
        if status == "cancelled":
            # The server had generated more than the client showed: it keeps that.
            for item in output:
                if (
                    item["type"] == "message"
                    and item["content"]
                    and item["id"] not in self.audio_ms
                ):
                    item["content"][0]["text"] += " and more"
            if self.hold_cancel is not None:
                await self.hold_cancel.wait()
        self.conversation.extend(output)
        usage = {
            "input_tokens": 17,
            "output_tokens": 5,
            "total_tokens": 22,
            "input_token_details": {"cached_tokens": 3, "text_tokens": 17, "audio_tokens": 0},
        }
        body = {"id": rid, "status": status, "output": output, "usage": usage}
        await self._emit(ws, {"type": "response.done", "response": body})

    async def _speak(
        self,
        ws: ServerConnection,
        value: str,
        index: int,
        item_id: str,
        base: dict[str, Any],
        output: list[dict[str, Any]],
    ) -> dict[str, Any]:
        item: dict[str, Any] = {
            "id": item_id,
            "type": "message",
            "role": "assistant",
            "status": "in_progress",
            "content": [],
        }
        output.append(item)
        await self._emit(
            ws, {"type": "response.output_item.added", **base, "output_index": index, "item": item}
        )
        at = {**base, "output_index": index, "item_id": item_id, "content_index": 0}
        pcm = base64.b64encode(SPOKEN * (WORD_MS * BYTES_PER_MS // 2)).decode()
        sent = ""
        for n, word in enumerate(value.split(" ")):
            delta = word if n == 0 else " " + word
            sent += delta
            await self._emit(ws, {"type": "response.output_audio.delta", **at, "delta": pcm})
            self.audio_ms[item_id] = self.audio_ms.get(item_id, 0) + WORD_MS
            await self._emit(
                ws, {"type": "response.output_audio_transcript.delta", **at, "delta": delta}
            )
        item["content"] = [{"type": "output_audio", "transcript": sent}]
        await self._emit(ws, {"type": "response.output_audio.done", **at})
        await self._emit(
            ws, {"type": "response.output_audio_transcript.done", **at, "transcript": sent}
        )
        return item


class ThreadedRealtimeServer(OnItsOwnLoop[FakeRealtimeServer]):
    """A ``FakeRealtimeServer`` on its own event loop in a thread (``OnItsOwnLoop``)."""

    def __init__(self) -> None:
        super().__init__(FakeRealtimeServer())
