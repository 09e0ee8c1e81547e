"""Session observers: the ``session_started`` / ``session_closed`` plugin hooks.

The runtime calls these two functions; they forward to the active plugin
manager, if one was activated (the CLI activates the one it loaded). An
observer that raises is logged, never fatal.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("backline")

_observers: list[Callable[[str, Any], None]] = []


def add_observer(observer: Callable[[str, Any], None]) -> None:
    """Call ``observer(hook_name, session)`` on session start and close."""
    if observer not in _observers:
        _observers.append(observer)


def remove_observer(observer: Callable[[str, Any], None]) -> None:
    if observer in _observers:
        _observers.remove(observer)


def _notify(name: str, session: Any) -> None:
    for observer in list(_observers):
        try:
            observer(name, session)
        except Exception:
            logger.exception("a %s observer raised", name)


def session_started(session: Any) -> None:
    _notify("session_started", session)


def session_closed(session: Any) -> None:
    _notify("session_closed", session)


def has_observer(observer: Callable[[str, Any], None]) -> bool:
    """Whether ``observer`` is registered."""
    return observer in _observers
