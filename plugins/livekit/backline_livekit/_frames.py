"""Audio frames both ways: ``livekit.rtc.AudioFrame`` <-> ``backline.speech.AudioFrame``.

Both are 16-bit signed little-endian PCM, channels interleaved, so a frame crosses
as its bytes (one copy, no numpy). Resampling to an engine's rate is LiveKit's
native resampler (``rtc.AudioResampler``), not backline's pure-Python one, since
audio flows through it all the time.
"""

from __future__ import annotations

from livekit import rtc

from backline.speech import AudioFrame


def to_backline(frame: rtc.AudioFrame) -> AudioFrame:
    """A LiveKit frame as a backline frame (the same samples)."""
    return AudioFrame(bytes(frame.data), frame.sample_rate, frame.num_channels)


def to_livekit(frame: AudioFrame) -> rtc.AudioFrame:
    """A backline frame as a LiveKit frame (the same samples)."""
    return rtc.AudioFrame(
        data=frame.data,
        sample_rate=frame.sample_rate,
        num_channels=frame.channels,
        samples_per_channel=frame.samples_per_channel,
    )


class Resampler:
    """LiveKit frames to mono frames at ``rate``: frames already there pass through;
    others go through LiveKit's resampler, made for the first rate seen (and made
    again if the input's rate changes)."""

    def __init__(self, rate: int | None) -> None:
        self.rate = rate
        self._resampler: rtc.AudioResampler | None = None
        self._from: tuple[int, int] | None = None

    def push(self, frame: rtc.AudioFrame) -> list[rtc.AudioFrame]:
        if self.rate is None or (frame.sample_rate == self.rate and frame.num_channels == 1):
            return [frame]
        if frame.num_channels != 1:
            frame = to_livekit(to_backline(frame).to_mono())
        source = (frame.sample_rate, frame.num_channels)
        if self._resampler is None or self._from != source:
            self._resampler = rtc.AudioResampler(
                frame.sample_rate, self.rate, quality=rtc.AudioResamplerQuality.QUICK
            )
            self._from = source
        return self._resampler.push(frame)
