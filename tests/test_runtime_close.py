"""Close is bounded and leaves nothing behind, whatever it interrupts (issue 3)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from backline import Agent, AgentTask, Session, function_tool
from backline.testing import ScriptedLLM, VirtualClock, text, tool_calls


class Assistant(Agent):
    def __init__(self) -> None:
        super().__init__("Help.")


async def close_promptly(session: Session[Any], clock: VirtualClock) -> None:
    start = clock.now()
    await session.aclose()
    assert clock.now() - start < 1.0, "close took too long (virtual seconds)"
    assert session.closed


async def test_close_during_generation(
    virtual_clock: VirtualClock, no_leaked_tasks: Callable[[], Any]
) -> None:
    llm = ScriptedLLM([text("too late", delay=100)])
    session = Session(llm)
    await session.start(Assistant())
    handle = session.generate_reply()
    await asyncio.sleep(1)
    assert session.agent_state == "thinking"
    await close_promptly(session, virtual_clock)
    assert handle.done() and handle.interrupted
    await no_leaked_tasks()


async def test_close_during_streaming_playout(
    virtual_clock: VirtualClock, no_leaked_tasks: Callable[[], Any]
) -> None:
    from backline import InMemoryTextOutput

    llm = ScriptedLLM([text("word " * 50, chunk_delay=0.5)])
    session = Session(llm, output=InMemoryTextOutput(chars_per_second=5))
    await session.start(Assistant())
    handle = session.generate_reply()
    await asyncio.sleep(3)
    assert session.agent_state == "speaking"
    await close_promptly(session, virtual_clock)
    assert handle.done()
    await no_leaked_tasks()


async def test_close_during_tool_execution(
    virtual_clock: VirtualClock, no_leaked_tasks: Callable[[], Any]
) -> None:
    entered = asyncio.Event()
    finalized = asyncio.Event()

    @function_tool
    async def slow() -> str:
        """Slow."""
        entered.set()
        try:
            await asyncio.Event().wait()
        finally:
            finalized.set()
        return "never"

    llm = ScriptedLLM([tool_calls(("slow", {}))])
    session = Session(llm, tools=[slow])
    await session.start(Assistant())
    session.generate_reply()
    await asyncio.wait_for(entered.wait(), 5)
    await close_promptly(session, virtual_clock)
    assert finalized.is_set()
    await no_leaked_tasks()


async def test_close_during_a_handoff(
    virtual_clock: VirtualClock, no_leaked_tasks: Callable[[], Any]
) -> None:
    exiting = asyncio.Event()

    class Second(Agent):
        def __init__(self) -> None:
            super().__init__("Second.")

    class First(Assistant):
        async def on_exit(self) -> None:
            exiting.set()
            await asyncio.Event().wait()  # a slow goodbye

        @function_tool
        async def transfer(self) -> Agent:
            """Transfer."""
            return Second()

    llm = ScriptedLLM([tool_calls(("transfer", {}))])
    session = Session(llm)
    await session.start(First())
    session.generate_reply()
    await asyncio.wait_for(exiting.wait(), 5)
    await close_promptly(session, virtual_clock)
    await no_leaked_tasks()


async def test_close_during_an_agent_task(
    virtual_clock: VirtualClock, no_leaked_tasks: Callable[[], Any]
) -> None:
    class Ask(AgentTask[str]):
        def __init__(self) -> None:
            super().__init__("Ask something.")

    outcome: list[str] = []

    class Root(Assistant):
        @function_tool
        async def ask(self) -> str:
            """Ask."""
            try:
                return await Ask()
            except asyncio.CancelledError:
                outcome.append("cancelled")
                raise

    llm = ScriptedLLM([tool_calls(("ask", {}))])
    session = Session(llm)
    await session.start(Root())
    await session.run(user_input="go")
    assert isinstance(session.current_agent, Ask)
    await close_promptly(session, virtual_clock)
    assert outcome == ["cancelled"]
    await no_leaked_tasks()


async def test_close_while_on_enter_awaits_an_agent_task(
    virtual_clock: VirtualClock, no_leaked_tasks: Callable[[], Any]
) -> None:
    class Ask(AgentTask[str]):
        def __init__(self) -> None:
            super().__init__("Ask.")

    started = asyncio.Event()

    class Root(Assistant):
        async def on_enter(self) -> None:
            started.set()
            await Ask()

    session = Session(ScriptedLLM())
    await session.start(Root())
    await asyncio.wait_for(started.wait(), 5)
    await asyncio.sleep(0.1)
    assert isinstance(session.current_agent, Ask)
    await close_promptly(session, virtual_clock)
    await no_leaked_tasks()


async def test_close_with_drain_lets_the_current_speech_finish(
    virtual_clock: VirtualClock, no_leaked_tasks: Callable[[], Any]
) -> None:
    from backline import InMemoryTextOutput

    output = InMemoryTextOutput(chars_per_second=10)
    session = Session(ScriptedLLM(), output=output)
    await session.start(Assistant())
    handle = session.say("goodbye now")
    await asyncio.sleep(0.2)
    await session.aclose(drain=True)
    assert handle.done() and not handle.interrupted
    assert output.transcript == ["goodbye now"]
    await no_leaked_tasks()


async def test_close_is_idempotent_and_concurrent_calls_share_it(
    virtual_clock: VirtualClock, no_leaked_tasks: Callable[[], Any]
) -> None:
    session = Session(ScriptedLLM())
    await session.start(Assistant())
    closes: list[Any] = []
    session.on("close", closes.append)
    await asyncio.gather(session.aclose(), session.aclose(), session.aclose())
    await session.aclose()
    assert len(closes) == 1 and closes[0].reason == "user"
    await no_leaked_tasks()


async def test_a_tool_that_ignores_cancellation_cannot_hang_close(
    virtual_clock: VirtualClock,
) -> None:
    entered = asyncio.Event()
    release = asyncio.Event()

    @function_tool
    async def stubborn() -> str:
        """Ignores cancellation."""
        entered.set()
        while not release.is_set():
            try:
                await asyncio.sleep(1)
            except asyncio.CancelledError:
                continue
        return "done"

    session = Session(ScriptedLLM([tool_calls(("stubborn", {}))]), tools=[stubborn])
    await session.start(Assistant())
    session.generate_reply()
    await asyncio.wait_for(entered.wait(), 5)
    start = virtual_clock.now()
    await session.aclose()
    assert virtual_clock.now() - start < 30  # bounded by the close timeouts
    release.set()
    await asyncio.sleep(2)
