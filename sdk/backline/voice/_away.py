"""The user-away timer policy and its counted holds.

The timer is armed only when the user and the agent are both ``listening``,
no counting hold is held and no realtime model is working in the background.
It is re-evaluated (``reevaluate``) whenever any of those inputs changes, so
work that starts after the timer was armed cancels it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class Hold:
    """One counted hold on the away timer, taken by running work (a tool, a
    background turn). ``owner`` is the one record of who holds it: moving the hold
    changes it, and ``release()`` reads it (idempotent)."""

    __slots__ = ("_timer", "owner")

    def __init__(self, timer: AwayTimer, owner: object) -> None:
        self._timer = timer
        self.owner = owner

    def __repr__(self) -> str:
        return f"Hold({self.owner!r})"

    def release(self) -> None:
        self._timer._release(self)


class AwayTimer:
    """Counted holds per owner, and the one rule that decides whether the timer runs.

    A hold with owner ``None`` (session-scoped work, a busy background session)
    always counts; a hold owned by an activity counts only while that activity is
    current (a paused agent's tool cannot speak until the agent resumes).
    """

    __slots__ = (
        "_current_owner",
        "_deadline",
        "_fire",
        "_handle",
        "_handle_at",
        "_holds",
        "_loop",
        "_should_arm",
        "timeout",
    )

    def __init__(
        self,
        timeout: float | None,
        *,
        should_arm: Callable[[], bool],
        current_owner: Callable[[], object],
        fire: Callable[[], None],
    ) -> None:
        if timeout is not None and timeout <= 0:
            raise ValueError("user_away_timeout must be positive, or None to disable it")
        self.timeout = timeout
        self._should_arm = should_arm
        self._current_owner = current_owner
        self._fire = fire
        self._holds: set[Hold] | None = None  # made at the first hold
        # Armed: the loop time the user goes away at. The loop's timer (``_handle``,
        # due at ``_handle_at``) is lazy: disarming leaves it in place, and re-arming
        # with a later deadline reuses it; when it comes due early it re-arms for the
        # deadline. A turn arms and disarms the window; the loop's timer heap is
        # touched about once per window, not twice per turn.
        self._deadline: float | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._handle_at = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def armed(self) -> bool:
        return self._deadline is not None

    @property
    def holds(self) -> list[Hold]:
        """Every hold taken and not yet released."""
        return list(self._holds or ())

    def counting_holds(self) -> int:
        if not self._holds:
            return 0
        current = self._current_owner()
        return sum(1 for h in self._holds if h.owner is None or h.owner is current)

    def take_hold(self, owner: object) -> Hold:
        hold = Hold(self, owner)
        if self._holds is None:
            self._holds = set()
        self._holds.add(hold)
        if self._deadline is not None:
            self.reevaluate()  # a hold can only stop the timer
        return hold

    def _release(self, hold: Hold) -> None:
        if self._holds is not None and hold in self._holds:
            self._holds.remove(hold)
            self.reevaluate()

    def move_holds(self, old: object, new: object) -> None:
        """Every hold ``old`` owns now belongs to ``new`` (``old`` closed for good)."""
        moved = False
        for hold in self._holds or ():
            if hold.owner is old:
                hold.owner = new
                moved = True
        if moved:
            self.reevaluate()

    def reevaluate(self) -> None:
        """Arm or cancel the timer from the current inputs (idempotent)."""
        timeout = self.timeout
        if timeout is None:
            return
        arm = (not self._holds or self.counting_holds() == 0) and self._should_arm()
        if arm:
            if self._deadline is None:
                self._arm(timeout)
        elif self._deadline is not None:
            self._deadline = None  # the loop's timer stays, for the next window

    def _arm(self, timeout: float) -> None:
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        deadline = self._deadline = loop.time() + timeout
        handle = self._handle
        if handle is None or deadline < self._handle_at:
            if handle is not None:
                handle.cancel()
            self._handle = loop.call_at(deadline, self._due)
            self._handle_at = deadline

    def cancel(self) -> None:
        """Disarm (the user did something: the next arm starts a full window)."""
        self._deadline = None

    def stop(self) -> None:
        """Disarm and drop the loop's timer (the session closes)."""
        self._deadline = None
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _due(self) -> None:
        self._handle = None
        deadline = self._deadline
        if deadline is None:
            return  # disarmed since
        if deadline > self._handle_at:
            assert self._loop is not None
            self._handle = self._loop.call_at(deadline, self._due)  # re-armed since
            self._handle_at = deadline
            return
        self._deadline = None
        self._fire()
