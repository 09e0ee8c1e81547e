"""The microphone and the speaker: PortAudio through ``sounddevice`` (the SDK's extra
``audio``: ``pip install 'backline[audio]'``), imported only when a device is used.

- ``list_devices()``: the devices PortAudio sees, as ``AudioDevice`` values.
- ``choose_device(devices, wanted, kind)``: the device an option names (an index, or
  part of a name, case-insensitive), or the system's default; a pure function.
- ``Microphone``: an ``AudioSource``: ``async with Microphone() as mic: async for
  frame in mic``. Frames of ``frame_seconds`` at ``sample_rate``, mono, whatever the
  device's own rate and channels.
- ``Speaker``: an ``AudioSink`` (``SpeechOutput`` speaks into it): ``write`` never
  blocks, ``clear`` stops at once, ``played`` counts what the device took.

Threads: PortAudio calls each stream's callback on its own thread. The microphone's
callback copies the block and hands it to the event loop with
``loop.call_soon_threadsafe``, nothing else; the speaker's callback takes bytes from a
buffer guarded by a ``threading.Lock`` (held for a copy, never across a wait) and
wakes the loop the same way. Opening and closing a stream (blocking calls into
PortAudio) run on a short-lived thread with a bound, so a stuck driver fails in one
line instead of hanging the loop.

Every failure is a ``DeviceError`` with a one-line message saying what to do: the
package or PortAudio missing, no device, a name that matches none or several (the
devices listed), a device that stops delivering.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol, runtime_checkable

from ._mixing import mix_pcm
from ._pcm import SAMPLE_WIDTH, Resampler, downmix, upmix
from ._portaudio import (
    OPTION,
    AudioDevice,
    DeviceError,
    Opened,
    choose_device,
    close_opened,
    noop,
    off_loop,
    open_stream,
    query,
    sounddevice,
)
from .frames import AudioFrame

__all__ = [
    "AudioDevice",
    "AudioSource",
    "DeviceError",
    "Microphone",
    "Speaker",
    "choose_device",
    "list_devices",
]

logger = logging.getLogger("backline.speech")

STALL = 5.0  # seconds a started microphone may go without delivering audio
GRACE = 5.0  # seconds a speaker may take beyond the audio queued to play it


@runtime_checkable
class AudioSource(Protocol):
    """Where frames come from: a ``Microphone``, a ``WavInput`` (a file played as the
    microphone). ``start()`` (or ``async with``), then ``async for frame in source``;
    ``aclose()`` ends the iteration. Frames are mono at ``sample_rate``."""

    @property
    def sample_rate(self) -> int: ...

    async def start(self) -> None: ...

    async def aclose(self) -> None: ...

    def __aiter__(self) -> AsyncIterator[AudioFrame]: ...


def list_devices() -> list[AudioDevice]:
    """The audio devices PortAudio sees (a ``DeviceError`` without the package or the
    library). Blocking: PortAudio asks the system; call it before the loop is busy."""
    return query(sounddevice())


async def _close(opened: Opened, what: str) -> None:
    """Close a stream within the bound; one that hangs is left to its thread (logged)."""
    try:
        await off_loop(lambda: close_opened(opened), f"closing the {what}", noop)
    except DeviceError as e:
        logger.warning("%s", e)


# -- the microphone --------------------------------------------------------------------------------
class Microphone:
    """Frames from a microphone (see the module doc). ``device``: an index or part of a
    name (``None``: the system's default). Frames are ``frame_seconds`` long, mono, at
    ``sample_rate``. If the loop falls behind by more than ``max_queued`` seconds the
    oldest frames are dropped and counted in ``dropped``. Iteration ends at
    ``aclose()``; it raises ``DeviceError`` if the device stops (unplugged) or
    delivers nothing for ``STALL`` seconds."""

    def __init__(
        self,
        device: int | str | None = None,
        *,
        sample_rate: int = 16000,
        frame_seconds: float = 0.02,
        max_queued: float = 2.0,
    ) -> None:
        if sample_rate <= 0 or frame_seconds <= 0:
            raise ValueError("sample_rate and frame_seconds must be positive")
        self.wanted = device
        self.sample_rate = sample_rate
        self.frame_seconds = frame_seconds
        self._frame_bytes = max(1, round(frame_seconds * sample_rate)) * SAMPLE_WIDTH
        self._max_frames = max(1, round(max_queued / frame_seconds))
        self.device: AudioDevice | None = None  # once started
        self.latency = 0.0  # seconds PortAudio reports for the input, once started
        self.dropped = 0  # frames dropped because the loop fell behind
        self._opened: Opened | None = None
        self._resampler: Resampler | None = None
        self._pending = bytearray()
        self._frames: deque[AudioFrame] = deque()
        self._ready = asyncio.Event()
        self._failure: DeviceError | None = None
        self._closed = False

    async def start(self) -> None:
        if self._opened is not None or self._closed:
            raise RuntimeError("a Microphone starts once")
        loop = asyncio.get_running_loop()

        def callback(indata: Any, frames: int, time: Any, status: Any) -> None:
            data = bytes(indata)  # PortAudio reuses its buffer: copy before handing over
            try:
                loop.call_soon_threadsafe(self._arrived, data)
            except RuntimeError:  # the loop is closed: stop the stream
                raise importlib.import_module("sounddevice").CallbackAbort from None

        def finished() -> None:
            try:
                loop.call_soon_threadsafe(self._device_stopped)
            except RuntimeError:
                pass

        opened = await off_loop(
            lambda: open_stream(
                "input",
                self.wanted,
                self.sample_rate,
                self._frame_bytes // SAMPLE_WIDTH,
                callback,
                finished,
            ),
            "the microphone",
            close_opened,
        )
        if self._closed:  # closed while opening
            await _close(opened, "microphone")
            return
        self._opened, self.device = opened, opened.device
        self.latency = float(getattr(opened.stream, "latency", 0.0) or 0.0)
        self._resampler = Resampler(opened.rate, self.sample_rate)

    def _arrived(self, data: bytes) -> None:
        """On the loop: one block from the device → frames of ``frame_seconds``."""
        opened, resampler = self._opened, self._resampler
        if self._closed or opened is None or resampler is None:
            return
        self._pending += resampler.push(downmix(data, opened.channels))
        size = self._frame_bytes
        while len(self._pending) >= size:
            frame = AudioFrame(bytes(self._pending[:size]), self.sample_rate)
            del self._pending[:size]
            if len(self._frames) >= self._max_frames:
                self._frames.popleft()
                self.dropped += 1
            self._frames.append(frame)
        if self._frames:
            self._ready.set()

    def _device_stopped(self) -> None:
        if not self._closed and self._failure is None:
            name = self.device.name if self.device else "?"
            self._failure = DeviceError(
                f"the microphone {name!r} stopped (unplugged?): connect it again, or choose "
                f"another with {OPTION['input']}"
            )
            self._ready.set()

    def __aiter__(self) -> Microphone:
        return self

    async def __anext__(self) -> AudioFrame:
        if self._opened is None and not self._closed:
            raise RuntimeError("Microphone.start() first (or async with)")
        while not self._frames:
            if self._closed:
                raise StopAsyncIteration
            if self._failure is not None:
                raise self._failure
            self._ready.clear()
            try:
                await asyncio.wait_for(self._ready.wait(), STALL)
            except TimeoutError:
                name = self.device.name if self.device else "?"
                raise DeviceError(
                    f"the microphone {name!r} gave no audio for {STALL:g} s: is another "
                    f"program using it? Choose another with {OPTION['input']}"
                ) from None
        return self._frames.popleft()

    async def aclose(self) -> None:
        """Stop recording (bounded); iteration ends."""
        if self._closed:
            return
        self._closed = True
        self._frames.clear()
        self._ready.set()
        opened, self._opened = self._opened, None
        if opened is not None:
            await _close(opened, "microphone")

    async def __aenter__(self) -> Microphone:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


# -- the speaker -----------------------------------------------------------------------------------
class Speaker:
    """Plays frames on a speaker: an ``AudioSink`` (see the module doc). ``device``: an
    index or part of a name (``None``: the system's default); ``sample_rate``: the rate
    to open the device at if it takes it (frames of any rate are resampled to the
    device's). ``on_played(frame)``, if given, is called on the loop with every block
    the device takes, as it takes it (silence included): what an echo canceller needs
    as its far end. ``played`` counts the seconds of written audio the device has
    taken (PortAudio's ``latency`` later it is heard)."""

    def __init__(
        self,
        device: int | str | None = None,
        *,
        sample_rate: int = 24000,
        on_played: Callable[[AudioFrame], None] | None = None,
    ) -> None:
        if sample_rate <= 0:
            raise ValueError("sample_rate must be positive")
        self.wanted = device
        self.sample_rate = sample_rate
        self.device: AudioDevice | None = None
        self.latency = 0.0  # seconds PortAudio reports for the output, once started
        self._on_played = on_played
        self._opened: Opened | None = None
        self._rate = sample_rate  # the device's rate, once started
        self._lock = threading.Lock()  # guards _buffer and _taken
        self._buffer = bytearray()  # mono 16-bit at the device's rate, not yet taken
        self._taken = 0  # bytes of written audio the device has taken
        self._resampler: Resampler | None = None
        self._emptied = asyncio.Event()
        self._failure: DeviceError | None = None
        self._closed = False

    async def start(self) -> None:
        if self._opened is not None or self._closed:
            raise RuntimeError("a Speaker starts once")
        loop = asyncio.get_running_loop()

        def callback(outdata: Any, frames: int, time: Any, status: Any) -> None:
            channels = max(1, len(outdata) // (frames * SAMPLE_WIDTH)) if frames else 1
            size = frames * SAMPLE_WIDTH  # bytes of mono audio wanted
            with self._lock:
                had = len(self._buffer)
                chunk = bytes(self._buffer[:size])
                del self._buffer[:size]
                self._taken += len(chunk)
                emptied = had > 0 and not self._buffer
            block = chunk if len(chunk) == size else chunk + bytes(size - len(chunk))
            outdata[:] = upmix(block, channels)
            try:
                if emptied:
                    loop.call_soon_threadsafe(self._emptied.set)
                if self._on_played is not None:
                    loop.call_soon_threadsafe(self._played_block, block)
            except RuntimeError:  # the loop is closed: stop the stream
                raise importlib.import_module("sounddevice").CallbackAbort from None

        def finished() -> None:
            try:
                loop.call_soon_threadsafe(self._device_stopped)
            except RuntimeError:
                pass

        opened = await off_loop(
            lambda: open_stream("output", self.wanted, self.sample_rate, 0, callback, finished),
            "the speaker",
            close_opened,
        )
        if self._closed:
            await _close(opened, "speaker")
            return
        self._opened, self.device, self._rate = opened, opened.device, opened.rate
        self.latency = float(getattr(opened.stream, "latency", 0.0) or 0.0)

    def _device_stopped(self) -> None:
        if not self._closed and self._failure is None:
            name = self.device.name if self.device else "?"
            self._failure = DeviceError(
                f"the speaker {name!r} stopped (unplugged?): connect it again, or choose "
                f"another with {OPTION['output']}"
            )
            self._emptied.set()

    def _played_block(self, block: bytes) -> None:
        if self._on_played is not None and not self._closed:
            self._on_played(AudioFrame(block, self._rate))

    def write(self, frame: AudioFrame) -> None:
        """Queue ``frame`` (any rate, mono or not) after what is queued; never blocks."""
        if self._opened is None:
            raise RuntimeError("the speaker is closed" if self._closed else "Speaker.start() first")
        if self._failure is not None:
            raise self._failure
        data = downmix(frame.data, frame.channels)
        resampler = self._resampler
        if frame.sample_rate != self._rate:
            if resampler is None or resampler.source != frame.sample_rate:
                resampler = self._resampler = Resampler(frame.sample_rate, self._rate)
            data = resampler.push(data)
        with self._lock:
            self._buffer += data

    def mix(self, frame: AudioFrame) -> None:
        """Play ``frame`` now, over what is queued (a cue: an alert's sound): it delays
        nothing; the part that outlasts what is queued counts in ``played``."""
        if self._opened is None:
            raise RuntimeError("the speaker is closed" if self._closed else "Speaker.start() first")
        data = frame.resample(self._rate).data
        with self._lock:
            head = bytes(self._buffer[: len(data)])
            self._buffer[: len(head)] = mix_pcm(head, data, self._rate)

    def clear(self) -> None:
        """Stop now: what is queued is dropped (what PortAudio holds still plays:
        ``latency`` seconds at most)."""
        with self._lock:
            self._buffer.clear()
        if self._resampler is not None:
            self._resampler.reset()
        self._emptied.set()

    @property
    def played(self) -> float:
        with self._lock:
            taken = self._taken
        return taken / SAMPLE_WIDTH / self._rate

    @property
    def queued(self) -> float:
        """Seconds of audio written and not yet taken by the device."""
        with self._lock:
            size = len(self._buffer)
        return size / SAMPLE_WIDTH / self._rate

    async def drained(self) -> None:
        """Until the device has taken everything queued; a ``DeviceError`` if it stops
        taking audio for longer than what is queued plus ``GRACE`` seconds."""
        last = self.played
        while not self._closed and self._opened is not None:
            if self._failure is not None:
                raise self._failure
            self._emptied.clear()
            left = self.queued
            if left <= 0:
                return
            try:
                await asyncio.wait_for(self._emptied.wait(), left + GRACE)
            except TimeoutError:
                if self.played > last:
                    last = self.played
                    continue
                name = self.device.name if self.device else "?"
                raise DeviceError(
                    f"the speaker {name!r} stopped playing: is another program using it? "
                    f"Choose another with {OPTION['output']}"
                ) from None

    async def aclose(self) -> None:
        """Stop playing (bounded; what is queued is dropped)."""
        if self._closed:
            return
        self._closed = True
        with self._lock:
            self._buffer.clear()
        self._emptied.set()
        opened, self._opened = self._opened, None
        if opened is not None:
            await _close(opened, "speaker")

    async def __aenter__(self) -> Speaker:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
