"""The user as the session sees them: listening, speaking or away.

``UserPresence`` owns the user's state and the user-away timer (``_away``): the
front end's speech signals and user turns change the state; the timer, armed only
while both the user and the agent listen and nothing holds it, sets ``away``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ._away import AwayTimer
from .events import UserState, UserStateChanged

if TYPE_CHECKING:
    from ._runtime import Runtime


class UserPresence:
    """The user's state and the away timer of one session (see the module doc)."""

    __slots__ = ("_session", "away", "state")

    def __init__(
        self, session: Runtime, timeout: float | None, *, should_arm: Callable[[], bool]
    ) -> None:
        self._session = session
        self.state: UserState = "listening"
        self.away = AwayTimer(
            timeout,
            should_arm=should_arm,
            current_owner=lambda: session._switches.current,
            fire=self._went_away,
        )

    def set(self, state: UserState) -> None:
        old = self.state
        if old != state:
            self.state = state
            self._session.emit(UserStateChanged(old=old, new=state))

    def took_turn(self) -> None:
        """A final user turn: the user is back if away; else the away window restarts
        (disarmed now: the refresh that ends the turn re-arms a full window)."""
        if self.state == "away":
            self.set("listening")
        else:
            self.away.cancel()

    def _went_away(self) -> None:
        session = self._session
        if not session._closing:
            self.set("away")
            session._refresh()
