"""The interrupt grace window: when a message reaching a busy background interrupts it.

A voice model often splits one correction into several sends. So a message
that arrives while the background is inside a turn interrupts that turn only
if (a) no earlier message is still waiting (the first piece of a burst), (b)
more than ``grace`` seconds have passed since the turn started (a correction
sent right after the turn began is queued, not used to kill it), and (c) this
turn was not interrupted already. Every message is queued either way.

An interrupt is decided for one turn and carries its number (``turn``): it is
dropped if that turn has ended before the callback runs, so it never lands on
the next turn (often the very correction that caused it).
"""

from __future__ import annotations


class GraceWindow:
    __slots__ = ("_count", "_interrupted", "_started_at", "grace")

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self._started_at: float | None = None
        self._interrupted = False
        self._count = 0

    @property
    def in_turn(self) -> bool:
        return self._started_at is not None

    @property
    def turn(self) -> int | None:
        """The number of the turn running now (1, 2, ...), or None between turns."""
        return self._count if self._started_at is not None else None

    def turn_started(self, now: float) -> None:
        self._count += 1
        self._started_at = now
        self._interrupted = False

    def turn_ended(self) -> None:
        self._started_at = None
        self._interrupted = False

    def stopped(self) -> None:
        """The turn was stopped on purpose (``backline_stop``): it counts as interrupted,
        so a message of the same burst does not interrupt it again."""
        if self._started_at is not None:
            self._interrupted = True

    def should_interrupt(self, *, now: float, earlier_waiting: int) -> bool:
        """Decide for a message that just arrived; records the interrupt if yes."""
        if self._started_at is None or self._interrupted or earlier_waiting:
            return False
        if now - self._started_at <= self.grace:
            return False
        self._interrupted = True
        return True
