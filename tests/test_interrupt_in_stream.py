"""A speech streams its model's answer in its own task: an interrupt cancels the stream
where it waits and the speech goes on to record what was said; close cancels it for good.
Streams that misbehave when cancelled (fail, swallow the cancellation, or wait on a future
someone else cancels) end the reply, never the agent, and nothing reaches the event loop
(the suite's guard fails a test that leaves a task running or an exception unretrieved)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncGenerator, Sequence
from typing import Any, Literal

import pytest

from backline import Agent, ChatMessage, Session, TextOutput
from backline.llm import ChatChunk, ChatContext, LLMStream, TextDelta
from backline.llm.tools import FunctionTool, ToolChoice
from backline.testing import ScriptedLLM, text, virtual_clock

GUARD = 10.0  # a bound on each wait, never reached when the code is right

Mode = Literal["plain", "fail", "swallow", "foreign"]


class GatedLLM:
    """The first request says "Hello " and then waits on a gate; what it does when
    cancelled there is its ``mode``. Later requests answer "Again." at once."""

    def __init__(self, mode: Mode = "plain") -> None:
        self.mode = mode
        self.waiting = asyncio.Event()
        self.closed = asyncio.Event()
        self.gate: asyncio.Future[None] | None = None
        self.calls = 0

    def chat(
        self,
        chat_ctx: ChatContext,
        *,
        tools: Sequence[FunctionTool] = (),
        tool_choice: ToolChoice | None = None,
    ) -> LLMStream:
        self.calls += 1
        return LLMStream(self._stream(self.calls))

    async def _stream(self, n: int) -> AsyncGenerator[ChatChunk, None]:
        if n > 1:
            yield TextDelta("Again.")
            return
        try:
            yield TextDelta("Hello ")
            self.gate = asyncio.get_running_loop().create_future()
            self.waiting.set()
            try:
                await self.gate
            except asyncio.CancelledError:
                if self.mode == "fail":
                    raise RuntimeError("the stream broke as it was cancelled") from None
                if self.mode == "swallow":
                    return  # ends the stream as if the model had finished
                raise
            yield TextDelta("world.")
        finally:
            self.closed.set()


def assistant_texts(session: Session[Any]) -> list[tuple[str, bool]]:
    return [
        (m.text_content, m.interrupted)
        for m in session.history.items
        if isinstance(m, ChatMessage) and m.role == "assistant"
    ]


async def start(llm: Any) -> Session[Any]:
    session: Session[Any] = Session(llm)
    await session.start(Agent("You are terse."))
    return session


async def answers_again(session: Session[Any]) -> None:
    result = await session.run(user_input="again", timeout=GUARD)
    result.expect.next_event().is_message(role="assistant", content="Again.")


@pytest.mark.parametrize("mode", ["plain", "fail", "swallow"])
async def test_an_interrupt_stops_the_stream_where_it_waits(mode: Mode) -> None:
    llm = GatedLLM(mode)
    session = await start(llm)
    try:
        session.push_user_turn("hi")
        await asyncio.wait_for(llm.waiting.wait(), GUARD)
        session.interrupt()
        assert await session.wait_for_idle(GUARD)
        assert llm.closed.is_set()  # the stream was closed, not left suspended
        assert assistant_texts(session) == [("Hello ", True)]
        assert session.agent_state == "listening"
        await answers_again(session)  # the agent goes on
    finally:
        await session.aclose()


@pytest.mark.parametrize("mode", ["plain", "fail", "swallow"])
@pytest.mark.parametrize("interrupt_first", [False, True])
async def test_close_while_the_stream_waits_ends_the_agent(
    mode: Mode, interrupt_first: bool
) -> None:
    llm = GatedLLM(mode)
    session = await start(llm)
    session.push_user_turn("hi")
    await asyncio.wait_for(llm.waiting.wait(), GUARD)
    if interrupt_first:
        session.interrupt()  # its cancellation and close's land together
    await asyncio.wait_for(session.aclose(), GUARD)
    assert session.closed and llm.closed.is_set()
    activity = session._switches.activities  # every agent closed, none left running
    assert activity == []


async def test_a_future_cancelled_by_someone_else_ends_the_reply_not_the_agent() -> None:
    llm = GatedLLM("plain")
    session = await start(llm)
    try:
        session.push_user_turn("hi")
        await asyncio.wait_for(llm.waiting.wait(), GUARD)
        assert llm.gate is not None
        llm.gate.cancel()  # a CancelledError nobody asked the agent's task for
        assert await session.wait_for_idle(GUARD)
        assert llm.closed.is_set()
        await answers_again(session)
    finally:
        await session.aclose()


async def test_interrupts_and_closes_at_random_moments_of_streamed_replies() -> None:
    """Randomized schedules on the virtual clock: replies streamed word by word with
    random delays, user turns, interrupts and a close at random moments. Every
    session closes, every recorded reply is a prefix of what the model said, and a
    reply is marked interrupted exactly when it was cut."""
    full = "one two three four five six seven eight"
    with virtual_clock():
        for seed in range(60):
            rng = random.Random(seed)
            delays = [rng.choice([0.0, 0.01, 0.05]) for _ in range(8)]
            llm = ScriptedLLM([text(full, chunk_delay=d, delay=0.01) for d in delays])
            session: Session[Any] = Session(llm)
            await session.start(Agent("You are terse."))
            for _ in range(rng.randint(1, 6)):
                action = rng.random()
                if action < 0.4:
                    session.push_user_turn("go on")
                elif action < 0.7:
                    session.interrupt()
                await asyncio.sleep(rng.choice([0.0, 0.005, 0.02, 0.1]))
            if rng.random() < 0.5:
                await session.wait_for_idle(GUARD)
            await asyncio.wait_for(session.aclose(), GUARD)
            assert session.closed
            for said, interrupted in assistant_texts(session):
                assert full.startswith(said), (seed, said)
                assert interrupted == (said != full), (seed, said, interrupted)


class LateClearOutput(TextOutput):
    """Plays nothing until cleared; reports the cleared segment one loop step later, and
    in the step after that cancels the agent's loop task: the cancellation lands just
    as the wait for the cleared playout ends (3.11's asyncio.wait_for swallowed it)."""

    def __init__(self) -> None:
        super().__init__()
        self.flushed = asyncio.Event()
        self.loop_task: asyncio.Task[Any] | None = None

    def on_flush(self) -> None:
        self.flushed.set()  # and no playout report: the segment "plays" until cleared

    def on_clear(self) -> None:
        loop = asyncio.get_running_loop()

        def finish() -> None:
            self.report_playout(self.segment_text, interrupted=True)
            assert self.loop_task is not None
            loop.call_soon(self.loop_task.cancel)

        loop.call_soon(finish)


async def test_a_cancellation_that_lands_as_the_cleared_playout_ends_stops_the_agent() -> None:
    output = LateClearOutput()
    session: Session[Any] = Session(ScriptedLLM([text("Hello there.")]), output=output)
    await session.start(Agent("You are terse."))
    try:
        activity = session._switches.current
        assert activity is not None and activity._loop_task is not None
        output.loop_task = activity._loop_task
        session.push_user_turn("hi")
        await asyncio.wait_for(output.flushed.wait(), GUARD)
        session.interrupt()
        # The loop task ends with its cancellation (it would wait for the next speech
        # forever if the speech had swallowed it).
        await asyncio.wait([activity._loop_task], timeout=GUARD)
        assert activity._loop_task.cancelled()
    finally:
        await asyncio.wait_for(session.aclose(), GUARD)


async def test_an_interrupt_landing_as_a_stream_ends_never_cuts_the_next_speech() -> None:
    """The speech loop keeps one stream guard. An interrupt whose callback is still
    queued when the interrupted stream ends (and the next speech's stream starts in
    the same loop step) must not cancel that next stream."""
    session: Session[Any]

    def respond(request: Any) -> Any:
        if request.index == 1:
            session.push_user_turn("next")  # interrupts this reply, queues the next
            return text("first reply")  # streamed without a pause: ends at once
        return text("second reply", delay=1.0)  # waits: a stale callback would run now

    with virtual_clock():
        session = Session(ScriptedLLM(respond), output=TextOutput())
        async with session:
            await session.start(Agent("Hi."))
            session.push_user_turn("go")
            assert await session.wait_for_idle(timeout=GUARD)
            replies = [
                (it.content, it.interrupted)
                for it in session.history.items
                if isinstance(it, ChatMessage) and it.role == "assistant"
            ]
    assert replies[-1] == ("second reply", False)
