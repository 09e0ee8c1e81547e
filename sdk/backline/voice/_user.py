"""The user as the session sees them: listening, speaking or away.

``UserPresence`` owns the user's state and the user-away timer (``away``): the
front end's speech signals and user turns change the state; the timer, armed only
while both the user and the agent listen and nothing holds it, reports the user
gone (``went_away``), and the session decides.
"""

from __future__ import annotations

from collections.abc import Callable

from ._away import AwayTimer
from .events import Event, UserState, UserStateChanged


class UserPresence:
    """The user's state and the away timer of one session (see the module doc)."""

    __slots__ = ("_emit", "away", "state")

    def __init__(
        self,
        timeout: float | None,
        *,
        should_arm: Callable[[], bool],
        current_owner: Callable[[], object],
        emit: Callable[[Event], None],
        went_away: Callable[[], None],
    ) -> None:
        self._emit = emit
        self.state: UserState = "listening"
        self.away = AwayTimer(
            timeout, should_arm=should_arm, current_owner=current_owner, fire=went_away
        )

    def set(self, state: UserState) -> None:
        old = self.state
        if old != state:
            self.state = state
            self._emit(UserStateChanged(old=old, new=state))
