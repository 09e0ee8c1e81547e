"""Background runtimes: lifecycle, crash and return, close, and the inbox
(catalog §1C and §2A, items 22–35; the issue's rules on stopped entrypoints)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest

from backline import (
    Agent,
    BackgroundContext,
    ChatMessage,
    Session,
    background,
)
from backline.testing import ScriptedLLM, VirtualClock, text, tool_calls
from tests.background_kit import First, Second, ctx_of, deliver, worker
from tests.conftest import Recorder

pytestmark = pytest.mark.usefixtures("close_sessions")


def notes(session: Session[Any]) -> list[str]:
    return [it.content for it in session.history.items if isinstance(it, ChatMessage)]


# -- lifecycle (1C) -------------------------------------------------------------------


async def test_entrypoints_start_after_the_first_agent_and_before_start_returns(
    virtual_clock: VirtualClock,
) -> None:
    seen: list[tuple[Any, str]] = []

    @background("early", description="x")
    async def early(ctx: BackgroundContext) -> None:
        seen.append((ctx.session.current_agent, ctx.session.agent_state))
        await asyncio.Event().wait()

    session: Session[Any] = Session(ScriptedLLM(), background=[early, worker])
    rec = Recorder(session)
    agent = Agent("Help.")
    await session.start(agent)
    assert seen == [(agent, "initializing")]  # before the session went to listening
    assert rec.agent_states == ["listening"]
    assert [(e.background_id, e.status) for e in rec.of("background_status")] == [
        ("early", "running"),
        ("worker", "running"),
    ]
    await session.aclose()


async def test_a_cancelled_start_closes_the_started_entrypoints(
    virtual_clock: VirtualClock, no_leaked_tasks: Callable[[], Any]
) -> None:
    cleaned = asyncio.Event()
    starting: list[asyncio.Task[None]] = []

    @background("canceller", description="x")
    async def canceller(ctx: BackgroundContext) -> None:
        starting[0].cancel()  # start() is waiting for the entrypoints right now
        try:
            await asyncio.Event().wait()
        finally:
            cleaned.set()

    session: Session[Any] = Session(ScriptedLLM(), background=[canceller])
    starting.append(asyncio.ensure_future(session.start(Agent("Help."))))
    with pytest.raises(asyncio.CancelledError):
        await starting[0]
    assert cleaned.is_set()
    assert session.closed and ctx_of(session, "canceller").closed
    await no_leaked_tasks()


async def test_the_runtime_survives_a_handoff_without_restarting(
    virtual_clock: VirtualClock,
) -> None:
    starts: list[BackgroundContext] = []
    received: list[str] = []
    two = asyncio.Event()

    @background("worker", description="x")
    async def reader(ctx: BackgroundContext) -> None:
        starts.append(ctx)
        async for message in ctx.messages():
            received.append(message)
            if len(received) == 2:
                two.set()

    llm = ScriptedLLM(
        [
            tool_calls(("backline_send", {"background_session_id": "worker", "content": "before"})),
            text("Sent."),
            tool_calls(("transfer", {})),
            tool_calls(("backline_send", {"background_session_id": "worker", "content": "after"})),
            text("Sent again."),
        ]
    )
    session: Session[Any] = Session(llm, background=[reader])
    await session.start(First())
    ctx = ctx_of(session)
    await session.run(user_input="send before")
    await session.run(user_input="transfer")
    assert isinstance(session.current_agent, Second)
    await session.run(user_input="send after")
    await asyncio.wait_for(two.wait(), 5)
    assert received == ["before", "after"]
    assert starts == [ctx] and ctx_of(session) is ctx
    await session.aclose()


async def test_a_crash_is_logged_once_not_restarted_and_told_silently(
    virtual_clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    runs: list[int] = []

    @background("flaky", description="x")
    async def flaky(ctx: BackgroundContext) -> None:
        runs.append(1)
        await asyncio.sleep(1)
        raise ValueError("disk full")

    llm = ScriptedLLM()
    session: Session[Any] = Session(llm, background=[flaky])
    rec = Recorder(session)
    caplog.set_level(logging.ERROR, logger="backline")
    await session.start(Agent("Help."))
    await asyncio.sleep(10)
    assert runs == [1]
    failures = [
        r for r in caplog.records if r.getMessage() == "background session entrypoint failed"
    ]
    assert len(failures) == 1
    assert failures[0].background_id == "flaky"  # type: ignore[attr-defined]
    note = "Background session `flaky` stopped working after an error (ValueError: disk full)."
    assert notes(session) == [note]
    last = session.current_agent.chat_ctx.items[-1]
    assert isinstance(last, ChatMessage) and last.content == note
    assert llm.requests == [] and rec.of("background_reply") == []
    assert rec.of("background_message") == []  # the note is the runtime's, not a send
    statuses = [(e.status, e.error) for e in rec.of("background_status")]
    assert statuses == [("running", None), ("crashed", "ValueError: disk full")]
    assert session.agent_state == "listening"
    await session.aclose()
    assert [e.status for e in rec.of("background_status")][-1] == "crashed"


async def test_a_returned_entrypoint_is_told_and_its_context_can_still_send(
    virtual_clock: VirtualClock,
) -> None:
    contexts: list[BackgroundContext] = []

    @background("oneshot", description="x")
    async def oneshot(ctx: BackgroundContext) -> None:
        contexts.append(ctx)

    session: Session[Any] = Session(ScriptedLLM(), background=[oneshot])
    rec = Recorder(session)
    await session.start(Agent("Help."))
    assert await session.wait_for_idle(timeout=5)
    assert notes(session) == ["Background session `oneshot` has finished and is no longer running."]
    assert [e.status for e in rec.of("background_status")] == ["running", "ended"]
    await contexts[0].send("from a helper task", silent=True)  # not closed, only ended
    assert "from a helper task" in notes(session)[-1]
    await session.aclose()


@pytest.mark.parametrize("drain", [False, True])
async def test_close_cancels_entrypoints_and_drops_buffered_replies(
    virtual_clock: VirtualClock, no_leaked_tasks: Callable[[], Any], drain: bool
) -> None:
    finally_ran = asyncio.Event()

    @background("worker", description="x")
    async def entry(ctx: BackgroundContext) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            finally_ran.set()

    llm = ScriptedLLM()
    session: Session[Any] = Session(llm, background=[entry])
    rec = Recorder(session)
    await session.start(Agent("Help."))
    session.user_started_speaking()  # the reply cannot be voiced yet
    ctx = ctx_of(session)
    await ctx.send("buffered")
    assert session.agent_state == "thinking"
    start = virtual_clock.now()
    await session.aclose(drain=drain)
    assert virtual_clock.now() - start < 1.0
    assert finally_ran.is_set()
    assert llm.requests == []
    assert rec.of("background_reply") == []
    with pytest.raises(RuntimeError, match="background session 'worker' is closed"):
        await ctx.send("later")
    assert rec.of("background_status")[-1].status == "closed"
    await no_leaked_tasks()


async def test_close_marks_everything_closed_before_cancelling(
    virtual_clock: VirtualClock, no_leaked_tasks: Callable[[], Any]
) -> None:
    seen: dict[str, list[str]] = {}

    def make(name: str) -> Any:
        @background(name, description="x")
        async def entry(ctx: BackgroundContext) -> None:
            await ctx.send("pending")
            try:
                await asyncio.Event().wait()
            finally:
                errors = seen.setdefault(name, [])
                try:
                    ctx.set_state("bye")
                except RuntimeError as e:
                    errors.append(str(e))
                try:
                    await ctx.send("too late")
                except RuntimeError as e:
                    errors.append(str(e))

        return entry

    llm = ScriptedLLM()
    session: Session[Any] = Session(llm, background=[make("a"), make("b")])
    await session.start(Agent("Help."))
    session.user_started_speaking()
    await asyncio.sleep(1)
    assert session.agent_state == "thinking"  # both replies are buffered
    assert len(session.history) == 2
    await session.aclose()
    assert seen == {name: [f"background session '{name}' is closed"] * 2 for name in ("a", "b")}
    await no_leaked_tasks()


async def test_close_does_not_hang_on_an_entrypoint_blocked_in_send(
    virtual_clock: VirtualClock, no_leaked_tasks: Callable[[], Any]
) -> None:
    blocked = asyncio.Event()

    class Stuck(Agent):
        async def update_chat_ctx(self, chat_ctx: Any) -> None:
            blocked.set()
            await asyncio.Event().wait()  # never lets the insert finish

    @background("worker", description="x")
    async def entry(ctx: BackgroundContext) -> None:
        await ctx.send("stuck")

    llm = ScriptedLLM()
    session: Session[Any] = Session(llm, background=[entry])
    rec = Recorder(session)
    agent = Stuck("Help.")
    await session.start(agent)
    await asyncio.wait_for(blocked.wait(), 5)
    start = virtual_clock.now()
    await session.aclose()
    assert virtual_clock.now() - start < 1.0
    assert llm.requests == [] and len(session.history) == 0
    assert rec.of("background_message") == rec.of("background_reply") == []
    await no_leaked_tasks()


async def test_after_close_the_context_refuses_but_still_reads_state(
    virtual_clock: VirtualClock,
) -> None:
    session: Session[Any] = Session(ScriptedLLM(), background=[worker])
    await session.start(Agent("Help."))
    ctx = ctx_of(session)
    ctx.set_state({"last": True})
    await session.aclose()
    assert ctx.closed
    for silent in (False, True):
        with pytest.raises(RuntimeError, match=r"^background session 'worker' is closed$"):
            await ctx.send("late", silent=silent)
    with pytest.raises(RuntimeError, match=r"^background session 'worker' is closed$"):
        ctx.set_state("late")
    with pytest.raises(RuntimeError, match="is closed"):
        async with ctx.turn():
            pass
    assert ctx.state == {"last": True}
    assert len(session.history) == 0


async def test_starting_a_runtime_is_idempotent_and_refused_once_closed(
    virtual_clock: VirtualClock,
) -> None:
    starts: list[int] = []

    @background("worker", description="x")
    async def entry(ctx: BackgroundContext) -> None:
        starts.append(1)
        await asyncio.Event().wait()

    session: Session[Any] = Session(ScriptedLLM(), background=[entry])
    await session.start(Agent("Help."))
    assert session.background is not None
    rt = session.background.runtime("worker")
    assert rt is not None and rt.running
    rt.start()
    await asyncio.sleep(1)
    assert starts == [1]
    await session.aclose()
    assert not rt.running
    with pytest.raises(RuntimeError, match="is closed"):
        rt.start()


# -- the inbox (2A) -------------------------------------------------------------------


async def test_messages_are_fifo_and_buffered_until_read(virtual_clock: VirtualClock) -> None:
    session: Session[Any] = Session(ScriptedLLM(), background=[worker])
    await session.start(Agent("Help."))
    ctx = ctx_of(session)
    for m in ("one", "two", "three"):
        deliver(session, m)
    got: list[str] = []
    async for m in ctx.messages():
        got.append(m)
        if len(got) == 2:
            break
    deliver(session, "four")
    async for m in ctx.messages():  # a new iterator after a break takes over
        got.append(m)
        if len(got) == 4:
            break
    assert got == ["one", "two", "three", "four"]
    await session.aclose()


async def test_a_second_concurrent_reader_raises(virtual_clock: VirtualClock) -> None:
    session: Session[Any] = Session(ScriptedLLM(), background=[worker])
    await session.start(Agent("Help."))
    ctx = ctx_of(session)
    got: list[str] = []
    received = asyncio.Event()

    async def first_reader() -> None:
        async for m in ctx.messages():
            got.append(m)
            received.set()

    task = asyncio.ensure_future(first_reader())
    deliver(session, "first")
    await asyncio.wait_for(received.wait(), 5)  # the first reader is iterating
    for stream in (ctx.messages(), ctx.batches()):
        with pytest.raises(RuntimeError, match="single consumer"):
            await stream.__anext__()
    received.clear()
    deliver(session, "still mine")
    await asyncio.wait_for(received.wait(), 5)
    assert got == ["first", "still mine"]
    await session.aclose()  # the stream ends at close
    await asyncio.wait_for(task, 5)
    assert task.done() and task.exception() is None


async def test_the_stream_ends_only_at_close(virtual_clock: VirtualClock) -> None:
    ended = asyncio.Event()
    results: list[str] = []

    async def read(ctx: BackgroundContext) -> None:
        async for m in ctx.messages():
            results.append(m)
        ended.set()

    session: Session[Any] = Session(ScriptedLLM(), background=[worker])
    await session.start(Agent("Help."))
    task = asyncio.ensure_future(read(ctx_of(session)))
    await asyncio.sleep(3600)
    assert not ended.is_set()
    await session.aclose()
    await asyncio.wait_for(ended.wait(), 5)
    await task


async def test_batches_yield_everything_waiting_at_once(virtual_clock: VirtualClock) -> None:
    session: Session[Any] = Session(ScriptedLLM(), background=[worker])
    await session.start(Agent("Help."))
    ctx = ctx_of(session)
    assert ctx.pending() == []
    deliver(session, "a")
    deliver(session, "b")
    stream = ctx.batches()
    assert await stream.__anext__() == ["a", "b"]
    waiting = asyncio.ensure_future(stream.__anext__())
    await asyncio.sleep(1)  # nothing arrives for a while: the stream waits
    assert not waiting.done()
    deliver(session, "c")
    assert await asyncio.wait_for(waiting, 5) == ["c"]
    await session.aclose()


async def test_front_ends_can_post_into_an_inbox(virtual_clock: Any) -> None:
    got: list[str] = []
    arrived = asyncio.Event()

    @background("inbox", description="Collects.")
    async def inbox(ctx: BackgroundContext) -> None:
        async for message in ctx.messages():
            got.append(message)
            arrived.set()

    session: Session[Any] = Session(ScriptedLLM(), background=[inbox])
    await session.start(Agent("hi"))
    manager = session.background
    assert manager is not None
    manager.deliver("inbox", "from the page")
    await asyncio.wait_for(arrived.wait(), 5)
    assert got == ["from the page"]
    with pytest.raises(KeyError, match="known: inbox"):
        manager.deliver("nope", "x")
    await session.aclose()
