"""What the console shows (``ConsoleView``), and the output that shows the agent's
replies as they stream (``ConsoleOutput``), speaking them too when given a voice."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..background import background_voices
from ..llm.llm import AudioDelta
from ..speech.audio_output import AudioSink, SpeechOutput
from ..speech.output import PlayoutResult, TextOutput
from ..speech.tts import TextToSpeech
from ._view import speaker_label, summarize_state

if TYPE_CHECKING:
    from ..session import Session

LEAVE_HINT = "/quit or Ctrl-D: leave"
"""The status line's last item: how to leave, always shown whole."""


class ConsoleView:
    """What the console shows, independent of how it is drawn."""

    def __init__(
        self, session: Session[Any], *, extra_items: Callable[[], list[str]] | None = None
    ) -> None:
        self.session = session
        self.extra_items = extra_items
        self.backgrounds: dict[str, str] = {}
        self.live_reply = ""
        self.streaming = False
        self._sources: dict[str, str] = {}
        if session.background is not None:
            for bid in session.background.sorted_ids():
                self.backgrounds[bid] = "starting"
        session.on("speech_created", self._on_speech)
        session.on("background_state", self._on_state)
        session.on("background_status", self._on_status)

    def _on_speech(self, ev: Any) -> None:
        self._sources[ev.speech.id] = ev.source

    def _on_state(self, ev: Any) -> None:
        self.backgrounds[ev.background_id] = summarize_state(ev.state)

    def _on_status(self, ev: Any) -> None:
        if ev.status in ("ended", "crashed", "closed"):
            detail = f": {ev.error}" if ev.error else ""
            self.backgrounds[ev.background_id] = f"{ev.status}{detail}"
        elif self.backgrounds.get(ev.background_id) == "starting":
            self.backgrounds[ev.background_id] = ev.status

    def speaker(self, speech_id: str) -> str:
        return speaker_label(self._sources.get(speech_id))

    def status_items(self) -> list[str]:
        """What the status line says: the agent's and the user's state, each
        background's, and how to leave."""
        s = self.session
        items = [f"agent: {s.agent_state}", f"you: {s.user_state}"]
        if self.extra_items is not None:
            items += self.extra_items()
        items += [f"{bid}: {text}" for bid, text in self.backgrounds.items()]
        return [*items, LEAVE_HINT]

    def status_line(self) -> str:
        return " | ".join(self.status_items())

    def status_lines(self, width: int) -> list[str]:
        """The status line laid out in ``width`` columns: it wraps (between items, else
        between words), so a narrow terminal never cuts an instruction off."""
        return wrap_items(self.status_items(), width)


def wrap_items(items: list[str], width: int, separator: str = " | ") -> list[str]:
    """``items`` joined by ``separator`` in lines of at most ``width`` characters: a line
    breaks between items, and an item wider than a line between its words (not inside
    a command in backticks that fits on a line)."""
    width = max(width, 10)
    items = [_bind_commands(item, width) for item in items]
    lines: list[str] = []
    current = ""
    for item in items:
        joined = f"{current}{separator}{item}" if current else item
        if len(joined) <= width:
            current = joined
            continue
        if current:
            lines.append(current)
        pieces = textwrap.wrap(item, width) or [""]
        lines += pieces[:-1]
        current = pieces[-1]
    lines.append(current)
    return [line.replace(_NBSP, " ") for line in lines]


_NBSP = "\u00a0"


def _bind_commands(text: str, width: int) -> str:
    """``text`` with the spaces of each backticked command that fits in ``width`` made
    unbreakable (``textwrap`` breaks only at ordinary whitespace)."""
    return re.sub(
        r"\(?`[^`]+`\)?",
        lambda m: m[0].replace(" ", _NBSP) if len(m[0]) <= width else m[0],
        text,
    )


class ConsoleOutput(TextOutput):
    """A ``TextOutput`` that writes to the console as text streams in.

    With ``speech`` (a text-to-speech engine and where its audio plays), each reply
    is spoken too: the text shows as it is generated, and the playout reported to
    the session is the speech's (what was heard, when an interruption cuts it)."""

    def __init__(
        self,
        view: ConsoleView,
        emit: Callable[[str], None],
        *,
        stream: bool,
        speech: tuple[TextToSpeech, AudioSink] | None = None,
    ) -> None:
        super().__init__()
        self._view = view
        self._emit = emit
        self._stream = stream
        self.on_live: Callable[[], None] | None = None
        self.on_done: Callable[[], None] | None = None
        self.voice: _Voice | None = None if speech is None else _Voice(*speech, owner=self)
        if self.voice is not None:  # several backgrounds: each in a voice of its own
            background_voices(view.session, self.voice)

    def on_segment_start(self, speech_id: str) -> None:
        self._view.live_reply = ""
        self._view.streaming = True
        if self._stream:
            self._emit(f"{self._view.speaker(speech_id)}: ")
        if self.voice is not None:
            self.voice.begin_segment(speech_id)

    def on_text(self, text: str) -> None:
        self._show(text)
        if self.voice is not None:
            self.voice.write(text)

    def write_audio(self, delta: AudioDelta) -> None:
        """A model that speaks itself: its transcript shows, its audio plays."""
        self.relay_audio(delta, self.voice, self._show)

    def _show(self, text: str) -> None:
        if self._stream:
            self._emit(text)
        else:
            self._view.live_reply += text
            if self.on_live is not None:
                self.on_live()

    def on_flush(self) -> None:
        self._shown(interrupted=False)
        if self.voice is None:
            self.report_playout(self.segment_text, interrupted=False)
        else:
            self.voice.flush()  # the playout is reported when the speech has played

    def on_clear(self) -> None:
        if self._view.streaming:
            self._shown(interrupted=True)
        elif self.voice is not None:
            self._emit("[interrupted]\n")  # the text was shown whole; its speech was cut
        if self.voice is None:
            self.report_playout(self.segment_text, interrupted=True)
        else:
            self.voice.clear()  # reports what was heard

    def _shown(self, *, interrupted: bool) -> None:
        self._view.streaming = False
        text = self.segment_text
        mark = " [interrupted]" if interrupted else ""
        if self._stream:
            self._emit(f"{mark}\n")
        else:
            speaker = self._view.speaker(self.speech_id or "")
            self._emit(f"{speaker}: {text}{mark}\n")
            self._view.live_reply = ""
            if self.on_live is not None:
                self.on_live()
        if self.on_done is not None:
            self.on_done()

    async def aclose(self) -> None:
        """Stop speaking (bounded)."""
        if self.voice is not None:
            await self.voice.aclose()


class _Voice(SpeechOutput):
    """The console's speech: its playout is the console output's."""

    def __init__(self, tts: TextToSpeech, sink: AudioSink, *, owner: TextOutput) -> None:
        super().__init__(tts, sink)
        self._owner = owner

    def on_playout(self, result: PlayoutResult) -> None:
        self._owner.report_playout(result.text, interrupted=result.interrupted)
