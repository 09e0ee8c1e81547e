"""Mixing a short sound over queued audio: what ``mix(frame)`` of a sink does (a cue,
such as an alert's sound, plays at once, over the agent's voice, delaying nothing)."""

from __future__ import annotations

from itertools import zip_longest

from .frames import AudioFrame


def mix_pcm(under: bytes, over: bytes, sample_rate: int) -> bytes:
    """``over`` added to ``under`` sample by sample (16-bit mono, clipped): as long as
    the longer of the two."""
    low = AudioFrame(under, sample_rate).samples()
    high = AudioFrame(over, sample_rate).samples()
    summed = (a + b for a, b in zip_longest(low, high, fillvalue=0))
    return AudioFrame.from_samples(summed, sample_rate).data
