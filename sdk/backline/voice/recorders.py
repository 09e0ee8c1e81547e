"""Conversation recorders: what a session tells a recorder of its turns, directly.

A turn's facts (two items, three state changes, the model request) would cost a
recorder six events to build and dispatch. A ``ConversationRecorder`` added with
``session.add_recorder`` is called instead, on the event loop, as each fact happens,
with nothing built for it: the conversation log (``backline.logs``) is one. Everything
else (background messages, errors, close) a recorder hears as events (``session.on``).

A recorder's methods run synchronously on the event loop and must only take note
(queue, append): never block, never change the session. One that raises is logged,
never fatal, and the session goes on.
"""

from __future__ import annotations

from typing import Literal, Protocol

from ..llm.chat_context import ChatItem
from ..llm.llm import LLM, Usage
from .events import AgentState

RequestStatus = Literal["completed", "cancelled", "failed"]


class ConversationRecorder(Protocol):
    """Told each fact of a turn as it happens (see the module doc)."""

    def item_added(self, item: ChatItem) -> None:
        """``item`` was added to the history (what ``conversation_item_added`` says)."""

    def agent_state_changed(self, old: AgentState, new: AgentState) -> None:
        """The agent's state changed (what ``agent_state_changed`` says)."""

    def llm_request(
        self,
        llm: LLM,
        speech_id: str,
        *,
        started: float,
        first: float | None,
        first_audio: float | None,
        ended: float,
        usage: Usage | None,
        status: RequestStatus,
    ) -> None:
        """One model request of ``speech_id`` ended: sent at ``started``, its first
        output at ``first``, its first audio at ``first_audio`` (a model that speaks),
        ended at ``ended`` (event-loop seconds), with the model's ``usage`` (what
        ``llm_metrics`` says)."""
