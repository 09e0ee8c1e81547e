"""Turns: the interrupt grace window, the user-away hold of a busy background, and a
pending reply counted as owed speech (the issue's rules; catalog items 143, 185–186, 193)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from backline import (
    Agent,
    BackgroundContext,
    InMemoryTextOutput,
    Session,
    background,
)
from backline.testing import ScriptedLLM, VirtualClock, text, tool_calls
from tests.background_kit import First, Second, ctx_of, deliver, worker
from tests.conftest import Recorder

pytestmark = pytest.mark.usefixtures("close_sessions")


def away_times(session: Session[Any], clock: VirtualClock) -> list[float]:
    times: list[float] = []
    session.on(
        "user_state_changed", lambda e: times.append(clock.now()) if e.new == "away" else None
    )
    return times


# -- the interrupt grace window -------------------------------------------------------


class Turns:
    """A background that runs each batch of messages as one interruptible turn."""

    def __init__(self, grace: float = 2.0, work: float = 30.0) -> None:
        self.turns: list[list[str]] = []
        self.interrupts: list[float] = []
        self.finished: list[list[str]] = []
        self.started = asyncio.Event()
        self.work = work
        self.definition = background("worker", description="x", interrupt_grace=grace)(self.entry)

    async def entry(self, ctx: BackgroundContext) -> None:
        current: list[asyncio.Task[None]] = []

        async def stop() -> None:
            self.interrupts.append(asyncio.get_running_loop().time())
            current[0].cancel()

        ctx.on_interrupt(stop)
        async for batch in ctx.batches():
            self.turns.append(batch)
            async with ctx.turn():
                self.started.set()
                current[:] = [asyncio.ensure_future(asyncio.sleep(self.work))]
                try:
                    await current[0]
                    self.finished.append(batch)
                except asyncio.CancelledError:
                    if not current[0].cancelled():
                        raise


async def grace_session(turns: Turns) -> Session[Any]:
    session: Session[Any] = Session(ScriptedLLM(), background=[turns.definition])
    await session.start(Agent("Help."))
    deliver(session, "task")
    await asyncio.wait_for(turns.started.wait(), 5)
    return session


async def test_a_message_within_the_grace_window_does_not_interrupt(
    virtual_clock: VirtualClock,
) -> None:
    turns = Turns(grace=2.0)
    session = await grace_session(turns)
    await asyncio.sleep(2.0)  # exactly at the edge: not "more than" the grace
    deliver(session, "also this")
    await asyncio.sleep(70)
    assert turns.interrupts == []
    assert turns.finished == [["task"], ["also this"]]
    await session.aclose()


async def test_a_message_after_the_grace_window_interrupts_once(
    virtual_clock: VirtualClock,
) -> None:
    turns = Turns(grace=2.0)
    session = await grace_session(turns)
    started = virtual_clock.now()
    await asyncio.sleep(2.5)
    deliver(session, "stop, do this instead")
    await asyncio.sleep(1)
    assert [t - started for t in turns.interrupts] == [2.5]
    assert turns.turns == [["task"], ["stop, do this instead"]]
    assert turns.finished == []  # the first turn was stopped; the second is running
    await asyncio.sleep(40)
    assert turns.finished == [["stop, do this instead"]]
    assert len(turns.interrupts) == 1
    await session.aclose()


async def test_a_burst_interrupts_once_and_runs_as_the_next_turn(
    virtual_clock: VirtualClock,
) -> None:
    turns = Turns(grace=2.0)
    session = await grace_session(turns)
    await asyncio.sleep(3)
    for piece in ("stop,", "use tabs", "not spaces"):
        deliver(session, piece)  # three sends of one correction, in one go
    await asyncio.sleep(1)
    assert len(turns.interrupts) == 1
    assert turns.turns == [["task"], ["stop,", "use tabs", "not spaces"]]
    await asyncio.sleep(60)
    assert len(turns.interrupts) == 1
    await session.aclose()


async def test_later_pieces_wait_while_an_earlier_one_is_still_waiting(
    virtual_clock: VirtualClock,
) -> None:
    turns = Turns(grace=2.0)
    session = await grace_session(turns)
    await asyncio.sleep(1)
    deliver(session, "early piece")  # within the grace: queued
    await asyncio.sleep(5)
    deliver(session, "late piece")  # past the grace, but an earlier piece still waits
    await asyncio.sleep(1)
    assert turns.interrupts == []
    await asyncio.sleep(30)
    assert turns.turns == [["task"], ["early piece", "late piece"]]
    await session.aclose()


async def test_a_burst_drained_by_a_concurrent_reader_still_interrupts_once(
    virtual_clock: VirtualClock,
) -> None:
    """The Claude Code shape: a reader task empties the inbox at once, so "an earlier
    piece is still waiting" never holds; the turn is still interrupted only once."""
    interrupts: list[float] = []
    queued: list[str] = []
    in_turn = asyncio.Event()

    @background("worker", description="x", interrupt_grace=2.0)
    async def entry(ctx: BackgroundContext) -> None:
        async def stop() -> None:
            interrupts.append(asyncio.get_running_loop().time())

        async def reader() -> None:
            async for message in ctx.messages():
                queued.append(message)

        ctx.on_interrupt(stop)
        task = asyncio.ensure_future(reader())
        try:
            async with ctx.turn():
                in_turn.set()
                await asyncio.sleep(60)
        finally:
            task.cancel()

    session: Session[Any] = Session(ScriptedLLM(), background=[entry])
    await session.start(Agent("Help."))
    await asyncio.wait_for(in_turn.wait(), 5)
    await asyncio.sleep(5)
    for piece in ("stop,", "use tabs", "not spaces"):
        deliver(session, piece)
        await asyncio.sleep(0.1)  # the reader takes each piece before the next arrives
        assert ctx_of(session).pending() == []
    await asyncio.sleep(1)
    assert queued == ["stop,", "use tabs", "not spaces"]
    assert len(interrupts) == 1
    await session.aclose()


async def test_each_turn_can_be_interrupted_and_idle_messages_never_are(
    virtual_clock: VirtualClock,
) -> None:
    turns = Turns(grace=0.0, work=10)
    session = await grace_session(turns)
    await asyncio.sleep(1)
    deliver(session, "second")
    await asyncio.sleep(1)
    deliver(session, "third")
    await asyncio.sleep(30)
    assert len(turns.interrupts) == 2
    assert turns.finished == [["third"]]
    deliver(session, "while idle")  # not inside a turn: nothing to interrupt
    await asyncio.sleep(30)
    assert len(turns.interrupts) == 2 and turns.finished[-1] == ["while idle"]
    await session.aclose()


async def test_a_failing_interrupt_callback_is_logged(
    virtual_clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    got: list[str] = []

    @background("worker", description="x", interrupt_grace=0.5)
    async def entry(ctx: BackgroundContext) -> None:
        async def broken() -> None:
            raise RuntimeError("cannot stop")

        ctx.on_interrupt(broken)
        async for m in ctx.messages():
            got.append(m)
            async with ctx.turn():
                await asyncio.sleep(5)

    session: Session[Any] = Session(ScriptedLLM(), background=[entry])
    await session.start(Agent("Help."))
    deliver(session, "one")
    await asyncio.sleep(1)
    deliver(session, "two")
    await asyncio.sleep(20)
    assert got == ["one", "two"]
    assert "interrupt callback failed" in caplog.text
    await session.aclose()


async def test_turns_do_not_nest(virtual_clock: VirtualClock) -> None:
    session: Session[Any] = Session(ScriptedLLM(), background=[worker])
    await session.start(Agent("Help."))
    ctx = ctx_of(session)
    async with ctx.turn():
        with pytest.raises(RuntimeError, match="do not nest"):
            async with ctx.turn():
                pass
    await session.aclose()


# -- the user-away timer and owed speech ----------------------------------------------


async def test_a_turn_holds_the_away_timer_and_its_end_starts_a_full_window(
    virtual_clock: VirtualClock,
) -> None:
    session: Session[Any] = Session(ScriptedLLM(), background=[worker], user_away_timeout=15)
    rec = Recorder(session)
    away = away_times(session, virtual_clock)
    await session.start(Agent("Help."))
    ctx = ctx_of(session)
    await asyncio.sleep(10)
    assert session._away.armed
    async with ctx.turn():  # work starting after the timer armed cancels it
        assert not session._away.armed
        await asyncio.sleep(60)
        assert away == []
    ended = virtual_clock.now()
    await asyncio.sleep(20)
    assert away == [ended + 15]
    statuses = [e.status for e in rec.of("background_status")]
    assert statuses == ["running", "busy", "idle"]
    await session.aclose()


async def test_a_turn_spanning_a_handoff_keeps_holding(virtual_clock: VirtualClock) -> None:
    session: Session[Any] = Session(
        ScriptedLLM([tool_calls(("transfer", {}))]), background=[worker], user_away_timeout=15
    )
    away = away_times(session, virtual_clock)
    await session.start(First())
    async with ctx_of(session).turn():
        await session.run(user_input="transfer")
        assert isinstance(session.current_agent, Second)
        assert not session._away.armed
        await asyncio.sleep(60)
    assert away == []
    await session.aclose()


async def test_a_pending_background_reply_keeps_the_agent_thinking(
    virtual_clock: VirtualClock,
) -> None:
    output = InMemoryTextOutput(chars_per_second=20)
    llm = ScriptedLLM([text("Here is a long answer for you."), text("The build passed.")])
    session: Session[Any] = Session(llm, background=[worker], output=output, user_away_timeout=15)
    rec = Recorder(session)
    away = away_times(session, virtual_clock)
    await session.start(Agent("Help."))
    mark = len(rec.agent_states)
    session.push_user_turn("question")
    await asyncio.sleep(0.5)
    assert session.agent_state == "speaking"
    await ctx_of(session).send("build passed")  # arrives while the agent speaks
    assert await session.wait_for_idle(timeout=30)
    # No "listening" blip between the answer and the reply it owes.
    assert rec.agent_states[mark:] == ["thinking", "speaking", "thinking", "speaking", "listening"]
    assert output.transcript == ["Here is a long answer for you.", "The build passed."]
    assert away == []
    await session.aclose()


async def test_an_owed_reply_holds_off_away_while_the_user_speaks(
    virtual_clock: VirtualClock,
) -> None:
    llm = ScriptedLLM([text("Done.")])
    session: Session[Any] = Session(llm, background=[worker], user_away_timeout=15)
    away = away_times(session, virtual_clock)
    await session.start(Agent("Help."))
    session.user_started_speaking()
    await ctx_of(session).send("result")
    session.user_stopped_speaking()
    session.user_started_speaking()
    assert session.agent_state == "thinking" and not session._away.armed
    await asyncio.sleep(30)
    assert llm.requests == [] and away == []
    session.user_stopped_speaking()
    assert await session.wait_for_idle(timeout=5)
    assert len(llm.requests) == 1
    assert str(session.agent_state) == "listening" and session._away.armed
    await session.aclose()
