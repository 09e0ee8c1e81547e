"""The user's voice to a Gemini Live session: ``use_audio()`` and its STT engine.

The session is configured with automatic activity detection off: backline's voice
pipeline (``SpeechInput``: its VAD, push-to-talk, barge-in rules) decides where an
utterance starts and ends. Each stream of the engine sends, per utterance,
``activity_start`` at its first frame, its frames (16 kHz mono PCM,
``audio/pcm;rate=16000``) as ``send_realtime_input(audio=...)``, and ``activity_end``
at ``flush``. The server's ``input_transcription`` comes back as the stream's interim
transcripts; the final one is given when the model starts answering (or the
transcription says it is finished), and the session then holds it as a user turn.

The reply: with automatic activity detection off, Gemini Live answers the user's
activity by itself once ``activity_end`` arrives (there is no "respond" message, and
client content would interrupt that answer). So the answer is registered as a model
turn nobody claimed yet; the runtime's ``chat()`` for the heard turn, whose context
then ends with the final transcript the session already holds, claims that turn and
streams it (see ``GeminiLiveLLM._request``). One response per utterance, never two.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Any, Protocol

from google.genai import types

from backline.llm import LLMError
from backline.speech import AudioFrame, SpeechToText, STTStream, Transcript
from backline.tasks import TaskScope

from ._live_state import LiveState
from ._live_turns import Hearing, Listener, Turn

log = logging.getLogger("backline_google.live")

INPUT_RATE = 16000  # Gemini Live's audio in: 16-bit PCM, 16 kHz, mono
INPUT_MIME = f"audio/pcm;rate={INPUT_RATE}"
_START = object()  # the utterance's first frame: activity_start
_END = object()  # its flush: activity_end
_MAX_CHUNK = 64 * 1024  # bytes of PCM per realtime input message (2 s)


class LiveVoice(LiveState):
    """The host side of the hearing streams (a base of ``GeminiLiveLLM``, which opens the
    session and sends: ``_voice_session``, ``_send_realtime``)."""

    hearing_timeout: float
    _generation: int

    def use_audio(self) -> SpeechToText:
        """Answer with the model's voice from now on (``AudioDelta``, 24 kHz PCM, with its
        transcript), and give the STT engine whose streams carry the user's voice to the
        model. A session opened for text is replaced by one for audio at the next use."""
        self._audio = True
        return LiveHearing(self)

    @property
    def audio(self) -> bool:
        """Whether replies are spoken (``use_audio()`` was called)."""
        return self._audio

    async def _voice_session(self) -> None:  # pragma: no cover - GeminiLiveLLM's
        raise NotImplementedError

    async def _send_realtime(self, what: str, **realtime_input: Any) -> None:  # pragma: no cover
        raise NotImplementedError

    # -- what a hearing stream calls ----------------------------------------------
    async def start_activity(self, listener: Listener) -> Hearing:
        """An utterance starts: the session it goes to (opened if none), its hearing."""
        await self._voice_session()
        previous = self._hearing
        if previous is not None:
            self._heard(previous)  # a new utterance: what the last one said is final
        hearing = self._hearing = Hearing(listener, self._generation)
        await self._send_realtime("activityStart", activity_start=types.ActivityStart())
        return hearing

    async def send_audio(self, hearing: Hearing, pcm: bytes) -> None:
        self._check(hearing)
        await self._send_realtime("audio", audio=types.Blob(data=pcm, mime_type=INPUT_MIME))

    async def end_activity(self, hearing: Hearing) -> None:
        """The utterance ended: the model's answer to it is expected (see the module doc)."""
        self._check(hearing)
        self._turns.append(Turn(hearing=hearing))
        self._changed()
        await self._send_realtime("activityEnd", activity_end=types.ActivityEnd())

    def stop_hearing(self, hearing: Hearing) -> None:
        """No final transcript in time: what was heard so far is final, and an answer
        that has not started is not waited for."""
        for turn in list(self._turns):
            if turn.hearing is hearing and not turn.started and not turn.done:
                turn.end()
                self._turns.remove(turn)
        self._heard(hearing)
        self._changed()

    def _check(self, hearing: Hearing) -> None:
        if hearing.generation != self._generation:
            raise LLMError(
                "Gemini Live: the session this utterance went to was lost", retryable=True
            )


class Host(Protocol):
    """What a hearing stream needs of the model (``GeminiLiveLLM``)."""

    hearing_timeout: float

    async def start_activity(self, listener: Listener) -> Hearing: ...

    async def send_audio(self, hearing: Hearing, pcm: bytes) -> None: ...

    async def end_activity(self, hearing: Hearing) -> None: ...

    def stop_hearing(self, hearing: Hearing) -> None: ...


class LiveHearing:
    """The speech-to-text engine whose streams carry the user's voice to the model."""

    name = "gemini-live"

    def __init__(self, host: Host) -> None:
        self._host = host

    def stream(self) -> STTStream:
        return HearingStream(self._host)


class _Utterance:
    """One utterance of a stream: its hearing on the session, and its final transcript
    (given once the utterance ended and the transcription is final)."""

    __slots__ = ("ended", "failed", "given", "hearing", "result", "stream")

    def __init__(self, stream: HearingStream) -> None:
        self.stream = stream
        self.hearing: Hearing | None = None
        self.failed: str | None = None  # lost: no more of its audio is sent
        self.result: Transcript | None = None
        self.ended = False
        self.given = False

    # -- Listener (from the model's reader) -----------------------------------------
    def interim(self, text: str) -> None:
        self.stream._put(Transcript(text, final=False))

    def final(self, text: str, error: str | None) -> None:
        if error is not None and self.failed is None:
            self.failed = error
        if self.result is None:
            self.result = Transcript(text, final=True, error=error)
        self.stream._give(self)


class HearingStream:
    """One microphone's utterances to the model (see the module doc)."""

    def __init__(self, host: Host) -> None:
        self._host = host
        self._ops: deque[bytes | object] = deque()  # starts, audio and ends, in order
        self._out: asyncio.Queue[Transcript | None] = asyncio.Queue()
        self._scope = TaskScope("gemini-live hearing")
        self._sender: asyncio.Task[None] | None = None
        self._speaking = False  # frames were pushed since the last flush
        self._utterance: _Utterance | None = None  # the one being sent
        self._closed = False

    # -- STTStream ----------------------------------------------------------------
    def push(self, frame: AudioFrame) -> None:
        if self._closed:
            return
        if not self._speaking:
            self._speaking = True
            self._ops.append(_START)
        self._ops.append(frame.resample(INPUT_RATE).data)
        self._wake()

    def flush(self) -> None:
        if self._closed:
            return
        if not self._speaking:
            self._put(Transcript("", final=True))  # nothing was said
            return
        self._speaking = False
        self._ops.append(_END)
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
        self._out.put_nowait(None)
        await self._scope.aclose()

    # -- transcripts ----------------------------------------------------------------
    def _put(self, transcript: Transcript) -> None:
        if not self._closed and (transcript.final or transcript.text.strip()):
            self._out.put_nowait(transcript)

    def _give(self, utterance: _Utterance) -> None:
        if utterance.ended and utterance.result is not None and not utterance.given:
            utterance.given = True
            self._put(utterance.result)

    # -- the sender -------------------------------------------------------------------
    def _wake(self) -> None:
        if self._sender is None or self._sender.done():
            self._sender = self._scope.create_task(self._send(), name="send the user's voice")

    async def _send(self) -> None:
        ops = self._ops
        while ops:
            op = ops.popleft()
            if op is _START:
                await self._start()
            elif op is _END:
                await self._end()
            else:
                assert isinstance(op, bytes)
                pcm = bytearray(op)
                while ops and isinstance(ops[0], bytes) and len(pcm) < _MAX_CHUNK:
                    more = ops.popleft()  # consecutive audio: one message
                    assert isinstance(more, bytes)
                    pcm += more
                await self._audio(bytes(pcm))

    async def _start(self) -> None:
        utterance = self._utterance = _Utterance(self)
        try:
            utterance.hearing = await self._host.start_activity(utterance)
        except LLMError as e:
            utterance.failed = str(e)

    async def _audio(self, pcm: bytes) -> None:
        utterance = self._utterance
        if utterance is None or utterance.hearing is None or utterance.failed is not None:
            return  # the utterance is lost: the rest of it is not sent
        try:
            await self._host.send_audio(utterance.hearing, pcm)
        except LLMError as e:
            utterance.failed = str(e)

    async def _end(self) -> None:
        utterance, self._utterance = self._utterance, None
        if utterance is None:
            return
        if utterance.failed is None and utterance.hearing is not None:
            try:
                await self._host.end_activity(utterance.hearing)
            except LLMError as e:
                utterance.failed = str(e)
        utterance.ended = True
        if utterance.failed is not None:
            if utterance.result is None or utterance.result.error is None:
                utterance.result = Transcript("", final=True, error=utterance.failed)
            log.warning("the user's words did not reach Gemini Live: %s", utterance.failed)
        self._give(utterance)
        if not utterance.given:
            self._scope.create_task(self._await_words(utterance), name="the user's words")

    async def _await_words(self, utterance: _Utterance) -> None:
        """The final transcript, within ``hearing_timeout`` (then the text so far)."""
        hearing = utterance.hearing
        assert hearing is not None
        try:
            async with asyncio.timeout(self._host.hearing_timeout):
                await hearing.done.wait()
        except TimeoutError:
            log.info("no final transcript within %gs: what was heard", self._host.hearing_timeout)
            self._host.stop_hearing(hearing)
        if utterance.result is None:
            utterance.result = Transcript("", final=True)
        self._give(utterance)
