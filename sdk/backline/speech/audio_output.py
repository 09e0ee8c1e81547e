"""The agent's words as audio: ``SpeechOutput`` speaks a reply through a TTS engine.

It is a ``TextOutput``: the runtime writes the reply as it streams; each sentence is
synthesized as soon as it is complete (the first audio plays before the reply's text
is done) and its frames go to an ``AudioSink`` (a speaker, a file played in real time,
a web page). A model that speaks itself (``AudioDelta``) is played as it is, without
synthesis. When the reply is interrupted, synthesis stops, the sink drops what it
queued, and the playout reported back holds only what was heard: whole sentences
played, and the played share of the current one, cut at a word.

``ClockSink`` plays audio on the event loop's clock (no device): for tests, files
(``on_frame`` receives every frame, e.g. to write a WAV) and benchmarks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..llm.llm import AudioDelta
from ..tasks import TaskScope
from .frames import AudioFrame
from .output import TextOutput
from .tts import SentenceSplitter, TextToSpeech, VoicedTTS

__all__ = ["AudioSink", "ClockSink", "SpeechOutput"]

logger = logging.getLogger("backline.speech")


@runtime_checkable
class AudioSink(Protocol):
    """Where audio goes to be played."""

    def write(self, frame: AudioFrame) -> None:
        """Queue ``frame`` to play after what is queued (never blocks)."""
        ...

    def clear(self) -> None:
        """Stop now: what is queued is dropped."""
        ...

    @property
    def played(self) -> float:
        """Seconds of audio played since the sink was made (a running total)."""
        ...

    async def drained(self) -> None:
        """Wait until everything queued has played."""
        ...


_EPSILON = 1e-6  # seconds: less than a sample at any rate


class ClockSink:
    """Plays on the event loop's clock: a frame written at ``t`` while nothing is queued
    plays from ``t`` for its duration. ``on_frame(frame)`` sees every frame written
    (``on_clear()`` every stop, ``on_mix(frame)`` every frame mixed), to record or
    forward them."""

    def __init__(
        self,
        *,
        on_frame: Callable[[AudioFrame], None] | None = None,
        on_clear: Callable[[], None] | None = None,
        on_mix: Callable[[AudioFrame], None] | None = None,
    ) -> None:
        self._on_frame = on_frame
        self._on_clear = on_clear
        self._on_mix = on_mix
        self._written = 0.0  # seconds of audio queued since the start, in total
        self._busy_until = 0.0  # loop time when what is queued ends
        self._mixed_until = 0.0  # loop time when what was mixed ends
        self._changed = asyncio.Event()

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    def write(self, frame: AudioFrame) -> None:
        now = self._now()
        self._busy_until = max(self._busy_until, now) + frame.duration
        self._written += frame.duration
        if self._on_frame is not None:
            self._on_frame(frame)

    def mix(self, frame: AudioFrame) -> None:
        """Play ``frame`` now, over what is queued (a cue: an alert's sound); it delays
        nothing, and ``played`` counts only what was written."""
        self._mixed_until = max(self._mixed_until, self._now() + frame.duration)
        if self._on_mix is not None:
            self._on_mix(frame)

    def clear(self) -> None:
        now = self._now()
        left = max(0.0, self._busy_until - now)
        self._written -= left  # what had not played is gone
        self._busy_until = now
        self._changed.set()
        self._changed = asyncio.Event()
        if self._on_clear is not None:
            self._on_clear()

    @property
    def played(self) -> float:
        return self._written - max(0.0, self._busy_until - self._now())

    async def drained(self) -> None:
        while True:
            left = max(self._busy_until, self._mixed_until) - self._now()
            if left <= _EPSILON:  # (a float's last bits: a timer that short may never fire)
                return
            changed = self._changed
            try:
                await asyncio.wait_for(changed.wait(), left)
            except TimeoutError:
                pass


@dataclass(slots=True)
class _Spoken:
    text: str
    seconds: float = 0.0  # of audio queued for it so far


class SpeechOutput(TextOutput):
    """Speaks each reply through ``tts`` into ``sink`` (see the module doc).
    ``aclose()`` stops it (bounded). ``set_voice(speech_id, voice)`` speaks one reply
    in another of the engine's voices (a ``VoicedTTS``; other engines ignore it)."""

    def __init__(self, tts: TextToSpeech, sink: AudioSink) -> None:
        super().__init__()
        self.tts = tts
        self.sink = sink
        self._scope = TaskScope("speech output")
        self._splitter = SentenceSplitter()
        self._queue: asyncio.Queue[str | None] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._spoken: list[_Spoken] = []  # the sentences queued, and their audio so far
        self._voiced: _Spoken | None = None  # a reply the model speaks itself
        self._start = 0.0  # the sink's played total when the segment's audio began
        self.first_audio_at: float | None = None  # loop time of the segment's first frame
        self._voices: dict[str, str] = {}  # speech id -> its voice, until it starts

    def set_voice(self, speech_id: str, voice: str | None) -> None:
        """Speak the reply ``speech_id`` (not started yet) in ``voice`` of the engine."""
        self._voices.pop(speech_id, None)
        if voice is not None and isinstance(self.tts, VoicedTTS):
            if len(self._voices) >= 64:  # bounded: a reply that never started is forgotten
                del self._voices[next(iter(self._voices))]
            self._voices[speech_id] = voice

    def on_segment_start(self, speech_id: str) -> None:
        voice = self._voices.pop(speech_id, None)
        self._stop_worker()
        self._splitter = SentenceSplitter()
        self._spoken = []
        self._voiced = None
        self._start = self.sink.played
        self.first_audio_at = None
        self._queue = asyncio.Queue()
        self._worker = self._scope.create_task(self._speak(self._queue, voice), name="speak")

    def write_audio(self, delta: AudioDelta) -> None:
        """The model speaks this reply itself: its audio plays as it comes (nothing is
        synthesized) and its transcript is the segment's text, heard in proportion."""
        if self._speech_id is None or self._queue is None:
            return
        voiced = self._voiced
        if voiced is None:
            voiced = self._voiced = _Spoken("")
            self._spoken.append(voiced)
        if delta.transcript:
            self._parts.append(delta.transcript)
            voiced.text += delta.transcript
        if delta.data:
            frame = AudioFrame(delta.data, delta.sample_rate)
            if self.first_audio_at is None:
                self.first_audio_at = asyncio.get_running_loop().time()
            self.sink.write(frame)
            voiced.seconds += frame.duration

    def on_text(self, text: str) -> None:
        if self._queue is not None:
            for sentence in self._splitter.push(text):
                self._queue.put_nowait(sentence)

    def on_flush(self) -> None:
        if self._queue is not None:
            for sentence in self._splitter.flush():
                self._queue.put_nowait(sentence)
            self._queue.put_nowait(None)

    def on_clear(self) -> None:
        self._stop_worker()
        heard = self.heard_text()
        self.sink.clear()
        self.report_playout(heard, interrupted=True)

    def _stop_worker(self) -> None:
        worker, self._worker, self._queue = self._worker, None, None
        if worker is not None and not worker.done():
            worker.cancel()

    async def _speak(self, queue: asyncio.Queue[str | None], voice: str | None = None) -> None:
        try:
            while (sentence := await queue.get()) is not None:
                entry = _Spoken(sentence)
                self._spoken.append(entry)
                tts = self.tts
                frames = (
                    tts.synthesize(sentence)
                    if voice is None or not isinstance(tts, VoicedTTS)
                    else tts.synthesize(sentence, voice=voice)
                )
                async for frame in frames:
                    if self.first_audio_at is None:
                        self.first_audio_at = asyncio.get_running_loop().time()
                    self.sink.write(frame)
                    entry.seconds += frame.duration
            await self.sink.drained()
        except asyncio.CancelledError:
            raise
        except Exception as e:
            logger.error("speaking the reply failed: %s", e, exc_info=e)
            self.sink.clear()
            self.report_playout(self.heard_text(), interrupted=True)
            return
        self.report_playout(self.segment_text, interrupted=False)

    def heard_text(self) -> str:
        """What of the current segment has played: whole sentences, and the played
        share of the one playing, cut back to a word."""
        played = self.sink.played - self._start
        heard: list[str] = []
        for entry in self._spoken:
            sentence, seconds = entry.text, entry.seconds
            if played >= seconds - 1e-6:
                heard.append(sentence)
                played -= seconds
                continue
            if played > 0 and seconds > 0:
                cut = sentence[: int(len(sentence) * played / seconds)]
                if cut and not sentence[len(cut) : len(cut) + 1].isspace():
                    cut = cut.rsplit(" ", 1)[0] if " " in cut else ""
                if cut.strip():
                    heard.append(cut.strip())
            break
        return " ".join(heard)

    async def aclose(self) -> None:
        self._stop_worker()
        await self._scope.aclose()
