"""The part of a realtime (speech-to-speech) model session the runtime relies on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from .chat_context import ChatContext


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


@runtime_checkable
class ContextFollower(Protocol):
    """A realtime session that takes context changes as they happen.

    The runtime calls ``context_changed(chat_ctx)`` when items were inserted into the
    agent's context with no reply of their own (a background's silent update), so the
    model has them at once rather than with the next request. Return at once: bring
    them over in the background, best effort (the next request syncs the context in
    any case), and never start a response.
    """

    def context_changed(self, chat_ctx: ChatContext) -> None: ...
