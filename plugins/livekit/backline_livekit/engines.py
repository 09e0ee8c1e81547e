"""backline's speech engines behind LiveKit's STT, TTS and VAD interfaces.

With these, a LiveKit ``AgentSession`` (``backline livekit console|dev|start``, or
your own worker) listens and speaks with any engine a backline plugin registers
(``backline speech list``): pocketsphinx, whisper, espeak, kokoro, piper, silero,
energy ... with no speech cloud.

- ``BackendSTT(engine, vad=...)``: a backline ``SpeechToText`` as a LiveKit ``stt.STT``.
  ``recognize(buffer)`` transcribes a recording; ``stream()`` (when given a LiveKit
  VAD) sends each utterance the VAD finds to the engine as it is spoken, with the
  audio just before its start, and flushes it at its end, as backline's own voice
  pipeline does: interim transcripts (an engine's ``interim_every``) and the final
  come back as LiveKit speech events. Without a VAD it is a non-streaming STT, which
  LiveKit wraps in its ``stt.StreamAdapter`` with the session's VAD.
- ``BackendTTS(engine)``: a backline ``TextToSpeech`` as a LiveKit ``tts.TTS``
  (non-streaming: ``synthesize(text)`` emits audio as the engine produces it; the
  agent's ``tts.StreamAdapter`` cuts a streamed reply into sentences for it).
- ``BackendVAD(factory)``: a backline ``VoiceActivityDetector`` as a LiveKit ``vad.VAD``:
  start and end of speech (with the speech's audio), and an inference event per frame
  (how long speech or silence has lasted), which LiveKit's barge-in reads.

An engine failing (a synthesiser that exits, a model that raises) is a LiveKit
``APIConnectionError`` (not retried), so LiveKit reports it as it reports a
provider's failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

from livekit import rtc
from livekit.agents import APIConnectionError, utils
from livekit.agents.tts import TTS, AudioEmitter, ChunkedStream, TTSCapabilities
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, APIConnectOptions
from livekit.agents.vad import VAD, VADCapabilities, VADEvent, VADEventType, VADStream

from backline.speech import TextToSpeech, VoiceActivityDetector
from backline.speech import VADStream as BacklineVADStream

from ._engine_stt import BackendSTT
from ._frames import Resampler, to_backline, to_livekit

__all__ = ["BackendSTT", "BackendTTS", "BackendVAD", "to_backline", "to_livekit"]

PROVIDER = "backline"
CLOSE_TIMEOUT = 5.0
"""Seconds an engine's synthesis gets to stop once its LiveKit stream is closed."""


# -- text to speech ---------------------------------------------------------------------
class BackendTTS(TTS[Any]):
    """A backline text-to-speech engine as a LiveKit TTS (mono, at the engine's rate)."""

    def __init__(self, engine: TextToSpeech, *, model: str | None = None) -> None:
        super().__init__(
            capabilities=TTSCapabilities(streaming=False),
            sample_rate=engine.sample_rate,
            num_channels=1,
        )
        self.engine = engine
        self._model = model
        self._label = f"{PROVIDER}.{engine.name}"

    @property
    def model(self) -> str:
        return self._model or self.engine.name

    @property
    def provider(self) -> str:
        return PROVIDER

    def synthesize(
        self, text: str, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> ChunkedStream:
        return _Synthesis(tts=self, input_text=text, conn_options=conn_options)


class _Synthesis(ChunkedStream):
    async def _run(self, output_emitter: AudioEmitter) -> None:
        tts = self._tts
        assert isinstance(tts, BackendTTS)
        rate = tts.sample_rate
        output_emitter.initialize(
            request_id=utils.shortuuid("backline_tts_"),
            sample_rate=rate,
            num_channels=1,
            mime_type="audio/pcm",
        )
        audio = tts.engine.synthesize(self.input_text)
        try:
            async for frame in audio:
                if frame.sample_rate != rate or frame.channels != 1:
                    frame = frame.resample(rate)
                output_emitter.push(frame.data)
        except Exception as e:
            raise APIConnectionError(
                f"{tts.engine.name} could not speak: {e}", retryable=False
            ) from e
        finally:
            await _close(audio)
        output_emitter.flush()


async def _close(audio: AsyncIterator[Any]) -> None:
    """Stop an engine's synthesis (its generator's cleanup), bounded."""
    close = getattr(audio, "aclose", None)
    if close is None:
        return
    with contextlib.suppress(Exception):
        await asyncio.wait_for(close(), CLOSE_TIMEOUT)


# -- voice activity ---------------------------------------------------------------------
PREFIX_PADDING = 0.5
"""Seconds of audio before the start of speech given with its events (as Silero does)."""
KEPT = 1.5
"""Seconds of recent audio kept while nobody speaks."""
MAX_SPEECH = 60.0
"""Seconds of one speech kept for its end event; longer speech is cut there."""


class BackendVAD(VAD):
    """A backline voice activity detector as a LiveKit VAD.

    ``factory`` builds the detector (``EnergyVAD``, or a registered engine's
    ``entry.build``): one per stream, since a detector keeps what it heard (Silero's
    recurrent state, a noise floor), and a LiveKit session runs two streams at once
    (its own, and ``BackendSTT``'s)."""

    def __init__(self, factory: Callable[[], VoiceActivityDetector]) -> None:
        self._factory = factory
        self._spare: VoiceActivityDetector | None = factory()
        engine = self._spare
        rate = getattr(engine, "sample_rate", None)
        window = getattr(engine, "window", None)
        interval = window / rate if rate and window else 0.02
        super().__init__(capabilities=VADCapabilities(update_interval=interval))
        self.name = engine.name
        self._label = f"{PROVIDER}.{engine.name}"

    @property
    def model(self) -> str:
        return self.name

    @property
    def provider(self) -> str:
        return PROVIDER

    def stream(self) -> VADStream:
        engine, self._spare = self._spare or self._factory(), None
        return _VADStream(self, engine)


class _VADStream(VADStream):
    """Frames in; backline's start/end events out as LiveKit's, plus an inference event
    per frame. The engine scores in a worker thread (a model may take a millisecond)."""

    def __init__(self, vad: BackendVAD, engine: VoiceActivityDetector) -> None:
        self._engine = engine
        self._threshold = float(getattr(engine, "threshold", 0.5))
        self._resampler = Resampler(getattr(engine, "sample_rate", None))
        self._reset()
        super().__init__(vad)

    def _reset(self) -> None:
        self._inner: BacklineVADStream = self._engine.stream()
        self._time = 0.0  # seconds of audio pushed
        self._samples = 0
        self._speaking = False
        self._speech_start = 0.0  # where the current speech began (seconds)
        self._speech_end = 0.0  # where the last one ended
        self._raw_speech = 0.0  # consecutive windows above / below the threshold
        self._raw_silence = 0.0
        self._audio: deque[tuple[float, rtc.AudioFrame]] = deque()  # (start, frame)
        self._buffered = 0.0  # seconds in _audio while speaking

    async def _main_task(self) -> None:
        async for item in self._input_ch:
            if isinstance(item, self._FlushSentinel):
                self._reset()  # a hard boundary: the next frame starts afresh
                continue
            await self._frame(item)

    async def _frame(self, frame: rtc.AudioFrame) -> None:
        started = time.perf_counter()
        events = []
        for part in self._resampler.push(frame):
            events += await asyncio.to_thread(self._inner.push, to_backline(part))
        inference = time.perf_counter() - started
        at, self._time = self._time, self._time + frame.duration
        self._samples += frame.samples_per_channel
        self._keep(at, frame)
        probability = float(getattr(self._inner, "probability", 0.0))
        if probability >= self._threshold:
            self._raw_speech, self._raw_silence = self._raw_speech + frame.duration, 0.0
        else:
            self._raw_speech, self._raw_silence = 0.0, self._raw_silence + frame.duration
        self._send(VADEventType.INFERENCE_DONE, inference, [frame], probability=probability)
        for event in events:
            if event.kind == "start":
                self._speaking, self._speech_start = True, event.at
                self._trim(event.at - PREFIX_PADDING)
                self._buffered = sum(f.duration for _, f in self._audio)
                self._send(VADEventType.START_OF_SPEECH, inference, self._speech())
            else:
                self._speaking, self._speech_end = False, event.at
                self._send(VADEventType.END_OF_SPEECH, inference, self._speech())
                self._trim(self._time)

    def _keep(self, at: float, frame: rtc.AudioFrame) -> None:
        if self._speaking:
            if self._buffered < MAX_SPEECH:
                self._audio.append((at, frame))
                self._buffered += frame.duration
            return
        self._audio.append((at, frame))
        self._trim(self._time - KEPT)

    def _trim(self, since: float) -> None:
        while self._audio and self._audio[0][0] + self._audio[0][1].duration <= since:
            self._audio.popleft()

    def _speech(self) -> list[rtc.AudioFrame]:
        frames = [f for _, f in self._audio]
        return [rtc.combine_audio_frames(frames)] if frames else []

    def _send(
        self,
        kind: VADEventType,
        inference: float,
        frames: list[rtc.AudioFrame],
        *,
        probability: float = 0.0,
    ) -> None:
        if kind == VADEventType.END_OF_SPEECH:
            speech = self._speech_end - self._speech_start
        elif self._speaking:
            speech = self._time - self._speech_start
        else:
            speech = 0.0
        silence = 0.0 if self._speaking else self._time - self._speech_end
        self._event_ch.send_nowait(
            VADEvent(
                type=kind,
                samples_index=self._samples,
                timestamp=self._time,
                speech_duration=max(0.0, speech),
                silence_duration=max(0.0, silence),
                frames=frames,
                probability=probability,
                inference_duration=inference,
                speaking=self._speaking,
                raw_accumulated_silence=self._raw_silence,
                raw_accumulated_speech=self._raw_speech,
            )
        )
