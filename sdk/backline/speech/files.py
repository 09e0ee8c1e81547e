"""Audio from and to WAV files, in place of the microphone and the speaker: for tests,
demos and bug reports that replay the same way every time.

- ``WavInput``: a recording played as the microphone, an ``AudioSource``. In real time
  on the event loop's clock (a virtual clock in tests): frame ``i`` arrives when a
  microphone would deliver it, ``(i + 1) * frame_seconds`` after ``start()``; then
  ``then_silence`` seconds of silence so the last turn can end, then the iteration
  stops. Resampled to ``sample_rate``, mono.
- ``WavOutput``: an ``AudioSink`` that plays on the loop's clock (a ``ClockSink``) and
  writes to the file exactly what was played, on the conversation's timeline: audio
  cleared before it played is not in the file, and the time between replies is
  silence, so second ``t`` of the file is second ``t`` of the conversation (from
  ``start()``, else from the first write). Next to a ``WavInput`` started at the same
  moment, the two files line up.
"""

from __future__ import annotations

import asyncio
import math
import wave
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..tasks import TaskScope
from ._mixing import mix_pcm
from ._pcm import SAMPLE_WIDTH, Resampler
from .audio_output import ClockSink
from .frames import AudioFrame, read_wav

__all__ = ["WavInput", "WavOutput"]

TICK = 0.02  # seconds between WavOutput's checks of what has played, while audio plays


class WavInput:
    """A WAV file (16-bit PCM) played as the microphone: an ``AudioSource`` (see the
    module doc). ``realtime=False`` gives the frames as fast as they are taken (the
    loop still gets a turn between frames). ``then_silence``: seconds of silence after
    the recording (finite; 0 for none)."""

    def __init__(
        self,
        path: str | Path,
        *,
        sample_rate: int = 16000,
        realtime: bool = True,
        frame_seconds: float = 0.02,
        then_silence: float = 2.0,
    ) -> None:
        if sample_rate <= 0 or frame_seconds <= 0:
            raise ValueError("sample_rate and frame_seconds must be positive")
        if not (math.isfinite(then_silence) and then_silence >= 0):
            raise ValueError(f"then_silence is seconds, finite and >= 0; got {then_silence}")
        self.path = Path(path)
        self.sample_rate = sample_rate
        self.realtime = realtime
        self.frame_seconds = frame_seconds
        self.then_silence = then_silence
        self.duration = 0.0  # seconds of the recording (once started)
        self._audio = b""
        self._frame_bytes = max(1, round(frame_seconds * sample_rate)) * SAMPLE_WIDTH
        self._position = 0  # bytes given
        self._end = 0  # bytes to give: the recording, then the silence
        self._started_at: float | None = None
        self._closed = False

    async def start(self) -> None:
        """Read the file (a ``ValueError`` or ``OSError`` saying what is wrong with it)
        and start the clock: the first frame arrives ``frame_seconds`` later."""
        if self._started_at is not None:
            return
        recording = read_wav(self.path)
        mono = AudioFrame(recording.data, recording.sample_rate, recording.channels).to_mono()
        resampler = Resampler(mono.sample_rate, self.sample_rate)
        self._audio = resampler.push(mono.data)
        self.duration = len(self._audio) / SAMPLE_WIDTH / self.sample_rate
        silence = round(self.then_silence * self.sample_rate) * SAMPLE_WIDTH
        self._end = len(self._audio) + silence
        self._started_at = asyncio.get_running_loop().time()

    def __aiter__(self) -> WavInput:
        return self

    async def __anext__(self) -> AudioFrame:
        if self._started_at is None and not self._closed:
            await self.start()
        if self._closed or self._position >= self._end or self._started_at is None:
            raise StopAsyncIteration
        start = self._position
        stop = min(start + self._frame_bytes, self._end)
        data = self._audio[start:stop]
        if len(data) < stop - start:  # into the silence after the recording
            data += bytes(stop - start - len(data))
        frame = AudioFrame(data, self.sample_rate)
        loop = asyncio.get_running_loop()
        if self.realtime:
            due = self._started_at + (start + len(data)) / SAMPLE_WIDTH / self.sample_rate
            await asyncio.sleep(max(0.0, due - loop.time()))
        else:
            await asyncio.sleep(0)
        if self._closed:
            raise StopAsyncIteration
        self._position = stop
        return frame

    async def aclose(self) -> None:
        """Stop: the iteration ends."""
        self._closed = True

    async def __aenter__(self) -> WavInput:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


@dataclass(slots=True)
class _Scheduled:
    start: int  # sample of the file where it plays
    data: bytes  # mono at the file's rate

    @property
    def end(self) -> int:
        return self.start + len(self.data) // SAMPLE_WIDTH


class WavOutput:
    """An ``AudioSink`` that records what plays into a WAV file (see the module doc).
    ``sample_rate``: the file's rate (``None``: the first frame's); frames are stored
    mono. Audio is written to the file as it plays; ``aclose()`` writes what has played
    by then (audio still queued did not play and is not written: ``await drained()``
    first to keep it) and finishes the file. ``on_played(frame)``, if given, sees the
    audio as it plays (on the loop, every ``TICK`` while something plays; not the silence
    between replies): the far end for an echo canceller."""

    def __init__(
        self,
        path: str | Path,
        *,
        sample_rate: int | None = None,
        on_played: Callable[[AudioFrame], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self.sample_rate = sample_rate
        self._on_played = on_played
        self._clock = ClockSink(on_frame=self._scheduled, on_clear=self._cleared)
        self._scope = TaskScope("wav output")
        self._ticker: asyncio.Task[None] | None = None
        self._origin: float | None = None  # loop time of the file's first sample
        self._queue: list[_Scheduled] = []  # written, not yet in the file
        self._written = 0.0  # seconds written to the clock
        self._resampler: Resampler | None = None
        self._file: wave.Wave_write | None = None
        self._file_end = 0  # samples in the file
        self._closed = False

    # -- the timeline --------------------------------------------------------------------------
    def start(self) -> None:
        """Time zero of the file is now (called by the front end when the conversation
        starts; else the first write is time zero)."""
        if self._origin is None:
            self._origin = asyncio.get_running_loop().time()

    def _sample_at(self, t: float) -> int:
        assert self._origin is not None and self.sample_rate is not None
        return max(0, round((t - self._origin) * self.sample_rate))

    def _now_sample(self) -> int:
        return self._sample_at(asyncio.get_running_loop().time())

    # -- AudioSink --------------------------------------------------------------------------
    def write(self, frame: AudioFrame) -> None:
        if self._closed:
            raise RuntimeError("the WAV output is closed")
        self.start()
        self._clock.write(frame)
        if self._ticker is None or self._ticker.done():
            self._ticker = self._scope.create_task(self._tick(), name="wav output")

    def clear(self) -> None:
        self._clock.clear()

    def mix(self, frame: AudioFrame) -> None:
        """Play ``frame`` now, over what is queued (a cue: an alert's sound): it is added
        to the audio that plays from now on, delaying nothing."""
        if self._closed:
            raise RuntimeError("the WAV output is closed")
        self.start()
        if self.sample_rate is None:
            self.sample_rate = frame.sample_rate
        now = self._now_sample()
        self._commit(now)  # what played before it is in the file already
        self._overlay(now, frame.resample(self.sample_rate).data)
        self._clock.mix(frame)
        if self._ticker is None or self._ticker.done():
            self._ticker = self._scope.create_task(self._tick(), name="wav output")

    def _overlay(self, start: int, data: bytes) -> None:
        """``data`` added to the queue from sample ``start`` (summed where audio is queued,
        on its own in the gaps and after the end)."""
        assert self.sample_rate is not None
        rate, end = self.sample_rate, start + len(data) // SAMPLE_WIDTH

        def part(lo: int, hi: int) -> bytes:
            return data[(lo - start) * SAMPLE_WIDTH : (hi - start) * SAMPLE_WIDTH]

        queue: list[_Scheduled] = []
        at = start  # the first sample of ``data`` not placed yet
        for item in self._queue:
            if at < min(item.start, end):  # a gap before this item
                queue.append(_Scheduled(at, part(at, min(item.start, end))))
                at = min(item.start, end)
            lo, hi = max(at, item.start), min(item.end, end)
            if lo < hi:
                a, b = (lo - item.start) * SAMPLE_WIDTH, (hi - item.start) * SAMPLE_WIDTH
                mixed = mix_pcm(item.data[a:b], part(lo, hi), rate)
                item = _Scheduled(item.start, item.data[:a] + mixed + item.data[b:])
                at = hi
            queue.append(item)
        if at < end:
            queue.append(_Scheduled(at, part(at, end)))
        self._queue = queue

    @property
    def played(self) -> float:
        return self._clock.played

    async def drained(self) -> None:
        await self._clock.drained()

    # -- the file --------------------------------------------------------------------------
    def _scheduled(self, frame: AudioFrame) -> None:
        """From the clock: ``frame`` plays after what was queued (or now, if nothing was)."""
        if self.sample_rate is None:
            self.sample_rate = frame.sample_rate
        queued_before = self._written - self._clock.played  # seconds still to play before it
        self._written += frame.duration
        data = AudioFrame(frame.data, frame.sample_rate, frame.channels).to_mono().data
        if frame.sample_rate != self.sample_rate:
            resampler = self._resampler
            if resampler is None or resampler.source != frame.sample_rate:
                resampler = self._resampler = Resampler(frame.sample_rate, self.sample_rate)
            data = resampler.push(data)
        last = self._queue[-1].end if self._queue else self._file_end
        now = self._now_sample()
        # Right after what is queued, to the sample; else now (a gap of silence before).
        start = last if queued_before > 1e-9 or now - last <= 1 else max(last, now)
        self._queue.append(_Scheduled(start, data))

    def _cleared(self) -> None:
        """From the clock: what had not played is gone."""
        self._written = self._clock.played
        if self._resampler is not None:
            self._resampler.reset()
        if self._origin is None or self.sample_rate is None:
            return
        cut = self._now_sample()
        kept: list[_Scheduled] = []
        for item in self._queue:
            if item.start >= cut:
                continue
            if item.end > cut:
                item = _Scheduled(item.start, item.data[: (cut - item.start) * SAMPLE_WIDTH])
            kept.append(item)
        self._queue = kept
        self._commit(cut)

    def _commit(self, until: int) -> None:
        """Into the file: what has played up to sample ``until``, silence before it."""
        while self._queue and self._queue[0].start < until:
            item = self._queue[0]
            take = min(item.end, until) - item.start
            self._append(item.start, item.data[: take * SAMPLE_WIDTH])
            if take * SAMPLE_WIDTH >= len(item.data):
                self._queue.pop(0)
            else:
                self._queue[0] = _Scheduled(item.start + take, item.data[take * SAMPLE_WIDTH :])

    def _append(self, start: int, data: bytes) -> None:
        if self._file is None:
            assert self.sample_rate is not None
            self._file = wave.open(str(self.path), "wb")  # noqa: SIM115 - closed in aclose
            self._file.setnchannels(1)
            self._file.setsampwidth(SAMPLE_WIDTH)
            self._file.setframerate(self.sample_rate)
        gap = start - self._file_end
        if gap > 0:  # the silence between replies (not passed to on_played)
            self._file.writeframesraw(bytes(gap * SAMPLE_WIDTH))
        self._file.writeframesraw(data)
        self._played_audio(data)
        self._file_end = start + len(data) // SAMPLE_WIDTH

    def _played_audio(self, data: bytes) -> None:
        if self._on_played is not None and data and self.sample_rate is not None:
            self._on_played(AudioFrame(data, self.sample_rate))

    async def _tick(self) -> None:
        """While audio is queued: into the file (and ``on_played``) as it plays."""
        while self._queue:
            self._commit(self._now_sample())
            if self._queue:
                await asyncio.sleep(TICK)

    async def aclose(self) -> None:
        """Write what has played and finish the file (bounded: no waiting for the rest)."""
        if self._closed:
            return
        self._closed = True
        await self._scope.aclose()
        if self._origin is not None and self.sample_rate is not None:
            self._commit(self._now_sample())
        self._queue.clear()
        if self._file is None:  # nothing played: an empty file still says so
            self._file = wave.open(str(self.path), "wb")  # noqa: SIM115
            self._file.setnchannels(1)
            self._file.setsampwidth(SAMPLE_WIDTH)
            self._file.setframerate(self.sample_rate or 16000)
        self._file.close()

    async def __aenter__(self) -> WavOutput:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
