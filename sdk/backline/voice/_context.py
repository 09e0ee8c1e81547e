"""Context variables: which tool call or ``on_enter`` the current code runs in.

``await SomeTask(...)`` (an inline ``AgentTask``) reads them to find the agent to
pause and the speech whose tool awaits the task. They are typed by what that needs
(``InlineHost``), so this module sits below everything that sets them.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Protocol

from .speech_handle import SpeechHandle


class InlineHost(Protocol):
    """An agent that can pause while an inline task runs (``AgentActivity``)."""

    async def run_inline(self, task: Any, speech: SpeechHandle | None) -> Any: ...


class InlineCall(Protocol):
    """A tool call in flight (``CallState``): the agent and the speech it belongs to."""

    @property
    def activity(self) -> InlineHost: ...

    @property
    def speech(self) -> SpeechHandle: ...


current_call: ContextVar[InlineCall | None] = ContextVar("backline_current_call", default=None)
current_on_enter: ContextVar[InlineHost | None] = ContextVar(
    "backline_current_on_enter", default=None
)
