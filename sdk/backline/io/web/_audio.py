"""Audio between a tab and the server, when the server listens and speaks (``--speech``).

``PageAudioSink`` is the ``AudioSink`` the tab's ``SpeechOutput`` speaks into: frames go
to the page as binary messages, a *stream* at a time (``audio_start`` announces its
sample rate; ``audio_end`` says it is complete; ``audio_clear`` stops it at once). What
has played comes from the page (``audio_played``), so an interrupted reply keeps, in
the history, only what the page really played. Audio is sent at most ``lead`` seconds
ahead of the page's playback: a page that stops reading never piles up minutes of
audio in the tab's queue, and a barge-in has little to throw away.

``MicrophoneGate`` checks the page's microphone audio at the boundary: announced rate,
whole 16-bit samples, a bounded size per message, and no faster than real time (a
little slack for the network): a page cannot make the server transcribe more audio
than a person can speak.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable

from ...speech import AudioFrame, split_frames
from . import protocol

logger = logging.getLogger("backline")

LEAD = 2.0
"""Seconds of audio sent to the page ahead of what it has played."""
CHUNK = 0.1
"""Seconds of audio per binary message to the page."""
DRAIN_FACTOR = 1.5
DRAIN_SLACK = 5.0
"""``drained()`` waits for the page's word at most ``DRAIN_FACTOR`` times the audio left
to play, plus ``DRAIN_SLACK`` seconds; then it takes the stream as played."""

MAX_INPUT_MESSAGE_SECONDS = 1.0
"""The most audio one binary message from the page may hold (the page sends 50 ms)."""
INPUT_BURST = 3.0
"""How far ahead of real time the page's audio may run (network jitter, a tab that was
paused), in seconds; more is refused."""
INPUT_SPEED = 1.05
"""The page's audio may run this much faster than the server's clock (clock drift)."""


class PageAudioSink:
    """An ``AudioSink`` whose speaker is the page (see the module doc).

    ``send(message)`` queues a JSON message for the page, ``send_audio(data)`` a binary
    one (the tab's bounded queue). ``page_played(...)`` is the page's ``audio_played``;
    ``disconnected()``: the page is gone (nothing is sent, waits end).
    """

    def __init__(
        self,
        send: Callable[[protocol.ServerMessage], None],
        send_audio: Callable[[bytes], None],
        *,
        lead: float = LEAD,
        chunk: float = CHUNK,
        drain_slack: float = DRAIN_SLACK,
    ) -> None:
        self._send = send
        self._send_audio = send_audio
        self.lead = lead
        self.chunk = chunk
        self.drain_slack = drain_slack
        self._stream = 0  # the number of the last stream started
        self._active = False  # that stream is open (started, neither cleared nor finished)
        self._rate = 0
        self._pending: deque[AudioFrame] = deque()  # written, not sent yet
        self._pending_seconds = 0.0
        self._sent = 0.0  # seconds of the stream sent to the page
        self._heard = 0.0  # seconds of the stream the page says it played
        self._before = 0.0  # seconds played of the streams before it
        self._ending = False  # drained() was called: audio_end once all is sent
        self._end_sent = False
        self._finished = asyncio.Event()  # the stream is done (played, cleared, page gone)
        self._gone = False

    # -- the AudioSink protocol -----------------------------------------------------------------
    def write(self, frame: AudioFrame) -> None:
        if self._gone:
            return
        frame = frame.to_mono()
        if not self._active or self._ending:
            self._open(frame.sample_rate)
        elif frame.sample_rate != self._rate:
            frame = frame.resample(self._rate)
        self._pending.extend(split_frames(frame, self.chunk))
        self._pending_seconds += frame.duration
        self._pump()

    def clear(self) -> None:
        self._pending.clear()
        self._pending_seconds = 0.0
        if self._active:
            if not self._gone:
                self._send(protocol.audio_clear(self._stream))
            self._finish(self._heard)

    @property
    def played(self) -> float:
        """Seconds the page has played since the tab opened (a running total)."""
        return self._before + (self._heard if self._active else 0.0)

    async def drained(self) -> None:
        """Until the page says the stream played to its end; bounded (see ``DRAIN_SLACK``):
        a page that stops answering has its stream taken as played (and stopped)."""
        if not self._active:
            return
        self._ending = True
        self._pump()
        finished, stream = self._finished, self._stream
        timeout = DRAIN_FACTOR * self.queued + self.drain_slack
        try:
            await asyncio.wait_for(finished.wait(), timeout)
        except TimeoutError:
            if self._active and self._stream == stream:
                logger.warning(
                    "web: the page did not say it played audio stream %d within %.0fs; "
                    "taking it as played",
                    stream,
                    timeout,
                )
                self.clear()

    # -- the page's side ------------------------------------------------------------------------
    @property
    def stream(self) -> int:
        """The number of the current (or last) stream; 0 before the first."""
        return self._stream

    @property
    def queued(self) -> float:
        """Seconds of the current stream written and not played yet."""
        if not self._active:
            return 0.0
        return self._sent + self._pending_seconds - self._heard

    def page_played(self, stream: int, seconds: float, *, done: bool) -> None:
        """The page's ``audio_played``: reports of another stream than the current one are
        stale and ignored; the position never goes back nor past what was sent."""
        if stream != self._stream or not self._active:
            return
        self._heard = max(self._heard, min(seconds, self._sent))
        if done and self._end_sent:
            self._finish(self._sent)
            return
        self._pump()

    def disconnected(self) -> None:
        """The page is gone: nothing more is sent; the stream ends where it was heard."""
        self._gone = True
        self.clear()

    # -- inside ---------------------------------------------------------------------------------
    def _open(self, rate: int) -> None:
        if self._active:  # written to after drained(): that stream is over for us
            self._finish(self._heard)
        self._stream += 1
        self._active = True
        self._rate = rate
        self._sent = self._heard = 0.0
        self._ending = self._end_sent = False
        self._finished = asyncio.Event()
        self._send(protocol.audio_start(self._stream, rate))

    def _pump(self) -> None:
        if not self._active or self._gone:
            return
        while self._pending and self._sent - self._heard < self.lead:
            piece = self._pending.popleft()
            self._pending_seconds -= piece.duration
            self._sent += piece.duration
            self._send_audio(piece.data)
        if not self._pending:
            self._pending_seconds = 0.0  # no float residue
            if self._ending and not self._end_sent:
                self._end_sent = True
                self._send(protocol.audio_end(self._stream))

    def _finish(self, heard: float) -> None:
        self._before += heard
        self._heard = 0.0
        self._active = False
        self._pending.clear()
        self._pending_seconds = 0.0
        self._finished.set()


class MicrophoneGate:
    """The page's microphone, checked (see the module doc): ``start(rate)`` on
    ``audio_input``, ``audio(data)`` per binary message (raises ``ProtocolError`` and
    passes nothing on when it is wrong), ``end()`` on ``audio_input_end``. Good audio goes
    to ``push(frame)``."""

    def __init__(
        self,
        push: Callable[[AudioFrame], None],
        *,
        clock: Callable[[], float] = time.monotonic,
        burst: float = INPUT_BURST,
    ) -> None:
        self._push = push
        self._clock = clock
        self.burst = burst
        self.rate: int | None = None
        self._level = 0.0  # seconds received ahead of real time
        self._at = 0.0
        self._refusing = False  # said once per run of audio refused for its speed

    def start(self, sample_rate: int) -> None:
        self.rate = sample_rate
        self._level = 0.0
        self._at = self._clock()
        self._refusing = False

    def end(self) -> int | None:
        """The microphone is off; returns the rate it was on (None: it was not on)."""
        rate, self.rate = self.rate, None
        return rate

    def audio(self, data: bytes) -> None:
        rate = self.rate
        if rate is None:
            raise protocol.ProtocolError(
                "audio before audio_input: send {type: audio_input, sample_rate} first"
            )
        if not data or len(data) % 2:
            raise protocol.ProtocolError(
                f"audio: {len(data)} bytes is not whole 16-bit samples (an even, non-zero count)"
            )
        seconds = len(data) / 2 / rate
        if seconds > MAX_INPUT_MESSAGE_SECONDS:
            raise protocol.ProtocolError(
                f"audio: {seconds:.2f} s in one message; at most {MAX_INPUT_MESSAGE_SECONDS:g} s"
            )
        now = self._clock()
        level = max(0.0, self._level - INPUT_SPEED * (now - self._at)) + seconds
        self._at = now
        if level > self.burst:
            self._level = level - seconds
            if self._refusing:
                return  # said already: refused quietly until the audio slows down
            self._refusing = True
            raise protocol.ProtocolError(
                "audio: faster than real time (more than "
                f"{self.burst:g} s ahead of the clock); the audio was dropped"
            )
        self._level = level
        self._refusing = False
        self._push(AudioFrame(data, rate))
