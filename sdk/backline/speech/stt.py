"""Speech-to-text: audio frames in, interim and final transcripts out.

``SpeechToText.stream()`` gives a ``STTStream``: push frames as they come
(``push``), mark the end of an utterance (``flush``: the voice pipeline calls it
when voice activity ends, so an engine that transcribes whole utterances gives its
final then), iterate transcripts, close. ``BatchSTT`` turns an engine that
transcribes a whole recording at once (whisper.cpp, pocketsphinx, an HTTP API) into
a stream: it buffers an utterance, transcribes it in a worker thread at ``flush``,
and, if ``interim_every`` is set, transcribes the audio so far every so often for
interim transcripts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..tasks import TaskScope
from .frames import AudioFrame

logger = logging.getLogger("backline.speech")

__all__ = ["BatchSTT", "STTStream", "SpeechToText", "Transcript"]


@dataclass(frozen=True)
class Transcript:
    """What the user said. ``start``/``end``: seconds of audio from the stream's start.
    ``error``: the engine failed on this audio (``text`` is empty then); the stream
    goes on with the next utterance."""

    text: str
    final: bool
    start: float = 0.0
    end: float = 0.0
    confidence: float | None = None
    language: str | None = None
    error: str | None = None


@runtime_checkable
class STTStream(Protocol):
    def push(self, frame: AudioFrame) -> None:
        """Audio in (frames at any rate: resampled to the engine's)."""
        ...

    def flush(self) -> None:
        """The utterance ended: give its final transcript (even an empty one)."""
        ...

    def __aiter__(self) -> AsyncIterator[Transcript]: ...

    async def aclose(self) -> None:
        """Stop (bounded); the iteration ends."""
        ...


@runtime_checkable
class SpeechToText(Protocol):
    """A speech-to-text engine (registered by a plugin with ``register_stt``)."""

    @property
    def name(self) -> str: ...

    def stream(self) -> STTStream: ...


class BatchSTT:
    """A base for engines that transcribe a whole utterance at once.

    Subclasses set ``name`` and ``sample_rate`` and implement ``transcribe(frame)``
    (synchronous, run in a worker thread: it may take long) returning the text. With
    ``interim_every`` (seconds of new audio), the audio so far is transcribed that
    often while the user speaks, for interim transcripts.
    """

    name = "batch"
    sample_rate = 16000
    interim_every: float | None = None

    def transcribe(self, frame: AudioFrame) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def stream(self) -> STTStream:
        return _BatchStream(self)


class _BatchStream:
    def __init__(self, engine: BatchSTT) -> None:
        self._engine = engine
        self._rate = engine.sample_rate
        self._buffer: list[bytes] = []
        self._buffered = 0.0  # seconds in the buffer
        self._since_interim = 0.0
        self._offset = 0.0  # seconds of audio before the buffer (for timings)
        self._queue: asyncio.Queue[Transcript | None] = asyncio.Queue()
        self._scope = TaskScope(f"{engine.name} transcription")
        self._work: asyncio.Task[None] | None = None
        self._closed = False

    def push(self, frame: AudioFrame) -> None:
        if self._closed:
            return
        if frame.sample_rate != self._rate or frame.channels != 1:
            frame = frame.resample(self._rate)
        self._buffer.append(frame.data)
        self._buffered += frame.duration
        self._since_interim += frame.duration
        every = self._engine.interim_every
        if every is not None and self._since_interim >= every and self._idle():
            self._since_interim = 0.0
            self._run(final=False)

    def flush(self) -> None:
        if self._closed:
            return
        self._run(final=True)

    def _idle(self) -> bool:
        return self._work is None or self._work.done()

    def _run(self, *, final: bool) -> None:
        audio = AudioFrame(b"".join(self._buffer), self._rate)
        start, end = self._offset, self._offset + self._buffered
        if final:
            self._buffer, self._offset, self._buffered = [], end, 0.0
            self._since_interim = 0.0
        previous = self._work
        self._work = self._scope.create_task(
            self._transcribe(previous, audio, start, end, final), name=f"{self._engine.name}"
        )

    async def _transcribe(
        self,
        previous: asyncio.Task[None] | None,
        audio: AudioFrame,
        start: float,
        end: float,
        final: bool,
    ) -> None:
        if previous is not None and not previous.done():
            with contextlib.suppress(Exception):
                await asyncio.shield(previous)  # transcripts in order
        if not final and not audio.data:
            return
        text = ""
        if audio.data:
            try:
                text = await asyncio.to_thread(self._engine.transcribe, audio)
            except Exception as e:  # the engine failed: said once, the stream goes on
                logger.warning("%s could not transcribe: %s", self._engine.name, e)
                logger.debug("the engine's error", exc_info=e)
                if final:
                    why = str(e) or type(e).__name__
                    self._queue.put_nowait(Transcript("", True, start, end, error=why))
                return
        self._queue.put_nowait(Transcript(" ".join(text.split()), final, start, end))

    async def __anext__(self) -> Transcript:
        item = await self._queue.get()
        if item is None:
            raise StopAsyncIteration
        return item

    def __aiter__(self) -> AsyncIterator[Transcript]:
        return self

    async def aclose(self) -> None:
        self._closed = True
        await self._scope.aclose()
        self._queue.put_nowait(None)
