"""The part of a realtime (speech-to-speech) model session the runtime relies on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable


@runtime_checkable
class RealtimeSession(Protocol):
    """A realtime model session attached to an agent.

    ``background_work_running`` is true while the model works with nothing to
    show yet (a backend response in flight, an open tool call). The property is
    the truth: the runtime reads it whenever it attaches the session (at start,
    at a handoff that reuses the session, after a reconnect). The change
    notification lets the runtime react at once when work starts after the
    user-away timer was armed. A listener is called with the new value.
    """

    @property
    def background_work_running(self) -> bool: ...

    def add_background_work_listener(self, listener: Callable[[bool], None]) -> None: ...

    def remove_background_work_listener(self, listener: Callable[[bool], None]) -> None: ...
