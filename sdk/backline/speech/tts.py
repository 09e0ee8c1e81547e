"""Text-to-speech: text in, audio frames out, a sentence at a time.

An engine synthesizes one piece of text (``synthesize(text)``: an async iterator of
frames; closing it stops the synthesis). The speech output (``SpeechOutput``)
splits the agent's streaming reply into sentences (``SentenceSplitter``) and asks
for each as soon as it is complete, so the first audio plays before the reply's
text has finished. ``ThreadedTTS`` is a base for engines that synthesize in a
blocking call (a process, a local model): it runs in a worker thread and hands
frames over as they come.

An engine that can speak a piece in another of its voices at no extra cost (eSpeak
NG: a voice is an argument) is a ``VoicedTTS``: ``synthesize(text, voice=...)``, and
``alternate_voices``, voices for other speakers (several background agents, each in
its own voice).
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

from ..tasks import TaskScope
from .frames import AudioFrame

__all__ = ["SentenceSplitter", "TextToSpeech", "ThreadedTTS", "VoicedTTS"]


@runtime_checkable
class TextToSpeech(Protocol):
    """A text-to-speech engine (registered by a plugin with ``register_tts``)."""

    @property
    def name(self) -> str: ...

    @property
    def sample_rate(self) -> int: ...

    def synthesize(self, text: str) -> AsyncIterator[AudioFrame]:
        """The audio of ``text`` (a sentence or so), frame by frame, as soon as ready."""
        ...


@runtime_checkable
class VoicedTTS(TextToSpeech, Protocol):
    """An engine that speaks a piece in another of its voices, per call, cheaply."""

    @property
    def alternate_voices(self) -> Sequence[str]:
        """Voices other than its own, as distinct from it and from each other as it has,
        most distinct first: one per other speaker."""
        ...

    def synthesize(self, text: str, *, voice: str | None = None) -> AsyncIterator[AudioFrame]:
        """The audio of ``text`` in ``voice`` (None: its own)."""
        ...


class ThreadedTTS:
    """A base for engines whose synthesis is a blocking call. Subclasses set ``name`` and
    ``sample_rate`` and implement ``synthesize_sync(text)``: an iterator of frames,
    run in a worker thread (stopped between two frames when the consumer stops). One
    that takes ``synthesize_sync(text, voice=...)`` and has ``alternate_voices`` is a
    ``VoicedTTS``: ``synthesize(text, voice=...)`` passes the voice on."""

    name = "threaded"
    sample_rate = 22050

    def synthesize_sync(self, text: str) -> Iterator[AudioFrame]:  # pragma: no cover
        raise NotImplementedError

    async def synthesize(self, text: str, *, voice: str | None = None) -> AsyncIterator[AudioFrame]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[AudioFrame | BaseException | None] = asyncio.Queue()
        stop = threading.Event()
        extra: dict[str, Any] = {} if voice is None else {"voice": voice}

        def run() -> None:
            try:
                for frame in self.synthesize_sync(text, **extra):
                    if stop.is_set():
                        return
                    loop.call_soon_threadsafe(queue.put_nowait, frame)
            except BaseException as e:  # reported to the consumer
                loop.call_soon_threadsafe(queue.put_nowait, e)
            finally:
                loop.call_soon_threadsafe(queue.put_nowait, None)

        scope = TaskScope(f"{self.name} synthesis")
        worker = scope.create_task(asyncio.to_thread(run), name="synthesis")
        try:
            while True:
                item = await queue.get()
                if item is None:
                    break
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()
            await asyncio.wait([worker], timeout=5.0)


# A sentence ends at . ! ? … (and their CJK forms) followed by a space, or at a newline.
_BOUNDARY = re.compile(r"(?<=[.!?…。！？])[\"')\]]*\s+|\n+")
_MIN_CHARS = 20  # shorter pieces join the next sentence (a "Yes." alone sounds clipped)


class SentenceSplitter:
    """Cuts streaming text into sentences: ``push(delta)`` returns those completed by
    it, ``flush()`` the rest. A sentence shorter than 20 characters waits to be joined
    to the next (unless it is the last)."""

    def __init__(self, *, min_chars: int = _MIN_CHARS) -> None:
        self._buffer = ""
        self._min = min_chars

    def push(self, text: str) -> list[str]:
        self._buffer += text
        out: list[str] = []
        start = 0
        for match in _BOUNDARY.finditer(self._buffer):
            piece = self._buffer[start : match.end()]
            if len(piece.strip()) >= self._min:
                out.append(piece.strip())
                start = match.end()
        self._buffer = self._buffer[start:]
        return out

    def flush(self) -> list[str]:
        rest, self._buffer = self._buffer.strip(), ""
        return [rest] if rest else []
