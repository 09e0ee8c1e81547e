"""Waiting for cancelled tasks at close: bounded, shielded, and light.

Thousands of sessions may close at once, so the wait for their cancelled tasks
is a future and a timer (no task and no ``asyncio.wait`` of its own); it keeps
the guarantees of close: never longer than the bound, and a closer that is
itself cancelled still waits (within the bound) before it re-raises.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from backline import Agent, Session, TextOutput, background
from backline.testing import ScriptedLLM, VirtualClock, text
from backline.voice._tasks import cancel_and_wait


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
    loop = asyncio.get_running_loop()
    session: Session[Any] = Session(
        ScriptedLLM(lambda _: text("Fine."), record=False),
        output=TextOutput(),
        background=[WORKER],
    )
    await session.start(Agent("Help."))
    await session.run(user_input="hello")
    made: list[Any] = []
    factory = loop.get_task_factory()

    def counting(lp: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> asyncio.Task[Any]:
        made.append(getattr(coro, "__qualname__", coro))
        return asyncio.Task(coro, loop=lp, **kw)

    loop.set_task_factory(counting)
    try:
        await session.aclose()
    finally:
        loop.set_task_factory(factory)
    assert made == []
    assert session.closed
    assert session.background is not None
    assert session.background.runtime("worker").status == "closed"  # type: ignore[union-attr]


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
