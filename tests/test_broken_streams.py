"""Broken model streams: deadlines (a ping-only stream), malformed events, cut streams,
through AnthropicLLM and a Session; a reply cut off is kept marked interrupted (issue 13
items 5 and 6)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from backline import Agent, ChatMessage, ErrorEvent, Session
from backline.io._diagnostics import describe_error
from backline.llm import ChatChunk, ChatContext, LLMError, LLMTimeoutError, TextDelta
from backline.llm.anthropic import AnthropicLLM
from backline.testing import ScriptedLLM, VirtualClock, error, text
from backline.testing import fake_anthropic as fa
from tests import anthropic_kit
from tests.anthropic_kit import MakeLLM
from tests.conftest import Recorder

server = anthropic_kit.server  # the shared fixtures
make_llm = anthropic_kit.make_llm

GUARD = 20.0  # a bound on each test's waits, never reached when the code is right


def hi() -> ChatContext:
    return ChatContext([ChatMessage(role="user", content="hi")])


async def consume(llm: AnthropicLLM, got: list[ChatChunk]) -> None:
    async with asyncio.timeout(GUARD), llm.chat(hi()) as stream:
        async for chunk in stream:
            got.append(chunk)


# -- deadlines (item 5) ----------------------------------------------------------------------


async def test_a_ping_only_stream_fails_at_the_first_token_deadline(
    server: fa.FakeAnthropicServer, make_llm: MakeLLM
) -> None:
    server.push(fa.stalled_stream(ping_interval=0.02))
    got: list[ChatChunk] = []
    with pytest.raises(LLMError) as info:
        await consume(make_llm(first_token_timeout=0.3), got)
    assert got == []
    message = str(info.value)
    assert "no output within 0.3s of the request (first_token_timeout of AnthropicLLM)" in message
    assert isinstance(info.value, LLMTimeoutError) and info.value.retryable
    # A front end says the model stalled, not that the network is down.
    assert describe_error(info.value, llm="anthropic").startswith(
        "The model did not answer in time"
    )
    assert (await server.wait_for_disconnect_async(GUARD)).disconnected
    assert len(server.requests) == 1  # a passed deadline is not retried


async def test_a_stream_that_stalls_after_text_fails_at_the_response_deadline(
    server: fa.FakeAnthropicServer, make_llm: MakeLLM
) -> None:
    server.push(fa.stalled_stream(text="Partial answer", ping_interval=0.02))
    got: list[ChatChunk] = []
    with pytest.raises(LLMError) as info:
        await consume(make_llm(first_token_timeout=10, response_timeout=0.5), got)
    assert got == [TextDelta("Partial "), TextDelta("answer")]
    assert isinstance(info.value, LLMTimeoutError)
    assert "the response did not finish within 0.5s (response_timeout" in str(info.value)
    assert "cut off after output had started" in str(info.value)
    assert (await server.wait_for_disconnect_async(GUARD)).disconnected


async def test_retries_stop_at_the_first_token_deadline_and_say_why(
    server: fa.FakeAnthropicServer, make_llm: MakeLLM
) -> None:
    server.push(fa.error(529), fa.text("too late"))
    got: list[ChatChunk] = []
    with pytest.raises(LLMError) as info:
        await consume(make_llm(first_token_timeout=0.2, retry_base_delay=30.0), got)
    message = str(info.value)
    assert "no output within 0.2s" in message
    assert "the last attempt failed: Anthropic API error 529 overloaded_error" in message
    assert len(server.requests) == 1 and server.remaining == 1


def test_deadlines_are_positive_or_none() -> None:
    with pytest.raises(ValueError, match="first_token_timeout must be a positive number"):
        AnthropicLLM(api_key="k", first_token_timeout=0)
    with pytest.raises(ValueError, match="response_timeout must be a positive number"):
        AnthropicLLM(api_key="k", response_timeout=-1)
    AnthropicLLM(api_key="k", first_token_timeout=None, response_timeout=None)


# -- malformed and cut streams (item 6) ------------------------------------------------------


async def test_a_malformed_event_is_an_llm_error(
    server: fa.FakeAnthropicServer, make_llm: MakeLLM
) -> None:
    server.push(fa.malformed_event())
    got: list[ChatChunk] = []
    with pytest.raises(LLMError) as info:
        await consume(make_llm(max_retries=0), got)
    assert "had an event that could not be read (JSONDecodeError: " in str(info.value)
    assert info.value.retryable


async def test_a_malformed_event_before_output_is_retried(
    server: fa.FakeAnthropicServer, make_llm: MakeLLM
) -> None:
    server.push(fa.malformed_event('{"type": "content_block_delta"}'), fa.text("Recovered."))
    got: list[ChatChunk] = []
    await consume(make_llm(), got)
    assert got[0] == TextDelta("Recovered.")
    assert len(server.requests) == 2


async def test_a_malformed_event_after_text_cuts_the_reply_off(
    server: fa.FakeAnthropicServer, make_llm: MakeLLM
) -> None:
    server.push(fa.malformed_event(text="Hello there"))
    got: list[ChatChunk] = []
    with pytest.raises(LLMError, match=r"could not be read .*cut off after output had started"):
        await consume(make_llm(), got)
    assert got == [TextDelta("Hello "), TextDelta("there")]
    assert len(server.requests) == 1


async def test_a_cut_stream_is_an_llm_error(
    server: fa.FakeAnthropicServer, make_llm: MakeLLM
) -> None:
    server.push(fa.cut_stream(text="Half a"))
    got: list[ChatChunk] = []
    with pytest.raises(LLMError, match="cut off after output had started"):
        await consume(make_llm(), got)
    assert got == [TextDelta("Half "), TextDelta("a")]


# -- through a Session: reported, and a partial reply is marked interrupted -------------------


async def run_session(llm: AnthropicLLM) -> tuple[Session[Any], Recorder]:
    session: Session[Any] = Session(llm)
    recorder = Recorder(session)
    await session.start(Agent("Help."))
    async with asyncio.timeout(GUARD):
        await session.run(user_input="hi")
    return session, recorder


async def test_a_stalled_request_is_reported_and_the_agent_listens_again(
    server: fa.FakeAnthropicServer, make_llm: MakeLLM
) -> None:
    server.push(fa.stalled_stream(ping_interval=0.02), fa.text("Back."))
    session, rec = await run_session(make_llm(first_token_timeout=0.3))
    try:
        (event,) = rec.of("error")
        assert isinstance(event, ErrorEvent) and event.source == "llm"
        assert isinstance(event.error, LLMError) and "first_token_timeout" in str(event.error)
        assert session.agent_state == "listening"
        await session.run(user_input="again")
        assert session.history.items[-1].content == "Back."  # type: ignore[union-attr]
    finally:
        await session.aclose()


@pytest.mark.parametrize(
    "broken",
    [
        fa.cut_stream(text="The answer is"),
        fa.malformed_event(text="The answer is"),
        fa.stalled_stream(text="The answer is", ping_interval=0.02),
    ],
    ids=["cut", "malformed", "stalled"],
)
async def test_a_reply_cut_off_by_a_failure_is_kept_marked_interrupted(
    server: fa.FakeAnthropicServer, make_llm: MakeLLM, broken: fa.AnthropicResponse
) -> None:
    server.push(broken)
    session, rec = await run_session(make_llm(response_timeout=0.5))
    try:
        assert len(rec.of("error")) == 1
        replies = [
            it
            for it in session.history.items
            if isinstance(it, ChatMessage) and it.role == "assistant"
        ]
        assert [(m.content, m.interrupted) for m in replies] == [("The answer is", True)]
        assert session.agent_state == "listening"
    finally:
        await session.aclose()


async def test_a_scripted_reply_cut_off_by_an_error_is_marked_interrupted(
    virtual_clock: VirtualClock,
) -> None:
    llm = ScriptedLLM([error(LLMError("connection lost"), text="Let me check that"), text("Ok.")])
    async with Session(llm) as session:
        rec = Recorder(session)
        await session.start(Agent("Help."))
        await session.run(user_input="hi")
        await session.run(user_input="and?")
        replies = [
            (it.content, it.interrupted)
            for it in session.history.items
            if isinstance(it, ChatMessage) and it.role == "assistant"
        ]
        assert replies == [("Let me check that", True), ("Ok.", False)]
        assert [str(e.error) for e in rec.of("error")] == ["connection lost"]
        previous = llm.requests[1].chat_ctx.items
        assert any(getattr(it, "interrupted", False) for it in previous)


def test_a_rejected_key_names_the_variable_the_adapter_named() -> None:
    from backline import LLMError

    groq = LLMError(
        "Groq rejected the key: check GROQ_API_KEY (backline keys set GROQ_API_KEY)", status=401
    )
    assert "check GROQ_API_KEY" in describe_error(groq, llm="openai")
    plain = LLMError("unauthorized", status=401)
    assert "check OPENAI_API_KEY" in describe_error(plain, llm="openai")
    assert "check the provider's API key" in describe_error(plain)
