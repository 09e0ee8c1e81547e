"""Session parts and observers (issue 24): the runtime knows parts only through
``SessionPart``, and what follows every session subscribes as an observer."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import pytest

from backline import Agent, FunctionTool, Session, function_tool
from backline.tasks import TaskScope
from backline.testing import ScriptedLLM, text, tool_calls
from backline.voice import Session as RuntimeSession
from backline.voice import SessionPart, add_session_observer, remove_session_observer
from backline.voice.parts import PartHost


class Part:
    """A part with a tool, a task of its own, and a record of what it was asked."""

    def __init__(self, name: str, *, reserved: Mapping[str, str] | None = None) -> None:
        self.name = name
        self.calls: list[str] = []
        self.taken: frozenset[str] = frozenset()
        self.scope = TaskScope(f"part {name}")
        self._reserved = dict(reserved or {})
        self.fail_start: BaseException | None = None
        self.finish_waits: asyncio.Event | None = None
        self.host: PartHost | None = None

        async def tool() -> str:
            return f"{name} answered"

        tool.__name__ = f"{name}_tool"
        tool.__doc__ = f"The tool of part {name}."
        self._tools: list[FunctionTool] = [function_tool(tool)]

    @property
    def tools(self) -> Sequence[FunctionTool]:
        return self._tools

    def reserved_names(self) -> Mapping[str, str]:
        return self._reserved

    async def start(self, session: PartHost, taken: Collection[str]) -> None:
        self.calls.append("start")
        self.taken = frozenset(taken)
        self.host = session
        if self.fail_start is not None:
            raise self.fail_start
        self.scope = TaskScope(f"part {self.name}")
        self.scope.create_task(asyncio.Event().wait(), name=f"{self.name} work")

    def stop(self) -> Sequence[TaskScope]:
        self.calls.append("stop")
        self.scope.cancel()
        return (self.scope,)

    def finish(self) -> Any:
        self.calls.append("finish")
        if self.finish_waits is None:
            return None
        return self._finish_later()

    async def _finish_later(self) -> None:
        assert self.finish_waits is not None
        await self.finish_waits.wait()
        self.calls.append("finished")

    def add_tool(self, tool: FunctionTool) -> None:
        self._tools = [*self._tools, tool]
        assert self.host is not None
        self.host.tools_changed()


def test_a_part_satisfies_the_protocol() -> None:
    assert isinstance(Part("a"), SessionPart)


async def test_a_parts_tools_reach_every_agent_and_its_lifecycle_is_called_in_order() -> None:
    part = Part("clock")
    llm = ScriptedLLM([tool_calls(("clock_tool", {})), text("Done.")])
    session: RuntimeSession[Any] = RuntimeSession(llm, parts=[part])
    await session.start(Agent("Help."))
    assert session.parts == (part,)
    assert "clock_tool" not in part.taken  # (its own tools are no one else's)
    assert [t.name for t in session.tools] == ["clock_tool"]
    result = await session.run(user_input="what time is it")
    outputs = [e.item.output for e in result.events if e.type == "function_call_output"]
    assert outputs == ["clock answered"]
    assert llm.requests[0].tool_names == ["clock_tool"]
    await session.aclose()
    assert part.calls == ["start", "stop", "finish"]
    assert part.scope.closed and len(part.scope) == 0


async def test_a_part_that_fails_to_start_fails_the_start_and_the_started_ones_close() -> None:
    first, second = Part("first"), Part("second")
    second.fail_start = RuntimeError("no server")
    session: RuntimeSession[Any] = RuntimeSession(ScriptedLLM(), parts=[first, second])
    with pytest.raises(RuntimeError, match="no server"):
        await session.start(Agent("Help."))
    assert session.closed
    assert first.calls == ["start", "stop", "finish"]
    assert second.calls == ["start", "stop", "finish"]


def test_a_reserved_name_clashing_with_a_session_tool_fails_at_construction() -> None:
    @function_tool
    async def mine() -> str:
        """Mine."""
        return "x"

    with pytest.raises(ValueError, match="mine is reserved for the other part"):
        RuntimeSession(
            ScriptedLLM(), tools=[mine], parts=[Part("p", reserved={"mine": "the other part"})]
        )


async def test_tools_changed_reaches_the_next_request() -> None:
    part = Part("p")
    llm = ScriptedLLM([text("One."), text("Two.")])
    session: RuntimeSession[Any] = RuntimeSession(llm, parts=[part])
    await session.start(Agent("Help."))
    await session.run(user_input="first")

    @function_tool
    async def later() -> str:
        """Added later."""
        return "later"

    part.add_tool(later)
    await session.run(user_input="second")
    assert llm.requests[0].tool_names == ["p_tool"]
    assert sorted(llm.requests[1].tool_names) == ["later", "p_tool"]
    await session.aclose()


async def test_the_close_awaits_what_a_part_still_needs_and_stays_bounded() -> None:
    part = Part("slow")
    part.finish_waits = asyncio.Event()
    session: RuntimeSession[Any] = RuntimeSession(ScriptedLLM(), parts=[part])
    await session.start(Agent("Help."))
    closing = asyncio.ensure_future(session.aclose())
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert not closing.done() and not session.closed
    part.finish_waits.set()
    await asyncio.wait_for(closing, 5)
    assert session.closed and part.calls[-1] == "finished"


async def test_backline_session_takes_parts_beside_its_own() -> None:
    part = Part("extra")
    session: Session[Any] = Session(ScriptedLLM(), parts=[part])
    assert session.background is None
    async with session:
        await session.start(Agent("Help."))
        assert part.calls == ["start"]
    assert part.calls == ["start", "stop", "finish"]


async def test_observers_see_every_start_and_close_and_one_that_raises_is_only_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[tuple[str, object]] = []

    def broken(hook: str, session: object) -> None:
        raise RuntimeError("observer bug")

    def watcher(hook: str, session: object) -> None:
        seen.append((hook, session))

    add_session_observer(broken)
    add_session_observer(watcher)
    add_session_observer(watcher)  # once, even if added twice
    try:
        session: Session[Any] = Session(ScriptedLLM())
        with caplog.at_level(logging.ERROR, logger="backline"):
            await session.start(Agent("Help."))
            await session.aclose()
    finally:
        remove_session_observer(broken)
        remove_session_observer(watcher)
    assert seen == [("session_started", session), ("session_closed", session)]
    assert "a session_started observer raised" in caplog.text
    after: Session[Any] = Session(ScriptedLLM())
    await after.start(Agent("Help."))
    await after.aclose()
    assert len(seen) == 2  # removed: not called any more
