"""Fake speech providers implementing LiveKit's interfaces (LiveKit ships none in its wheel).

The test drives the user's side: ``vad.start_speech()`` / ``vad.end_speech()``
and ``stt.final("text")``. The TTS turns text into silence (a fixed duration per
character) and records every text it was asked to speak, in order; it can be told
to fail. The audio output plays in real time and reports how far it got, so
LiveKit's transcript synchronizer can say what the user heard.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from livekit import rtc
from livekit.agents import APIConnectionError, APIConnectOptions, LanguageCode, utils
from livekit.agents.stt import (
    STT,
    RecognizeStream,
    SpeechData,
    SpeechEvent,
    SpeechEventType,
    STTCapabilities,
)
from livekit.agents.tts import TTS, AudioEmitter, ChunkedStream, TTSCapabilities
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS
from livekit.agents.utils.audio import AudioBuffer
from livekit.agents.vad import VAD, VADCapabilities, VADEvent, VADEventType, VADStream
from livekit.agents.voice.io import AudioInput, AudioOutput, AudioOutputCapabilities

SAMPLE_RATE = 16000


def silence(seconds: float, sample_rate: int = SAMPLE_RATE) -> rtc.AudioFrame:
    samples = max(1, int(sample_rate * seconds))
    return rtc.AudioFrame(
        data=b"\x00\x00" * samples,
        sample_rate=sample_rate,
        num_channels=1,
        samples_per_channel=samples,
    )


# -- voice activity -----------------------------------------------------------------------
class FakeVAD(VAD):
    """Voice activity on command: every stream reports what the test says."""

    def __init__(self) -> None:
        super().__init__(capabilities=VADCapabilities(update_interval=0.02))
        self._streams: list[FakeVADStream] = []
        self._speaking_since: float | None = None

    def stream(self) -> VADStream:
        stream = FakeVADStream(self)
        self._streams.append(stream)
        return stream

    def start_speech(self) -> None:
        self._speaking_since = time.time()
        self._send(VADEventType.START_OF_SPEECH, speaking=True)

    def end_speech(self) -> None:
        self._send(VADEventType.END_OF_SPEECH, speaking=False)
        self._speaking_since = None

    def _send(self, kind: VADEventType, *, speaking: bool) -> None:
        since = self._speaking_since or time.time()
        for stream in self._streams:
            stream.event(kind, speech_duration=time.time() - since, speaking=speaking)


class FakeVADStream(VADStream):
    def __init__(self, vad: FakeVAD) -> None:
        super().__init__(vad)
        self._fake = vad
        self._speaking = False

    def event(self, kind: VADEventType, *, speech_duration: float, speaking: bool) -> None:
        self._speaking = speaking
        self._event_ch.send_nowait(
            VADEvent(
                type=kind,
                samples_index=0,
                timestamp=time.time(),
                speech_duration=speech_duration,
                silence_duration=0.0 if speaking else 0.3,
                speaking=speaking,
                probability=1.0 if speaking else 0.0,
            )
        )

    async def _main_task(self) -> None:
        # While the user speaks LiveKit reads inference events for the speech length
        # (its interruption rule counts on them); otherwise frames are only consumed.
        async for _ in self._input_ch:
            if self._speaking and self._fake._speaking_since is not None:
                self.event(
                    VADEventType.INFERENCE_DONE,
                    speech_duration=time.time() - self._fake._speaking_since,
                    speaking=True,
                )


# -- speech to text ---------------------------------------------------------------------
class FakeSTT(STT):
    """A streaming STT whose transcripts the test provides."""

    def __init__(self) -> None:
        super().__init__(capabilities=STTCapabilities(streaming=True, interim_results=False))
        self._streams: list[FakeRecognizeStream] = []

    async def _recognize_impl(
        self, buffer: AudioBuffer, *, language: Any = None, conn_options: APIConnectOptions
    ) -> SpeechEvent:
        raise NotImplementedError("FakeSTT only streams")

    def stream(
        self, *, language: Any = None, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> RecognizeStream:
        stream = FakeRecognizeStream(stt=self, conn_options=conn_options)
        self._streams.append(stream)
        return stream

    def final(self, text: str) -> None:
        for stream in self._streams:
            stream.transcript(text)


class FakeRecognizeStream(RecognizeStream):
    def transcript(self, text: str) -> None:
        self._event_ch.send_nowait(
            SpeechEvent(
                type=SpeechEventType.FINAL_TRANSCRIPT,
                alternatives=[SpeechData(language=LanguageCode("en"), text=text, confidence=1.0)],
            )
        )

    async def _run(self) -> None:
        async for _ in self._input_ch:
            pass


# -- text to speech ---------------------------------------------------------------------
class FakeTTS(TTS):
    """Speaks text as silence, ``seconds_per_char`` long; records what it was given."""

    def __init__(self, *, seconds_per_char: float = 0.01) -> None:
        super().__init__(
            capabilities=TTSCapabilities(streaming=False), sample_rate=SAMPLE_RATE, num_channels=1
        )
        self.seconds_per_char = seconds_per_char
        self.texts: list[str] = []
        self.fail_when: str | None = None  # a text containing this fails (after some audio)

    def synthesize(
        self, text: str, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> ChunkedStream:
        self.texts.append(text)
        return FakeChunkedStream(tts=self, input_text=text, conn_options=conn_options)


class FakeChunkedStream(ChunkedStream):
    async def _run(self, output_emitter: AudioEmitter) -> None:
        tts = self._tts
        assert isinstance(tts, FakeTTS)
        output_emitter.initialize(
            request_id=utils.shortuuid("fake_tts_"),
            sample_rate=SAMPLE_RATE,
            num_channels=1,
            mime_type="audio/pcm",
        )
        if tts.fail_when is not None and tts.fail_when in self.input_text:
            raise APIConnectionError("the fake TTS provider went away", retryable=False)
        frame = silence(tts.seconds_per_char * max(1, len(self.input_text)))
        output_emitter.push(bytes(frame.data))
        output_emitter.flush()


# -- audio in and out -------------------------------------------------------------------
class FakeAudioInput(AudioInput):
    """A microphone hearing silence, 20 ms a frame, in real time."""

    def __init__(self) -> None:
        super().__init__(label="fake microphone")

    async def __anext__(self) -> rtc.AudioFrame:
        await asyncio.sleep(0.02)
        return silence(0.02)


class RecordedAudioInput(AudioInput):
    """A microphone hearing ``frames`` (then silence), each in its own time, in real time."""

    def __init__(self, frames: list[rtc.AudioFrame]) -> None:
        super().__init__(label="recorded microphone")
        self._frames = list(frames)
        self.heard = asyncio.Event()  # every frame was read

    async def __anext__(self) -> rtc.AudioFrame:
        frame = self._frames.pop(0) if self._frames else silence(0.02)
        if not self._frames:
            self.heard.set()
        await asyncio.sleep(frame.duration)
        return frame


class FakeAudioOutput(AudioOutput):
    """A speaker that plays in real time and reports how much it played; ``frames``:
    everything it was given, in order."""

    def __init__(self) -> None:
        super().__init__(label="fake speaker", capabilities=AudioOutputCapabilities(pause=False))
        self.frames: list[rtc.AudioFrame] = []
        self._started_at: float | None = None
        self._pushed = 0.0
        self._finish: asyncio.TimerHandle | None = None

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        await super().capture_frame(frame)
        self.frames.append(frame)
        if self._started_at is None:
            self._started_at = time.time()
            self.on_playback_started(created_at=self._started_at)
        self._pushed += frame.duration

    def flush(self) -> None:
        super().flush()
        if self._started_at is None:
            return
        remaining = max(0.0, self._pushed - (time.time() - self._started_at))
        self._finish = asyncio.get_running_loop().call_later(remaining, self._finished, False)

    def clear_buffer(self) -> None:
        if self._started_at is None:
            return
        if self._finish is not None:
            self._finish.cancel()
        self._finished(True)

    def _finished(self, interrupted: bool) -> None:
        assert self._started_at is not None
        played = min(self._pushed, time.time() - self._started_at)
        self._started_at, self._pushed, self._finish = None, 0.0, None
        self.on_playback_finished(playback_position=played, interrupted=interrupted)
