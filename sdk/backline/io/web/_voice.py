"""A tab whose speech is the server's: the page's microphone becomes user turns, the
agent's replies become audio for the page.

The page's audio (checked by ``MicrophoneGate``) goes to a ``SpeechInput`` on the
tab's session: voice activity, transcripts, barge-in after enough speech. The
replies go through a ``SpeechOutput`` into a ``PageAudioSink``; ``WebOutput`` shows
their text on the page and reports the playout ``SpeechOutput`` measured (only
what the page played). The engines are shared by every tab; the streams are the
tab's own, and ``aclose()`` ends them (bounded).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...app import session_speech
from ...background import background_voices
from ...speech import AudioFrame, PlayoutResult, SpeechInput, SpeechOutput, split_frames
from . import protocol
from ._audio import MicrophoneGate, PageAudioSink

if TYPE_CHECKING:
    from ...session import Session
    from ._speech import WebSpeech

END_SILENCE = 1.0
"""Seconds of silence that end an utterance when the microphone goes off, for a voice
activity detector that does not say how much it needs (``min_silence``)."""
FRAME = 0.02


class SpokenOutput(SpeechOutput):
    """A ``SpeechOutput`` that tells ``on_played(result)`` how each segment ended."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.on_played: Callable[[PlayoutResult], None] | None = None

    def on_playout(self, result: PlayoutResult) -> None:
        if self.on_played is not None:
            self.on_played(result)


class TabVoice:
    """The server's speech in one tab (see the module doc): ``start()`` once the session
    has started; the page's audio messages through ``audio_input``, ``audio``,
    ``audio_input_end`` and ``audio_played``; ``aclose()`` after the session closed."""

    def __init__(
        self,
        session: Session[Any],
        speech: WebSpeech,
        send: Callable[[protocol.ServerMessage], None],
        send_audio: Callable[[bytes], None],
    ) -> None:
        assert speech.ready and speech.tts is not None and speech.vad is not None
        self._session = session
        self.sink = PageAudioSink(send, send_audio)
        self.output = SpokenOutput(speech.tts, self.sink)
        background_voices(session, self.output)  # several backgrounds: a voice each
        stt = session_speech(speech.stt, session.llm)
        self.input = SpeechInput(session, stt=stt, vad=speech.vad)
        self.microphone = MicrophoneGate(self._push)
        self._end_silence = float(getattr(speech.vad, "min_silence", END_SILENCE - 0.1)) + 0.1
        self._started = False
        self._closed = False

    def start(self) -> None:
        self.input.start()
        self._started = True

    # -- the page's messages ----------------------------------------------------------------------
    def audio_input(self, sample_rate: int) -> None:
        self.microphone.start(sample_rate)

    def audio(self, data: bytes) -> None:
        """A binary message: the microphone's audio (raises ``ProtocolError`` if wrong)."""
        self.microphone.audio(data)

    def audio_input_end(self) -> None:
        """The microphone went off: what the user was saying ends (as if they paused),
        and the user is listening again."""
        rate = self.microphone.end()
        if rate is not None and self.input.speaking:
            for frame in split_frames(AudioFrame.silence(self._end_silence, rate), FRAME):
                self._push(frame)
        if not self.input.speaking:
            self._session.user_stopped_speaking()

    def audio_played(self, stream: int, seconds: float, *, done: bool) -> None:
        self.sink.page_played(stream, seconds, done=done)

    def _push(self, frame: AudioFrame) -> None:
        if self._started and not self._closed:
            self.input.push(frame)

    # -- the end --------------------------------------------------------------------------------
    def disconnected(self) -> None:
        """The page is gone: the reply playing ends where the page had got to."""
        self.sink.disconnected()
        self.output.clear()

    async def aclose(self) -> None:
        """Stop listening and speaking (bounded: each part bounds its own close)."""
        self._closed = True
        try:
            await self.input.aclose()
        finally:
            await self.output.aclose()
