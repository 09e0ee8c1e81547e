"""Waiting for cancelled tasks at close: bounded, shielded, and light.

Thousands of sessions may close at once, so the wait for their cancelled tasks
is a future and a timer (no task and no ``asyncio.wait`` of its own); it keeps
the guarantees of close: never longer than the bound, and a closer that is
itself cancelled still waits (within the bound) before it re-raises.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections import Counter
from collections.abc import AsyncGenerator, Iterator
from typing import Any

import pytest

from backline import Agent, Session, TextOutput, background, function_tool
from backline.llm import ChatChunk, LLMStream
from backline.llm.llm import ToolCallChunk
from backline.tasks import cancel_and_wait
from backline.testing import ScriptedLLM, VirtualClock, text

from .conftest import cyclic_garbage


@contextlib.contextmanager
def tasks_made() -> Iterator[list[Any]]:
    """The coroutine names of the tasks the running loop makes inside the block."""
    loop = asyncio.get_running_loop()
    made: list[Any] = []
    factory = loop.get_task_factory()

    def counting(lp: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> asyncio.Task[Any]:
        made.append(getattr(coro, "__qualname__", coro))
        return asyncio.Task(coro, loop=lp, **kw)

    loop.set_task_factory(counting)
    try:
        yield made
    finally:
        loop.set_task_factory(factory)


async def _parked() -> None:
    await asyncio.Event().wait()


async def _stubborn(release: asyncio.Event) -> None:
    while not release.is_set():
        try:
            await asyncio.sleep(1)
        except asyncio.CancelledError:
            continue


async def _slow_to_stop(delay: float) -> None:
    try:
        await asyncio.Event().wait()
    finally:
        await asyncio.shield(asyncio.sleep(delay))


async def test_the_wait_ends_when_the_tasks_do_and_leaves_no_timer(
    virtual_clock: VirtualClock,
) -> None:
    loop = asyncio.get_running_loop()
    tasks = [loop.create_task(_parked()) for _ in range(3)]
    await asyncio.sleep(0)
    timers = len(loop._scheduled)  # type: ignore[attr-defined]
    start = virtual_clock.now()
    await cancel_and_wait(tasks, timeout=5.0)
    assert virtual_clock.now() == start
    assert all(t.cancelled() for t in tasks)
    live = [h for h in loop._scheduled if not h.cancelled()]  # type: ignore[attr-defined]
    assert len(live) <= timers  # the bound's timer is cancelled
    assert all(not t._callbacks for t in tasks)  # type: ignore[attr-defined]


async def test_a_task_that_ignores_cancellation_is_abandoned_at_the_bound(
    virtual_clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    release = asyncio.Event()
    task = asyncio.get_running_loop().create_task(_stubborn(release), name="stubborn")
    await asyncio.sleep(0)
    start = virtual_clock.now()
    with caplog.at_level(logging.WARNING, logger="backline"):
        await cancel_and_wait([task], timeout=3.0, owner="test")
    assert virtual_clock.now() - start == pytest.approx(3.0)
    assert not task.done()
    assert "stubborn ignored cancellation" in caplog.text
    release.set()
    await task


async def test_a_cancelled_closer_still_waits_within_the_bound(
    virtual_clock: VirtualClock,
) -> None:
    loop = asyncio.get_running_loop()
    slow = loop.create_task(_slow_to_stop(2.0))
    await asyncio.sleep(0)
    closer = loop.create_task(cancel_and_wait([slow], timeout=5.0))
    await asyncio.sleep(0.5)
    closer.cancel()
    start = virtual_clock.now()
    with pytest.raises(asyncio.CancelledError):
        await closer
    assert slow.done()  # waited for, then the closer's cancellation was re-raised
    assert virtual_clock.now() - start == pytest.approx(1.5)


async def test_a_cancelled_closer_gives_up_at_the_bound(virtual_clock: VirtualClock) -> None:
    loop = asyncio.get_running_loop()
    release = asyncio.Event()
    stubborn = loop.create_task(_stubborn(release))
    await asyncio.sleep(0)
    closer = loop.create_task(cancel_and_wait([stubborn], timeout=5.0))
    await asyncio.sleep(1.0)
    closer.cancel()
    start = virtual_clock.now()
    with pytest.raises(asyncio.CancelledError):
        await closer
    assert virtual_clock.now() - start == pytest.approx(4.0)  # the rest of the bound
    release.set()
    await stubborn


async def _worker(ctx: Any) -> None:
    async for _ in ctx.messages():
        pass


WORKER = background("worker", description="Does nothing.")(_worker)


async def test_closing_an_idle_session_makes_no_task() -> None:
    """Nothing but the agent's and the background's own tasks to wait for: the close
    runs in no task of its own; its one wait is driven by their done callbacks."""
    session: Session[Any] = Session(
        ScriptedLLM(lambda _: text("Fine."), record=False),
        output=TextOutput(),
        background=[WORKER],
    )
    await session.start(Agent("Help."))
    await session.run(user_input="hello")
    with tasks_made() as made:
        await session.aclose()
    assert made == []
    assert session.closed
    assert session.background is not None
    assert session.background.runtime("worker").status == "closed"  # type: ignore[union-attr]


async def test_a_reply_queued_at_close_is_said_only_with_drain() -> None:
    """A turn pushed right before ``aclose()`` is interrupted with the rest (nothing is
    said); ``aclose(drain=True)`` lets the queued reply be said first (the console does
    that when its input is a pipe: ``/quit`` after a piped line)."""
    for drain, expected in ((False, ["last words"]), (True, ["last words", "Fine."])):
        session: Session[Any] = Session(
            ScriptedLLM(lambda _: text("Fine."), record=False), output=TextOutput()
        )
        await session.start(Agent("Help."))
        session.push_user_turn("last words")
        await session.aclose(drain=drain)
        said = [getattr(it, "content", None) for it in session.history.items]
        assert said == expected, drain


async def test_a_background_cleans_up_while_the_agents_close_and_close_waits_for_it(
    virtual_clock: VirtualClock,
) -> None:
    """Cancelled once, at the start of close; its cleanup (an await) is not cut short."""
    log: list[str] = []

    async def tidy(ctx: Any) -> None:
        try:
            async for _ in ctx.messages():
                pass
        except asyncio.CancelledError:
            log.append("cancelled")
            await asyncio.sleep(0.5)  # cleanup that takes time
            log.append("cleaned up")
            raise

    session: Session[Any] = Session(
        ScriptedLLM(lambda _: text("Fine."), record=False),
        output=TextOutput(),
        background=[background("tidy", description="Tidies up.")(tidy)],
    )
    statuses: list[str] = []
    session.on("background_status", lambda e: statuses.append(e.status))
    await session.start(Agent("Help."))
    await session.run(user_input="hello")
    start = virtual_clock.now()
    await session.aclose()
    assert log == ["cancelled", "cleaned up"]
    assert virtual_clock.now() - start == pytest.approx(0.5)
    assert statuses[-1] == "closed"


async def _idle_session_after_a_turn() -> Session[Any]:
    session: Session[Any] = Session(
        ScriptedLLM(lambda _: text("Fine."), record=False),
        output=TextOutput(),
        background=[WORKER],
    )
    await session.start(Agent("Help."))
    await session.run(user_input="hello")
    return session


async def test_an_idle_session_closes_in_three_loop_iterations() -> None:
    """Its speech loop is woken and ends by itself, its background's entrypoint is
    cancelled; their scopes' done callbacks finish the close, which wakes the caller:
    three loop iterations (six before, with a task for the close)."""
    session = await _idle_session_after_a_turn()
    loop = asyncio.get_running_loop()
    ticks = 0
    closing = True

    def tick() -> None:
        nonlocal ticks
        if closing:
            ticks += 1
            loop.call_soon(tick)

    loop.call_soon(tick)
    await session.aclose()
    closing = False
    assert ticks == 3
    activity = session.current_agent._activity
    assert activity is None  # detached
    assert session.background is not None
    worker = session.background.runtime("worker")
    assert worker is not None and worker.status == "closed"


async def test_an_idle_session_keeps_nothing_from_its_close() -> None:
    """What the close allocates is gone once it returns (no task, coroutine, context
    or timer of its own), and its stopped tasks keep no exception: a cancelled task
    keeps its CancelledError, whose traceback keeps the frames (and their locals) of
    every coroutine it went through, as long as the task is kept."""
    session = await _idle_session_after_a_turn()
    activity = session._switches.current
    assert activity is not None and activity._loop_task is not None
    assert session.background is not None
    worker = session.background.runtime("worker")
    assert worker is not None and worker._task is not None
    with cyclic_garbage() as garbage:
        gc.collect()  # the young generation is now empty; the collector is off
        await session.aclose()
        young = gc.get_objects(generation=0)
    kept = Counter(type(o).__name__ for o in young)
    assert garbage == []
    for name in ("Task", "coroutine", "Context", "TimerHandle", "_WhenEmpty"):
        assert kept[name] == 0, kept
    assert not activity._loop_task.cancelled()  # woken, it ended by itself
    assert worker._task.cancelled()
    for task in (activity._loop_task, worker._task):
        assert not [r for r in gc.get_referents(task) if isinstance(r, BaseException)]


async def test_a_cancelled_caller_stops_waiting_and_the_close_goes_on() -> None:
    session = await _idle_session_after_a_turn()
    closes: list[Any] = []
    session.on("close", closes.append)
    caller = asyncio.get_running_loop().create_task(session.aclose())
    await asyncio.sleep(0)  # the close has started: its tasks are told to stop
    assert not session.closed
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    await session.aclose()  # waits for the same close
    assert session.closed and len(closes) == 1
    assert session.background is not None
    assert session.background.runtime("worker").status == "closed"  # type: ignore[union-attr]


async def test_a_background_that_ignores_cancellation_is_abandoned_at_the_bound(
    virtual_clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """The one wait of a close is bounded; what is still running then is logged and
    abandoned, and the close goes on (one bound, not one per step)."""
    release = asyncio.Event()

    async def stubborn(ctx: Any) -> None:
        await _stubborn(release)

    session: Session[Any] = Session(
        ScriptedLLM(lambda _: text("Fine."), record=False),
        output=TextOutput(),
        background=[background("stubborn", description="Ignores cancellation.")(stubborn)],
    )
    await session.start(Agent("Help."))
    start = virtual_clock.now()
    try:
        with caplog.at_level(logging.WARNING, logger="backline"):
            await session.aclose()
        assert session.closed
        assert virtual_clock.now() - start == pytest.approx(5.0)  # the one bound
        assert "background stubborn ignored cancellation" in caplog.text
    finally:
        release.set()
        await asyncio.sleep(2)


class _SwallowingLLM:
    """Its stream waits; cancelled there, it swallows the cancellation and calls the
    ``stubborn`` tool (work that starts while the session closes)."""

    def __init__(self) -> None:
        self.waiting = asyncio.Event()

    def chat(self, chat_ctx: Any, *, tools: Any = (), tool_choice: Any = None) -> LLMStream:
        return LLMStream(self._stream())

    async def _stream(self) -> AsyncGenerator[ChatChunk, None]:
        self.waiting.set()
        try:
            await asyncio.get_running_loop().create_future()
        except asyncio.CancelledError:
            pass
        yield ToolCallChunk(call_id="call_1", name="stubborn", arguments="{}")
        await asyncio.sleep(0.1)  # the tool starts, and ignores its cancellation


async def test_work_that_starts_during_a_close_is_closed_within_its_bound(
    virtual_clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    release = asyncio.Event()
    started = asyncio.Event()

    @function_tool
    async def stubborn() -> str:
        """Ignores cancellation."""
        started.set()
        await _stubborn(release)
        return "done"

    llm = _SwallowingLLM()
    session: Session[Any] = Session(llm, tools=[stubborn])  # type: ignore[arg-type]
    await session.start(Agent("Help."))
    session.push_user_turn("hi")
    await asyncio.wait_for(llm.waiting.wait(), 5)
    start = virtual_clock.now()
    try:
        with tasks_made() as made, caplog.at_level(logging.WARNING, logger="backline"):
            await session.aclose()
        assert started.is_set()
        assert made == ["ToolRunner._run"]  # the tool's own task; the close made none
        assert session.closed
        assert virtual_clock.now() - start == pytest.approx(5.1)  # the tool scope's bound
        assert "tool stubborn ignored cancellation" in caplog.text
    finally:
        release.set()
        await asyncio.sleep(2)
