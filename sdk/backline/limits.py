"""The limit table: every size, count and time bound that protects a session from input.

One table, so a limit is found (and documented, and tested) in one place. Each field
is a documented default; a session takes its own ``Limits`` (``Session(limits=...)``
where wired), front ends take theirs from options. A value over a limit is cut with a
visible marker (``truncate_text``) or refused with a clear error, never passed on whole.

Add a field here for any new bound (a queue's depth, a payload's size, a deadline),
with a docstring that says what it bounds and what happens at the bound.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

TRUNCATION_MARKER = (
    "\n[... truncated: {cut} of {total} characters cut ({what} is limited to {limit})]"
)
"""Appended to text cut at a limit, so a model and a person both see that it was cut."""


@dataclass(frozen=True)
class Limits:
    """Bounds on what a session accepts. Every field is a positive number."""

    log_queue_size: int = 10_000
    """Records waiting for the conversation log's writer thread. Past it a record is
    dropped (counted in the session's ``dropped`` column, warned about once): the event
    loop never waits for the disk."""

    log_batch_size: int = 500
    """Records the conversation log's writer commits in one transaction, at most."""

    log_batch_interval: float = 0.05
    """Seconds the conversation log's writer gathers records before a commit (a flush or
    a close cuts it short): few wake-ups, few transactions. A killed process loses at
    most this much."""

    log_busy_timeout: float = 2.0
    """Seconds a conversation-log write waits for another process's lock before the
    batch is dropped (with a warning; later batches are tried again)."""

    log_close_timeout: float = 2.0
    """Seconds closing the conversation log (at exit) waits for its writer to finish."""

    log_text_chars: int = 20_000
    """Characters of one text (a turn, a tool's arguments or output, a background
    message) kept in the conversation log; the rest is cut with a visible marker."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"Limits.{f.name} must be a positive number, got {value!r}")

    def with_(self, **changes: Any) -> Limits:
        """A copy with ``changes`` (validated like the constructor)."""
        return replace(self, **changes)


DEFAULT_LIMITS = Limits()
"""The documented defaults (docs/limits.md lists them)."""


def truncate_text(text: str, limit: int, what: str) -> tuple[str, bool]:
    """``text`` cut to at most ``limit`` characters plus a visible marker naming ``what``.

    Returns ``(text, was_cut)``; text within the limit is returned unchanged.
    """
    if len(text) <= limit:
        return text, False
    cut = len(text) - limit
    marker = TRUNCATION_MARKER.format(cut=cut, total=len(text), what=what, limit=limit)
    return text[:limit] + marker, True
