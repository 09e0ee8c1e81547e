"""A whole voice conversation on GeminiLLM: parallel tool calls, a background session
that notes silently and speaks, all through the fake Gemini API (each request checked
there as the API checks it)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from backline import Agent, BackgroundContext, LLMMetrics, Session, background, function_tool
from tests.conftest import Recorder
from tests.plugins.google import fake_gemini as fg
from tests.plugins.google.conftest import MakeLLM
from tests.plugins.google.fake_gemini import FakeGeminiServer

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
    gemini_server: FakeGeminiServer,
    make_gemini_llm: MakeLLM,
    no_leaked_tasks: Callable[[], Any],
) -> None:
    gemini_server.push(
        fg.tool_calls(
            ("backline_send", {"background_session_id": "coder", "content": "fix the login"}),
            ("get_weather", {"city": "Oslo"}),
            text="On it.",
            signature=b"sig-send",
        ),
        fg.text("I've asked the coder, and it is sunny in Oslo."),
        fg.text("The login is fixed."),
    )
    session: Session[Any] = Session(make_gemini_llm(), tools=[get_weather], background=[coder])
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
    result.expect.contains_message(role="assistant", content="I've asked the coder")
    await asyncio.wait_for(spoken.wait(), WAIT)
    assert await session.wait_for_idle(timeout=WAIT)
    await session.aclose()
    await no_leaked_tasks()

    requests = gemini_server.requests
    assert len(requests) == 3  # each one valid for the API (the fake answers 400 otherwise)
    second = requests[1]
    assert [c["functionCall"]["name"] for c in second.contents[1]["parts"][1:]] == [
        "backline_send",
        "get_weather",
    ]
    assert [r["response"] for r in second.parts("functionResponse")] == [
        {"output": "Message has been delivered."},
        {"output": "Sunny in Oslo."},
    ]
    # The spoken update: asked for without tools, after the silent note, in order.
    last = requests[2]
    assert "tools" not in last.body and "toolConfig" not in last.body
    texts = [p["text"] for c in last.contents for p in c["parts"] if "text" in p]
    (updates,) = [t for t in texts if "finished: fix" in t]
    assert updates.index("started: fix the login") < updates.index("finished: fix the login")
    # The call's thought signature went back with it in every later request.
    for request in requests[1:]:
        (call_part,) = [p for c in request.contents for p in c["parts"] if "thoughtSignature" in p]
        assert call_part["functionCall"]["name"] == "backline_send"
    metrics: list[LLMMetrics] = rec.of("llm_metrics")
    assert [(m.llm, m.model, m.status) for m in metrics] == [
        ("GeminiLLM", "gemini-test", "completed")
    ] * 3
    assert all(m.ttft is not None and 0 <= m.ttft <= m.duration for m in metrics)
