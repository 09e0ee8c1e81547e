"""Ways to talk: which of the microphone's sound is heard, and which turns reach the
session.

A ``Listener`` sits on both sides of ``SpeechInput``: ``gate(frame)`` decides what
the microphone's frame becomes before it is pushed (itself, or silence of the same
length, so voice activity ends naturally when the user stops talking or lets go of
the key), and it is the ``TurnSink`` that ``SpeechInput`` drives, passing on to the
session only what the mode lets through:

- ``"always"``: everything (always-on listening, gated by voice activity);
- ``"push"``: push-to-talk. ``press()``/``release()`` (hold a key) or ``toggle()``
  (tap once to start and once to stop); outside it the microphone is silence.
  Pressing interrupts the agent if it is speaking: the user asked for the floor;
- ``"wake"``: idle until the wake phrase ("hey backline") is heard in the local
  transcript; then a conversation window, in which everything goes through, that
  closes after ``wake_window`` seconds in which neither the user nor the agent spoke.
  What was said after the phrase, in the same breath, is the first turn;
- ``"mute"``: nothing is heard.

``set_mode()`` switches at any time. ``on_change(state)`` reports what the front end
shows and sounds (``ListenerState``: the mode, whether the user is heard now, and
``"woke"`` / ``"window closed"`` moments, when a front end plays ``chime()``).
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeAlias

from .audio_input import TurnSink
from .frames import AudioFrame

__all__ = [
    "DEFAULT_WAKE_PHRASE",
    "LISTENING_MODES",
    "Listener",
    "ListenerState",
    "ListeningMode",
    "chime",
]

ListeningMode: TypeAlias = Literal["always", "push", "wake", "mute"]
LISTENING_MODES: tuple[ListeningMode, ...] = ("always", "push", "wake", "mute")
DEFAULT_WAKE_PHRASE = "hey backline"
DEFAULT_WAKE_WINDOW = 8.0  # seconds of quiet that close a wake window

_BUSY_AGENT = frozenset({"thinking", "speaking"})


@dataclass(frozen=True)
class ListenerState:
    """What a front end shows: ``mode``; ``hearing`` (the user's voice goes through
    now); ``moment``: ``"woke"`` (the wake phrase opened a window), ``"window closed"``,
    ``"pressed"``, ``"released"``, ``"mode"`` (switched), or None."""

    mode: ListeningMode
    hearing: bool
    moment: str | None = None

    def describe(self) -> str:
        """A few words for a status line."""
        if self.mode == "mute":
            return "muted"
        if self.mode == "push":
            return "talking (push-to-talk)" if self.hearing else "push-to-talk: hold or tap"
        if self.mode == "wake":
            return "listening (wake window)" if self.hearing else "waiting for the wake phrase"
        return "listening"


class Listener:
    """See the module doc. ``session``: what the turns go to (a ``backline.Session``)."""

    def __init__(
        self,
        session: TurnSink,
        *,
        mode: ListeningMode = "always",
        wake_phrase: str = DEFAULT_WAKE_PHRASE,
        wake_window: float = DEFAULT_WAKE_WINDOW,
        on_change: Callable[[ListenerState], None] | None = None,
    ) -> None:
        if mode not in LISTENING_MODES:
            raise ValueError(f"mode must be one of {', '.join(LISTENING_MODES)}, not {mode!r}")
        key = _squash(wake_phrase)
        if not key:
            raise ValueError("the wake phrase needs at least one word")
        if not wake_window > 0:
            raise ValueError("the wake window must be a positive number of seconds")
        self._session = session
        self._mode: ListeningMode = mode
        self.wake_phrase = wake_phrase
        self._wake_key = key
        self.wake_window = wake_window
        self._on_change = on_change
        self._pressed = False
        self._open = False  # a wake window is open
        self._passed_start = False  # the session was told the user started speaking
        self._heard = False  # the utterance under way started while the user was heard
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False

    # -- state ------------------------------------------------------------------------
    @property
    def mode(self) -> ListeningMode:
        return self._mode

    @property
    def hearing(self) -> bool:
        """Whether the user's voice reaches the session now."""
        if self._mode == "always":
            return True
        if self._mode == "push":
            return self._pressed
        if self._mode == "wake":
            return self._open
        return False

    @property
    def state(self) -> ListenerState:
        return ListenerState(self._mode, self.hearing)

    def set_mode(self, mode: ListeningMode) -> None:
        if mode not in LISTENING_MODES:
            raise ValueError(f"mode must be one of {', '.join(LISTENING_MODES)}, not {mode!r}")
        if mode == self._mode:
            return
        self._mode = mode
        self._pressed = False
        self._set_open(False, moment=None)
        self._changed("mode")

    def press(self) -> None:
        """Push-to-talk: the key went down (or a tap started talking)."""
        if self._mode != "push" or self._pressed:
            return
        self._pressed = True
        if self._session.agent_state == "speaking":
            self._session.interrupt()
        self._changed("pressed")

    def release(self) -> None:
        """Push-to-talk: the key went up (or a second tap)."""
        if self._mode != "push" or not self._pressed:
            return
        self._pressed = False
        self._changed("released")

    def toggle(self) -> None:
        """Tap-to-talk: a tap starts talking, the next one stops."""
        if self._pressed:
            self.release()
        else:
            self.press()

    # -- the microphone side --------------------------------------------------------------
    def gate(self, frame: AudioFrame) -> AudioFrame:
        """The frame to push to ``SpeechInput``: itself where the microphone is heard
        (wake mode hears everything, to catch the phrase), silence otherwise."""
        if self._mode in ("always", "wake") or (self._mode == "push" and self._pressed):
            return frame
        return AudioFrame(bytes(len(frame.data)), frame.sample_rate, frame.channels)

    # -- TurnSink: what SpeechInput drives --------------------------------------------------
    @property
    def agent_state(self) -> str:
        return self._session.agent_state

    def user_started_speaking(self, *, interrupt: bool = True) -> None:
        self._heard = self.hearing
        if self._heard:
            self._passed_start = True
            self._keep_open()
            self._session.user_started_speaking(interrupt=interrupt)

    def user_stopped_speaking(self) -> None:
        if self._passed_start:
            self._passed_start = False
            self._keep_open()
            self._session.user_stopped_speaking()

    def push_interim_transcript(self, text: str) -> None:
        if self._mode == "wake" and not self._open:
            if self._wake_key in _squash(text):
                self._wake()
            return
        if self.hearing or self._heard:
            self._keep_open()
            self._session.push_interim_transcript(text)

    def push_user_turn(self, text: str) -> None:
        """A final transcript: it reaches the session if the user is heard now, or was
        when this utterance started (a key let go before the words were recognised)."""
        heard, self._heard = self._heard, self._passed_start and self._heard
        if self._mode == "wake":
            rest = self._after_phrase(text)
            if rest is not None:  # the phrase, in this utterance
                if not self._open:
                    self._wake()
                if rest:
                    self._session.push_user_turn(rest)
                self._keep_open()
                return
        if self.hearing or heard:
            self._keep_open()
            self._session.push_user_turn(text)

    def interrupt(self, *, force: bool = False) -> None:
        if self.hearing:
            self._session.interrupt(force=force)

    # -- the wake window ------------------------------------------------------------------
    def _wake(self) -> None:
        self._set_open(True, moment="woke")

    def _set_open(self, value: bool, *, moment: str | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        was = self._open
        self._open = value
        if value:
            self._arm()
        elif was and self._passed_start:
            self._passed_start = False
            self._session.user_stopped_speaking()
        if moment is not None and value != was:
            self._changed(moment)

    def _keep_open(self) -> None:
        if self._open:
            self._arm()

    def _arm(self) -> None:
        if self._closed:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(self.wake_window, self._window_due)

    def _window_due(self) -> None:
        self._timer = None
        if not self._open:
            return
        if self._passed_start or self._session.agent_state in _BUSY_AGENT:
            self._arm()  # still talking, one side or the other: wait another window
            return
        self._set_open(False, moment="window closed")

    def _after_phrase(self, text: str) -> str | None:
        """What follows the wake phrase in ``text`` (words, as said), or None if the
        phrase is not in it."""
        words = re.findall(r"[\w']+", text)
        squashed = [_squash(w) for w in words]
        for start in range(len(words)):
            joined = ""
            for end in range(start, len(words)):
                joined += squashed[end]
                if joined == self._wake_key:
                    return " ".join(words[end + 1 :])
                if not self._wake_key.startswith(joined):
                    break
        return None

    def _changed(self, moment: str) -> None:
        if self._on_change is not None:
            self._on_change(ListenerState(self._mode, self.hearing, moment))

    def close(self) -> None:
        """Stop the wake window's timer (the listener hears nothing more)."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def _squash(text: str) -> str:
    """Lower case, letters and digits only: "Hey, Back-line!" -> "heybackline"."""
    return re.sub(r"[\W_]+", "", text.lower())


def chime(sample_rate: int = 24000, *, rising: bool = True, seconds: float = 0.18) -> AudioFrame:
    """A short two-note sound (rising: a window opened; falling: it closed)."""
    notes = (660.0, 990.0) if rising else (990.0, 660.0)
    half = int(sample_rate * seconds / 2)
    samples: list[int] = []
    for note in notes:
        for i in range(half):
            fade = min(1.0, i / (0.01 * sample_rate), (half - i) / (0.01 * sample_rate))
            samples.append(int(8000 * fade * math.sin(2 * math.pi * note * i / sample_rate)))
    return AudioFrame.from_samples(samples, sample_rate)
