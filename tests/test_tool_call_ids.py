"""Tool calls with a repeated id: each runs, and each pairs with its own output in the
history and in what the model reads next (issue 13 item 8)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from backline import Agent, FunctionCall, FunctionCallOutput, Session, function_tool
from backline.llm.anthropic import AnthropicLLM
from backline.testing import ScriptedLLM, VirtualClock, text, tool_calls
from backline.testing import fake_anthropic as fa

ran: list[str] = []


@function_tool
async def left() -> str:
    """The left one."""
    ran.append("left")
    return "LEFT"


@function_tool
async def right() -> str:
    """The right one."""
    ran.append("right")
    return "RIGHT"


@pytest.fixture(autouse=True)
def reset() -> None:
    ran.clear()


def pairs(items: Any) -> list[tuple[str, str, str]]:
    """(call id, tool, output) for each call, its output found by call id."""
    out = {it.call_id: it.output for it in items if isinstance(it, FunctionCallOutput)}
    calls = [it for it in items if isinstance(it, FunctionCall)]
    return [(c.call_id, c.name, out.get(c.call_id, "<no output>")) for c in calls]


async def test_a_repeated_id_in_one_response_is_renamed_and_both_pair(
    virtual_clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    llm = ScriptedLLM([tool_calls(("left", {}, "dup"), ("right", {}, "dup")), text("Both.")])
    async with Session(llm) as session:
        await session.start(Agent("Help.", tools=[left, right]))
        with caplog.at_level(logging.WARNING, logger="backline"):
            await session.run(user_input="both")
        assert sorted(ran) == ["left", "right"]
        expected = [("dup", "left", "LEFT"), ("dup_2", "right", "RIGHT")]
        assert pairs(session.history.items) == expected
        assert pairs(llm.requests[1].chat_ctx.items) == expected
        assert "already in use; it runs as 'dup_2'" in caplog.text


async def test_an_id_from_an_earlier_step_or_an_empty_id_gets_a_fresh_one(
    virtual_clock: VirtualClock,
) -> None:
    llm = ScriptedLLM(
        [
            tool_calls(("left", {}, "call_0")),
            tool_calls(("right", {}, "call_0"), ("left", {}, "")),
            text("Done."),
        ]
    )
    async with Session(llm) as session:
        await session.start(Agent("Help.", tools=[left, right]))
        await session.run(user_input="go")
        got = pairs(llm.requests[2].chat_ctx.items)
        assert [(name, output) for _, name, output in got] == [
            ("left", "LEFT"),
            ("right", "RIGHT"),
            ("left", "LEFT"),
        ]
        ids = [call_id for call_id, _, _ in got]
        assert ids[:2] == ["call_0", "call_0_2"]
        assert ids[2] and len(set(ids)) == 3


@pytest.fixture
async def server() -> AsyncIterator[fa.FakeAnthropicServer]:
    async with fa.FakeAnthropicServer() as s:
        yield s


async def test_through_the_anthropic_adapter_both_results_reach_the_model(
    server: fa.FakeAnthropicServer,
) -> None:
    server.push(
        fa.tool_calls(("left", {}, "toolu_same"), ("right", {}, "toolu_same")),
        fa.text("Both done."),
    )
    llm = AnthropicLLM(base_url=server.url, api_key="test", retry_base_delay=0.001)
    errors: list[Any] = []
    try:
        async with Session(llm) as session:
            session.on("error", errors.append)
            await session.start(Agent("Help.", tools=[left, right]))
            await session.run(user_input="both")
            last = session.history.items[-1]
    finally:
        await llm.aclose()
    assert sorted(ran) == ["left", "right"]
    # The (validating) server accepted the history: no error, the model answered.
    assert errors == [] and getattr(last, "content", None) == "Both done."
    assert len(server.requests) == 2
    second = server.requests[1]
    (assistant,) = [m for m in second.messages if m["role"] == "assistant"]
    uses = [(b["id"], b["name"]) for b in assistant["content"] if b["type"] == "tool_use"]
    assert uses == [("toolu_same", "left"), ("toolu_same_2", "right")]
    results = {r["tool_use_id"]: r["content"] for r in second.tool_results}
    assert results == {"toolu_same": "LEFT", "toolu_same_2": "RIGHT"}
