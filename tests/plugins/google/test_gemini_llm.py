"""GeminiLLM against the fake Gemini API: a real Session's text turn and tool turn (what
the server receives checked: function responses, ids, thought signatures), the request's
fields, the errors a user sees, and the plugin's registration."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from backline_google.llm import GeminiLLM
from backline_google.plugin import gemini_llm

from backline import Agent, LLMMetrics, Session, function_tool
from backline.keys import set_key
from backline.llm import (
    ChatChunk,
    ChatContext,
    ChatMessage,
    FunctionCall,
    FunctionCallOutput,
    LLMError,
    TextDelta,
    ToolCallChunk,
    ToolError,
    Usage,
    named_tool,
)
from backline.plugins import PluginManager
from tests.conftest import Recorder
from tests.plugins.google import fake_gemini as fg
from tests.plugins.google.conftest import TEST_KEY, MakeLLM
from tests.plugins.google.fake_gemini import FakeGeminiServer

WAIT = 20.0  # bounds a hang only


@function_tool
async def get_weather(city: str) -> str:
    """Get the weather.

    Args:
        city: The city.
    """
    return f"Sunny in {city}."


@function_tool
async def book_table(restaurant: str) -> str:
    """Book a table.

    Args:
        restaurant: Where.
    """
    raise ToolError(f"{restaurant} is full tonight")


async def collect(llm: GeminiLLM, ctx: ChatContext, **kwargs: Any) -> list[ChatChunk]:
    async with llm.chat(ctx, **kwargs) as stream:
        return [chunk async for chunk in stream]


def user(text: str) -> ChatContext:
    return ChatContext([ChatMessage(role="user", content=text)])


# -- a real session ------------------------------------------------------------------------


async def test_a_text_turn_in_a_session(
    gemini_server: FakeGeminiServer,
    make_gemini_llm: MakeLLM,
    no_leaked_tasks: Callable[[], Any],
) -> None:
    gemini_server.push(fg.text("Hello from Gemini.", usage={"input_tokens": 12}))
    session: Session[Any] = Session(make_gemini_llm())
    rec = Recorder(session)
    await session.start(Agent("You are a concise voice assistant."))
    result = await session.run(user_input="hello", timeout=WAIT)
    result.expect.next_event().is_message(role="assistant", content="Hello from Gemini.")
    await session.aclose()
    await no_leaked_tasks()

    (request,) = gemini_server.requests
    assert request.path == "/v1/models/gemini-test:streamGenerateContent?alt=sse"
    assert request.headers["x-goog-api-key"] == TEST_KEY
    assert request.headers["x-server-timeout"] == "180"  # the response deadline
    body = request.body
    assert body["systemInstruction"]["parts"][0]["text"].startswith("You are a concise")
    assert body["contents"] == [{"role": "user", "parts": [{"text": "hello"}]}]
    assert "tools" not in body and "toolConfig" not in body
    metrics: list[LLMMetrics] = rec.of("llm_metrics")
    assert [(m.llm, m.model, m.status, m.input_tokens) for m in metrics] == [
        ("GeminiLLM", "gemini-test", "completed", 12)
    ]


async def test_a_tool_call_and_its_continuation(
    gemini_server: FakeGeminiServer,
    make_gemini_llm: MakeLLM,
    no_leaked_tasks: Callable[[], Any],
) -> None:
    """The server gives the call an id and a thought signature; the continuation must
    send both back, and the tool's output as the ``functionResponse`` (the fake answers
    400 otherwise)."""
    gemini_server.push(
        fg.tool_calls(("get_weather", {"city": "Oslo"}), text="Checking.", signature=b"sig-1"),
        fg.text("It is sunny in Oslo."),
    )
    session: Session[Any] = Session(make_gemini_llm(), tools=[get_weather])
    await session.start(Agent("Be brief."))
    result = await session.run(user_input="weather in Oslo?", timeout=WAIT)
    result.expect.next_event().is_message(role="assistant", content="Checking.")
    result.expect.next_event().is_function_call(name="get_weather", arguments={"city": "Oslo"})
    result.expect.next_event().is_function_call_output(output="Sunny in Oslo.")
    result.expect.next_event().is_message(role="assistant", content="It is sunny in Oslo.")
    await session.aclose()
    await no_leaked_tasks()

    first, second = gemini_server.requests
    (declaration,) = first.body["tools"][0]["functionDeclarations"]
    assert declaration["name"] == "get_weather"
    assert declaration["description"].startswith("Get the weather.")
    schema = declaration["parameters_json_schema"]  # as google-genai spells it on the wire
    assert schema["properties"]["city"]["type"] == "string"
    model_turn, answer_turn = second.contents[1], second.contents[2]
    assert model_turn["role"] == "model"
    assert model_turn["parts"][0] == {"text": "Checking."}
    assert model_turn["parts"][1] == {
        "functionCall": {"id": "fc_0100", "name": "get_weather", "args": {"city": "Oslo"}},
        "thoughtSignature": base64.b64encode(b"sig-1").decode(),
    }
    assert answer_turn == {
        "role": "user",
        "parts": [
            {
                "functionResponse": {
                    "id": "fc_0100",
                    "name": "get_weather",
                    "response": {"output": "Sunny in Oslo."},
                }
            }
        ],
    }


async def test_calls_without_ids_and_a_failed_tool(
    gemini_server: FakeGeminiServer, make_gemini_llm: MakeLLM
) -> None:
    """Calls the API gave no id get backline's, never sent back; a failed tool's result
    is ``{"error": ...}``; two calls in one turn are answered in one turn, in order."""
    gemini_server.push(
        fg.tool_calls(
            ("get_weather", {"city": "Oslo"}), ("book_table", {"restaurant": "Maaemo"}), ids=False
        ),
        fg.text("Sunny, but Maaemo is full."),
    )
    session: Session[Any] = Session(make_gemini_llm(), tools=[get_weather, book_table])
    await session.start(Agent("Be brief."))
    result = await session.run(user_input="weather and a table?", timeout=WAIT)
    result.expect.contains_message(role="assistant", content="Sunny, but Maaemo is full.")
    await session.aclose()

    calls = [e.item for e in result.events if isinstance(e.item, FunctionCall)]
    assert all(c.call_id.startswith("gemini_call_") for c in calls)
    second = gemini_server.requests[1]
    assert second.parts("functionCall") == [
        {"name": "get_weather", "args": {"city": "Oslo"}},
        {"name": "book_table", "args": {"restaurant": "Maaemo"}},
    ]
    answers = second.parts("functionResponse")
    assert [a["response"] for a in answers] == [
        {"output": "Sunny in Oslo."},
        {"error": "Maaemo is full tonight"},
    ]
    assert all("id" not in a for a in answers)


async def test_another_models_calls_are_sent_without_their_ids(
    gemini_server: FakeGeminiServer, make_gemini_llm: MakeLLM
) -> None:
    """A context from another model (after a handoff, or a restored conversation): its
    call ids are not Gemini's, so they are not sent; results pair by position."""
    ctx = ChatContext(
        [
            ChatMessage(role="system", content="Be brief."),
            ChatMessage(role="developer", content="Speak English."),
            ChatMessage(role="assistant", content="Hi!"),
            ChatMessage(role="user", content="weather?"),
            FunctionCall(call_id="toolu_01", name="get_weather", arguments='{"city":"Oslo"}'),
            FunctionCallOutput(call_id="toolu_01", name="get_weather", output="Sunny."),
            ChatMessage(role="assistant", content="Sunny."),
        ]
    )
    gemini_server.push("Anything else?")
    chunks = await collect(make_gemini_llm(), ctx)
    assert chunks[0] == TextDelta("Anything ")
    body = gemini_server.requests[0].body
    assert body["systemInstruction"]["parts"] == [{"text": "Be brief.\n\nSpeak English."}]
    roles = [c["role"] for c in body["contents"]]
    assert roles == ["user", "model", "user", "model", "user", "model", "user"]
    assert body["contents"][0]["parts"] == [{"text": "(The conversation starts.)"}]
    assert body["contents"][2]["parts"] == [{"text": "weather?"}]
    assert body["contents"][3]["parts"][0] == {
        "functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}
    }
    assert body["contents"][4]["parts"] == [
        {"functionResponse": {"name": "get_weather", "response": {"output": "Sunny."}}}
    ]
    assert body["contents"][6]["parts"] == [{"text": "(continue)"}]


# -- the request ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("choice", "config"),
    [
        ("auto", {"mode": "AUTO"}),
        ("none", {"mode": "NONE"}),
        ("required", {"mode": "ANY"}),
        (named_tool("get_weather"), {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}),
    ],
)
async def test_tool_choice(
    gemini_server: FakeGeminiServer, make_gemini_llm: MakeLLM, choice: Any, config: Any
) -> None:
    gemini_server.push("ok")
    await collect(make_gemini_llm(), user("hi"), tools=[get_weather], tool_choice=choice)
    body = gemini_server.requests[0].body
    assert body["toolConfig"] == {"functionCallingConfig": config}


async def test_max_tokens_thoughts_and_usage(
    gemini_server: FakeGeminiServer, make_gemini_llm: MakeLLM
) -> None:
    """A thought summary is not spoken; thinking tokens count as output."""
    gemini_server.push(
        fg.text(
            "Two words.",
            thought="Let me think about this.",
            finish_reason="MAX_TOKENS",
            usage={
                "input_tokens": 7,
                "output_tokens": 3,
                "thoughts_tokens": 20,
                "cached_tokens": 4,
            },
        )
    )
    chunks = await collect(make_gemini_llm(max_tokens=64), user("hi"))
    assert chunks[:-1] == [TextDelta("Two "), TextDelta("words.")]
    usage = chunks[-1]
    assert isinstance(usage, Usage)
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_input_tokens) == (7, 23, 4)
    assert usage.stop_reason == "MAX_TOKENS"
    assert gemini_server.requests[0].body["generationConfig"] == {"maxOutputTokens": 64}


@pytest.mark.parametrize(
    ("options", "sent"),
    [
        # google-genai sends these fields in snake case (proto JSON reads both spellings)
        ({"thinking_budget": 0}, {"thinking_budget": 0}),
        ({"thinking_level": "low"}, {"thinking_level": "LOW"}),
    ],
)
async def test_thinking_settings(
    gemini_server: FakeGeminiServer, make_gemini_llm: MakeLLM, options: Any, sent: Any
) -> None:
    gemini_server.push("ok")
    await collect(make_gemini_llm(**options), user("hi"))
    assert gemini_server.requests[0].body["generationConfig"] == {"thinkingConfig": sent}


async def test_a_cut_stream_is_retried(
    gemini_server: FakeGeminiServer, make_gemini_llm: MakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    gemini_server.push(fg.cut_stream(), "whole")
    with caplog.at_level(logging.WARNING, logger="backline_google.llm"):
        chunks = await collect(make_gemini_llm(), user("hi"))
    assert chunks[0] == TextDelta("whole")
    assert "ended before a finishReason" in caplog.text


async def test_an_unreadable_event_is_retried(
    gemini_server: FakeGeminiServer, make_gemini_llm: MakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    gemini_server.push(fg.malformed_stream(), "readable")
    with caplog.at_level(logging.WARNING, logger="backline_google.llm"):
        chunks = await collect(make_gemini_llm(), user("hi"))
    assert chunks[0] == TextDelta("readable")
    assert "could not be read" in caplog.text


# -- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("response", "says", "status", "retryable"),
    [
        (fg.error(400, "Invalid value at 'contents'"), "Invalid value at 'contents'", 400, False),
        (fg.error(401), "GEMINI_API_KEY is missing or wrong", 401, False),
        (fg.error(403), "may not have access to this model", 403, False),
        (
            fg.error(404, "models/gemini-nope is not found for API version v1"),
            "the model 'gemini-test' is not available",
            404,
            False,
        ),
        (fg.error(404, "Not Found"), "check the base URL", 404, False),
        (fg.error(429), "rate limited, or the key's quota is used up", 429, True),
        (fg.error(500), "Gemini API error 500 INTERNAL", 500, True),
    ],
)
async def test_errors_are_one_clear_line(
    gemini_server: FakeGeminiServer,
    make_gemini_llm: MakeLLM,
    response: fg.GeminiResponse,
    says: str,
    status: int,
    retryable: bool,
) -> None:
    gemini_server.push(response)
    with pytest.raises(LLMError) as info:
        await collect(make_gemini_llm(max_retries=0), user("hi"))
    message = str(info.value)
    assert says in message
    assert "\n" not in message
    assert TEST_KEY not in message
    assert (info.value.status, info.value.retryable) == (status, retryable)
    assert message.startswith(f"Gemini API error {status} {fg._STATUS_NAMES[status]}: ")


async def test_a_wrong_key_names_the_variable_it_came_from(
    gemini_server: FakeGeminiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Gemini answers a wrong key with 400 "API key not valid": the message names the
    variable the key was read from."""
    monkeypatch.setenv("GOOGLE_API_KEY", "not-the-key")
    llm = GeminiLLM("gemini-test", base_url=gemini_server.url)
    try:
        with pytest.raises(LLMError) as info:
            await collect(llm, user("hi"))
    finally:
        await llm.aclose()
    assert "GOOGLE_API_KEY is missing or wrong" in str(info.value)
    assert "API key not valid" in str(info.value)
    assert "not-the-key" not in str(info.value)
    assert gemini_server.requests[0].headers["x-goog-api-key"] == "not-the-key"


async def test_a_429s_retry_delay_is_honoured(
    gemini_server: FakeGeminiServer, make_gemini_llm: MakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    retry_info = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.05s"}
    gemini_server.push(fg.error(429, details=[retry_info]), "ok")
    with caplog.at_level(logging.WARNING, logger="backline_google.llm"):
        await collect(make_gemini_llm(retry_max_delay=1.0), user("hi"))
    assert "retrying in 0.05s" in caplog.text


async def test_a_blocked_prompt_says_so(
    gemini_server: FakeGeminiServer, make_gemini_llm: MakeLLM
) -> None:
    gemini_server.push(fg.blocked("SAFETY"))
    with pytest.raises(LLMError, match=r"Gemini blocked the prompt \(SAFETY\)") as info:
        await collect(make_gemini_llm(), user("hi"))
    assert not info.value.retryable
    assert len(gemini_server.requests) == 1


async def test_a_tool_call_cut_off_is_not_given(
    gemini_server: FakeGeminiServer, make_gemini_llm: MakeLLM
) -> None:
    """A call is given only once the reply finished: a stream that fails after it is
    retried as if nothing came (the call never ran)."""
    failing = fg.tool_calls(("get_weather", {"city": "Oslo"}))
    failing.stream_error = 503
    gemini_server.push(failing, fg.tool_calls(("get_weather", {"city": "Bergen"})))
    chunks = await collect(make_gemini_llm(), user("hi"), tools=[get_weather])
    calls = [c for c in chunks if isinstance(c, ToolCallChunk)]
    assert [json.loads(c.arguments) for c in calls] == [{"city": "Bergen"}]
    assert len(gemini_server.requests) == 2


# -- the plugin ----------------------------------------------------------------------------


def test_without_a_key_the_factory_says_what_to_do() -> None:
    with pytest.raises(LLMError) as info:
        gemini_llm()
    message = str(info.value)
    assert "GEMINI_API_KEY is not set" in message
    assert "backline keys set GEMINI_API_KEY" in message
    assert info.value.status == 401


@pytest.mark.parametrize("name", ["GEMINI_API_KEY", "GOOGLE_API_KEY"])
async def test_the_key_comes_from_either_variable(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(name, "k-env")
    llm = gemini_llm()
    try:
        assert isinstance(llm, GeminiLLM)
        assert (llm.model, llm.missing_key) == ("gemini-2.5-flash", None)
    finally:
        await llm.aclose()


async def test_a_stored_key_and_the_base_url_variable(
    gemini_server: FakeGeminiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_key("GEMINI_API_KEY", TEST_KEY)
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", gemini_server.url)
    monkeypatch.setenv("BACKLINE_MODEL", "gemini-from-env")
    gemini_server.push("stored")
    llm = gemini_llm()
    try:
        assert (await collect(llm, user("hi")))[0] == TextDelta("stored")
    finally:
        await llm.aclose()
    assert gemini_server.requests[0].model == "gemini-from-env"


def test_the_plugin_registers_gemini_and_its_option() -> None:
    manager = PluginManager.from_environment({}).load()
    (entry,) = [e for e in manager.llms() if e.name == "gemini"]
    assert entry.plugin == "google"
    assert entry.default() == "gemini-2.5-flash"
    assert entry.known_models()[0] == "gemini-2.5-flash"
    assert "--gemini-base-url" in [o.flag for o in manager.options()]


def test_loading_the_plugin_does_not_import_google_genai() -> None:
    code = (
        "import sys\n"
        "import backline_google, backline_google.plugin\n"
        "assert 'google.genai' not in sys.modules, 'google.genai was imported'\n"
        "assert backline_google.GeminiLLM.__name__ == 'GeminiLLM'\n"
        "assert 'google.genai' in sys.modules\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr


async def test_aclose_twice_and_a_closed_llms_stream(make_gemini_llm: MakeLLM) -> None:
    llm = make_gemini_llm()
    await llm.aclose()
    await asyncio.wait_for(llm.aclose(), WAIT)  # a second close is a no-op
