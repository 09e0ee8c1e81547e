"""WebOutput: the agent's words go to the page, and the page reports what it spoke (or
the server speaks them, and reports what the page played)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from ...llm.llm import AudioDelta
from ...voice.io import PlayoutResult, TextOutput
from . import protocol

if TYPE_CHECKING:
    from ._voice import SpokenOutput

logger = logging.getLogger("backline")

WATCHDOG_BASE = 30.0
WATCHDOG_PER_CHAR = 0.25


def common_prefix(a: str, b: str) -> str:
    """The longest common prefix of two strings."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return a[:n]


class WebOutput(TextOutput):
    """Streams each output segment to the page and waits for its ``playout`` report.

    Every segment gets a number (``segment``) unique in the connection; one
    speech may have several segments (text before and after a tool step). The
    runtime's ``flush`` becomes ``segment_end`` and its ``clear`` becomes
    ``segment_clear``; the segment's playout ends when the page reports it.

    The report is checked against what was sent: a finished segment delivered
    all its text (and cannot finish before ``segment_end``); a cut one delivered
    the part of the reported text that is a prefix of what was sent. Reports for
    another segment are stale and ignored.
    If the page is gone, a clear reports nothing as spoken at once; if it never
    reports a finished segment, a watchdog (generous: 30 s + 0.25 s a character)
    reports it delivered so the conversation cannot stall (with ``voice``, it stops
    the segment, which keeps what the page played: a speech engine that hangs).

    With ``voice`` (the server's speech), the page only shows the text
    (``segment_start`` says ``speaker: "server"``): ``voice`` speaks it into the page's
    audio and its playout (what the page played, bounded waits) is this segment's.
    """

    def __init__(
        self,
        send: Callable[[protocol.ServerMessage], None],
        describe: Callable[[str], tuple[str | None, str | None]],
        voice: SpokenOutput | None = None,
    ) -> None:
        super().__init__()
        self._send = send
        self._describe = describe
        self.voice = voice
        if voice is not None:
            voice.on_played = self._voice_played
        self._segment = 0
        self._ended = False
        self._watchdog: asyncio.TimerHandle | None = None
        self.connected = True
        self.last_played: tuple[int, str] | None = None
        """``(segment, speech_id)`` of the last segment whose playout ended."""

    @property
    def segment(self) -> int:
        """The number of the current (or last) segment; 0 before the first."""
        return self._segment

    def on_segment_start(self, speech_id: str) -> None:
        self._cancel_watchdog()
        self._segment += 1
        self._ended = False
        source, background_id = self._describe(speech_id)
        speaker = "page" if self.voice is None else "server"
        self._send(protocol.segment_start(self._segment, speech_id, source, background_id, speaker))
        if self.voice is not None:
            self.voice.begin_segment(speech_id)

    def on_text(self, text: str) -> None:
        self._send(protocol.segment_text(self._segment, text))
        if self.voice is not None:
            self.voice.write(text)

    def write_audio(self, delta: AudioDelta) -> None:
        """A model that speaks itself: its transcript shows, its audio plays."""
        self.relay_audio(
            delta, self.voice, lambda text: self._send(protocol.segment_text(self._segment, text))
        )

    def on_flush(self) -> None:
        self._ended = True
        if not self.connected:
            if self.voice is not None:
                self.voice.clear()  # nothing more can play
            self.report_playout(self.segment_text, interrupted=False)
            return
        self._send(protocol.segment_end(self._segment))
        if self.voice is not None:
            self.voice.flush()  # it reports when the page has played it
        delay = WATCHDOG_BASE + WATCHDOG_PER_CHAR * len(self.segment_text)
        self._watchdog = asyncio.get_running_loop().call_later(delay, self._page_silent, delay)

    def on_clear(self) -> None:
        self._cancel_watchdog()
        if self.connected:
            self._send(protocol.segment_clear(self._segment))
        if self.voice is not None:
            self.voice.clear()  # reports what the page played, at once
        if not self.connected:
            self.report_playout("", interrupted=True)

    def _voice_played(self, result: PlayoutResult) -> None:
        if result.speech_id == self.speech_id:
            self.report_playout(result.text, interrupted=result.interrupted)

    def on_playout(self, result: PlayoutResult) -> None:
        self._cancel_watchdog()
        if self.speech_id is not None:
            self.last_played = (self._segment, self.speech_id)

    def page_reported(self, segment: int, text: str, *, interrupted: bool) -> None:
        """The page's ``playout`` message for ``segment``."""
        if segment != self._segment:
            return  # stale: a segment that already ended (or never was)
        if self.voice is not None:
            raise protocol.ProtocolError(
                f"playout: the server speaks segment {segment}; the page reports audio_played"
            )
        if interrupted:
            self.report_playout(common_prefix(text, self.segment_text), interrupted=True)
        elif self._ended:
            self.report_playout(self.segment_text, interrupted=False)
        else:
            raise protocol.ProtocolError(
                f"playout: segment {segment} cannot have finished before segment_end"
            )

    def disconnected(self) -> None:
        """The page is gone: a segment in progress ends now, with nothing confirmed spoken."""
        self.connected = False
        self._cancel_watchdog()
        self.report_playout("", interrupted=True)

    def _page_silent(self, delay: float) -> None:
        self._watchdog = None
        if self.voice is not None:  # a speech engine that hangs: stop, keep what played
            logger.warning(
                "web: segment %d was not spoken within %.0fs; stopping it", self._segment, delay
            )
            self._send(protocol.segment_clear(self._segment))
            self.voice.clear()
            return
        logger.warning(
            "web: the page did not report playout of segment %d within %.0fs; taking it as spoken",
            self._segment,
            delay,
        )
        self.report_playout(self.segment_text, interrupted=False)

    def _cancel_watchdog(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
