"""Output: where the agent's words go, and how playout is reported back.

The runtime writes each reply to a ``TextOutput`` as it streams and waits for its
playout; a front end shows or speaks it and reports back what was delivered
(``SpeechOutput`` speaks it, through a text-to-speech engine).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from ..llm.llm import AudioDelta


@dataclass(frozen=True)
class PlayoutResult:
    """How one output segment ended: the text actually delivered, and whether it was cut."""

    speech_id: str
    text: str
    interrupted: bool
    finished_at: float


_new = object.__new__


def _playout_result(speech_id: str, text: str, interrupted: bool, at: float) -> PlayoutResult:
    """``PlayoutResult(speech_id, text, interrupted, at)``, built once per reply: a
    frozen dataclass's __init__ sets each field through object.__setattr__ (about
    three times the cost); its fields live in its __dict__, filled here directly."""
    result = _new(PlayoutResult)
    fields = result.__dict__
    fields["speech_id"] = speech_id
    fields["text"] = text
    fields["interrupted"] = interrupted
    fields["finished_at"] = at
    return result


class TextOutput:
    """Receives the agent's text as it streams, and reports playout back.

    The runtime calls ``begin_segment``, ``write`` (deltas), then ``flush`` (no
    more text) or ``clear`` (interrupted: stop now), and awaits
    ``wait_for_playout``. A front end overrides the ``on_*`` hooks and calls
    ``report_playout(text, interrupted=...)`` when the segment really ended,
    with the text that was delivered (spoken, shown). The defaults suit an
    instant output: a flush reports everything delivered, a clear reports what
    was written so far. The hooks are looked up per class, once: override them in
    a subclass (a hook assigned on an instance is not called).
    """

    # Whether a class overrides these hooks (the defaults do nothing: on every reply
    # the runtime skips calling them then).
    _text_hook = False
    _segment_hook = False
    _playout_hook = False

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls._text_hook = cls.on_text is not TextOutput.on_text
        cls._segment_hook = cls.on_segment_start is not TextOutput.on_segment_start
        cls._playout_hook = cls.on_playout is not TextOutput.on_playout

    def __init__(self) -> None:
        self._speech_id: str | None = None
        self._parts: list[str] = []
        # The current segment's result once reported; the future a wait is woken by,
        # made only when someone waits before the report (an instant output never).
        self._result: PlayoutResult | None = None
        self._playout: asyncio.Future[PlayoutResult] | None = None

    # -- called by the runtime -------------------------------------------------
    def begin_segment(self, speech_id: str) -> None:
        if self._playout is not None:
            if not self._playout.done():
                self._playout.cancel()  # the previous segment's wait ends (cancelled)
            self._playout = None
        self._speech_id = speech_id
        self._parts = []
        self._result = None
        if self._segment_hook:
            self.on_segment_start(speech_id)

    def write(self, text: str) -> None:
        if self._speech_id is None or not text:
            return
        self._parts.append(text)
        if self._text_hook:
            self.on_text(text)

    def write_audio(self, delta: AudioDelta) -> None:
        """A piece of a reply a model speaks itself (audio and its transcript). Default:
        the transcript is written as text (``write``); the audio is not played.
        ``SpeechOutput`` plays the audio instead of synthesizing the text."""
        if delta.transcript:
            self.write(delta.transcript)

    def relay_audio(
        self, delta: AudioDelta, voice: TextOutput | None, show: Callable[[str], None]
    ) -> None:
        """``write_audio`` for an output that shows the text and speaks through a
        ``voice`` of its own (the console, the page): the transcript is shown (``show``)
        and is this segment's text; the audio goes to ``voice``. Without a voice, the
        transcript is written as text."""
        if voice is None or self._speech_id is None:
            TextOutput.write_audio(self, delta)
            return
        if delta.transcript:
            self._parts.append(delta.transcript)
            show(delta.transcript)
        voice.write_audio(delta)

    def flush(self) -> None:
        if self._speech_id is not None:
            self.on_flush()

    def clear(self) -> None:
        if self._speech_id is not None and self._result is None:
            self.on_clear()

    async def wait_for_playout(self) -> PlayoutResult:
        if self._speech_id is None:
            raise RuntimeError("no output segment was started")
        if self._result is not None:
            return self._result
        return await asyncio.shield(self._playout_future())

    def _playout_future(self) -> asyncio.Future[PlayoutResult]:
        """The current segment's playout, as a future (made on first use)."""
        fut = self._playout
        if fut is None:
            fut = self._playout = asyncio.get_running_loop().create_future()
            if self._result is not None:
                fut.set_result(self._result)
        return fut

    # -- for implementations ---------------------------------------------------
    @property
    def segment_text(self) -> str:
        """Everything written to the current segment so far."""
        return "".join(self._parts)

    @property
    def speech_id(self) -> str | None:
        return self._speech_id

    def report_playout(self, text: str, *, interrupted: bool) -> None:
        """Call when the current segment's playout ended, with the delivered text."""
        if self._speech_id is None or self._result is not None:
            return  # no segment, or it was reported already
        result = self._result = _playout_result(
            self._speech_id, text, interrupted, asyncio.get_running_loop().time()
        )
        fut = self._playout
        if fut is not None and not fut.done():
            fut.set_result(result)
        if self._playout_hook:
            self.on_playout(result)

    def on_segment_start(self, speech_id: str) -> None:
        """A new segment begins."""

    def on_text(self, text: str) -> None:
        """A text delta arrived."""

    def on_flush(self) -> None:
        """No more text in this segment. Default: everything was delivered at once."""
        self.report_playout(self.segment_text, interrupted=False)

    def on_clear(self) -> None:
        """Stop now. Default: what was written so far was delivered."""
        self.report_playout(self.segment_text, interrupted=True)

    def on_playout(self, result: PlayoutResult) -> None:
        """A segment finished (after ``report_playout``)."""


class InMemoryTextOutput(TextOutput):
    """An output for tests and benchmarks that keeps what was delivered.

    With ``chars_per_second`` set, playout takes time on the event loop clock
    (use the virtual clock), so an interruption cuts the text at a predictable
    point; without it, playout is instant.
    """

    def __init__(self, *, chars_per_second: float | None = None) -> None:
        super().__init__()
        if chars_per_second is not None and chars_per_second <= 0:
            raise ValueError("chars_per_second must be positive")
        self.chars_per_second = chars_per_second
        self.segments: list[PlayoutResult] = []
        self._started_at: float | None = None
        self._finish: asyncio.TimerHandle | None = None

    @property
    def transcript(self) -> list[str]:
        """The delivered text of every finished segment, in order."""
        return [s.text for s in self.segments]

    def on_segment_start(self, speech_id: str) -> None:
        self._started_at = None
        if self._finish is not None:
            self._finish.cancel()
            self._finish = None

    def on_text(self, text: str) -> None:
        if self._started_at is None:
            self._started_at = asyncio.get_running_loop().time()

    def _delivered_now(self) -> str:
        text = self.segment_text
        if self.chars_per_second is None or self._started_at is None:
            return text
        elapsed = asyncio.get_running_loop().time() - self._started_at
        return text[: int(elapsed * self.chars_per_second)]

    def on_flush(self) -> None:
        if self.chars_per_second is None or self._started_at is None:
            self.report_playout(self.segment_text, interrupted=False)
            return
        loop = asyncio.get_running_loop()
        end = self._started_at + len(self.segment_text) / self.chars_per_second
        self._finish = loop.call_at(
            max(end, loop.time()), lambda: self.report_playout(self.segment_text, interrupted=False)
        )

    def on_clear(self) -> None:
        if self._finish is not None:
            self._finish.cancel()
            self._finish = None
        self.report_playout(self._delivered_now(), interrupted=True)

    def on_playout(self, result: PlayoutResult) -> None:
        self.segments.append(result)
