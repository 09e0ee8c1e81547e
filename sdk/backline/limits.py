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

    livekit_close_timeout: float = 10.0
    """Seconds a LiveKit front end (``backline-livekit``) waits for LiveKit's own session
    to close, after the backline session has closed (itself bounded); past it the close
    goes on and a warning is logged."""

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
