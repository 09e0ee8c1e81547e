"""``BackendSTT``: a backline speech-to-text engine as a LiveKit STT (see ``engines``).

backline's engines expect what backline's voice pipeline gives them: the audio of
one utterance (from a little before its start), then ``flush()`` at its end, when
an engine that transcribes whole utterances (pocketsphinx, whisper) gives its
final. The stream here does the same with a LiveKit VAD: frames go to the engine
only while the VAD hears speech (with the recent audio before the start it
reports), and its end flushes the engine.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import replace
from typing import Any

from livekit import rtc
from livekit.agents import APIConnectionError, APITimeoutError, LanguageCode, utils
from livekit.agents.stt import (
    STT,
    RecognitionUsage,
    RecognizeStream,
    SpeechData,
    SpeechEvent,
    SpeechEventType,
    STTCapabilities,
)
from livekit.agents.types import (
    DEFAULT_API_CONNECT_OPTIONS,
    NOT_GIVEN,
    APIConnectOptions,
    NotGivenOr,
)
from livekit.agents.utils import AudioBuffer
from livekit.agents.vad import VAD, VADEventType, VADStream

from backline.speech import SpeechToText, STTStream, Transcript

from ._frames import to_backline

PROVIDER = "backline"


class BackendSTT(STT[Any]):
    """A backline speech-to-text engine as a LiveKit STT.

    ``vad``: a LiveKit VAD that finds the utterances of ``stream()`` (LiveKit's Silero,
    or ``BackendVAD``); without one the STT does not stream and LiveKit's agent wraps
    it in ``stt.StreamAdapter`` with the session's VAD. ``language``: what the engine
    was built for, reported with its transcripts (LiveKit's ``language=`` arguments
    are not used: a backline engine's language is chosen when it is built).
    ``timeout``: seconds an utterance may take to transcribe, past its own length
    (default: the connection options' timeout, 10 s).
    """

    def __init__(
        self,
        engine: SpeechToText,
        *,
        vad: VAD | None = None,
        model: str | None = None,
        language: str | None = None,
        timeout: float | None = None,
    ) -> None:
        streaming = vad is not None
        super().__init__(
            capabilities=STTCapabilities(streaming=streaming, interim_results=streaming)
        )
        self.engine = engine
        self.vad = vad
        self.language = language
        self.timeout = timeout
        self._model = model
        self._label = f"{PROVIDER}.{engine.name}"

    @property
    def model(self) -> str:
        return self._model or self.engine.name

    @property
    def provider(self) -> str:
        return PROVIDER

    def _deadline(self, seconds: float, conn_options: APIConnectOptions) -> float:
        """How long transcribing ``seconds`` of audio may take."""
        base = self.timeout if self.timeout is not None else conn_options.timeout
        return base + 3 * seconds

    def _speech_data(self, transcript: Transcript, offset: float = 0.0) -> SpeechData:
        return SpeechData(
            language=LanguageCode(transcript.language or self.language or ""),
            text=" ".join(transcript.text.split()),
            start_time=offset + transcript.start,
            end_time=offset + transcript.end,
            confidence=transcript.confidence if transcript.confidence is not None else 0.0,
        )

    async def _recognize_impl(
        self,
        buffer: AudioBuffer,
        *,
        language: NotGivenOr[str] = NOT_GIVEN,
        conn_options: APIConnectOptions,
    ) -> SpeechEvent:
        frames = buffer if isinstance(buffer, list) else [buffer]
        audio = to_backline(rtc.combine_audio_frames(frames)) if frames else None
        seconds = audio.duration if audio is not None else 0.0
        stream = self.engine.stream()
        try:
            if audio is not None:
                stream.push(audio)
            stream.flush()
            transcript = await asyncio.wait_for(
                _final(stream), self._deadline(seconds, conn_options)
            )
        except TimeoutError:
            raise APITimeoutError(
                f"{self.engine.name} did not transcribe {seconds:.1f} s of audio in time",
                retryable=False,
            ) from None
        except Exception as e:
            raise APIConnectionError(
                f"{self.engine.name} could not transcribe: {e}", retryable=False
            ) from e
        finally:
            await stream.aclose()
        return SpeechEvent(
            type=SpeechEventType.FINAL_TRANSCRIPT,
            request_id=utils.shortuuid("backline_stt_"),
            alternatives=[self._speech_data(transcript)],
        )

    def stream(
        self,
        *,
        language: NotGivenOr[str] = NOT_GIVEN,
        conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
    ) -> RecognizeStream:
        if self.vad is None:
            return super().stream(language=language, conn_options=conn_options)
        return _Stream(self, self.vad, conn_options)


async def _final(stream: STTStream) -> Transcript:
    async for transcript in stream:
        if transcript.final:
            return transcript
    raise RuntimeError("the engine's stream ended without a transcript")


class _Stream(RecognizeStream):
    """Utterances found by a LiveKit VAD, transcribed by a backline engine.

    The engine hears the audio the VAD's events carry (as LiveKit's Silero and
    ``BackendVAD`` give it): a start of speech brings the speech so far with the audio
    just before it, each inference while speaking its frames, and the end of speech
    flushes the engine. So the engine follows the VAD exactly, however far the input
    runs ahead of it."""

    def __init__(self, stt: BackendSTT, vad: VAD, conn_options: APIConnectOptions) -> None:
        rate = getattr(stt.engine, "sample_rate", None)
        super().__init__(
            stt=stt,
            conn_options=conn_options,
            sample_rate=rate if isinstance(rate, int) else NOT_GIVEN,
        )
        self._backend = stt
        self._vad = vad
        self._time = 0.0  # seconds of audio the VAD has processed
        self._speaking = False
        self._utterances: deque[tuple[float, float]] = deque()  # (start, end) not yet final
        self._utterance_seconds = 0.0
        self._flushed = 0  # utterances handed to the engine
        self._finals = 0  # finals it gave back
        self._caught_up = asyncio.Event()
        self._caught_up.set()

    async def _run(self) -> None:
        engine = self._backend.engine.stream()
        vad = self._vad.stream()
        closed = False
        try:
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(self._transcripts(engine), name="backline transcripts")
                listening = tasks.create_task(self._listen(vad, engine), name="backline vad")
                await self._forward(vad)
                await listening  # the VAD has seen every frame
                if self._speaking:  # the input ended mid-speech: that utterance is over
                    self._end_utterance(engine)
                await self._wait_for_finals()
                closed = True
                await engine.aclose()  # ends the transcripts
        except BaseExceptionGroup as group:  # one of the tasks failed: its error
            raise group.exceptions[0] from None
        finally:
            await vad.aclose()
            if not closed:
                await engine.aclose()

    async def _forward(self, vad: VADStream) -> None:
        # LiveKit's flush (this STT does not ask for one: no ``manual_flush``) resets the
        # VAD: an utterance it cuts ends at the next start of speech, or the input's end.
        async for item in self._input_ch:
            if isinstance(item, self._FlushSentinel):
                vad.flush()
            else:
                vad.push_frame(item)
        vad.end_input()

    async def _listen(self, vad: VADStream, engine: STTStream) -> None:
        async for event in vad:
            if event.type == VADEventType.INFERENCE_DONE:
                if self._speaking:
                    self._push(engine, event.frames)
                else:
                    self._time += sum(f.duration for f in event.frames)
            elif event.type == VADEventType.START_OF_SPEECH:
                if self._speaking:  # the VAD was flushed mid-speech: that utterance is over
                    self._end_utterance(engine)
                self._speaking = True
                lead = sum(f.duration for f in event.frames)
                self._utterances.append((max(0.0, self._time - lead), -1.0))
                self._utterance_seconds = 0.0
                self._push(engine, event.frames, counted=True)
                self._event_ch.send_nowait(SpeechEvent(type=SpeechEventType.START_OF_SPEECH))
            elif event.type == VADEventType.END_OF_SPEECH and self._speaking:
                ended = time.time() - event.silence_duration - event.inference_duration
                self._event_ch.send_nowait(
                    SpeechEvent(type=SpeechEventType.END_OF_SPEECH, speech_end_time=ended)
                )
                self._end_utterance(engine)

    def _push(
        self, engine: STTStream, frames: list[rtc.AudioFrame], *, counted: bool = False
    ) -> None:
        """Frames to the engine; ``counted``: they are already on the VAD's clock."""
        for frame in frames:
            if not counted:
                self._time += frame.duration
            self._utterance_seconds += frame.duration
            engine.push(to_backline(frame))

    def _end_utterance(self, engine: STTStream) -> None:
        self._speaking = False
        start, _ = self._utterances.pop()
        self._utterances.append((start, self._time))
        self._flushed += 1
        self._caught_up.clear()
        engine.flush()

    async def _wait_for_finals(self) -> None:
        """Until the engine has answered every utterance (bounded: a hung engine)."""
        deadline = self._backend._deadline(self._utterance_seconds, self._conn_options)
        try:
            await asyncio.wait_for(self._caught_up.wait(), deadline)
        except TimeoutError:
            raise APITimeoutError(
                f"{self._backend.engine.name} did not finish transcribing in time",
                retryable=False,
            ) from None

    async def _transcripts(self, engine: STTStream) -> None:
        async for transcript in engine:
            # The engine hears utterances only: its times are mapped back onto the stream's.
            start, end = self._utterances[0] if self._utterances else (self._time, -1.0)
            if transcript.final:
                if self._utterances:
                    self._utterances.popleft()
                self._finals += 1
                if self._finals >= self._flushed:
                    self._caught_up.set()
            end = end if end >= 0 else self._time
            timed = replace(transcript, start=start, end=end)
            data = self._backend._speech_data(timed, self.start_time_offset)
            if not data.text:
                continue
            if not transcript.final:
                self._event_ch.send_nowait(
                    SpeechEvent(type=SpeechEventType.INTERIM_TRANSCRIPT, alternatives=[data])
                )
                continue
            self._event_ch.send_nowait(
                SpeechEvent(
                    type=SpeechEventType.FINAL_TRANSCRIPT,
                    request_id=utils.shortuuid("backline_stt_"),
                    alternatives=[data],
                )
            )
            usage = RecognitionUsage(audio_duration=end - start)
            self._event_ch.send_nowait(
                SpeechEvent(type=SpeechEventType.RECOGNITION_USAGE, recognition_usage=usage)
            )
