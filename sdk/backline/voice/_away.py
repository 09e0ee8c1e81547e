"""The user-away timer policy and its counted holds.

The timer is armed only when the user and the agent are both ``listening``,
no counting hold is held and no realtime model is working in the background.
It is re-evaluated (``reevaluate``) whenever any of those inputs changes, so
work that starts after the timer was armed cancels it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._activity import AgentActivity


class AwayTimer:
    """Counted holds per owner, and the one rule that decides whether the timer runs.

    A hold with owner ``None`` (session-scoped work, a busy background session)
    always counts; a hold owned by an activity counts only while that activity is
    current (a paused agent's tool cannot speak until the agent resumes).
    """

    def __init__(
        self,
        timeout: float | None,
        *,
        should_arm: Callable[[], bool],
        current_owner: Callable[[], AgentActivity | None],
        fire: Callable[[], None],
    ) -> None:
        if timeout is not None and timeout <= 0:
            raise ValueError("user_away_timeout must be positive, or None to disable it")
        self.timeout = timeout
        self._should_arm = should_arm
        self._current_owner = current_owner
        self._fire = fire
        self._holds: dict[AgentActivity | None, int] = {}
        self._handle: asyncio.TimerHandle | None = None
        self._on_change: Callable[[], None] | None = None

    @property
    def armed(self) -> bool:
        return self._handle is not None

    def counting_holds(self) -> int:
        if not self._holds:
            return 0
        current = self._current_owner()
        return self._holds.get(None, 0) + (
            self._holds.get(current, 0) if current is not None else 0
        )

    def take_hold(self, owner: AgentActivity | None) -> None:
        self._holds[owner] = self._holds.get(owner, 0) + 1
        self._changed()

    def release_hold(self, owner: AgentActivity | None) -> None:
        n = self._holds.get(owner, 0)
        if n <= 1:
            self._holds.pop(owner, None)
        else:
            self._holds[owner] = n - 1
        self._changed()

    def move_hold(self, old: AgentActivity | None, new: AgentActivity | None) -> None:
        """Move one hold from ``old`` to ``new`` (ownership changed)."""
        if self._holds.get(old, 0) == 0:
            return
        self.release_hold(old)
        self.take_hold(new)

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change()
        else:
            self.reevaluate()

    def reevaluate(self) -> None:
        """Arm or cancel the timer from the current inputs (idempotent)."""
        arm = self.timeout is not None and self.counting_holds() == 0 and self._should_arm()
        if arm and self._handle is None:
            assert self.timeout is not None
            self._handle = asyncio.get_running_loop().call_later(self.timeout, self._expired)
        elif not arm and self._handle is not None:
            self.cancel()

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _expired(self) -> None:
        self._handle = None
        self._fire()
