"""``backline_stop`` (issue 30, item 6): the voice agent stops a named background's
current work through its interrupt path (``ctx.on_interrupt``), whatever the grace
window, without sending it anything; it says what happened."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from backline import (
    Agent,
    BackgroundContext,
    FunctionCallOutput,
    Session,
    background,
)
from backline.background.runtime import STOP_TIMEOUT
from backline.testing import ScriptedLLM, VirtualClock, text, tool_calls
from tests.background_kit import ctx_of

pytestmark = pytest.mark.usefixtures("close_sessions")


class Job:
    """A background whose work waits on an event; its interrupt sets it."""

    def __init__(self, *, interruptible: bool = True, hang: bool = False, fail: bool = False):
        self.started = asyncio.Event()
        self.stop = asyncio.Event()
        self.log: list[str] = []
        self.interrupts = 0
        self.interruptible, self.hang, self.fail = interruptible, hang, fail
        self.definition = background("job", description="Runs long jobs.", interrupt_grace=2.0)(
            self.entry
        )

    async def interrupt(self) -> None:
        self.interrupts += 1
        if self.hang:
            await asyncio.Event().wait()
        if self.fail:
            raise RuntimeError("the interrupt broke")
        self.stop.set()

    async def entry(self, ctx: BackgroundContext) -> None:
        if self.interruptible:
            ctx.on_interrupt(self.interrupt)
        async for message in ctx.messages():
            async with ctx.turn():
                self.log.append(f"start {message}")
                self.stop.clear()
                self.started.set()
                await self.stop.wait()  # the work: it ends only when stopped
                self.log.append(f"stopped {message}")


def stop_call(background_id: str = "job") -> Any:
    return tool_calls(("backline_stop", {"background_session_id": background_id}))


async def stopped_by_voice(
    job: Job, *, deliver: str | None = "refactor"
) -> tuple[str, Session[Any]]:
    """Start a session with ``job``, give it work (unless None), let the voice model call
    ``backline_stop``; return what the tool said."""
    llm = ScriptedLLM([stop_call(), text("Done.")])
    session: Session[Any] = Session(llm, background=[job.definition], user_away_timeout=None)
    await session.start(Agent("Help."))
    if deliver is not None:
        assert session.background is not None
        session.background.deliver("job", deliver)
        await asyncio.wait_for(job.started.wait(), 5)
    await session.run(user_input="stop the job", timeout=60)
    (output,) = [it for it in llm.requests[1].chat_ctx.items if isinstance(it, FunctionCallOutput)]
    return output.output, session


async def test_stop_interrupts_the_running_turn_at_once(virtual_clock: VirtualClock) -> None:
    job = Job()
    said, session = await stopped_by_voice(job)  # well within the 2 s grace window
    assert said == "Stopped background session 'job': its current work is interrupted."
    assert job.interrupts == 1
    await asyncio.sleep(0.1)
    assert job.log == ["start refactor", "stopped refactor"]
    assert ctx_of(session, "job").waiting == 0  # nothing was sent to it
    assert session.background is not None
    assert session.background.runtime("job").status == "idle"  # type: ignore[union-attr]


async def test_stop_counts_as_this_turns_interrupt(virtual_clock: VirtualClock) -> None:
    job = Job()
    job.stop = _NeverSet()  # the work ignores the interrupt: the turn goes on
    said, session = await stopped_by_voice(job)
    assert said.startswith("Stopped")
    await asyncio.sleep(5)  # past the grace window
    assert session.background is not None
    session.background.deliver("job", "and another thing")  # would interrupt a fresh turn
    await asyncio.sleep(0.1)
    assert job.interrupts == 1
    said = await _stop_again(session)
    assert said == (
        "Stopped background session 'job': its current work is interrupted. 1 message(s) "
        "sent to it still wait and run next."
    )
    assert job.interrupts == 2  # an explicit stop is never refused by the burst rule


async def test_nothing_running_says_so(virtual_clock: VirtualClock) -> None:
    job = Job()
    said, _ = await stopped_by_voice(job, deliver=None)
    assert said == "Nothing to stop: background session 'job' is not working on anything."
    assert job.interrupts == 0


async def test_a_background_without_an_interrupt_says_it_cannot_be_stopped(
    virtual_clock: VirtualClock,
) -> None:
    job = Job(interruptible=False)
    said, _ = await stopped_by_voice(job)
    assert said == (
        "Background session 'job' cannot be stopped in the middle of its work (it has no "
        "interrupt); it goes on."
    )
    assert job.log == ["start refactor"]


async def test_an_interrupt_that_hangs_or_fails_is_reported(virtual_clock: VirtualClock) -> None:
    loop = asyncio.get_running_loop()
    job = Job(hang=True)
    began = loop.time()
    said, _ = await stopped_by_voice(job)
    assert said == "Asked background session 'job' to stop; it has not confirmed yet."
    assert loop.time() - began >= STOP_TIMEOUT
    job = Job(fail=True)
    said, _ = await stopped_by_voice(job)
    assert said == "Background session 'job' could not be stopped: its interrupt failed."


async def test_unknown_and_finished_backgrounds(virtual_clock: VirtualClock) -> None:
    @background("once", description="Does one thing.")
    async def once(ctx: BackgroundContext) -> None:
        return

    llm = ScriptedLLM([stop_call("nope"), stop_call("once"), text("Okay.")])
    session: Session[Any] = Session(llm, background=[once], user_away_timeout=None)
    await session.start(Agent("Help."))
    await asyncio.sleep(0.1)
    await session.run(user_input="stop things", timeout=60)
    outputs = [it for it in llm.requests[-1].chat_ctx.items if isinstance(it, FunctionCallOutput)]
    assert [o.is_error for o in outputs] == [True, False]
    assert "Unknown background session ID 'nope'. Valid IDs: once" in outputs[0].output
    assert outputs[1].output == "Background session 'once' is not running: nothing to stop."


async def test_the_tool_lists_the_backgrounds_by_name(virtual_clock: VirtualClock) -> None:
    job = Job()
    session: Session[Any] = Session(
        ScriptedLLM(), background=[job.definition.instance("api"), job.definition.instance("web")]
    )
    (stop,) = [t for t in session.tools if t.name == "backline_stop"]
    assert stop.description.endswith(
        "Available background sessions:\n- api: Runs long jobs.\n- web: Runs long jobs."
    )
    assert stop.parameters["required"] == ["background_session_id"]


class _NeverSet(asyncio.Event):
    def set(self) -> None:
        pass


async def _stop_again(session: Session[Any]) -> str:
    llm = session.llm
    assert isinstance(llm, ScriptedLLM)
    llm.push(stop_call(), text("Done."))
    await session.run(user_input="stop it again", timeout=60)
    outputs = [it for it in llm.requests[-1].chat_ctx.items if isinstance(it, FunctionCallOutput)]
    return str(outputs[-1].output)


async def test_on_stop_is_called_for_a_stop_and_on_interrupt_for_a_message(
    virtual_clock: VirtualClock,
) -> None:
    calls: list[str] = []
    done = asyncio.Event()

    @background("research", description="Researches.", interrupt_grace=0.0)
    async def research(ctx: BackgroundContext) -> None:
        async def interrupted() -> None:
            calls.append("interrupt")

        async def stopped() -> None:
            calls.append("stop")
            done.set()

        ctx.on_interrupt(interrupted)
        ctx.on_stop(stopped)  # a stop finishes the round; a message only steers it
        async for _ in ctx.messages():
            async with ctx.turn():
                await done.wait()

    llm = ScriptedLLM([stop_call("research"), text("Stopping it.")])
    session: Session[Any] = Session(llm, background=[research], user_away_timeout=None)
    await session.start(Agent("Help."))
    assert session.background is not None
    session.background.deliver("research", "bees")
    await asyncio.sleep(1)
    session.background.deliver("research", "focus on Europe")  # mid-turn: an interrupt
    await asyncio.sleep(0.1)
    await session.run(user_input="stop the research", timeout=60)
    assert calls == ["interrupt", "stop"]
