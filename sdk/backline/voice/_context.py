"""Context variables: which tool call or ``on_enter`` the current code runs in."""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._activity import AgentActivity
    from ._tool_runner import CallState

current_call: ContextVar[CallState | None] = ContextVar("backline_current_call", default=None)
current_on_enter: ContextVar[AgentActivity | None] = ContextVar(
    "backline_current_on_enter", default=None
)
