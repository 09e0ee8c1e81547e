"""The user's voice as turns: ``SpeechInput`` turns microphone frames into user turns.

Frames go through voice activity detection (VAD); while the user speaks they go to
speech-to-text, from a little before the start the VAD reports (the VAD confirms a
start only after some speech, and the first syllable must not be lost). The
session hears: the user started speaking (without interrupting yet), interim
transcripts, the user stopped speaking, and each final transcript as a user turn.

Barge-in needs more than a sound: while the agent speaks, the user interrupts it
only after ``min_interruption_speech`` seconds of speech, or once an interim
transcript has ``min_interruption_words`` words, so a cough or a "mm-hm" does not cut
the agent off. A final transcript with words is a turn in any case (it interrupts
the agent as any turn does); an empty one (noise) changes nothing.

An utterance longer than ``max_utterance`` seconds (a monologue, or noise the
detector takes for speech) is transcribed in pieces of that length, so speech-to-text
never holds more; ``end_utterance()`` ends one at once (push-to-talk let go).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Protocol

from ..tasks import TaskScope
from .frames import AudioFrame
from .stt import SpeechToText, STTStream
from .vad import VADStream, VoiceActivityDetector

__all__ = ["SpeechInput", "TurnSink"]

logger = logging.getLogger("backline.speech")

KEPT = 1.5  # seconds of recent audio kept while nobody speaks
LEAD = 0.25  # seconds before the start the VAD reports that go to speech-to-text


class TurnSink(Protocol):
    """What the voice pipeline drives (``backline.Session`` is one)."""

    @property
    def agent_state(self) -> str: ...

    def user_started_speaking(self, *, interrupt: bool = True) -> None: ...

    def user_stopped_speaking(self) -> None: ...

    def push_interim_transcript(self, text: str) -> None: ...

    def push_user_turn(self, text: str) -> None: ...

    def interrupt(self, *, force: bool = False) -> None: ...


class SpeechInput:
    """Microphone frames in (``push``), the session driven (see the module doc).
    ``start()`` then ``push(frame)`` for each frame; ``aclose()`` stops it (bounded)."""

    def __init__(
        self,
        session: TurnSink,
        *,
        stt: SpeechToText,
        vad: VoiceActivityDetector,
        min_interruption_speech: float = 0.5,
        min_interruption_words: int = 2,
        max_utterance: float = 30.0,
    ) -> None:
        if not max_utterance > 0:
            raise ValueError("max_utterance must be a positive number of seconds")
        self._session = session
        self._stt_engine = stt
        self._vad_engine = vad
        self.min_interruption_speech = min_interruption_speech
        self.min_interruption_words = min_interruption_words
        self.max_utterance = max_utterance
        self._scope = TaskScope("speech input")
        self._stt: STTStream | None = None
        self._vad: VADStream | None = None
        self._recent: deque[tuple[float, AudioFrame]] = deque()  # (start, frame)
        self._time = 0.0  # seconds of audio pushed
        self._speaking = False
        self._speech_seconds = 0.0  # of the utterance so far
        self._utterance_seconds = 0.0  # of it not yet given to speech-to-text whole
        self._interrupted = False  # this utterance interrupted the agent already
        self.speech_ended_at: float | None = None  # loop time of the last VAD end
        self.turns = 0
        self._pending = 0  # utterances ended whose final transcript is still to come
        self._settled = asyncio.Event()
        self._settled.set()

    @property
    def speaking(self) -> bool:
        return self._speaking

    def start(self) -> None:
        self._stt = self._stt_engine.stream()
        self._vad = self._vad_engine.stream()
        self._scope.create_task(self._transcripts(self._stt), name="transcripts")

    def push(self, frame: AudioFrame) -> None:
        """One frame from the microphone (any rate; mono or not)."""
        vad, stt = self._vad, self._stt
        if vad is None or stt is None:
            raise RuntimeError("SpeechInput.start() first")
        start, self._time = self._time, self._time + frame.duration
        for event in vad.push(frame):
            if event.kind == "start":
                self._speaking = True
                self._speech_seconds = 0.0
                self._utterance_seconds = 0.0
                self._interrupted = False
                for at, earlier in self._recent:
                    if at + earlier.duration > event.at - LEAD:
                        stt.push(earlier)
                self._recent.clear()
                self._session.user_started_speaking(interrupt=False)
            elif self._speaking:  # (not after end_utterance(): that one has ended)
                stt.push(frame)
                self._end()
                return
        if self._speaking:
            stt.push(frame)
            self._speech_seconds += frame.duration
            self._utterance_seconds += frame.duration
            if self._speech_seconds >= self.min_interruption_speech:
                self._barge_in()
            if self._utterance_seconds >= self.max_utterance:
                self._transcribe_so_far()  # a long monologue, or noise: bounded
        else:
            self._recent.append((start, frame))
            while self._recent and self._recent[0][0] < self._time - KEPT:
                self._recent.popleft()

    def end_utterance(self) -> None:
        """End what the user is saying now (push-to-talk let go), without waiting for
        the voice activity detector to hear the silence after it."""
        if self._speaking and self._stt is not None:
            self._end()

    def _end(self) -> None:
        self._speaking = False
        self.speech_ended_at = asyncio.get_running_loop().time()
        self._transcribe_so_far()
        self._session.user_stopped_speaking()

    def _transcribe_so_far(self) -> None:
        assert self._stt is not None
        self._stt.flush()
        self._utterance_seconds = 0.0
        self._pending += 1
        self._settled.clear()

    def _barge_in(self) -> None:
        if self._interrupted or self._session.agent_state != "speaking":
            return
        self._interrupted = True
        self._session.interrupt()

    async def _transcripts(self, stream: STTStream) -> None:
        async for transcript in stream:
            text = transcript.text.strip()
            if not transcript.final:
                if text:
                    self._session.push_interim_transcript(text)
                    if len(text.split()) >= self.min_interruption_words > 0:
                        self._barge_in()
                continue
            self._pending = max(0, self._pending - 1)
            if transcript.error is not None:
                logger.warning("the user's words were lost: %s", transcript.error)
            if text:
                self.turns += 1
                try:
                    self._session.push_user_turn(text)
                except RuntimeError as e:  # the session closed meanwhile
                    logger.debug("a transcript after close: %s", e)
            if not self._pending:
                self._settled.set()

    async def settled(self) -> None:
        """Wait until every utterance that ended has its final transcript pushed (the
        user may be speaking again: that one is not waited for). Bound it yourself."""
        await self._settled.wait()

    async def aclose(self) -> None:
        stt, self._stt = self._stt, None
        self._vad = None
        self._settled.set()  # nothing more will come
        if stt is not None:
            await stt.aclose()
        await self._scope.aclose()
