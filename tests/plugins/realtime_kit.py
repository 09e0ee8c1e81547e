"""What the tests of the models that hear and speak (OpenAI Realtime, Gemini Live) share:
a microphone's utterance, a speaker played by hand, and a ``backline voice`` run from a
recording to a recording."""

from __future__ import annotations

import asyncio
import io
import sys
import threading
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Generic, TypeVar

from backline.app import SessionOptions, SpeechOptions
from backline.io.voice import VoiceOptions, run_voice_front_end
from backline.plugins import PluginManager
from backline.speech import AudioFrame, split_frames, write_wav

RATE = 16000  # the microphone's rate

S = TypeVar("S", bound=AbstractAsyncContextManager[Any])


def tone(seconds: float, rate: int = RATE) -> AudioFrame:
    """A loud voice-like tone."""
    return AudioFrame.from_samples(
        [(8000 if (i // 20) % 2 else -8000) for i in range(int(seconds * rate))], rate
    )


def utterance(speech: float = 0.6) -> Iterator[AudioFrame]:
    """Silence, ``speech`` seconds of tone, silence: 20 ms frames."""
    for piece in (AudioFrame.silence(0.3, RATE), tone(speech), AudioFrame.silence(1.0, RATE)):
        yield from split_frames(piece, 0.02)


class HandSink:
    """A speaker played by hand (``play``): what has played is exactly known. With
    ``instant`` set, what is written plays at once."""

    def __init__(self) -> None:
        self.queued = 0.0
        self._played = 0.0
        self.instant = False
        self._drained = asyncio.Event()
        self._drained.set()
        self.wrote = asyncio.Event()
        self.frames: list[AudioFrame] = []

    def write(self, frame: AudioFrame) -> None:
        self.queued += frame.duration
        self.frames.append(frame)
        self.wrote.set()
        self._drained.clear()
        if self.instant:
            self.play(frame.duration)

    def clear(self) -> None:
        self.queued = self._played
        self._drained.set()

    @property
    def played(self) -> float:
        return self._played

    def play(self, seconds: float) -> None:
        self._played = min(self.queued, self._played + seconds)
        if self._played >= self.queued:
            self._drained.set()

    async def drained(self) -> None:
        await self._drained.wait()


def talk_by_voice(llm: str, manager: PluginManager, folder: Path) -> tuple[str, Path]:
    """``backline voice --plain`` with ``llm``: a recording of one utterance in, the
    speaker to ``folder/out.wav``; what it printed, and that file."""
    audio_in, out = folder / "in.wav", folder / "out.wav"
    write_wav(audio_in, [AudioFrame.silence(0.5, RATE), tone(0.6), AudioFrame.silence(2.0, RATE)])
    printed = io.StringIO()
    stdin, stdout = sys.stdin, sys.stdout
    sys.stdin, sys.stdout = io.StringIO(""), printed  # the recording, then quit
    try:
        run_voice_front_end(
            SessionOptions(llm=llm, log=False),
            SpeechOptions(tts="espeak", vad="energy"),
            VoiceOptions(audio_in=str(audio_in), audio_out=str(out), plain=True),
            manager=manager,
        )
    finally:
        sys.stdin, sys.stdout = stdin, stdout
    return printed.getvalue(), out


class OnItsOwnLoop(Generic[S]):
    """``server`` (a fake, an async context manager) entered on an event loop of its
    own in a thread, for a test that blocks (a front end run to its end):
    ``with OnItsOwnLoop(FakeServer()) as server``."""

    def __init__(self, server: S) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self.server = server

    def __enter__(self) -> S:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.__aenter__(), self._loop).result(10)
        return self.server

    def __exit__(self, *exc: object) -> None:
        try:
            done = self.server.__aexit__(None, None, None)
            asyncio.run_coroutine_threadsafe(done, self._loop).result(10)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()
