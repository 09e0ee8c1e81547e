"""Voice activity detection: when the user starts and stops speaking.

An engine scores short windows of audio (``FrameVAD.probability``: 0 to 1);
``VADStream`` turns the scores into events with hysteresis: speech starts once
``min_speech`` seconds score above ``threshold``, and ends after ``min_silence``
seconds below it, so a click does not start a turn and a pause between words
does not end one. ``EnergyVAD`` is the zero-download detector: a loudness gate
that adapts to the room's noise floor.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from .frames import AudioFrame

__all__ = ["EnergyVAD", "FrameVAD", "VADEvent", "VADStream", "VoiceActivityDetector"]


@dataclass(frozen=True)
class VADEvent:
    """``start``: speech began (``at``: seconds of audio from the stream's start, the
    start of the speech); ``end``: it ended (``speech``: how long it lasted)."""

    kind: Literal["start", "end"]
    at: float
    speech: float = 0.0


@runtime_checkable
class VoiceActivityDetector(Protocol):
    """A voice activity detector (registered by a plugin with ``register_vad``)."""

    @property
    def name(self) -> str: ...

    def stream(self) -> VADStream: ...


class FrameVAD:
    """A base for detectors that score fixed windows: set ``name``, ``sample_rate`` and
    ``window`` (samples), implement ``probability(window_frame)``."""

    name = "frame"
    sample_rate = 16000
    window = 512
    threshold = 0.5
    min_speech = 0.25
    min_silence = 0.5

    def probability(self, frame: AudioFrame) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def reset(self) -> None:
        """Forget what was heard (a new stream)."""

    def stream(self) -> VADStream:
        """A stream with a state of its own: it scores with a shallow copy of this
        detector, reset, so streams of one detector (a front end's conversations) never
        share what they heard (a noise floor, a model's recurrent state: ``reset`` and
        ``probability`` rebind those attributes, never change them in place)."""
        detector = copy.copy(self)
        detector.reset()
        return VADStream(detector)


class VADStream:
    """Frames in, ``VADEvent``s out (synchronously: scoring a window is cheap)."""

    def __init__(self, vad: FrameVAD) -> None:
        self._vad = vad
        self._rate = vad.sample_rate
        self._pending = b""
        self._time = 0.0  # seconds of audio scored
        self._window_seconds = vad.window / vad.sample_rate
        self.speaking = False
        self._run = 0.0  # how long the current candidate (speech or silence) has lasted
        self._speech_start = 0.0
        self._last_probability = 0.0

    @property
    def probability(self) -> float:
        """The last window's score."""
        return self._last_probability

    def push(self, frame: AudioFrame) -> list[VADEvent]:
        if frame.sample_rate != self._rate or frame.channels != 1:
            frame = frame.resample(self._rate)
        data = self._pending + frame.data
        step = self._vad.window * 2
        events: list[VADEvent] = []
        i = 0
        while i + step <= len(data):
            window = AudioFrame(data[i : i + step], self._rate)
            i += step
            p = self._last_probability = self._vad.probability(window)
            self._time += self._window_seconds
            voiced = p >= self._vad.threshold
            if not self.speaking:
                # Speech starts after min_speech of voiced windows; an unvoiced one (a
                # stop consonant, a breath) takes one back rather than starting over,
                # so the start stays where the speech began.
                if voiced:
                    if self._run == 0.0:
                        self._speech_start = self._time - self._window_seconds
                    self._run += self._window_seconds
                else:
                    self._run = max(0.0, self._run - self._window_seconds)
                if self._run >= self._vad.min_speech - 1e-9:
                    self.speaking = True
                    self._run = 0.0
                    events.append(VADEvent("start", self._speech_start))
            else:
                # Speech ends after min_silence of unvoiced windows in a row.
                self._run = 0.0 if voiced else self._run + self._window_seconds
                if self._run >= self._vad.min_silence - 1e-9:
                    self.speaking = False
                    self._run = 0.0
                    end = self._time - self._vad.min_silence
                    events.append(VADEvent("end", end, end - self._speech_start))
        self._pending = data[i:]
        return events


class EnergyVAD(FrameVAD):
    """A loudness gate with an adaptive noise floor: no model, no download.

    A window is speech when its loudness is ``ratio`` times the noise floor (and over
    ``min_rms``); the floor follows the quietest recent windows. Good enough with a
    headset; an open room wants a model (Silero).
    """

    name = "energy"
    window = 320  # 20 ms at 16 kHz

    def __init__(self, *, ratio: float = 3.0, min_rms: float = 300.0) -> None:
        self.ratio = ratio
        self.min_rms = min_rms
        self._floor = min_rms / ratio

    def reset(self) -> None:
        self._floor = self.min_rms / self.ratio

    def probability(self, frame: AudioFrame) -> float:
        rms = frame.rms()
        if rms < self._floor * 1.5:
            self._floor = 0.95 * self._floor + 0.05 * max(rms, 1.0)  # quiet: follow it
        gate = max(self._floor * self.ratio, self.min_rms)
        return min(1.0, rms / (2 * gate))  # 0.5 at the gate
