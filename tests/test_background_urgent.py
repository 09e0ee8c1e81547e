"""An urgent background update (``ctx.send(text, interrupt=True)``, issue 29): the agent
stops what it is saying (what was heard is kept) and voices the update first, ahead of
updates already waiting; a silent update cannot interrupt; speech that disallows
interruptions finishes first."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from backline import Agent, InMemoryTextOutput, Session
from backline.testing import ScriptedLLM, VirtualClock, text
from tests.background_kit import ctx_of, worker
from tests.conftest import Recorder

pytestmark = pytest.mark.usefixtures("close_sessions")

STORY = "Once upon a time there was a fox who lived in a very deep and quiet forest."


async def speaking(session: Session[Any]) -> None:
    started = asyncio.Event()
    session.on("agent_state_changed", lambda e: started.set() if e.new == "speaking" else None)
    await asyncio.wait_for(started.wait(), 5)


def said(session: Session[Any]) -> list[tuple[str, str, bool]]:
    return [
        (m.role, m.content, m.interrupted)
        for m in session.history.items
        if getattr(m, "type", None) == "message" and m.role == "assistant"
    ]


async def test_an_urgent_update_cuts_the_agent_and_is_voiced_at_once(
    virtual_clock: VirtualClock,
) -> None:
    llm = ScriptedLLM([text(STORY), text("The build broke; all else is well.")])
    output = InMemoryTextOutput(chars_per_second=10)
    session: Session[Any] = Session(llm, background=[worker], output=output)
    rec = Recorder(session)
    await session.start(Agent("Help."))
    session.push_user_turn("tell me a story")
    await speaking(session)
    await asyncio.sleep(2.0)  # 20 characters of the story are heard
    ctx = ctx_of(session)
    await ctx.send("all is well so far")  # waits for the story to end
    await ctx.send("the build broke", interrupt=True)
    assert await session.wait_for_idle(timeout=30)
    assert said(session) == [
        ("assistant", STORY[:20], True),  # cut where it was, what was heard kept
        # The waiting update and the urgent one: one reply (sends are coalesced).
        ("assistant", "The build broke; all else is well.", False),
    ]
    updates = [m for m in llm.requests[1].chat_ctx.items if "background_id" in m.extra]
    assert [m.extra.get("interrupt", False) for m in updates] == [False, True]
    assert [e.status for e in rec.of("background_reply")] == ["scheduled", "completed"]


async def test_a_silent_update_cannot_interrupt(virtual_clock: VirtualClock) -> None:
    session: Session[Any] = Session(ScriptedLLM(), background=[worker])
    await session.start(Agent("Help."))
    with pytest.raises(ValueError, match="silent update interrupts nothing"):
        await ctx_of(session).send("note", silent=True, interrupt=True)
    assert [m for m in session.history.items if getattr(m, "role", None) == "user"] == []


async def test_speech_that_disallows_interruptions_finishes_first(
    virtual_clock: VirtualClock,
) -> None:
    llm = ScriptedLLM([text("The build broke.")])
    output = InMemoryTextOutput(chars_per_second=10)
    session: Session[Any] = Session(llm, background=[worker], output=output)
    await session.start(Agent("Help."))
    session.say("Please hold on, this is important.", allow_interruptions=False)
    await speaking(session)
    await ctx_of(session).send("the build broke", interrupt=True)
    assert await session.wait_for_idle(timeout=30)
    assert said(session) == [
        ("assistant", "Please hold on, this is important.", False),
        ("assistant", "The build broke.", False),
    ]
