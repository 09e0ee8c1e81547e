"""The part of a realtime (speech-to-speech) model session the runtime relies on."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from .chat_context import ChatContext
from .tools import FunctionTool


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
    """A realtime session that follows its agent between requests.

    ``agent_changed(chat_ctx, tools)``: the session now speaks for this agent (at the
    start, after a handoff): its context (the instructions are its system messages)
    and its tools, before any request, so a model that answers the user's voice by
    itself is configured for it ahead. ``context_changed(chat_ctx)``: items reached the
    agent's context with no reply of their own (a background's silent update), so the
    model has them at once rather than with the next request. Both return at once:
    the work is done in the background, best effort (the next request syncs the
    context and carries the tools in any case), and never starts a response.
    """

    def agent_changed(self, chat_ctx: ChatContext, tools: Sequence[FunctionTool]) -> None: ...

    def context_changed(self, chat_ctx: ChatContext) -> None: ...
