"""OpenAILLM against the fake OpenAI-compatible server: the wire format, the request it
sends, the conversion of a context, and what is particular to Chat Completions."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
from typing import Any
from urllib.parse import urlsplit

import pytest
from backline_openai._convert import ERROR_PREFIX
from backline_openai._endpoints import DEFAULT_MODEL, Endpoint
from backline_openai.llm import OpenAILLM
from backline_openai.plugin import openai_llm

from backline.keys import set_key
from backline.llm import (
    AgentHandoff,
    ChatChunk,
    ChatContext,
    ChatMessage,
    FunctionCall,
    FunctionCallOutput,
    FunctionTool,
    LLMError,
    LLMTimeoutError,
    TextDelta,
    ToolCallChunk,
    Usage,
    function_tool,
    named_tool,
)
from tests.plugins.openai import fake_openai as fo
from tests.plugins.openai.conftest import MakeLLM
from tests.plugins.openai.fake_openai import FakeOpenAIServer


@function_tool
def get_weather(city: str) -> str:
    """Get the weather.

    Args:
        city: The city.
    """
    return "sunny"


@function_tool
def get_time(zone: str) -> str:
    """Get the time in a zone."""
    return "noon"


def ctx(*items: ChatMessage | FunctionCall | FunctionCallOutput | AgentHandoff) -> ChatContext:
    for i, item in enumerate(items):
        item.created_at = 1000.0 + i
    return ChatContext(items)


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


def assistant(text: str) -> ChatMessage:
    return ChatMessage(role="assistant", content=text)


def call(call_id: str, name: str = "get_weather", args: str = '{"city":"Paris"}') -> FunctionCall:
    return FunctionCall(call_id=call_id, name=name, arguments=args)


def output(call_id: str, text: str = "sunny", *, is_error: bool = False) -> FunctionCallOutput:
    return FunctionCallOutput(call_id=call_id, name="get_weather", output=text, is_error=is_error)


async def collect(
    llm: OpenAILLM,
    chat_ctx: ChatContext,
    tools: list[FunctionTool] | None = None,
    choice: Any = None,
) -> list[ChatChunk]:
    async with llm.chat(chat_ctx, tools=tools or [], tool_choice=choice) as stream:
        return [chunk async for chunk in stream]


async def sent(server: FakeOpenAIServer, make: MakeLLM, chat_ctx: ChatContext, **kw: Any) -> Any:
    """Send ``chat_ctx`` (the server validates it like the API); return the body sent."""
    server.push("ok")
    await collect(make(), chat_ctx, **kw)
    return server.requests[-1].body


# -- the fake speaks OpenAI's wire format ------------------------------------------------


def test_the_fake_streams_chunks_byte_for_byte_as_openai_does(openai_server: FakeOpenAIServer):
    openai_server.push(fo.text("Hi there", usage={"input_tokens": 9, "output_tokens": 2}))
    where = urlsplit(openai_server.url)
    conn = http.client.HTTPConnection(where.hostname or "", where.port, timeout=10)
    body = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    conn.request(
        "POST", "/v1/chat/completions", json.dumps(body), {"content-type": "application/json"}
    )
    response = conn.getresponse()
    raw = response.read()
    conn.close()
    assert response.status == 200
    assert response.getheader("content-type") == "text/event-stream; charset=utf-8"
    head = (
        '{"id":"chatcmpl-fake0001","object":"chat.completion.chunk","created":1767225600,'
        '"model":"gpt-4o-mini","service_tier":"default","system_fingerprint":"fp_fake0001",'
        '"choices":[{"index":0,"delta":'
    )
    usage = (
        '{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11,'
        '"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},'
        '"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,'
        '"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}'
    )
    meta = head[: head.index(',"choices"')]
    tail = '"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
    expected = (
        f'data: {head}{{"role":"assistant","content":"","refusal":null}},"logprobs":null,'
        '"finish_reason":null}],"usage":null}\n\n'
        f'data: {head}{{"content":"Hi "}},{tail}'
        f'data: {head}{{"content":"there"}},{tail}'
        f'data: {head}{{}},"logprobs":null,"finish_reason":"stop"}}],"usage":null}}\n\n'
        f'data: {meta},"choices":[],"usage":{usage}}}\n\n'
        "data: [DONE]\n\n"
    )
    assert raw.decode() == expected


# -- streaming ---------------------------------------------------------------------------


async def test_a_tool_call_split_across_many_chunks(
    openai_server: FakeOpenAIServer, make_openai_llm: MakeLLM
) -> None:
    args = {"city": 'Rio de Janeiro, "the marvellous city" ☀', "days": 3}
    openai_server.push(fo.tool_calls(("get_weather", args), json_chunk_size=1))
    chunks = await collect(make_openai_llm(), ctx(user("weather?")), tools=[get_weather])
    (only_call,) = [c for c in chunks if isinstance(c, ToolCallChunk)]
    assert only_call.call_id == "call_fake0100"
    assert json.loads(only_call.arguments) == args
    assert isinstance(chunks[-1], Usage) and chunks[-1].stop_reason == "tool_calls"


async def test_tool_call_pieces_without_an_index(
    openai_server: FakeOpenAIServer, make_openai_llm: MakeLLM
) -> None:
    openai_server.push(
        fo.tool_calls(
            ("get_weather", {"city": "Paris"}), ("get_time", {"zone": "UTC"}), index=False
        )
    )
    chunks = await collect(make_openai_llm(), ctx(user("hi")), tools=[get_weather, get_time])
    calls = [c for c in chunks if isinstance(c, ToolCallChunk)]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_time", {"zone": "UTC"}),
    ]


async def test_a_tool_name_and_id_split_across_chunks_are_joined(
    openai_server: FakeOpenAIServer, make_openai_llm: MakeLLM
) -> None:
    # Some OpenAI-compatible servers split a call's name and id over several pieces
    # (OpenAI sends them whole): every fragment counts, joined by the call's index.
    openai_server.push(
        fo.tool_calls(
            ("get_weather", {"city": "Paris"}), ("get_time", {"zone": "UTC"}), name_chunk_size=3
        )
    )
    chunks = await collect(make_openai_llm(), ctx(user("hi")), tools=[get_weather, get_time])
    calls = [c for c in chunks if isinstance(c, ToolCallChunk)]
    ours = [(c.call_id, c.name, json.loads(c.arguments)) for c in calls]
    assert ours == [
        ("call_fake0100", "get_weather", {"city": "Paris"}),
        ("call_fake0101", "get_time", {"zone": "UTC"}),
    ]
    # The same stream through the openai SDK's own accumulator gives the same calls.
    import openai

    openai_server.push(
        fo.tool_calls(
            ("get_weather", {"city": "Paris"}), ("get_time", {"zone": "UTC"}), name_chunk_size=3
        )
    )
    client = openai.AsyncOpenAI(api_key="sk-test", base_url=openai_server.url)
    messages: Any = [{"role": "user", "content": "hi"}]
    try:
        async with client.chat.completions.stream(model="gpt-test", messages=messages) as stream:
            final = await stream.get_final_completion()
    finally:
        await client.close()
    sdk_calls = final.choices[0].message.tool_calls or []
    theirs = [(c.id, c.function.name, json.loads(c.function.arguments)) for c in sdk_calls]
    assert theirs == [(f"call_fake02{i:02d}", name, args) for i, (_, name, args) in enumerate(ours)]


async def test_the_split_name_runs_the_tool_in_a_session(
    openai_server: FakeOpenAIServer, make_openai_llm: MakeLLM
) -> None:
    from backline import Agent, Session

    openai_server.push(
        fo.tool_calls(("get_weather", {"city": "Oslo"}), name_chunk_size=2), "Sunny in Oslo."
    )
    async with Session(make_openai_llm(), tools=[get_weather]) as session:
        await session.start(Agent("Weather."))
        result = await session.run(user_input="weather in Oslo?")
    result.expect.next_event().is_function_call(name="get_weather", arguments={"city": "Oslo"})
    result.expect.next_event().is_function_call_output(output="sunny", is_error=False)
    # The call went back to the server with its whole id and name.
    (sent_call,) = openai_server.requests[-1].messages[-2]["tool_calls"]
    assert (sent_call["id"], sent_call["function"]["name"]) == ("call_fake0100", "get_weather")


async def test_an_id_and_name_repeated_in_every_chunk_are_taken_once(
    openai_server: FakeOpenAIServer, make_openai_llm: MakeLLM
) -> None:
    # LiteLLM, DeepSeek, Qwen and Fireworks repeat the id (Fireworks the name too).
    openai_server.push(fo.tool_calls(("get_weather", {"city": "Rome"}), repeat_ids=True))
    chunks = await collect(make_openai_llm(), ctx(user("hi")), tools=[get_weather])
    (only_call,) = [c for c in chunks if isinstance(c, ToolCallChunk)]
    assert (only_call.call_id, only_call.name) == ("call_fake0100", "get_weather")
    assert json.loads(only_call.arguments) == {"city": "Rome"}


async def test_usage_comes_from_the_last_chunk(
    openai_server: FakeOpenAIServer, make_openai_llm: MakeLLM
) -> None:
    openai_server.push(
        fo.text(
            "cut",
            finish_reason="length",
            usage={"input_tokens": 300, "output_tokens": 1, "cached_tokens": 256},
        )
    )
    chunks = await collect(make_openai_llm(max_tokens=1), ctx(user("hi")))
    usage = chunks[-1]
    assert isinstance(usage, Usage)
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_input_tokens) == (300, 1, 256)
    assert usage.stop_reason == "length"
    assert usage.ttft is not None
    body = openai_server.requests[0].body
    assert body["max_tokens"] == 1  # not OpenAI's own API: the common field name
    assert body["stream_options"] == {"include_usage": True}


async def test_a_stream_cut_before_its_end_is_retried(
    openai_server: FakeOpenAIServer, make_openai_llm: MakeLLM
) -> None:
    openai_server.push(fo.cut_stream(), "whole")
    chunks = await collect(make_openai_llm(), ctx(user("hi")))
    assert chunks[0] == TextDelta("whole")
    assert len(openai_server.requests) == 2


async def test_a_stream_cut_after_output_is_an_error(
    openai_server: FakeOpenAIServer, make_openai_llm: MakeLLM
) -> None:
    openai_server.push(fo.cut_stream("half a"), "never")
    with pytest.raises(LLMError, match=r"ended before a finish_reason.*cut off") as info:
        await collect(make_openai_llm(), ctx(user("hi")))
    assert info.value.retryable
    assert len(openai_server.requests) == 1


async def test_an_error_mid_stream_keeps_the_api_message(
    openai_server: FakeOpenAIServer, make_openai_llm: MakeLLM
) -> None:
    openai_server.push(fo.stream_error("server_error", "The model crashed.", text="Sure, "))
    with pytest.raises(LLMError) as info:
        await collect(make_openai_llm(max_retries=0), ctx(user("hi")))
    assert "API error 500 server_error: The model crashed." in str(info.value)


# -- errors worded for the command line -----------------------------------------------------


async def test_an_unknown_model_says_how_to_choose_one(
    openai_server: FakeOpenAIServer, make_openai_llm: MakeLLM
) -> None:
    openai_server.push(
        fo.error(
            404,
            message="The model `gpt-nope` does not exist or you do not have access to it.",
            code="model_not_found",
        )
    )
    with pytest.raises(LLMError) as info:
        await collect(make_openai_llm(model="gpt-nope"), ctx(user("hi")))
    message = str(info.value)
    assert "The model `gpt-nope` does not exist" in message
    assert f"the model 'gpt-nope' is not available at {openai_server.url}" in message
    assert "-m MODEL" in message
    assert (info.value.status, info.value.retryable) == (404, False)


async def test_a_wrong_path_says_to_check_the_base_url(openai_server: FakeOpenAIServer) -> None:
    llm = OpenAILLM("gpt-test", base_url=openai_server.url.removesuffix("/v1"), api_key="k")
    with pytest.raises(LLMError) as info:
        await collect(llm, ctx(user("hi")))
    assert "check the base URL" in str(info.value)
    assert "ends in /v1" in str(info.value)
    await llm.aclose()


async def test_a_rejected_key_is_never_repeated(
    openai_server: FakeOpenAIServer, make_openai_llm: MakeLLM
) -> None:
    openai_server.push(fo.error(401))
    with pytest.raises(LLMError) as info:
        await collect(make_openai_llm(api_key="sk-very-secret"), ctx(user("hi")))
    assert "OPENAI_API_KEY is missing or wrong" in str(info.value)
    assert "sk-very-secret" not in str(info.value)
    assert openai_server.requests[0].api_key == "sk-very-secret"


async def test_a_timeout_is_worded_for_people(
    openai_server: FakeOpenAIServer, make_openai_llm: MakeLLM
) -> None:
    openai_server.push(fo.text("late", delay=5.0))
    with pytest.raises(LLMError) as info:
        await collect(make_openai_llm(timeout=0.2, max_retries=0), ctx(user("hi")))
    message = str(info.value)
    assert f"Timed out after 0.2s waiting for {openai_server.url}" in message
    assert "gave up after 1 attempt" in message
    assert info.value.retryable


async def test_a_request_with_no_output_fails_at_the_first_token_deadline(
    openai_server: FakeOpenAIServer, make_openai_llm: MakeLLM
) -> None:
    openai_server.push(fo.text("late", delay=30.0))
    with pytest.raises(LLMTimeoutError) as info:
        await collect(make_openai_llm(first_token_timeout=0.3), ctx(user("hi")))
    assert "no output within 0.3s of the request (first_token_timeout of OpenAILLM)" in str(
        info.value
    )
    assert info.value.retryable
    assert (await openai_server.wait_for_disconnect_async()).disconnected


async def test_a_stalled_reply_fails_at_the_response_deadline(
    openai_server: FakeOpenAIServer, make_openai_llm: MakeLLM
) -> None:
    openai_server.push(fo.text("one two three", chunk_delay=30.0))
    got: list[ChatChunk] = []

    async def consume() -> None:
        llm = make_openai_llm(first_token_timeout=5.0, response_timeout=0.3)
        async with llm.chat(ctx(user("hi"))) as stream:
            async for chunk in stream:
                got.append(chunk)

    with pytest.raises(LLMTimeoutError) as info:
        await consume()
    assert got == [TextDelta("one ")]
    message = str(info.value)
    assert "the response did not finish within 0.3s (response_timeout of OpenAILLM)" in message
    assert "cut off after output had started" in message
    assert (await openai_server.wait_for_disconnect_async()).disconnected


async def test_retries_stop_at_the_first_token_deadline_and_say_why(
    openai_server: FakeOpenAIServer, make_openai_llm: MakeLLM
) -> None:
    openai_server.push(fo.error(503), "never")
    llm = make_openai_llm(first_token_timeout=0.3, retry_base_delay=5.0, retry_max_delay=5.0)
    with pytest.raises(LLMTimeoutError) as info:
        await collect(llm, ctx(user("hi")))
    assert "the last attempt failed: OpenAI-compatible API error 503" in str(info.value)
    assert len(openai_server.requests) == 1


def test_deadlines_are_positive_or_none() -> None:
    for bad in (0, -1.0):
        with pytest.raises(ValueError, match="first_token_timeout must be a positive number"):
            OpenAILLM("m", base_url="http://localhost:1/v1", first_token_timeout=bad)
    OpenAILLM(
        "m", base_url="http://localhost:1/v1", first_token_timeout=None, response_timeout=None
    )


async def test_a_malformed_chunk_is_retried_before_output_and_cuts_off_after(
    openai_server: FakeOpenAIServer, make_openai_llm: MakeLLM
) -> None:
    openai_server.push(fo.malformed_stream(), "recovered")
    chunks = await collect(make_openai_llm(), ctx(user("hi")))
    assert chunks[0] == TextDelta("recovered")
    openai_server.push(fo.malformed_stream("Hello "), "never")
    with pytest.raises(LLMError) as info:
        await collect(make_openai_llm(), ctx(user("hi")))
    assert "a chunk that could not be read" in str(info.value)
    assert "cut off after output had started" in str(info.value)
    assert len(openai_server.requests) == 3


# -- endpoints, keys and models ----------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "name", "key", "required", "field"),
    [
        (None, "OpenAI", "OPENAI_API_KEY", True, "max_completion_tokens"),
        ("https://api.groq.com/openai/v1", "Groq", "GROQ_API_KEY", True, "max_completion_tokens"),
        (
            "https://api.cerebras.ai/v1",
            "Cerebras",
            "CEREBRAS_API_KEY",
            True,
            "max_completion_tokens",
        ),
        ("https://openrouter.ai/api/v1/", "OpenRouter", "OPENROUTER_API_KEY", True, "max_tokens"),
        ("http://localhost:11434/v1", "Ollama", "OPENAI_API_KEY", False, "max_tokens"),
        ("http://127.0.0.1:8000/v1", "vLLM", "OPENAI_API_KEY", False, "max_tokens"),
        ("http://localhost:8080/v1", "llama.cpp", "OPENAI_API_KEY", False, "max_tokens"),
        ("http://localhost:1234/v1", "LM Studio", "OPENAI_API_KEY", False, "max_tokens"),
        ("https://llm.example.com/v1", "OpenAI-compatible", "OPENAI_API_KEY", False, "max_tokens"),
    ],
)
def test_what_an_endpoint_needs(
    url: str | None, name: str, key: str, required: bool, field: str
) -> None:
    endpoint = Endpoint.of(url)
    assert (endpoint.name, endpoint.key_env, endpoint.key_required) == (name, key, required)
    assert endpoint.max_tokens_field == field
    assert not endpoint.url.endswith("/")


def test_the_base_url_comes_from_openai_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:11434/v1")
    llm = OpenAILLM("llama3.2")
    assert llm.base_url == "http://localhost:11434/v1"
    assert llm.missing_key is None  # a local server needs no key


def test_models_a_default_only_on_openais_own_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    assert OpenAILLM().model == DEFAULT_MODEL
    monkeypatch.setenv("BACKLINE_MODEL", "gpt-from-env")
    assert OpenAILLM().model == "gpt-from-env"
    monkeypatch.delenv("BACKLINE_MODEL")
    with pytest.raises(ValueError, match=r"-m MODEL .*llama3.2"):
        OpenAILLM(base_url="http://localhost:11434/v1")


async def test_a_hosted_api_without_its_key_fails_before_sending() -> None:
    llm = OpenAILLM("llama-3.3-70b-versatile", base_url="https://api.groq.com/openai/v1")
    assert llm.missing_key is not None and "GROQ_API_KEY is not set" in llm.missing_key
    with pytest.raises(LLMError, match="GROQ_API_KEY is not set") as info:
        await collect(llm, ctx(user("hi")))  # nothing is sent: the host is never reached
    assert info.value.status == 401
    await llm.aclose()
    with pytest.raises(LLMError, match="GROQ_API_KEY is not set"):
        openai_llm("llama-3.3-70b-versatile", base_url="https://api.groq.com/openai/v1")
    with pytest.raises(LLMError, match="-m MODEL"):
        openai_llm(base_url="http://localhost:8000/v1")


async def test_the_key_is_sent_as_a_bearer_token(
    openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    llm = OpenAILLM("gpt-test", base_url=openai_server.url)
    openai_server.push("ok")
    await collect(llm, ctx(user("hi")))
    assert openai_server.requests[0].api_key == "sk-from-env"
    await llm.aclose()
    monkeypatch.delenv("OPENAI_API_KEY")
    local = OpenAILLM("gpt-test", base_url=openai_server.url)  # loopback: no key needed
    openai_server.push("ok")
    await collect(local, ctx(user("hi")))
    assert openai_server.requests[1].api_key == "unused"
    await local.aclose()


# -- the request -----------------------------------------------------------------------------


async def test_the_request_body(openai_server: FakeOpenAIServer, make_openai_llm: MakeLLM) -> None:
    body = await sent(openai_server, make_openai_llm, ctx(user("hi")))
    assert body == {
        "model": "gpt-test",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


async def test_the_system_prompt_is_one_message_first(
    openai_server: FakeOpenAIServer, make_openai_llm: MakeLLM
) -> None:
    body = await sent(
        openai_server,
        make_openai_llm,
        ctx(
            ChatMessage(role="system", content="You are terse."),
            user("hi"),
            ChatMessage(role="developer", content="Answer in French."),
            user("and?"),
            assistant("Oui."),
        ),
    )
    assert body["messages"] == [
        {"role": "system", "content": "You are terse.\n\nAnswer in French."},
        {"role": "user", "content": "hi\n\nand?"},
        {"role": "assistant", "content": "Oui."},
        {"role": "user", "content": "(continue)"},
    ]


async def test_calls_and_results_in_chat_completions_form(
    openai_server: FakeOpenAIServer, make_openai_llm: MakeLLM
) -> None:
    body = await sent(
        openai_server,
        make_openai_llm,
        ctx(
            user("weather in Paris and Rome?"),
            assistant("Let me check."),
            call("c1"),
            call("c2", args='{"city":"Rome"}'),
            user("and hurry"),  # spoken while the tools ran
            output("c1", "sunny"),
            output("c2", "no such city", is_error=True),
            assistant("Paris is sunny."),
            call("c3", name="get_time", args=""),  # no output yet
        ),
        tools=[get_weather, get_time],
    )
    assert body["messages"] == [
        {"role": "user", "content": "weather in Paris and Rome?"},
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "c2", "content": ERROR_PREFIX + "no such city"},
        {"role": "user", "content": "and hurry"},
        {
            "role": "assistant",
            "content": "Paris is sunny.",
            "tool_calls": [
                {
                    "id": "c3",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c3", "content": body["messages"][6]["content"]},
    ]
    assert "No result is available" in body["messages"][6]["content"]


async def test_orphans_duplicates_bad_arguments_and_handoffs(
    openai_server: FakeOpenAIServer, make_openai_llm: MakeLLM
) -> None:
    body = await sent(
        openai_server,
        make_openai_llm,
        ctx(
            assistant("Hello, how can I help?"),
            user("hi"),
            AgentHandoff(old_agent=None, new_agent="greeter"),
            output("ghost", "orphan output"),
            call("c1"),
            call("c1"),
            call("c2", name="get_time", args="not json"),
            output("c2", ""),
        ),
    )
    assert body["messages"][:2] == [
        {"role": "user", "content": "(The conversation starts.)"},
        {"role": "assistant", "content": "Hello, how can I help?"},
    ]
    assert [m["role"] for m in body["messages"]] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "tool",
    ]
    calls = body["messages"][3]["tool_calls"]
    assert [c["id"] for c in calls] == ["c1", "c2"]
    assert json.loads(calls[1]["function"]["arguments"]) == {"_invalid_arguments": "not json"}
    assert body["messages"][5] == {"role": "tool", "tool_call_id": "c2", "content": ""}
    assert "ghost" not in json.dumps(body) and "greeter" not in json.dumps(body)


async def test_tools_and_tool_choice(
    openai_server: FakeOpenAIServer, make_openai_llm: MakeLLM
) -> None:
    tools = [get_weather, get_time]
    body = await sent(openai_server, make_openai_llm, ctx(user("hi")), tools=tools)
    assert body["tools"][0] == {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": get_weather.parameters,
            "description": "Get the weather.",
        },
    }
    assert "tool_choice" not in body
    for choice, expected in [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        (named_tool("get_time"), {"type": "function", "function": {"name": "get_time"}}),
    ]:
        body = await sent(
            openai_server, make_openai_llm, ctx(user("hi")), tools=tools, choice=choice
        )
        assert body["tool_choice"] == expected
    body = await sent(openai_server, make_openai_llm, ctx(user("hi")), choice="none")
    assert "tool_choice" not in body and "tools" not in body


def test_loading_the_plugin_does_not_import_openai() -> None:
    code = (
        "import sys\n"
        "from backline.plugins import PluginManager\n"
        "m = PluginManager.from_environment().load()\n"
        "assert 'openai' in m.llm_names(), m.llm_names()\n"
        "assert '--base-url' in [o.flag for o in m.options()]\n"
        "assert 'openai' not in sys.modules, 'openai was imported'\n"
        "import backline_openai\n"
        "assert backline_openai.OpenAILLM.__name__ == 'OpenAILLM'\n"
        "assert 'openai' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


async def test_stored_keys_are_used_and_the_environment_wins(
    openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_key("OPENAI_API_KEY", "sk-stored")
    set_key("GROQ_API_KEY", "gsk-stored")
    assert OpenAILLM("m", base_url="https://api.groq.com/openai/v1").missing_key is None
    llm = OpenAILLM("gpt-test", base_url=openai_server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    env_llm = OpenAILLM("gpt-test", base_url=openai_server.url)
    openai_server.push("ok", "ok")
    await collect(llm, ctx(user("hi")))
    await collect(env_llm, ctx(user("hi")))
    assert [r.api_key for r in openai_server.requests] == ["sk-stored", "sk-env"]
    await llm.aclose()
    await env_llm.aclose()


async def test_a_streaming_tool_call_counts_as_output_for_the_deadlines(
    openai_server: FakeOpenAIServer, make_openai_llm: MakeLLM
) -> None:
    # The call's pieces come every 0.15 s, 0.6 s in all: past a first-token deadline of
    # 0.3 s, within the response deadline.
    openai_server.push(
        fo.tool_calls(("get_time", {"zone": "UTC"}), json_pieces=3, chunk_delay=0.15)
    )
    llm = make_openai_llm(first_token_timeout=0.3, response_timeout=20.0)
    chunks = await collect(llm, ctx(user("time?")), tools=[get_time])
    assert isinstance(chunks[0], ToolCallChunk) and json.loads(chunks[0].arguments) == {
        "zone": "UTC"
    }
