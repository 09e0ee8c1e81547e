"""``LazyDeadline``: one loop timer bounds a series of waits that never overlap (a
session's ``run()`` calls); a wait that ends in time costs no timer of its own, the
timer re-arms for a later deadline, a shorter one replaces it, and each wait expires
at its own deadline, never at another's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from backline import Agent, Session
from backline.llm import ChatChunk, LLMStream, TextDelta
from backline.tasks import LazyDeadline, Signal
from backline.testing import ScriptedLLM, VirtualClock, text


def counting_timers(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The deadlines of every timer the running loop makes (``call_at``)."""
    loop = asyncio.get_running_loop()
    made: list[float] = []
    call_at = loop.call_at

    def counted(when: float, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        made.append(when)
        return call_at(when, *args, **kwargs)

    monkeypatch.setattr(loop, "call_at", counted)
    return made


async def test_waits_in_series_share_one_timer(
    virtual_clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    signal, deadline = Signal(), LazyDeadline()
    made = counting_timers(monkeypatch)
    for _ in range(50):
        flag = [False]
        asyncio.get_running_loop().call_later(
            1.0, lambda f=flag: (f.__setitem__(0, True), signal.notify())
        )
        assert await signal.wait_until(lambda f=flag: f[0], timeout=30.0, deadline=deadline)
    # Besides the test's own 50 timers: one for the deadlines, re-armed once when it
    # came due (at 30 s) before the current wait's deadline.
    assert len(made) - 50 <= 2
    deadline.cancel()


async def test_a_wait_expires_at_its_own_deadline(virtual_clock: VirtualClock) -> None:
    signal, deadline = Signal(), LazyDeadline()
    start = virtual_clock.now()
    assert not await signal.wait_until(lambda: False, timeout=5.0, deadline=deadline)
    assert virtual_clock.now() - start == pytest.approx(5.0)
    # A later, longer wait is not cut at the earlier deadline; a shorter one replaces it.
    start = virtual_clock.now()
    assert not await signal.wait_until(lambda: False, timeout=2.0, deadline=deadline)
    assert virtual_clock.now() - start == pytest.approx(2.0)
    flag = [False]
    asyncio.get_running_loop().call_later(1.0, lambda: (flag.__setitem__(0, True), signal.notify()))
    start = virtual_clock.now()
    assert await signal.wait_until(lambda: flag[0], timeout=30.0, deadline=deadline)
    assert virtual_clock.now() - start == pytest.approx(1.0)
    start = virtual_clock.now()
    assert not await signal.wait_until(lambda: False, timeout=40.0, deadline=deadline)
    assert virtual_clock.now() - start == pytest.approx(40.0)  # not at the 30 s one's
    deadline.cancel()


class Hanging:
    """A model that never answers."""

    def chat(self, chat_ctx: Any, *, tools: Any = (), tool_choice: Any = None) -> LLMStream:
        async def never() -> AsyncGenerator[ChatChunk, None]:
            await asyncio.Event().wait()
            yield TextDelta("never")

        return LLMStream(never())


async def test_a_run_still_times_out_and_close_drops_the_timer(
    virtual_clock: VirtualClock,
) -> None:
    session: Session[Any] = Session(ScriptedLLM([text("Hi.")]))
    await session.start(Agent("Help."))
    result = await session.run(user_input="hello", timeout=30.0)
    result.expect.contains_message(role="assistant", content="Hi.")
    await session.aclose()
    assert session._run_deadline._timer is None  # close dropped it

    stuck: Session[Any] = Session(Hanging())
    await stuck.start(Agent("Help."))
    start = virtual_clock.now()
    with pytest.raises(TimeoutError, match=r"did not finish within 3\.0s"):
        await stuck.run(user_input="hello", timeout=3.0)
    assert virtual_clock.now() - start == pytest.approx(3.0)
    await stuck.aclose()
