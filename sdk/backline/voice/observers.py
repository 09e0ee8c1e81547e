"""Session observers: code that watches every session start and close.

The runtime calls no layer above it. What must follow every session (the plugin
manager's ``session_started`` / ``session_closed`` hooks, the MCP voice channel's
registry of sessions) subscribes here, and the session tells its observers as it
starts and as it closes. An observer runs synchronously, must not block, and one
that raises is logged, never fatal.

To watch a single session instead, listen for its events (``session.on(...)``).
"""

from __future__ import annotations

import logging
from typing import Any, Literal, Protocol, TypeAlias

logger = logging.getLogger("backline")

SessionHook: TypeAlias = Literal["session_started", "session_closed"]


class SessionObserver(Protocol):
    """``observer(hook, session)``: ``hook`` is ``"session_started"`` (the session's
    agent and parts are running) or ``"session_closed"`` (a started session closed)."""

    def __call__(self, hook: SessionHook, session: Any, /) -> None: ...


_observers: list[SessionObserver] = []


def add_session_observer(observer: SessionObserver) -> None:
    """Call ``observer(hook, session)`` at every session's start and close (once, even
    if added twice)."""
    if observer not in _observers:
        _observers.append(observer)


def remove_session_observer(observer: SessionObserver) -> None:
    """Stop calling ``observer`` (nothing happens if it was not added)."""
    if observer in _observers:
        _observers.remove(observer)


def has_session_observer(observer: SessionObserver) -> bool:
    """Whether ``observer`` is added."""
    return observer in _observers


def notify(hook: SessionHook, session: Any) -> None:
    """Tell every observer (the session calls this; an observer that raises is logged)."""
    for observer in list(_observers):
        try:
            observer(hook, session)
        except Exception:
            logger.exception("a %s observer raised", hook)
