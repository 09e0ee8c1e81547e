"""A whole voice conversation on OpenAILLM: tools, parallel calls, a background session
that notes silently and speaks, all through the fake OpenAI-compatible server."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from backline import Agent, BackgroundContext, LLMMetrics, Session, background, function_tool
from tests.conftest import Recorder
from tests.plugins.openai import fake_openai as fo
from tests.plugins.openai.conftest import MakeLLM
from tests.plugins.openai.fake_openai import FakeOpenAIServer

WAIT = 20.0  # bounds a hang only


@function_tool
async def get_weather(city: str) -> str:
    """Get the weather.

    Args:
        city: The city.
    """
    return f"Sunny in {city}."


@background("coder", description="Writes code in the repository.")
async def coder(ctx: BackgroundContext) -> None:
    async for task in ctx.messages():
        async with ctx.turn():
            ctx.set_state({"status": "working", "task": task})
            await ctx.send(f"started: {task}", silent=True)
            ctx.set_state({"status": "idle"})
            await ctx.send(f"finished: {task}")


async def test_a_conversation_with_tools_and_a_background(
    openai_server: FakeOpenAIServer,
    make_openai_llm: MakeLLM,
    no_leaked_tasks: Callable[[], Any],
) -> None:
    openai_server.push(
        fo.tool_calls(
            ("backline_send", {"background_session_id": "coder", "content": "fix the login"}),
            ("get_weather", {"city": "Oslo"}),
            text="On it.",
            json_chunk_size=2,  # both calls' arguments in many pieces
        ),
        fo.text("I've asked the coder, and it is sunny in Oslo."),
        fo.text("The login is fixed."),
    )
    llm = make_openai_llm()
    session: Session[Any] = Session(llm, tools=[get_weather], background=[coder])
    rec = Recorder(session)
    spoken = asyncio.Event()
    session.on("background_reply", lambda e: spoken.set() if e.status == "completed" else None)
    await session.start(Agent("You front a coding agent."))

    result = await session.run(user_input="fix the login, and the weather in Oslo?", timeout=WAIT)
    result.expect.next_event().is_message(role="assistant", content="On it.")
    result.expect.next_event().is_function_call(name="backline_send")
    result.expect.next_event().is_function_call(name="get_weather", arguments={"city": "Oslo"})
    result.expect.next_event().is_function_call_output(output="Message has been delivered.")
    result.expect.next_event().is_function_call_output(output="Sunny in Oslo.")
    # The background noted its start and spoke its result while the reply was generated.
    result.expect.contains_message(role="assistant", content="I've asked the coder")
    result.expect.contains_message(role="user", content="started: fix the login")
    await asyncio.wait_for(spoken.wait(), WAIT)
    assert await session.wait_for_idle(timeout=WAIT)
    await session.aclose()
    await no_leaked_tasks()

    requests = openai_server.requests
    assert len(requests) == 3  # each one valid for the API (the fake answers 400 otherwise)
    second = requests[1].messages
    assert [m["role"] for m in second[:5]] == ["system", "user", "assistant", "tool", "tool"]
    assert [c["function"]["name"] for c in second[2]["tool_calls"]] == [
        "backline_send",
        "get_weather",
    ]
    # The spoken update: asked for without tools, after the silent note, in order.
    last = requests[2].body
    assert "tools" not in last and "tool_choice" not in last
    (updates,) = [m["content"] for m in last["messages"] if "finished: fix" in m["content"]]
    assert updates.index("started: fix the login") < updates.index("finished: fix the login")
    assert [e.content for e in rec.of("background_message")] == [
        "started: fix the login",
        "finished: fix the login",
    ]
    # Every model request was measured: the model's name, and its time to first token.
    metrics: list[LLMMetrics] = rec.of("llm_metrics")
    assert [(m.llm, m.model, m.status) for m in metrics] == [
        ("OpenAILLM", "gpt-test", "completed")
    ] * 3
    assert all(m.ttft is not None and 0 <= m.ttft <= m.duration for m in metrics)
    assert all(m.output_tokens for m in metrics)
