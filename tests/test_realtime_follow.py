"""A realtime session that follows its agent (``ContextFollower``, issue 29): told the
agent's instructions and tools when it is attached (at the start and at a handoff),
and told at once when a silent update reaches the context; a follower that raises
changes nothing for the conversation."""

from __future__ import annotations

from typing import Any

import pytest

from backline import Agent, Session, function_tool
from backline.llm import ContextFollower
from backline.testing import FakeRealtimeSession, ScriptedLLM, VirtualClock, text, tool_calls
from tests.background_kit import ctx_of, worker

pytestmark = pytest.mark.usefixtures("close_sessions")


@function_tool
async def get_weather(city: str) -> str:
    """Get the weather.

    Args:
        city: The city.
    """
    return f"Sunny in {city}."


class Expert(Agent):
    def __init__(self) -> None:
        super().__init__("You are the expert.", tools=[get_weather])


class Front(Agent):
    def __init__(self) -> None:
        super().__init__("You are the front desk.")

    @function_tool
    async def to_expert(self) -> Agent:
        """Hand the user to the expert."""
        return Expert()


async def test_the_session_is_told_its_agent_at_the_start_and_at_a_handoff(
    virtual_clock: VirtualClock,
) -> None:
    rt = FakeRealtimeSession()
    assert isinstance(rt, ContextFollower)
    llm = ScriptedLLM([tool_calls(("to_expert", {})), text("Hello, I am the expert.")])
    session: Session[Any] = Session(llm, realtime=rt)
    await session.start(Front())
    assert rt.agents == [(["You are the front desk."], ["to_expert"])]
    await session.run(user_input="an expert, please", timeout=5)
    assert rt.agents[-1] == (["You are the expert."], ["get_weather"])
    assert len(rt.agents) == 2
    await session.aclose()


async def test_a_silent_update_is_handed_on_at_once(virtual_clock: VirtualClock) -> None:
    rt = FakeRealtimeSession()
    llm = ScriptedLLM()
    session: Session[Any] = Session(llm, background=[worker], realtime=rt)
    await session.start(Agent("Help."))
    assert rt.contexts == []
    await ctx_of(session).send("for your information", silent=True)
    (context,) = rt.contexts
    assert context[0] == "Help." and context[-1].endswith("for your information")
    assert llm.requests == []  # and nothing was asked of the model
    await session.aclose()


class Broken(FakeRealtimeSession):
    def agent_changed(self, chat_ctx: Any, tools: Any) -> None:
        raise RuntimeError("boom")

    def context_changed(self, chat_ctx: Any) -> None:
        raise RuntimeError("boom")


async def test_a_follower_that_raises_changes_nothing(
    virtual_clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    llm = ScriptedLLM([text("Hi.")])
    session: Session[Any] = Session(llm, background=[worker], realtime=Broken())
    await session.start(Agent("Help."))
    await ctx_of(session).send("for your information", silent=True)
    result = await session.run(user_input="hello", timeout=5)
    result.expect.contains_message(role="assistant", content="Hi.")
    assert [r.getMessage() for r in caplog.records if "realtime session failed" in r.getMessage()]
    await session.aclose()
