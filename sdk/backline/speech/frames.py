"""``AudioFrame``: one piece of audio, 16-bit signed PCM, little-endian, interleaved.

Every engine, pipeline and front end of ``backline.speech`` speaks this one type.
A frame knows its sample rate and channel count; ``duration`` follows from them.
Plain ``bytes`` and the standard library only: no numpy needed to pass audio around.
"""

from __future__ import annotations

import array
import math
import sys
import wave
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["AudioFrame", "read_wav", "split_frames", "write_wav"]

SAMPLE_WIDTH = 2  # bytes: 16-bit PCM


@dataclass(frozen=True, slots=True)
class AudioFrame:
    """``data``: 16-bit signed little-endian PCM samples, channels interleaved."""

    data: bytes
    sample_rate: int
    channels: int = 1

    def __post_init__(self) -> None:
        if self.sample_rate <= 0:
            raise ValueError(f"sample_rate must be positive, got {self.sample_rate}")
        if self.channels <= 0:
            raise ValueError(f"channels must be positive, got {self.channels}")
        if len(self.data) % (SAMPLE_WIDTH * self.channels):
            raise ValueError(
                f"an audio frame holds whole 16-bit samples per channel: {len(self.data)} bytes "
                f"is not a multiple of {SAMPLE_WIDTH * self.channels}"
            )

    @property
    def samples_per_channel(self) -> int:
        return len(self.data) // (SAMPLE_WIDTH * self.channels)

    @property
    def duration(self) -> float:
        """Seconds of audio."""
        return self.samples_per_channel / self.sample_rate

    def samples(self) -> array.array[int]:
        """The samples as signed integers (interleaved when there are several channels)."""
        out = array.array("h")
        out.frombytes(self.data)
        if sys.byteorder == "big":  # pragma: no cover - little-endian machines
            out.byteswap()
        return out

    @classmethod
    def from_samples(
        cls, samples: Iterable[int], sample_rate: int, channels: int = 1
    ) -> AudioFrame:
        values = array.array("h", (max(-32768, min(32767, int(s))) for s in samples))
        if sys.byteorder == "big":  # pragma: no cover
            values.byteswap()
        return cls(values.tobytes(), sample_rate, channels)

    @classmethod
    def silence(cls, seconds: float, sample_rate: int, channels: int = 1) -> AudioFrame:
        n = round(seconds * sample_rate)
        return cls(bytes(n * SAMPLE_WIDTH * channels), sample_rate, channels)

    def rms(self) -> float:
        """The root mean square of the samples (0 to 32768): how loud the frame is."""
        values = self.samples()
        if not values:
            return 0.0
        return math.sqrt(sum(v * v for v in values) / len(values))

    def to_mono(self) -> AudioFrame:
        """The channels averaged into one."""
        if self.channels == 1:
            return self
        values = self.samples()
        c = self.channels
        mixed = [sum(values[i : i + c]) // c for i in range(0, len(values), c)]
        return AudioFrame.from_samples(mixed, self.sample_rate, 1)

    def resample(self, sample_rate: int) -> AudioFrame:
        """The same audio at ``sample_rate`` (mono; linear interpolation: fine for speech
        between the usual rates, 8 to 48 kHz)."""
        frame = self.to_mono()
        if sample_rate == frame.sample_rate:
            return frame
        values = frame.samples()
        n_out = round(len(values) * sample_rate / frame.sample_rate)
        if not values or n_out == 0:
            return AudioFrame(b"", sample_rate, 1)
        step = (len(values) - 1) / max(n_out - 1, 1)
        out: list[int] = []
        for i in range(n_out):
            pos = i * step
            j = int(pos)
            frac = pos - j
            nxt = values[j + 1] if j + 1 < len(values) else values[j]
            out.append(round(values[j] + (nxt - values[j]) * frac))
        return AudioFrame.from_samples(out, sample_rate, 1)


def split_frames(frame: AudioFrame, seconds: float) -> Iterator[AudioFrame]:
    """``frame`` cut into frames of ``seconds`` each (the last one may be shorter)."""
    step = max(1, round(seconds * frame.sample_rate)) * SAMPLE_WIDTH * frame.channels
    for i in range(0, len(frame.data), step):
        yield AudioFrame(frame.data[i : i + step], frame.sample_rate, frame.channels)


def read_wav(path: str | Path) -> AudioFrame:
    """A 16-bit PCM WAV file as one frame."""
    with wave.open(str(path), "rb") as f:
        if f.getsampwidth() != SAMPLE_WIDTH:
            raise ValueError(
                f"{path}: {8 * f.getsampwidth()}-bit samples; backline reads 16-bit PCM WAV"
            )
        return AudioFrame(f.readframes(f.getnframes()), f.getframerate(), f.getnchannels())


def write_wav(path: str | Path, frames: Iterable[AudioFrame]) -> None:
    """Write frames (of one sample rate and channel count) as a 16-bit PCM WAV file."""
    frames = list(frames)
    rate = frames[0].sample_rate if frames else 16000
    channels = frames[0].channels if frames else 1
    with wave.open(str(path), "wb") as f:
        f.setnchannels(channels)
        f.setsampwidth(SAMPLE_WIDTH)
        f.setframerate(rate)
        for frame in frames:
            if frame.sample_rate != rate or frame.channels != channels:
                raise ValueError("write_wav: every frame must have the same rate and channels")
            f.writeframes(frame.data)
