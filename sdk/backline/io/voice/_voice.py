"""``TerminalVoice``: what ``backline voice`` adds to the console (a ``ConsoleVoice``).

The microphone's frames (or a recording's) go through the echo canceller, then the
``Listener`` (the way of talking), then ``SpeechInput`` into the session; the
replies are spoken by the console's output into the speaker (or a file), each
frame also told to the echo canceller as it is written. A chime marks a wake
window opening and closing; a short sound, one per kind, marks each alert (a
background finished, failed or asks something). Keys (in a terminal) and typed
commands switch the way of talking at any time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from ...speech.audio_input import SpeechInput
from ...speech.audio_output import AudioSink
from ...speech.devices import AudioSource
from ...speech.echo import EchoCanceller
from ...speech.listening import LISTENING_MODES, Listener, ListenerState, ListeningMode, chime
from ...speech.stt import SpeechToText
from ...speech.tts import TextToSpeech
from ...speech.vad import VoiceActivityDetector
from ...tasks import TaskScope
from .._alerts import alert_sound
from .._console_voice import Emit

logger = logging.getLogger("backline.io.voice")

HOLD_RELEASE = 0.75
"""Seconds after the last repeat of the held key that count as letting go (a
terminal reports key presses and their auto-repeat, never a release; the first
repeat comes after the system's repeat delay, 660 ms by default on X11)."""
CLOSE_TIMEOUT = 5.0

HELP = (
    "/mode always|push|wake|mute: how you talk · /talk: start or stop talking "
    "(push-to-talk) · /mute, /unmute"
)


class _Said:
    """The session, as the listener drives it: each spoken turn is also shown."""

    def __init__(self, session: Any, show: Callable[[str], None]) -> None:
        self._session = session
        self._show = show

    @property
    def agent_state(self) -> str:
        return str(self._session.agent_state)

    def user_started_speaking(self, *, interrupt: bool = True) -> None:
        self._session.user_started_speaking(interrupt=interrupt)

    def user_stopped_speaking(self) -> None:
        self._session.user_stopped_speaking()

    def push_interim_transcript(self, text: str) -> None:
        self._session.push_interim_transcript(text)

    def push_user_turn(self, text: str) -> None:
        self._show(text)
        self._session.push_user_turn(text)

    def interrupt(self, *, force: bool = False) -> None:
        self._session.interrupt(force=force)


class TerminalVoice:
    """See the module doc. ``source``/``sink``: the audio in and out (the sink tells
    ``echo`` what it plays: its ``on_played``); ``ends``: the source ends by itself
    (a recording), so a script waits for it."""

    def __init__(
        self,
        session: Any,
        *,
        stt: SpeechToText,
        tts: TextToSpeech,
        vad: VoiceActivityDetector,
        source: AudioSource,
        sink: AudioSink,
        echo: EchoCanceller | None = None,
        mode: ListeningMode = "always",
        wake_phrase: str | None = None,
        wake_window: float | None = None,
        ends: bool = False,
        min_interruption_speech: float = 0.5,
        min_interruption_words: int = 2,
    ) -> None:
        self._session = session
        self._tts = tts
        self._sink = sink
        self._source = source
        self._echo = echo
        self._ends = ends
        self._emit: Emit | None = None
        self._redraw: Callable[[], None] | None = None
        wake: dict[str, Any] = {}
        if wake_phrase is not None:
            wake["wake_phrase"] = wake_phrase
        if wake_window is not None:
            wake["wake_window"] = wake_window
        said = _Said(session, self._said)
        self.listener = Listener(said, mode=mode, on_change=self._on_change, **wake)
        self.input = SpeechInput(
            self.listener,
            stt=stt,
            vad=vad,
            min_interruption_speech=min_interruption_speech,
            min_interruption_words=min_interruption_words,
        )
        self._scope = TaskScope("backline voice")
        self._done = asyncio.Event()
        self._started = False
        self._closed = False
        session.on("background_alert", self._on_alert)  # its sound, even mid-reply
        self.frames = 0  # microphone frames heard (for the status line and tests)

    # -- ConsoleVoice -----------------------------------------------------------------------
    @property
    def speech(self) -> tuple[TextToSpeech, AudioSink]:
        return self._tts, self._sink

    def status_items(self) -> list[str]:
        return [f"mic: {self.listener.state.describe()}"]

    async def start(self, emit: Emit) -> None:
        self._emit = emit
        await self._source.start()
        self.input.start()
        self._started = True
        self._scope.create_task(self._listen(), name="microphone")

    def command(self, line: str, emit: Emit) -> bool:
        words = line.split()
        if not words or words[0] not in ("/mode", "/talk", "/mute", "/unmute", "/voice"):
            return False
        head = words[0]
        if head == "/mode":
            wanted = words[1] if len(words) > 1 else ""
            if wanted not in LISTENING_MODES:
                emit(f"[voice] /mode takes one of: {', '.join(LISTENING_MODES)}\n")
                return True
            self.listener.set_mode(LISTENING_MODES[LISTENING_MODES.index(wanted)])
        elif head == "/talk":
            if self.listener.mode != "push":
                self.listener.set_mode("push")
            self.listener.toggle()
        elif head == "/mute":
            self.listener.set_mode("mute")
        elif head == "/unmute":
            self.listener.set_mode("always")
        else:
            emit(f"[voice] {HELP}\n")
            return True
        emit(f"[voice] {self.listener.state.describe()}\n")
        return True

    def key_bindings(self, redraw: Callable[[], None]) -> Any:
        from prompt_toolkit.filters import Condition
        from prompt_toolkit.key_binding import KeyBindings

        self._redraw = redraw
        keys = KeyBindings()
        release: asyncio.TimerHandle | None = None

        @Condition
        def empty_line_push() -> bool:
            from prompt_toolkit.application import get_app

            return self.listener.mode == "push" and not get_app().current_buffer.text

        @keys.add(" ", filter=empty_line_push)
        def _hold(event: Any) -> None:
            nonlocal release
            self.listener.press()
            if release is not None:
                release.cancel()
            release = asyncio.get_running_loop().call_later(HOLD_RELEASE, self.listener.release)

        @keys.add("c-t")
        def _tap(event: Any) -> None:
            if self.listener.mode != "push":
                self.listener.set_mode("push")
            self.listener.toggle()

        @keys.add("c-o")
        def _cycle(event: Any) -> None:
            modes = LISTENING_MODES
            self.listener.set_mode(modes[(modes.index(self.listener.mode) + 1) % len(modes)])

        return keys

    async def finished(self, timeout: float) -> None:
        if not self._ends or not self._started:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._done.wait()  # the recording, and its silence after, played
                await self.input.settled()  # its last words reached the session

    async def aclose(self) -> None:
        self._closed = True
        self._session.off("background_alert", self._on_alert)
        self.listener.close()
        async with asyncio.timeout(CLOSE_TIMEOUT):
            await self._scope.aclose()
            await self._source.aclose()
            await self.input.aclose()

    # -- inside -----------------------------------------------------------------------------
    async def _listen(self) -> None:
        echo = self._echo
        try:
            async for frame in self._source:
                self.frames += 1
                if echo is not None:
                    frame = echo.process(frame)
                self.input.push(self.listener.gate(frame))
        except Exception as e:  # the device stopped: said once; typing goes on
            logger.warning("the microphone stopped: %s", e, exc_info=e)
            if self._emit is not None:
                self._emit(f"[voice] the microphone stopped ({e}); you can still type\n")
        finally:
            self._done.set()

    def _said(self, text: str) -> None:
        if self._emit is not None:
            self._emit(f"you (said): {text}\n")

    def _on_alert(self, ev: Any) -> None:
        if not self._closed:
            sound = alert_sound(ev.kind, getattr(self._tts, "sample_rate", 24000))
            # Over the agent's voice, at once (a sink that cannot mix queues it).
            getattr(self._sink, "mix", self._sink.write)(sound)

    def _on_change(self, state: ListenerState) -> None:
        if state.moment == "released" and self._started:
            self.input.end_utterance()  # the key let go: what was said is a turn now
        if state.moment in ("woke", "window closed"):
            rate = getattr(self._tts, "sample_rate", 24000)
            sound = chime(rate, rising=state.moment == "woke")
            getattr(self._sink, "mix", self._sink.write)(sound)  # at once, over any reply
        if self._emit is not None and state.moment in ("woke", "window closed", "mode"):
            self._emit(f"[voice] {state.describe()}\n")
        if self._redraw is not None:
            self._redraw()
