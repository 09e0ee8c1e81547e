"""The ``llm_metrics`` event: time to first token and tokens per second, for every LLM."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from typing import Any

import pytest

from backline import (
    Agent,
    ChatContext,
    FunctionTool,
    InMemoryTextOutput,
    LLMError,
    LLMMetrics,
    LLMStream,
    Session,
    ToolChoice,
    function_tool,
)
from backline.llm.llm import ChatChunk, TextDelta
from backline.testing import ScriptedLLM, error, text, tool_calls


class Assistant(Agent):
    def __init__(self) -> None:
        super().__init__("You are terse.")


def metrics_of(session: Session[Any]) -> list[LLMMetrics]:
    got: list[LLMMetrics] = []
    session.on("llm_metrics", got.append)
    return got


async def test_ttft_duration_and_tokens_per_second_on_the_loop_clock(virtual_clock: Any) -> None:
    llm = ScriptedLLM([text("one two three four five", delay=0.5, chunk_delay=0.1)])
    async with Session(llm) as session:
        got = metrics_of(session)
        speeches: list[Any] = []
        session.on("speech_created", speeches.append)
        await session.start(Assistant())
        await session.run(user_input="count")
    (m,) = got
    assert m.speech_id == speeches[0].speech.id
    assert (m.llm, m.model, m.status) == ("ScriptedLLM", None, "completed")
    assert m.ttft == pytest.approx(0.5)
    assert m.duration == pytest.approx(0.9)
    assert m.output_tokens == 5
    assert m.input_tokens is not None and m.input_tokens > 0
    assert m.tokens_per_second == pytest.approx(5 / 0.4)


async def test_each_request_of_a_tool_turn_is_measured(virtual_clock: Any) -> None:
    @function_tool
    async def lookup(key: str) -> str:
        """Look a key up."""
        return "42"

    llm = ScriptedLLM(
        [tool_calls(("lookup", {"key": "answer"}), delay=0.3), text("It is 42.", delay=0.2)]
    )
    async with Session(llm, tools=[lookup]) as session:
        got = metrics_of(session)
        await session.start(Assistant())
        await session.run(user_input="the answer?")
    assert [m.ttft for m in got] == [pytest.approx(0.3), pytest.approx(0.2)]
    assert [m.status for m in got] == ["completed", "completed"]
    assert got[0].speech_id == got[1].speech_id  # two steps of one reply


async def test_an_interrupted_request_is_reported_cancelled(virtual_clock: Any) -> None:
    llm = ScriptedLLM([text("a b c d e f g h", delay=0.2, chunk_delay=1.0)])
    async with Session(llm, output=InMemoryTextOutput()) as session:
        got = metrics_of(session)
        await session.start(Assistant())
        handle = session.generate_reply()
        await asyncio.sleep(1.5)  # two words out
        session.interrupt()
        await handle
    (m,) = got
    assert m.status == "cancelled"
    assert m.ttft == pytest.approx(0.2)
    assert m.duration == pytest.approx(1.5)
    assert (m.output_tokens, m.tokens_per_second) == (None, None)  # no usage came


async def test_a_failed_request_is_reported_failed(virtual_clock: Any) -> None:
    llm = ScriptedLLM([error(LLMError("boom"), delay=0.25)])
    async with Session(llm) as session:
        got = metrics_of(session)
        await session.start(Assistant())
        result = await session.run(user_input="hi")
    assert result.errors
    (m,) = got
    assert (m.status, m.ttft, m.duration) == ("failed", None, pytest.approx(0.25))


class BareLLM:
    """An LLM that reports no usage and has a ``model``."""

    model = "bare-1"

    def chat(
        self,
        chat_ctx: ChatContext,
        *,
        tools: Sequence[FunctionTool] = (),
        tool_choice: ToolChoice | None = None,
    ) -> LLMStream:
        async def stream() -> AsyncGenerator[ChatChunk, None]:
            await asyncio.sleep(0.4)
            yield TextDelta("Hi.")

        return LLMStream(stream())


async def test_any_llm_is_measured_even_without_usage(virtual_clock: Any) -> None:
    async with Session(BareLLM()) as session:
        got = metrics_of(session)
        await session.start(Assistant())
        await session.run(user_input="hi")
    (m,) = got
    assert (m.llm, m.model, m.status) == ("BareLLM", "bare-1", "completed")
    assert m.ttft == pytest.approx(0.4)
    assert (m.input_tokens, m.output_tokens, m.tokens_per_second) == (None, None, None)
