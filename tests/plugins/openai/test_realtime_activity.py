"""The runtime finds a realtime session on the agent's LLM (its ``realtime``
attribute), and the away timer reads it (catalog 130-131, on the virtual clock)."""

from __future__ import annotations

import asyncio
from typing import Any

from backline import Agent, Session
from backline.testing import FakeRealtimeSession, ScriptedLLM, VirtualClock

TIMEOUT = 5.0


class RealtimeLLM(ScriptedLLM):
    """A model that is also its own realtime session's holder, as OpenAIRealtimeLLM is."""

    def __init__(self) -> None:
        super().__init__()
        self.realtime = FakeRealtimeSession()


async def test_the_llms_realtime_session_holds_the_away_timer(
    virtual_clock: VirtualClock,
) -> None:
    llm = RealtimeLLM()
    session: Session[Any] = Session(llm, user_away_timeout=TIMEOUT)
    await session.start(Agent("Help."))
    assert llm.realtime.listener_count == 1  # attached with the agent
    llm.realtime.set_background_work(True)
    await asyncio.sleep(3 * TIMEOUT)
    assert session.user_state == "listening"  # held while the model works
    llm.realtime.set_background_work(False)
    await asyncio.sleep(TIMEOUT + 0.1)
    assert session.user_state == "away"
    await session.aclose()
    assert llm.realtime.listener_count == 0  # detached at close


async def test_an_agents_own_realtime_session_comes_first(virtual_clock: VirtualClock) -> None:
    llm = RealtimeLLM()
    own = FakeRealtimeSession()
    session: Session[Any] = Session(llm, user_away_timeout=TIMEOUT)
    await session.start(Agent("Help.", realtime=own))
    assert (own.listener_count, llm.realtime.listener_count) == (1, 0)
    llm.realtime.set_background_work(True)  # not the agent's: it does not hold the timer
    await asyncio.sleep(TIMEOUT + 0.1)
    assert session.user_state == "away"
    await session.aclose()
    assert own.listener_count == 0
