"""The user as the session sees them: listening, speaking or away.

``UserPresence`` owns the user's state and the user-away timer (``away``): the
front end's speech signals, transcripts and user turns change the state; the
timer, armed only while both the user and the agent listen and nothing holds it,
reports the user gone (``went_away``), and the session decides.

What counts as the user being there is the session's ``user_away_signal``:

- ``"audio"`` (the default): any detected speech holds "away" off (the user is
  "speaking" meanwhile, and the timer only runs while they listen);
- ``"transcript"``: only transcripts count. Speech activity with no transcript (noise)
  does not hold "away" off; each interim transcript restarts the window; once away,
  only a transcript ends it (an interim as "speaking", a final as "listening"), and
  speech-activity flips are ignored meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, TypeAlias

from ._away import AwayTimer
from .events import Event, UserState, UserStateChanged

UserAwaySignal: TypeAlias = Literal["audio", "transcript"]
USER_AWAY_SIGNALS: tuple[UserAwaySignal, ...] = ("audio", "transcript")


class UserPresence:
    """The user's state and the away timer of one session (see the module doc)."""

    __slots__ = ("_emit", "away", "signal", "state")

    def __init__(
        self,
        timeout: float | None,
        *,
        signal: UserAwaySignal = "audio",
        should_arm: Callable[[], bool],
        current_owner: Callable[[], object],
        emit: Callable[[Event], None],
        went_away: Callable[[], None],
    ) -> None:
        self._emit = emit
        self.signal = signal
        self.state: UserState = "listening"
        self.away = AwayTimer(
            timeout, should_arm=should_arm, current_owner=current_owner, fire=went_away
        )

    def set(self, state: UserState) -> None:
        old = self.state
        if old != state:
            self.state = state
            self._emit(UserStateChanged(old=old, new=state))

    def lets_timer_run(self) -> bool:
        """The user's side of the away rule: listening (audio), or not away yet and
        whatever the speech activity says (transcript: noise does not hold it off)."""
        if self.signal == "audio":
            return self.state == "listening"
        return self.state != "away"

    def speech_started(self) -> bool:
        """Voice activity began; False if the signal ignores it (transcript, away)."""
        if self.signal == "transcript" and self.state == "away":
            return False
        self.set("speaking")
        return True

    def speech_stopped(self) -> bool:
        if self.signal == "transcript" and self.state == "away":
            return False
        self.set("listening")
        return True

    def interim(self) -> None:
        """An interim transcript: in transcript mode it ends "away" (as "speaking": the
        end of the speech is still to come) and restarts the window."""
        if self.signal != "transcript":
            return
        if self.state == "away":
            self.set("speaking")
        self.away.cancel()  # the refresh after it arms a full window
