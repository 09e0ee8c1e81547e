"""Where the bridge touches LiveKit's states itself.

LiveKit derives its agent state from its own speeches and its user state from
voice activity. With backline as the brain, "thinking" (tools running, a
background reply owed) and the user being away are backline's knowledge, so the
bridge decides them: clients read ``lk.agent.state`` from the room.

The agent state goes through an ``AgentStateGate``: every state LiveKit sets on
its own is first offered to the bridge, which keeps it, replaces it, or holds
it back, so LiveKit emits one change per real change. (Setting the state after
LiveKit had set its own made a burst at every speech end: listening, thinking,
listening, thinking within a millisecond, and listeners called after the
bridge's saw the changes out of order.)

LiveKit 1.8 has no public setter or hook for these: its private
``AgentSession._update_agent_state`` and ``_update_user_state`` are used here and
nowhere else, and ``tests/plugins/livekit`` checks that they still behave.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from livekit.agents import AgentSession

AgentState = Literal["initializing", "idle", "listening", "thinking", "speaking"]
UserState = Literal["speaking", "listening", "away"]

Decide = Callable[[AgentState], "AgentState | None"]
"""Given the state LiveKit is about to set, the state to set instead (``None``: none)."""


class AgentStateGate:
    """Puts ``decide`` between LiveKit and its agent state: every state LiveKit sets
    on its own (from any of its modules) passes ``decide`` first. ``set`` is the
    bridge's own write, which does not."""

    def __init__(self, session: AgentSession[Any], decide: Decide) -> None:
        self._session = session
        self._decide = decide
        self._update = session._update_agent_state  # LiveKit's own setter, bound
        # An instance attribute: every ``session._update_agent_state(...)`` in LiveKit
        # finds it before the class's method.
        session._update_agent_state = self._offered  # type: ignore[method-assign]

    def _offered(self, state: AgentState, **options: Any) -> None:
        chosen = self._decide(state)
        if chosen is not None:
            self._update(chosen, **options)

    def set(self, state: AgentState) -> None:
        """Set the agent state (a no-op, with no event, if it is already ``state``)."""
        self._update(state)

    def remove(self) -> None:
        """LiveKit sets its states on its own again."""
        if self._session.__dict__.get("_update_agent_state") == self._offered:
            del self._session._update_agent_state


def set_user_state(session: AgentSession[Any], state: UserState) -> None:
    session._update_user_state(state)
