"""The user's voice to an OpenAI Realtime session: the STT engine of ``use_audio()``.

Each stream sends its frames (24 kHz mono PCM) with ``input_audio_buffer.append`` and,
at ``flush`` (the end of an utterance, decided by backline's voice pipeline: the
session's own turn detection is off), ``input_audio_buffer.commit``. The server makes
the buffer a user message item the model hears, and transcribes it
(``conversation.item.input_audio_transcription.delta`` / ``.completed`` /
``.failed``): its text comes back as the stream's interim and final transcripts.
``Ears`` routes those server events to the stream whose commit made the item.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections import deque
from typing import Any, Protocol

from backline.llm import LLMError
from backline.speech import AudioFrame, STTStream, Transcript
from backline.tasks import TaskScope

log = logging.getLogger(__name__)

RATE = 24000  # the only PCM rate the Realtime API takes and gives
_COMMIT = object()
_MAX_APPEND = 256 * 1024  # bytes of PCM per append event (~5 s; the limit is 15 MiB)


class Host(Protocol):
    """What a stream needs of the realtime model (``OpenAIRealtimeLLM``)."""

    async def append_audio(self, pcm: bytes) -> None: ...

    async def commit_audio(self, stream: HearingStream) -> None: ...

    def forget(self, stream: HearingStream) -> None: ...


class RealtimeHearing:
    """The speech-to-text engine whose streams carry the user's voice to the model."""

    name = "openai-realtime"

    def __init__(self, host: Host) -> None:
        self._host = host

    def stream(self) -> STTStream:
        return HearingStream(self._host)


class HearingStream:
    """One microphone's utterances to the model (see the module doc)."""

    def __init__(self, host: Host) -> None:
        self._host = host
        self._ops: deque[bytes | object] = deque()  # audio and commits, in order
        self._out: asyncio.Queue[Transcript | None] = asyncio.Queue()
        self._scope = TaskScope("openai-realtime hearing")
        self._sender: asyncio.Task[None] | None = None
        self._failed: str | None = None  # an append failed: this utterance is lost
        self._closed = False
        self.heard: dict[str, str] = {}  # item id -> its transcript so far (interim)

    # -- STTStream ----------------------------------------------------------------
    def push(self, frame: AudioFrame) -> None:
        if self._closed:
            return
        self._ops.append(frame.resample(RATE).data)
        self._wake()

    def flush(self) -> None:
        if self._closed:
            return
        self._ops.append(_COMMIT)
        self._wake()

    def __aiter__(self) -> HearingStream:
        return self

    async def __anext__(self) -> Transcript:
        transcript = await self._out.get()
        if transcript is None:
            self._out.put_nowait(None)  # every later read ends too
            raise StopAsyncIteration
        return transcript

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._host.forget(self)
        self._out.put_nowait(None)
        await self._scope.aclose()

    # -- from the model's reader ----------------------------------------------------
    def interim(self, item_id: str, delta: str) -> None:
        text = self.heard.get(item_id, "") + delta
        self.heard[item_id] = text
        if not self._closed and text.strip():
            self._out.put_nowait(Transcript(text, final=False))

    def final(self, item_id: str | None, text: str, error: str | None = None) -> None:
        if item_id is not None:
            self.heard.pop(item_id, None)
        if not self._closed:
            self._out.put_nowait(Transcript(text, final=True, error=error))

    # -- the sender -------------------------------------------------------------------
    def _wake(self) -> None:
        if self._sender is None or self._sender.done():
            self._sender = self._scope.create_task(self._send(), name="send the user's voice")

    async def _send(self) -> None:
        ops = self._ops
        while ops:
            op = ops.popleft()
            if op is _COMMIT:
                await self._commit()
                continue
            assert isinstance(op, bytes)
            pcm = bytearray(op)
            while ops and ops[0] is not _COMMIT and len(pcm) < _MAX_APPEND:
                more = ops.popleft()  # consecutive audio: one append
                assert isinstance(more, bytes)
                pcm += more
            if self._failed is None and pcm:
                try:
                    await self._host.append_audio(bytes(pcm))
                except LLMError as e:
                    self._failed = str(e)

    async def _commit(self) -> None:
        failed, self._failed = self._failed, None
        if failed is not None:
            self.final(None, "", failed)
            return
        try:
            await self._host.commit_audio(self)
        except LLMError as e:
            self.final(None, "", str(e))


class Ears:
    """The model's side: which stream waits for which commit and transcript."""

    def __init__(self) -> None:
        self.commits: deque[HearingStream] = deque()  # committed, no item id yet
        self.items: dict[str, HearingStream] = {}  # item id -> the stream it answers
        self.settled = asyncio.Event()
        self.settled.set()

    @property
    def pending(self) -> bool:
        return bool(self.commits or self.items)

    def _update(self) -> None:
        if self.pending:
            self.settled.clear()
        else:
            self.settled.set()

    def committing(self, stream: HearingStream) -> None:
        self.commits.append(stream)
        self._update()

    def uncommit(self, stream: HearingStream) -> None:
        """The commit ``committing`` announced was not sent: take it back (the last)."""
        for n in range(len(self.commits) - 1, -1, -1):
            if self.commits[n] is stream:
                del self.commits[n]
                break
        self._update()

    def commit_refused(self, code: str, message: str) -> None:
        """A commit was refused (an error event naming it): its utterance has no words."""
        if not self.commits:
            return
        stream = self.commits.popleft()
        # Too little audio (a click the detector took for speech) is not an error.
        stream.final(None, "", None if code == "input_audio_buffer_commit_empty" else message)
        self._update()

    def on_event(self, kind: str, event: dict[str, Any]) -> str | None:
        """Route one input event; returns the transcript of a completed item."""
        item_id = str(event.get("item_id") or "")
        if kind == "input_audio_buffer.committed":
            if self.commits:
                self.items[item_id] = self.commits.popleft()
        elif kind == "conversation.item.input_audio_transcription.delta":
            stream = self.items.get(item_id)
            if stream is not None:
                stream.interim(item_id, str(event.get("delta") or ""))
        elif kind == "conversation.item.input_audio_transcription.completed":
            text = str(event.get("transcript") or "").strip()
            stream = self.items.pop(item_id, None)
            if stream is not None:
                stream.final(item_id, text)
            self._update()
            return text
        elif kind == "conversation.item.input_audio_transcription.failed":
            error = event.get("error") or {}
            message = str(error.get("message") or error or "transcription failed")
            stream = self.items.pop(item_id, None)
            if stream is not None:
                stream.final(item_id, "", f"OpenAI Realtime could not transcribe it: {message}")
        self._update()
        return None

    def lost(self, error: str) -> None:
        """The socket is gone: every utterance still waiting has no words."""
        for stream in [*self.commits, *self.items.values()]:
            stream.final(None, "", error)
        self.commits.clear()
        self.items.clear()
        self._update()

    def forget(self, stream: HearingStream) -> None:
        self.commits = deque(s for s in self.commits if s is not stream)
        self.items = {k: s for k, s in self.items.items() if s is not stream}
        self._update()

    @staticmethod
    def append_event(pcm: bytes) -> dict[str, Any]:
        return {"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm).decode()}
