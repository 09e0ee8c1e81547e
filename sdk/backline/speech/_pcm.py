"""Small PCM helpers shared by the devices, files and echo modules (16-bit, no numpy).

``Resampler`` converts a stream of mono chunks from one rate to another with linear
interpolation, carrying its position across chunks, so cutting a stream into frames
does not click at every frame boundary the way resampling each frame alone does.
"""

from __future__ import annotations

import array
import sys

from .frames import AudioFrame

SAMPLE_WIDTH = 2


def to_array(data: bytes | bytearray) -> array.array[int]:
    values = array.array("h")
    values.frombytes(data)
    if sys.byteorder == "big":  # pragma: no cover - little-endian machines
        values.byteswap()
    return values


def to_bytes(values: array.array[int]) -> bytes:
    if sys.byteorder == "big":  # pragma: no cover
        values = array.array("h", values)
        values.byteswap()
    return values.tobytes()


def downmix(data: bytes, channels: int) -> bytes:
    """Interleaved ``channels`` → mono (the channels averaged)."""
    if channels == 1:
        return data
    return AudioFrame(data, 1, channels).to_mono().data


def upmix(data: bytes, channels: int) -> bytes:
    """Mono → ``channels`` interleaved copies."""
    if channels == 1:
        return data
    values = to_array(data)
    out = array.array("h", bytes(len(values) * channels * SAMPLE_WIDTH))
    for c in range(channels):
        out[c::channels] = values
    return to_bytes(out)


class Resampler:
    """Mono 16-bit PCM from ``source`` Hz to ``target`` Hz, chunk by chunk.

    Output sample ``k`` sits at input position ``k * source / target`` (exact integer
    arithmetic: no drift over hours); the last input sample of a chunk is kept to
    interpolate towards the next one."""

    def __init__(self, source: int, target: int) -> None:
        if source <= 0 or target <= 0:
            raise ValueError(f"sample rates must be positive: {source}, {target}")
        self.source = source
        self.target = target
        self._out = 0  # output samples made so far
        self._base = 0  # the input index of _tail[0]
        self._tail = array.array("h")  # input samples still needed

    def push(self, data: bytes) -> bytes:
        """The output for ``data`` (16-bit mono); may be a sample shorter or longer than
        the exact ratio, the difference carried to the next chunk."""
        if self.source == self.target:
            return bytes(data)
        values = self._tail + to_array(data)
        src, dst = self.source, self.target
        end = self._base + len(values)  # input indexes available: [_base, end)
        out = array.array("h")
        k = self._out
        while True:
            num = k * src
            j, rem = divmod(num, dst)
            if j + 1 >= end and not (rem == 0 and j < end):
                break
            a = values[j - self._base]
            if rem:
                b = values[j + 1 - self._base]
                out.append(a + ((b - a) * rem) // dst)
            else:
                out.append(a)
            k += 1
        self._out = k
        keep = max(0, min(len(values), (k * src) // dst - self._base))
        self._tail = values[keep:]
        self._base += keep
        return to_bytes(out)

    def reset(self) -> None:
        """Forget the stream (after a cut: the next chunk starts a new one)."""
        self._out = 0
        self._base = 0
        self._tail = array.array("h")
