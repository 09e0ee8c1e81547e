"""``FakeRealtimeSession``: drive a realtime model's background-work flag in tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..llm.chat_context import ChatContext, ChatMessage
from ..llm.tools import FunctionTool


class FakeRealtimeSession:
    """A ``RealtimeSession`` whose ``background_work_running`` a test sets by hand.

    ``set_background_work(True)`` notifies listeners at once, as a realtime
    model does when a backend response starts; the property is always the truth.
    It is also a ``ContextFollower``: ``agents`` records each ``agent_changed`` (the
    system messages' text, the tool names) and ``contexts`` each ``context_changed``
    (the texts of the context's messages then).
    """

    def __init__(self, *, background_work_running: bool = False) -> None:
        self._running = background_work_running
        self._listeners: list[Callable[[bool], None]] = []
        self.changes: list[bool] = []
        self.agents: list[tuple[list[str], list[str]]] = []
        self.contexts: list[list[str]] = []

    def agent_changed(self, chat_ctx: ChatContext, tools: Sequence[FunctionTool]) -> None:
        system = [
            m.content
            for m in chat_ctx.items
            if isinstance(m, ChatMessage) and m.role in ("system", "developer")
        ]
        self.agents.append((system, sorted(t.name for t in tools)))

    def context_changed(self, chat_ctx: ChatContext) -> None:
        self.contexts.append([m.content for m in chat_ctx.items if isinstance(m, ChatMessage)])

    @property
    def background_work_running(self) -> bool:
        return self._running

    def add_background_work_listener(self, listener: Callable[[bool], None]) -> None:
        self._listeners.append(listener)

    def remove_background_work_listener(self, listener: Callable[[bool], None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    @property
    def listener_count(self) -> int:
        return len(self._listeners)

    def set_background_work(self, running: bool, *, notify: bool = True) -> None:
        """Change the flag; with ``notify=False`` only the property changes (as when
        no listener could be told, e.g. during a handoff)."""
        if running == self._running:
            return
        self._running = running
        self.changes.append(running)
        if notify:
            for listener in list(self._listeners):
                listener(running)
