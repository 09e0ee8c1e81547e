"""Echo: with open speakers the microphone hears the agent, and the agent must not
hear and interrupt itself.

An ``EchoCanceller`` sits between the microphone and ``SpeechInput``: it is told the
far end (``far_end(frame)``: what the speaker plays, as it plays; ``Speaker`` and
``WavOutput`` call their ``on_played`` with it) and cleans the near end
(``process(frame)``: a microphone frame in, the frame without the agent's voice out).

- ``echo_canceller()``: WebRTC's audio processing (acoustic echo cancellation, AEC3)
  through the ``livekit`` real-time package (the SDK's extra ``echo``:
  ``pip install 'backline[echo]'``), or ``None``; ``echo_unavailable()`` says why.
- ``EchoGuard``: the fallback when there is none: while the agent's voice plays, only
  sound clearly louder than its echo passes, and barge-in needs longer speech and
  more words (``guard.apply(speech_input)``). Headphones are better.

The canceller takes one 10 ms far-end block for each 10 ms near-end block (silence
when nothing plays), so the two streams stay in step however the far end arrives. It
runs on every block, also while nothing plays (about 2-3 % of one core at 16 kHz on a
small machine): AEC3 that skips blocks comes back with a burst of noise. Use it with
open speakers; with headphones there is no echo.
"""

from __future__ import annotations

import importlib
from collections import deque
from typing import Any, Protocol, runtime_checkable

from ._pcm import SAMPLE_WIDTH, Resampler, downmix
from .audio_input import SpeechInput
from .frames import AudioFrame

__all__ = [
    "EchoCanceller",
    "EchoGuard",
    "WebRTCEchoCanceller",
    "echo_canceller",
    "echo_unavailable",
]


INSTALL = "pip install 'backline[echo]' (the livekit package)"
LEARN = 3.0  # seconds of echo EchoGuard learns the room's coupling from
ENVELOPE = 0.5  # seconds: EchoGuard expects echo of what played that long ago at most
MIN_FAR = 300.0  # EchoGuard learns only while the far end is at least this loud (RMS)
MAX_FAR = 1.0  # seconds of far end kept ahead of the near end (more: the oldest dropped)


@runtime_checkable
class EchoCanceller(Protocol):
    """Removes the agent's voice from the microphone's frames."""

    @property
    def name(self) -> str: ...

    def far_end(self, frame: AudioFrame) -> None:
        """What the speaker plays, as it plays (any rate)."""
        ...

    def process(self, frame: AudioFrame) -> AudioFrame:
        """A microphone frame in, the same audio without the echo out (mono)."""
        ...


class _Rated:
    """Frames of any rate and channel count → mono bytes at ``rate``."""

    def __init__(self, rate: int) -> None:
        self.rate = rate
        self._resampler: Resampler | None = None

    def convert(self, frame: AudioFrame) -> bytes:
        data = downmix(frame.data, frame.channels)
        if frame.sample_rate == self.rate:
            return data
        if self._resampler is None or self._resampler.source != frame.sample_rate:
            self._resampler = Resampler(frame.sample_rate, self.rate)
        return self._resampler.push(data)


_unavailable: list[str | None] = []  # cached: the import is tried once


def echo_unavailable() -> str | None:
    """Why ``echo_canceller()`` gives ``None`` here (one sentence), or ``None`` if it
    works. Tries the import once (the ``livekit`` package loads a native library)."""
    if not _unavailable:
        try:
            importlib.import_module("livekit.rtc")
        except ImportError:
            _unavailable.append(f"echo cancellation needs the livekit package: {INSTALL}")
        except OSError as e:  # the package without its native library
            _unavailable.append(
                f"echo cancellation needs livekit's native library ({' '.join(str(e).split())}):"
                f" reinstall it: {INSTALL}"
            )
        else:
            _unavailable.append(None)
    return _unavailable[0]


def echo_canceller(*, sample_rate: int = 16000, delay: float = 0.05) -> WebRTCEchoCanceller | None:
    """WebRTC's echo canceller if the ``livekit`` package is installed, else ``None``
    (``echo_unavailable()`` says why). See ``WebRTCEchoCanceller`` for the options."""
    if echo_unavailable() is not None:
        return None
    return WebRTCEchoCanceller(sample_rate=sample_rate, delay=delay)


class WebRTCEchoCanceller:
    """WebRTC's AEC3 through ``livekit.rtc.AudioProcessingModule``, fed 10 ms blocks.

    ``sample_rate``: the rate it works at (a multiple of 100 Hz; 16000 is what speech
    engines take): near-end frames of another rate are resampled, and ``process``
    returns frames at this rate. ``delay``: seconds between the far end being told and
    its echo reaching ``process`` (the speaker's plus the microphone's ``latency`` is
    a good value; AEC3 finds the exact delay itself). ``process`` returns what is
    complete: the same length when frames are whole 10 ms (20 ms frames are), else up
    to 10 ms is carried to the next call. Not thread-safe: call it from one thread
    (the event loop)."""

    name = "webrtc"

    def __init__(self, *, sample_rate: int = 16000, delay: float = 0.05) -> None:
        if sample_rate <= 0 or sample_rate % 100:
            raise ValueError(f"sample_rate must be a multiple of 100 Hz, got {sample_rate}")
        why = echo_unavailable()
        if why is not None:
            raise RuntimeError(why)
        from livekit import rtc

        self._rtc: Any = rtc
        self._apm = rtc.AudioProcessingModule(echo_cancellation=True)
        self.sample_rate = sample_rate
        self.delay = delay
        self._block = sample_rate // 100 * SAMPLE_WIDTH  # bytes in 10 ms
        self._near_in = _Rated(sample_rate)
        self._far_in = _Rated(sample_rate)
        self._near = bytearray()  # near end not yet processed (under 10 ms)
        self._far = bytearray()  # far end not yet paired with a near-end block
        self.far_dropped = 0.0  # seconds of far end dropped: it ran ahead of the near end

    def far_end(self, frame: AudioFrame) -> None:
        self._far += self._far_in.convert(frame)
        excess = len(self._far) - int(MAX_FAR * self.sample_rate) * SAMPLE_WIDTH
        if excess > 0:
            excess -= excess % SAMPLE_WIDTH
            del self._far[:excess]
            self.far_dropped += excess / SAMPLE_WIDTH / self.sample_rate

    def process(self, frame: AudioFrame) -> AudioFrame:
        self._near += self._near_in.convert(frame)
        block, rate, rtc = self._block, self.sample_rate, self._rtc
        samples = block // SAMPLE_WIDTH
        out = bytearray()
        if len(self._near) >= block:
            self._apm.set_stream_delay_ms(max(0, round(self.delay * 1000)))
        while len(self._near) >= block:
            near = bytearray(self._near[:block])
            del self._near[:block]
            far = bytearray(self._far[:block])  # what played meanwhile; silence if nothing
            del self._far[: len(far)]
            if len(far) < block:
                far += bytes(block - len(far))
            self._apm.process_reverse_stream(rtc.AudioFrame(far, rate, 1, samples))
            processed = rtc.AudioFrame(near, rate, 1, samples)
            self._apm.process_stream(processed)
            out += processed.data.cast("B")
        return AudioFrame(bytes(out), rate)


class EchoGuard:
    """The fallback without an echo canceller (see the module doc).

    While the far end plays, a frame passes only if it is ``louder_db`` louder than
    the loudest echo expected: the far end's level over the last ``ENVELOPE`` seconds
    (the echo comes that much later at most) times ``coupling``, how loud the speaker
    arrives at the microphone. ``coupling`` starts at 1 (the echo as loud as what
    plays) and, after a second of the far end playing, is learned: the 90th
    percentile of that ratio over the last ``LEARN`` seconds of frames judged echo
    (the user's voice, which passes, does not teach it). Frames that do not pass
    become silence; when nothing plays, frames pass as they are.
    ``apply(speech_input)`` also makes barge-in need ``min_interruption_speech``
    seconds of speech and ``min_interruption_words`` words (``SpeechInput``'s
    defaults are 0.5 s and 2)."""

    name = "guard"

    def __init__(
        self,
        *,
        louder_db: float = 10.0,
        min_interruption_speech: float = 1.0,
        min_interruption_words: int = 4,
    ) -> None:
        self.louder_db = louder_db
        self.min_interruption_speech = min_interruption_speech
        self.min_interruption_words = min_interruption_words
        self.coupling = 1.0  # the loudest echo over the far end's level, as learned
        self._near_time = 0.0  # seconds of near end processed
        self._far: deque[tuple[float, float]] = deque()  # (near time when told, rms)
        self._ratios: deque[tuple[float, float]] = deque()  # (seconds, echo/far) heard

    def apply(self, speech_input: SpeechInput) -> None:
        """Make ``speech_input``'s barge-in need this guard's longer speech and words."""
        speech_input.min_interruption_speech = self.min_interruption_speech
        speech_input.min_interruption_words = self.min_interruption_words

    def far_end(self, frame: AudioFrame) -> None:
        rms = frame.rms()
        if rms > 0:
            self._far.append((self._near_time, rms))

    def process(self, frame: AudioFrame) -> AudioFrame:
        mono = frame.to_mono()
        self._near_time += mono.duration
        while self._far and self._far[0][0] < self._near_time - ENVELOPE:
            self._far.popleft()
        if not self._far:
            return mono  # nothing played lately: no echo
        level = max(rms for _, rms in self._far)
        near = mono.rms()
        if near > self.coupling * level * 10 ** (self.louder_db / 20):
            return mono  # clearly louder than any echo: the user
        if level >= MIN_FAR:
            self._learn(mono.duration, near / level)
        return AudioFrame(bytes(len(mono.data)), mono.sample_rate)

    def _learn(self, seconds: float, ratio: float) -> None:
        ratios = self._ratios
        ratios.append((seconds, ratio))
        total = sum(s for s, _ in ratios)
        while total - ratios[0][0] >= LEARN:
            total -= ratios.popleft()[0]
        if total >= 1.0:
            ordered = sorted(r for _, r in ratios)
            self.coupling = max(ordered[int(0.9 * (len(ordered) - 1))], 1e-3)
