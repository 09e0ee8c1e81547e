"""The LLM adapter conformance suite: what every model adapter must do, against its fake.

A test module runs the suite by importing its tests and defining an ``llm_harness``
fixture that returns a ``Harness`` for its adapter and fake server::

    from tests.llm_conformance import *  # noqa: F403 - the shared tests
    from tests.llm_conformance import Harness

    @pytest.fixture
    async def llm_harness(...) -> AsyncIterator[Harness]: ...

The fake servers share the script builders' names and shapes (``text``,
``tool_calls``, ``error``, ``stream_error``), so each test scripts both alike.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from backline.llm import (
    ChatChunk,
    ChatContext,
    ChatMessage,
    FunctionTool,
    LLMError,
    TextDelta,
    ToolCallChunk,
    Usage,
    function_tool,
    named_tool,
)

__all__ = [
    "test_a_given_client_is_used_without_its_retries",
    "test_aclose_closes_the_connection",
    "test_backoff_doubles_up_to_the_cap",
    "test_bad_tool_choice_fails_before_any_request",
    "test_cancelling_the_consumer_closes_the_connection",
    "test_exhausted_script_is_not_retried",
    "test_model_errors_hint_at_backline_model",
    "test_no_retry_once_output_started",
    "test_other_400_keeps_the_api_message",
    "test_parallel_tool_calls_are_complete_chunks",
    "test_rejected_key_names_the_variable",
    "test_retries_exhausted",
    "test_retries_then_succeed",
    "test_retry_after_is_honoured_up_to_the_cap",
    "test_streams_text_deltas_then_usage",
    "test_tool_call_without_arguments",
    "test_unreachable_server_is_retried_then_reported",
]


@dataclass
class Harness:
    """One adapter and its fake server, as the suite needs them.

    ``server``: ``push(*responses)``, ``requests`` (each with ``body``) and
    ``wait_for_disconnect_async(timeout)``. ``script``: the fake's builders.
    ``make_llm(**kwargs)``: the adapter on the fake server (a test key, a tiny
    backoff; closed by the fixture). ``make_client(max_retries)``: the vendor
    client on the fake server, for ``client=``. ``unreachable(url, **kwargs)``: the
    adapter on a dead URL. ``key_env``: the variable a rejected key names;
    ``logger``: where retries are logged; ``unreachable_text``: what a connection
    failure says; ``tool_stop_reason``: the stop reason of a tool-call reply.
    """

    server: Any
    script: Any
    make_llm: Callable[..., Any]
    make_client: Callable[[int], Any]
    unreachable: Callable[..., Any]
    key_env: str
    logger: str
    unreachable_text: str
    tool_stop_reason: str


@function_tool
def get_weather(city: str, days: int = 1) -> str:
    """Get the weather forecast.

    Args:
        city: The city.
        days: How many days.
    """
    return "sunny"


@function_tool
def get_time(zone: str) -> str:
    """Get the time in a zone."""
    return "noon"


def hi() -> ChatContext:
    return ChatContext([ChatMessage(role="user", content="hi")])


async def collect(
    llm: Any, chat_ctx: ChatContext, tools: list[FunctionTool] | None = None, choice: Any = None
) -> list[ChatChunk]:
    async with llm.chat(chat_ctx, tools=tools or [], tool_choice=choice) as stream:
        return [chunk async for chunk in stream]


# -- streaming ---------------------------------------------------------------------


async def test_streams_text_deltas_then_usage(llm_harness: Harness) -> None:
    h = llm_harness
    h.server.push(
        h.script.text("Hello there, friend.", usage={"input_tokens": 42, "output_tokens": 5})
    )
    chunks = await collect(h.make_llm(), hi())
    assert chunks[:-1] == [TextDelta("Hello "), TextDelta("there, "), TextDelta("friend.")]
    last = chunks[-1]
    assert isinstance(last, Usage)
    assert (last.input_tokens, last.output_tokens) == (42, 5)
    assert last.stop_reason is not None
    assert last.ttft is not None and last.ttft >= 0


async def test_parallel_tool_calls_are_complete_chunks(llm_harness: Harness) -> None:
    h = llm_harness
    h.server.push(
        h.script.tool_calls(
            ("get_weather", {"city": "Paris", "days": 2}),
            ("get_time", {"zone": "Europe/Paris"}),
            text="Checking.",
            json_chunk_size=3,  # many pieces per call
        )
    )
    chunks = await collect(h.make_llm(), hi(), tools=[get_weather, get_time])
    assert chunks[0] == TextDelta("Checking.")
    calls = [c for c in chunks if isinstance(c, ToolCallChunk)]
    assert [c.name for c in calls] == ["get_weather", "get_time"]
    assert len({c.call_id for c in calls}) == 2 and all(c.call_id for c in calls)
    assert json.loads(calls[0].arguments) == {"city": "Paris", "days": 2}
    assert json.loads(calls[1].arguments) == {"zone": "Europe/Paris"}
    assert get_weather.parse_arguments(calls[0].arguments) == {"city": "Paris", "days": 2}
    usage = chunks[-1]
    assert isinstance(usage, Usage)
    assert usage.stop_reason == h.tool_stop_reason


async def test_tool_call_without_arguments(llm_harness: Harness) -> None:
    h = llm_harness
    h.server.push(h.script.tool_calls(("get_time", {})))
    chunks = await collect(h.make_llm(), hi(), tools=[get_time])
    assert isinstance(chunks[0], ToolCallChunk)
    assert (chunks[0].name, chunks[0].arguments) == ("get_time", "{}")


async def test_a_given_client_is_used_without_its_retries(llm_harness: Harness) -> None:
    h = llm_harness
    client = h.make_client(7)
    llm = h.make_llm(client=client, api_key=None, base_url=None)
    assert llm.client.max_retries == 0
    h.server.push(h.script.error(503), "fine")
    chunks = await collect(llm, hi())
    assert chunks[0] == TextDelta("fine")
    assert len(h.server.requests) == 2
    await llm.aclose()  # does not close a client it did not create
    assert not client.is_closed()
    await client.close()
    with pytest.raises(ValueError, match="either client"):
        h.make_llm(client=client, api_key="k", base_url=None)


# -- retries and errors ------------------------------------------------------------


@pytest.mark.parametrize("first", ["429", "500", "529", "stream"])
async def test_retries_then_succeed(
    llm_harness: Harness, caplog: pytest.LogCaptureFixture, first: str
) -> None:
    h = llm_harness
    failure = h.script.stream_error() if first == "stream" else h.script.error(int(first))
    h.server.push(failure, h.script.text("recovered"))
    with caplog.at_level(logging.WARNING, logger=h.logger):
        chunks = await collect(h.make_llm(), hi())
    assert chunks[0] == TextDelta("recovered")
    assert len(h.server.requests) == 2
    assert h.server.requests[0].body == h.server.requests[1].body
    assert "retrying in" in caplog.text
    assert "attempt 2 of 4" in caplog.text


async def test_backoff_doubles_up_to_the_cap(
    llm_harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    h = llm_harness
    h.server.push(*[h.script.error(529)] * 4, "ok")
    llm = h.make_llm(max_retries=4, retry_base_delay=0.01, retry_max_delay=0.03)
    with caplog.at_level(logging.WARNING, logger=h.logger):
        await collect(llm, hi())
    delays = [r.getMessage().split("retrying in ")[1].split("s ")[0] for r in caplog.records]
    assert delays == ["0.01", "0.02", "0.03", "0.03"]


async def test_retry_after_is_honoured_up_to_the_cap(
    llm_harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    h = llm_harness
    h.server.push(h.script.error(429, headers={"retry-after": "0.05"}), "ok")
    with caplog.at_level(logging.WARNING, logger=h.logger):
        await collect(h.make_llm(retry_max_delay=1.0), hi())
    assert "retrying in 0.05s" in caplog.text


async def test_retries_exhausted(llm_harness: Harness) -> None:
    h = llm_harness
    h.server.push(*[h.script.error(503)] * 3)
    with pytest.raises(LLMError) as info:
        await collect(h.make_llm(max_retries=2), hi())
    assert info.value.retryable
    assert info.value.status == 503
    assert "503" in str(info.value)
    assert "gave up after 3 attempts" in str(info.value)
    assert len(h.server.requests) == 3


async def test_no_retry_once_output_started(llm_harness: Harness) -> None:
    h = llm_harness
    h.server.push(h.script.stream_error(text="partial reply"), "never")
    got: list[ChatChunk] = []

    async def consume() -> None:
        async with h.make_llm().chat(hi()) as stream:
            async for chunk in stream:
                got.append(chunk)

    with pytest.raises(LLMError) as info:
        await consume()
    assert got == [TextDelta("partial "), TextDelta("reply")]
    assert info.value.retryable
    assert info.value.status is not None and info.value.status >= 500
    assert "cut off" in str(info.value)
    assert len(h.server.requests) == 1


async def test_rejected_key_names_the_variable(llm_harness: Harness) -> None:
    h = llm_harness
    h.server.push(h.script.error(401))
    with pytest.raises(LLMError) as info:
        await collect(h.make_llm(), hi())
    assert f"{h.key_env} is missing or wrong" in str(info.value)
    assert info.value.status == 401
    assert not info.value.retryable
    assert len(h.server.requests) == 1


@pytest.mark.parametrize("status", [400, 404])
async def test_model_errors_hint_at_backline_model(llm_harness: Harness, status: int) -> None:
    h = llm_harness
    h.server.push(h.script.error(status, message="model: claude-nope"))
    with pytest.raises(LLMError) as info:
        await collect(h.make_llm(model="claude-nope"), hi())
    message = str(info.value)
    assert "model: claude-nope" in message  # the API's message
    assert "BACKLINE_MODEL" in message
    assert "'claude-nope'" in message
    assert info.value.status == status
    assert not info.value.retryable
    assert len(h.server.requests) == 1


async def test_other_400_keeps_the_api_message(llm_harness: Harness) -> None:
    h = llm_harness
    h.server.push(h.script.error(400, message="max_tokens: too large"))
    with pytest.raises(LLMError) as info:
        await collect(h.make_llm(), hi())
    assert "max_tokens: too large" in str(info.value)
    assert "BACKLINE_MODEL" not in str(info.value)


async def test_exhausted_script_is_not_retried(llm_harness: Harness) -> None:
    h = llm_harness
    with pytest.raises(LLMError, match="no response scripted"):
        await collect(h.make_llm(), hi())
    assert len(h.server.requests) == 1  # x-should-retry: false


async def test_unreachable_server_is_retried_then_reported(llm_harness: Harness) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    llm = llm_harness.unreachable(f"http://127.0.0.1:{port}", max_retries=1, retry_base_delay=0.001)
    with pytest.raises(LLMError) as info:
        await collect(llm, hi())
    assert info.value.retryable
    assert llm_harness.unreachable_text in str(info.value)
    assert "gave up after 2 attempts" in str(info.value)
    await llm.aclose()


# -- cancellation ------------------------------------------------------------------


async def test_cancelling_the_consumer_closes_the_connection(llm_harness: Harness) -> None:
    h = llm_harness
    h.server.push(h.script.text("one two three four", chunk_delay=30.0))
    first = asyncio.Event()

    async def consume() -> None:
        async for chunk in h.make_llm().chat(hi()):
            if isinstance(chunk, TextDelta):
                first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), timeout=10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    request = await h.server.wait_for_disconnect_async(timeout=10)
    assert request is h.server.requests[0]
    assert request.disconnected


async def test_aclose_closes_the_connection(llm_harness: Harness) -> None:
    h = llm_harness
    h.server.push(h.script.text("one two three four", chunk_delay=30.0))
    stream = h.make_llm().chat(hi())
    assert await anext(stream) == TextDelta("one ")
    await stream.aclose()
    assert (await h.server.wait_for_disconnect_async(timeout=10)).disconnected
    assert [c async for c in stream] == []


# -- requests ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tools", "choice", "problem"),
    [
        ([get_weather], named_tool("nope"), "not among the tools"),
        ([], "required", "needs tools"),
    ],
)
async def test_bad_tool_choice_fails_before_any_request(
    llm_harness: Harness, tools: list[FunctionTool], choice: Any, problem: str
) -> None:
    with pytest.raises(LLMError, match=problem):
        await collect(llm_harness.make_llm(), hi(), tools=tools, choice=choice)
    assert llm_harness.server.requests == []
