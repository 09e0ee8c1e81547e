"""AnthropicLLM against FakeAnthropicServer, through the real anthropic client.

The behaviour every adapter shares (streaming, retries, errors, cancellation) is the
conformance suite in ``tests/llm_conformance.py``, run here through ``llm_harness``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import anthropic
import pytest

from backline.llm import (
    AgentHandoff,
    ChatChunk,
    ChatContext,
    ChatMessage,
    FunctionCall,
    FunctionCallOutput,
    FunctionTool,
    LLMError,
    TextDelta,
    Usage,
    named_tool,
)
from backline.llm.anthropic import DEFAULT_MODEL, AnthropicLLM
from backline.llm.pairing import (
    CONTINUE_PLACEHOLDER,
    MISSING_RESULT,
    START_PLACEHOLDER,
)
from backline.testing import fake_anthropic as fa
from backline.testing.fake_anthropic import FakeAnthropicServer
from tests import anthropic_kit
from tests.anthropic_kit import MakeLLM
from tests.llm_conformance import *  # noqa: F403 - the shared conformance tests
from tests.llm_conformance import Harness, get_time, get_weather

server = anthropic_kit.server  # the shared fixtures
make_llm = anthropic_kit.make_llm


@pytest.fixture
def llm_harness(server: FakeAnthropicServer, make_llm: MakeLLM) -> Harness:
    def unreachable(url: str, **kwargs: Any) -> AnthropicLLM:
        return make_llm(base_url=url, **kwargs)

    return Harness(
        server=server,
        script=fa,
        make_llm=make_llm,
        make_client=lambda retries: anthropic.AsyncAnthropic(
            base_url=server.url, api_key="k", max_retries=retries
        ),
        unreachable=unreachable,
        key_env="ANTHROPIC_API_KEY",
        logger="backline.llm.anthropic",
        unreachable_text="Could not reach the Anthropic API",
        tool_stop_reason="tool_use",
    )


def ctx(*items: ChatMessage | FunctionCall | FunctionCallOutput | AgentHandoff) -> ChatContext:
    """A context with the items in the given order (increasing created_at)."""
    for i, item in enumerate(items):
        item.created_at = 1000.0 + i
    return ChatContext(items)


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


def assistant(text: str) -> ChatMessage:
    return ChatMessage(role="assistant", content=text)


def call(call_id: str, name: str = "get_weather", args: str = '{"city": "Paris"}') -> FunctionCall:
    return FunctionCall(call_id=call_id, name=name, arguments=args)


def output(call_id: str, text: str = "sunny", *, is_error: bool = False) -> FunctionCallOutput:
    return FunctionCallOutput(call_id=call_id, name="get_weather", output=text, is_error=is_error)


async def collect(
    llm: AnthropicLLM,
    chat_ctx: ChatContext,
    tools: list[FunctionTool] | None = None,
    tool_choice: Any = None,
) -> list[ChatChunk]:
    async with llm.chat(chat_ctx, tools=tools or [], tool_choice=tool_choice) as stream:
        return [chunk async for chunk in stream]


async def sent(
    server: FakeAnthropicServer,
    make_llm: MakeLLM,
    chat_ctx: ChatContext,
    **kwargs: Any,
) -> dict[str, Any]:
    """Send ``chat_ctx`` (the server validates it like the API) and return the body."""
    server.push("ok")
    await collect(make_llm(), chat_ctx, **kwargs)
    body = server.requests[-1].body
    assert isinstance(body, dict)
    return body


# -- streaming ---------------------------------------------------------------------


async def test_streams_text_then_usage(server: FakeAnthropicServer, make_llm: MakeLLM) -> None:
    server.push(fa.text("Hello there, friend.", usage={"input_tokens": 42, "output_tokens": 5}))
    chunks = await collect(make_llm(model="claude-test"), ctx(user("hi")))
    assert chunks[:-1] == [TextDelta("Hello "), TextDelta("there, "), TextDelta("friend.")]
    usage = chunks[-1]
    assert isinstance(usage, Usage)
    assert (usage.input_tokens, usage.output_tokens) == (42, 5)
    assert usage.stop_reason == "end_turn"
    assert usage.ttft is not None
    assert usage.ttft >= 0
    body = server.requests[0].body
    assert body["model"] == "claude-test"
    assert body["max_tokens"] == 1024
    assert body["stream"] is True
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert "tools" not in body
    assert "tool_choice" not in body
    assert "system" not in body


async def test_usage_with_cache_tokens_and_max_tokens(
    server: FakeAnthropicServer, make_llm: MakeLLM
) -> None:
    server.push(
        fa.text(
            "cut",
            stop_reason="max_tokens",
            usage={
                "input_tokens": 10,
                "output_tokens": 1,
                "cache_read_input_tokens": 300,
                "cache_creation_input_tokens": 20,
            },
        )
    )
    usage = (await collect(make_llm(max_tokens=1), ctx(user("hi"))))[-1]
    assert usage == Usage(
        input_tokens=10,
        output_tokens=1,
        cache_read_input_tokens=300,
        cache_creation_input_tokens=20,
        ttft=usage.ttft,  # type: ignore[union-attr]
        stop_reason="max_tokens",
    )
    assert server.requests[0].body["max_tokens"] == 1


async def test_model_from_environment(
    server: FakeAnthropicServer, make_llm: MakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BACKLINE_MODEL", raising=False)
    assert make_llm().model == DEFAULT_MODEL
    monkeypatch.setenv("BACKLINE_MODEL", "claude-from-env")
    llm = make_llm()
    assert llm.model == "claude-from-env"
    assert make_llm(model="claude-explicit").model == "claude-explicit"
    server.push("ok")
    await collect(llm, ctx(user("hi")))
    assert server.requests[0].model == "claude-from-env"
    assert "claude-from-env" in repr(llm)


# -- retries and errors ------------------------------------------------------------


async def test_no_api_key_at_all(
    server: FakeAnthropicServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Any,
) -> None:
    for name in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_PROFILE",
        "ANTHROPIC_CONFIG_DIR",
        "ANTHROPIC_FEDERATION_RULE_ID",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no profile on disk either
    llm = AnthropicLLM(base_url=server.url)
    with pytest.raises(LLMError, match="ANTHROPIC_API_KEY is missing"):
        await collect(llm, ctx(user("hi")))
    assert server.requests == []
    await llm.aclose()


# -- context conversion ------------------------------------------------------------


async def test_system_and_developer_messages_become_the_system_prompt(
    server: FakeAnthropicServer, make_llm: MakeLLM
) -> None:
    body = await sent(
        server,
        make_llm,
        ctx(
            ChatMessage(role="system", content="You are terse."),
            user("hi"),
            ChatMessage(role="developer", content="Answer in French."),
            ChatMessage(role="system", content="   "),
        ),
    )
    assert body["system"] == "You are terse.\n\nAnswer in French."
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


async def test_consecutive_same_role_items_are_merged_and_empty_text_dropped(
    server: FakeAnthropicServer, make_llm: MakeLLM
) -> None:
    body = await sent(
        server,
        make_llm,
        ctx(user("hello"), user(""), user("are you there?"), assistant("yes"), assistant(" \n")),
    )
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "hello"},
                {"type": "text", "text": "are you there?"},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "yes"}]},
        {"role": "user", "content": [{"type": "text", "text": CONTINUE_PLACEHOLDER}]},
    ]


async def test_a_conversation_that_starts_with_the_assistant(
    server: FakeAnthropicServer, make_llm: MakeLLM
) -> None:
    body = await sent(server, make_llm, ctx(assistant("Hi, how can I help?"), user("weather")))
    assert body["messages"][0] == {
        "role": "user",
        "content": [{"type": "text", "text": START_PLACEHOLDER}],
    }
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    body = await sent(server, make_llm, ctx(ChatMessage(role="system", content="Greet.")))
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": START_PLACEHOLDER}]}
    ]


async def test_calls_and_outputs_become_tool_use_and_tool_result(
    server: FakeAnthropicServer, make_llm: MakeLLM
) -> None:
    body = await sent(
        server,
        make_llm,
        ctx(
            user("weather in Paris and Rome?"),
            assistant("Let me check."),
            call("c1"),
            call("c2", args='{"city": "Rome"}'),
            output("c1", "sunny"),
            output("c2", "no such city", is_error=True),
            assistant("Paris is sunny."),
        ),
        tools=[get_weather],
    )
    assert body["messages"][1:3] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "c1", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "c2", "name": "get_weather", "input": {"city": "Rome"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "sunny"},
                {
                    "type": "tool_result",
                    "tool_use_id": "c2",
                    "content": "no such city",
                    "is_error": True,
                },
            ],
        },
    ]
    assert body["messages"][3]["role"] == "assistant"


async def test_results_come_first_when_the_user_spoke_while_a_tool_ran(
    server: FakeAnthropicServer, make_llm: MakeLLM
) -> None:
    body = await sent(
        server,
        make_llm,
        ctx(user("weather?"), call("c1"), user("and hurry"), output("c1", "sunny")),
    )
    assert body["messages"][2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": "sunny"},
            {"type": "text", "text": "and hurry"},
        ],
    }
    assert len(body["messages"]) == 3


async def test_several_tool_rounds_and_an_output_recorded_before_its_call(
    server: FakeAnthropicServer, make_llm: MakeLLM
) -> None:
    body = await sent(
        server,
        make_llm,
        ctx(
            user("plan my day"),
            call("c1"),
            output("c1", "sunny"),
            output("c2", "noon"),  # recorded just before its call
            call("c2", name="get_time", args='{"zone": "UTC"}'),
            assistant("Sunny at noon."),
        ),
    )
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["user", "assistant", "user", "assistant", "user", "assistant", "user"]
    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "c1", "content": "sunny"}
    ]
    assert body["messages"][4]["content"] == [
        {"type": "tool_result", "tool_use_id": "c2", "content": "noon"}
    ]
    assert body["messages"][5]["content"] == [{"type": "text", "text": "Sunny at noon."}]


async def test_orphans_duplicates_and_handoffs(
    server: FakeAnthropicServer, make_llm: MakeLLM
) -> None:
    body = await sent(
        server,
        make_llm,
        ctx(
            user("hi"),
            AgentHandoff(old_agent=None, new_agent="greeter"),
            output("ghost", "orphan output"),
            call("c1"),
            call("c1"),  # a repeated call id
            call("c2", name="get_time", args="not json"),
            output("c2", ""),
        ),
    )
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "c1", "name": "get_weather", "input": {"city": "Paris"}},
                {
                    "type": "tool_use",
                    "id": "c2",
                    "name": "get_time",
                    "input": {"_invalid_arguments": "not json"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": MISSING_RESULT},
                {"type": "tool_result", "tool_use_id": "c2"},
            ],
        },
    ]
    assert "ghost" not in json.dumps(body)
    assert "greeter" not in json.dumps(body)


async def test_tools_and_tool_choice(server: FakeAnthropicServer, make_llm: MakeLLM) -> None:
    tools = [get_weather, get_time]
    chat_ctx = ctx(user("hi"))
    body = await sent(server, make_llm, chat_ctx, tools=tools)
    assert body["tools"][0] == {
        "name": "get_weather",
        "input_schema": get_weather.parameters,
        "description": "Get the weather forecast.",
    }
    assert [t["name"] for t in body["tools"]] == ["get_weather", "get_time"]
    assert "tool_choice" not in body
    for choice, expected in [
        ("auto", {"type": "auto"}),
        ("none", {"type": "none"}),
        ("required", {"type": "any"}),
        (named_tool("get_time"), {"type": "tool", "name": "get_time"}),
    ]:
        body = await sent(server, make_llm, chat_ctx, tools=tools, tool_choice=choice)
        assert body["tool_choice"] == expected
    body = await sent(server, make_llm, chat_ctx, tool_choice="none")  # no tools: omitted
    assert "tool_choice" not in body


def test_importing_backline_does_not_import_anthropic() -> None:
    """Nor does building the adapter: the package (seconds of CPU) is imported when the
    client is first needed, or ahead by ``warm_up()`` in a thread."""
    code = """
import sys, threading
import backline, backline.llm, backline.testing, backline.testing.fake_anthropic
assert "anthropic" not in sys.modules, "anthropic was imported"
from backline.llm.anthropic import AnthropicLLM
llm = AnthropicLLM(api_key="k", base_url="http://127.0.0.1:9")
assert "anthropic" not in sys.modules, "building the adapter imported anthropic"
assert repr(llm) == f"AnthropicLLM(model='{llm.model}', base_url='http://127.0.0.1:9')"
llm.warm_up()
(thread,) = [t for t in threading.enumerate() if t.name == "import anthropic"]
thread.join(60)
assert "anthropic" in sys.modules
assert str(llm.client.base_url) == "http://127.0.0.1:9", llm.client.base_url
for url in ("http://h:9/", "http://h/v1", "http://h/v1/", "https://api.anthropic.com"):
    shown = AnthropicLLM(api_key="k", base_url=url)
    assert repr(shown).endswith(f"base_url='{shown.client.base_url}')"), (url, repr(shown))
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
