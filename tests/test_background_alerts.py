"""Alerts (issue 30, item 3): a background finished, failed or asks the user something,
and a ``background_alert`` says so at once, even while the agent speaks about something
else; on the virtual clock."""

from __future__ import annotations

import asyncio
from typing import Any

from backline import Agent, BackgroundAlert, BackgroundContext, Session, background
from backline.testing import ScriptedLLM, VirtualClock, text

from .conftest import Recorder

LONG = " ".join(f"word{i}" for i in range(40))


def alerts(recorder: Recorder) -> list[tuple[str, str, str]]:
    return [(e.background_id, e.kind, e.text) for e in recorder.of("background_alert")]


async def test_finished_failed_and_asked_while_the_agent_speaks(
    virtual_clock: VirtualClock,
) -> None:
    go = asyncio.Event()

    @background("ci", description="Runs the tests.")
    async def ci(ctx: BackgroundContext) -> None:
        await go.wait()
        async with ctx.turn():
            ctx.set_state({"status": "working", "task": "run the tests"})
            await asyncio.sleep(1)
            ctx.set_state({"status": "idle", "last_task": "run the tests"})
        await asyncio.Event().wait()

    @background("build", description="Builds.")
    async def build(ctx: BackgroundContext) -> None:
        await go.wait()
        await asyncio.sleep(2)
        async with ctx.turn():
            raise RuntimeError("the compiler crashed")

    @background("deploy", description="Deploys.")
    async def deploy(ctx: BackgroundContext) -> None:
        await go.wait()
        await asyncio.sleep(3)
        await ctx.ask("Deploy to production now?", choices=["yes", "no"], timeout=600)

    # The agent speaks for 20 s (a word every half second) while all three report.
    llm = ScriptedLLM([text(LONG, chunk_delay=0.5)])
    session: Session[Any] = Session(llm, background=[ci, build, deploy], user_away_timeout=None)
    recorder = Recorder(session)
    speaking: list[str] = []
    session.on("background_alert", lambda e: speaking.append(session.agent_state))
    async with session:
        await session.start(Agent("Talk."))
        session.push_user_turn("tell me a long story")
        await asyncio.sleep(1)
        assert session.agent_state == "speaking"
        go.set()
        await asyncio.sleep(5)
        assert alerts(recorder) == [
            ("ci", "finished", "ci finished: run the tests"),
            ("build", "failed", "build failed: RuntimeError: the compiler crashed"),
            ("deploy", "question", "deploy asks: Deploy to production now?"),
        ]
        assert speaking == ["speaking"] * 3
        assert all(isinstance(e, BackgroundAlert) for e in recorder.of("background_alert"))
        # The crash that followed the failed turn is the same failure: no second alert.
        assert [e.status for e in recorder.of("background_status") if e.background_id == "build"][
            -2:
        ] == ["idle", "crashed"]


async def test_a_reported_error_and_an_entrypoint_that_ends(virtual_clock: VirtualClock) -> None:
    """A turn whose state reports an error failed (told when it ends); an error reported
    outside a turn is told at once; an entrypoint that returns finished; a turn ended
    by a waiting message (an interruption) is no alert."""
    step = asyncio.Event()

    @background("agent", description="Works.")
    async def agent(ctx: BackgroundContext) -> None:
        async with ctx.turn():
            ctx.set_state({"status": "working", "error": None})
            await asyncio.sleep(1)
            ctx.set_state({"status": "error", "error": "the model is unreachable"})
        await step.wait()
        ctx.set_state({"status": "error", "error": "the disk is full"})  # outside a turn
        ctx.set_state({"status": "error", "error": "the disk is full"})  # the same: no alert
        async with ctx.turn():
            await asyncio.sleep(1)
            assert ctx.session.background is not None
            ctx.session.background.deliver("agent", "stop, do this instead")
        async for _ in ctx.messages():
            return  # the entrypoint ends

    session: Session[Any] = Session(ScriptedLLM(), background=[agent], user_away_timeout=None)
    recorder = Recorder(session)
    async with session:
        await session.start(Agent("Talk."))
        await asyncio.sleep(2)
        assert alerts(recorder) == [("agent", "failed", "agent failed: the model is unreachable")]
        step.set()
        await asyncio.sleep(2)
    assert alerts(recorder) == [
        ("agent", "failed", "agent failed: the model is unreachable"),
        ("agent", "failed", "agent failed: the disk is full"),
        ("agent", "finished", "agent finished"),
    ]


async def test_a_failure_reported_after_its_turn_raised_is_one_alert(
    virtual_clock: VirtualClock,
) -> None:
    """A background that catches its turn's error outside the turn and reports it in its
    state (as deep research does) gives one alert, and a later failure another."""

    @background("research", description="Researches.")
    async def research(ctx: BackgroundContext) -> None:
        for reason in ("no sources", "the search failed"):
            try:
                async with ctx.turn():
                    await asyncio.sleep(1)
                    raise ValueError(reason)
            except ValueError as e:
                ctx.set_state({"phase": "failed", "error": str(e)})
        await asyncio.Event().wait()

    session: Session[Any] = Session(ScriptedLLM(), background=[research], user_away_timeout=None)
    recorder = Recorder(session)
    async with session:
        await session.start(Agent("Talk."))
        await asyncio.sleep(3)
    assert alerts(recorder) == [
        ("research", "failed", "research failed: ValueError: no sources"),
        ("research", "failed", "research failed: ValueError: the search failed"),
    ]
