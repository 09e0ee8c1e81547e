"""The two places the bridge sets LiveKit's states itself.

LiveKit derives its agent state from its own speeches and its user state from
voice activity. With backline as the brain, "thinking" (tools running, a
background reply owed) and the user being away are backline's knowledge, so the
bridge writes them into LiveKit: clients read ``lk.agent.state`` from the room.
LiveKit 1.8 has no public setter; these two private methods are used here and
nowhere else, and ``tests/plugins/livekit`` checks that they still behave.
"""

from __future__ import annotations

from typing import Any, Literal

from livekit.agents import AgentSession

AgentState = Literal["initializing", "listening", "thinking", "speaking"]
UserState = Literal["speaking", "listening", "away"]


def set_agent_state(session: AgentSession[Any], state: AgentState) -> None:
    session._update_agent_state(state)


def set_user_state(session: AgentSession[Any], state: UserState) -> None:
    session._update_user_state(state)
