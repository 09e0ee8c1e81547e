"""A fake OpenAI-compatible audio server on loopback: ``/v1/audio/transcriptions`` and
``/v1/audio/speech``, answering from a script.

Transcriptions are checked as the real API checks them: a multipart/form-data body
with a ``file`` part (a filename, a readable WAV) and a ``model`` field, else a 400
with OpenAI's error body. The WAV is read back (``AudioRequest.wav``) so a test sees
its rate, channels and samples. Speech takes OpenAI's JSON body (``model``, ``input``,
``voice``) and streams the scripted audio in HTTP chunks; ``Speech(hold=N)`` sends N
chunks and then waits for ``release()`` (or the client going away: a disconnect is
recorded, ``wait_for_disconnect``). Errors are ``fake_openai.error(...)`` responses.

The HTTP layer (a thread per connection, disconnect detection) is the fake Anthropic
server's, as for ``FakeOpenAIServer``.
"""

from __future__ import annotations

import asyncio
import io
import json
import socket
import threading
import wave
from collections import deque
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from backline.speech import AudioFrame
from backline.testing._anthropic_http import (
    POLL,
    Handler,
    HTTPServer,
    Output,
    read_body,
    shutdown_socket,
)
from tests.plugins.openai.fake_openai import OpenAIResponse, error

HOLD_TIMEOUT = 30.0  # a held response waits this long at most for release()


@dataclass
class Transcript:
    """A transcription answer: ``{"text": ...}`` (and, for ``verbose_json``, OpenAI's
    other fields)."""

    text: str
    language: str = "english"


@dataclass
class Speech:
    """Speech audio sent in these HTTP chunks; after ``hold`` chunks, the rest waits for
    ``release()``."""

    chunks: list[bytes]
    hold: int | None = None
    content_type: str = "audio/pcm"


@dataclass
class Part:
    name: str
    data: bytes
    filename: str | None = None
    content_type: str | None = None


@dataclass
class AudioRequest:
    """One request as received (``fields``: the multipart text fields)."""

    index: int
    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    json: Any = None
    parts: dict[str, Part] = field(default_factory=dict)
    wav: AudioFrame | None = None
    completed: bool = False
    disconnected: bool = False
    sent_chunks: int = 0

    @property
    def fields(self) -> dict[str, str]:
        return {n: p.data.decode() for n, p in self.parts.items() if p.filename is None}

    @property
    def api_key(self) -> str | None:
        auth = self.headers.get("authorization", "")
        return auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None


def parse_multipart(body: bytes, content_type: str) -> dict[str, Part]:
    """The parts of a multipart/form-data body, by name (``ValueError`` if malformed)."""
    kind, _, params = content_type.partition(";")
    if kind.strip().lower() != "multipart/form-data":
        raise ValueError(f"expected multipart/form-data, got {kind.strip()!r}")
    boundary = ""
    for param in params.split(";"):
        key, _, value = param.strip().partition("=")
        if key.lower() == "boundary":
            boundary = value.strip('"')
    if not boundary:
        raise ValueError("multipart/form-data without a boundary")
    delimiter = b"--" + boundary.encode()
    sections = body.split(delimiter)
    if len(sections) < 3 or not sections[-1].startswith(b"--"):
        raise ValueError("the multipart body does not end with its closing boundary")
    parts: dict[str, Part] = {}
    for section in sections[1:-1]:
        if not section.startswith(b"\r\n") or not section.endswith(b"\r\n"):
            raise ValueError("a multipart part is not framed by CRLF")
        head, sep, data = section[2:-2].partition(b"\r\n\r\n")
        if not sep:
            raise ValueError("a multipart part has no blank line after its headers")
        headers: dict[str, str] = {}
        for line in head.decode().split("\r\n"):
            key, _, value = line.partition(":")
            headers[key.strip().lower()] = value.strip()
        disposition = headers.get("content-disposition", "")
        attrs: dict[str, str] = {}
        for item in disposition.split(";")[1:]:
            key, _, value = item.strip().partition("=")
            attrs[key.lower()] = value.strip('"')
        if not disposition.startswith("form-data") or "name" not in attrs:
            raise ValueError(f"a multipart part without a form-data name: {disposition!r}")
        parts[attrs["name"]] = Part(
            attrs["name"], data, attrs.get("filename"), headers.get("content-type")
        )
    return parts


def read_wav_bytes(data: bytes) -> AudioFrame:
    """A 16-bit PCM WAV file's audio (``wave.Error``/``ValueError`` if it is not one)."""
    with wave.open(io.BytesIO(data), "rb") as f:
        if f.getsampwidth() != 2:
            raise ValueError(f"{8 * f.getsampwidth()}-bit samples")
        frames = f.readframes(f.getnframes())
        if len(frames) != f.getnframes() * 2 * f.getnchannels():
            raise ValueError("the data chunk is shorter than the header says")
        return AudioFrame(frames, f.getframerate(), f.getnchannels())


class FakeAudioServer:
    """A scripted OpenAI-compatible audio server on ``127.0.0.1`` (``url`` ends in ``/v1``).

    ``push(*answers)`` appends to the script (``Transcript``, ``Speech``, or an
    ``error(...)``); ``requests`` are the requests received; ``release()`` lets held
    speech go on.
    """

    def __init__(self) -> None:
        self._queue: deque[Transcript | Speech | OpenAIResponse] = deque()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._requests: list[AudioRequest] = []
        self._connections: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._released = threading.Event()
        self._httpd: HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------
    def start(self) -> FakeAudioServer:
        httpd = HTTPServer(("127.0.0.1", 0), Handler, self)
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.01},
            name=f"FakeAudioServer:{httpd.server_address[1]}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        self._httpd = self._thread = None
        self._stopping.set()
        httpd.shutdown()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            shutdown_socket(conn)
        httpd.server_close()
        if thread is not None:
            thread.join()
        httpd.join_handlers(timeout=5.0)

    def __enter__(self) -> FakeAudioServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("FakeAudioServer is not running")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    # -- script and records ------------------------------------------------------
    def push(self, *answers: Transcript | Speech | OpenAIResponse) -> None:
        with self._lock:
            self._queue.extend(answers)

    def release(self) -> None:
        """Let held speech send the rest of its chunks."""
        self._released.set()

    @property
    def requests(self) -> list[AudioRequest]:
        with self._lock:
            return list(self._requests)

    def wait_for(self, check: Any, timeout: float = 10.0) -> None:
        with self._changed:
            if not self._changed.wait_for(check, timeout):
                raise TimeoutError(f"FakeAudioServer: not so within {timeout}s")

    def wait_for_disconnect(self, timeout: float = 10.0) -> AudioRequest:
        self.wait_for(lambda: any(r.disconnected for r in self._requests), timeout)
        return next(r for r in self.requests if r.disconnected)

    async def wait_for_disconnect_async(self, timeout: float = 10.0) -> AudioRequest:
        return await asyncio.to_thread(self.wait_for_disconnect, timeout)

    # -- the HTTP host (server threads) --------------------------------------------
    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            if not add:
                self._connections.discard(conn)
            elif self._stopping.is_set():
                shutdown_socket(conn)
            else:
                self._connections.add(conn)

    def _handle(self, handler: Handler, method: str) -> None:
        raw = read_body(handler)
        with self._changed:
            request = AudioRequest(
                index=len(self._requests) + 1,
                method=method,
                path=handler.path.partition("?")[0].rstrip("/"),
                headers={k.lower(): v for k, v in handler.headers.items()},
                raw=raw,
            )
            self._requests.append(request)
            self._changed.notify_all()
        out = Output(handler, self._stopping)
        try:
            self._dispatch(request, out)
        except OSError:
            out.gone = True
        finally:
            with self._changed:
                if out.gone:
                    handler.close_connection = True
                    request.disconnected = True
                else:
                    request.completed = True
                self._changed.notify_all()

    def _dispatch(self, request: AudioRequest, out: Output) -> None:
        rid = f"req_fake{request.index:04d}"
        if request.method == "POST" and request.path == "/v1/audio/transcriptions":
            problem = self._read_transcription(request)
        elif request.method == "POST" and request.path == "/v1/audio/speech":
            problem = self._read_speech(request)
        else:
            out.json(404, _error_body(f"Invalid URL ({request.method} {request.path})"), rid)
            return
        if problem is not None:
            out.json(400, _error_body(problem), rid)
            return
        with self._lock:
            answer = self._queue.popleft() if self._queue else None
        if answer is None:
            out.json(500, _error_body("FakeAudioServer: nothing scripted; push() more"), rid)
        elif isinstance(answer, OpenAIResponse):
            out.json(answer.status, answer.error_body(), rid, headers=answer.headers)
        elif isinstance(answer, Transcript):
            out.json(200, self._transcript_body(request, answer), rid)
        else:
            self._stream_speech(request, answer, out, rid)

    def _read_transcription(self, request: AudioRequest) -> str | None:
        try:
            request.parts = parse_multipart(request.raw, request.headers.get("content-type", ""))
        except ValueError as e:
            return f"Could not parse multipart form: {e}"
        file = request.parts.get("file")
        if file is None or not file.filename:
            return "you must provide a file parameter (with a filename)"
        if not request.fields.get("model"):
            return "you must provide a model parameter"
        fmt = request.fields.get("response_format", "json")
        if fmt not in ("json", "verbose_json", "text"):
            return f"Invalid value: '{fmt}' for response_format"
        try:
            request.wav = read_wav_bytes(file.data)
        except (wave.Error, ValueError, EOFError) as e:
            return f"Invalid file format. The audio could not be decoded: {e}"
        return None

    def _transcript_body(self, request: AudioRequest, answer: Transcript) -> dict[str, Any]:
        body: dict[str, Any] = {"text": answer.text}
        if request.fields.get("response_format") == "verbose_json":
            duration = request.wav.duration if request.wav is not None else 0.0
            body.update(task="transcribe", language=answer.language, duration=duration)
            body["segments"] = [{"id": 0, "start": 0.0, "end": duration, "text": answer.text}]
        return body

    def _read_speech(self, request: AudioRequest) -> str | None:
        try:
            request.json = json.loads(request.raw)
        except ValueError:
            return "We could not parse the JSON body of your request."
        body = request.json if isinstance(request.json, dict) else {}
        for name in ("model", "input", "voice"):
            if not body.get(name):
                return f"you must provide a {name} parameter"
        fmt = body.get("response_format", "mp3")
        if fmt not in ("mp3", "opus", "aac", "flac", "wav", "pcm"):
            return f"Invalid value: '{fmt}' for response_format"
        return None

    def _stream_speech(self, request: AudioRequest, answer: Speech, out: Output, rid: str) -> None:
        out.start_stream(rid, {"content-type": answer.content_type})
        for i, chunk in enumerate(answer.chunks):
            if i == answer.hold and not self._hold(out):
                return
            with self._changed:  # counted before it goes: the client may read it at once
                request.sent_chunks += 1
                self._changed.notify_all()
            if not out.chunk(chunk):
                return
        out.end_stream()

    def _hold(self, out: Output) -> bool:
        """Wait for ``release()``; ``False`` if the client went away (or we stop)."""
        waited = 0.0
        while not self._released.wait(POLL):
            waited += POLL
            if not out.wait(0) or waited >= HOLD_TIMEOUT:
                out.gone = True
                return False
        return out.wait(0)


def _error_body(message: str) -> dict[str, Any]:
    return {
        "error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}
    }


__all__ = [
    "AudioRequest",
    "FakeAudioServer",
    "OpenAIResponse",
    "Part",
    "Speech",
    "Transcript",
    "error",
    "parse_multipart",
    "read_wav_bytes",
]
