"""GeminiLiveLLM against a Gemini Live server on loopback (``fake_live``): a text turn,
a tool call (NON_BLOCKING, its response's scheduling), a background's silent and spoken
updates, a barge-in and the new session it leads to, a handoff, the busy flag, a
dropped socket resumed with the server's handle, a refused handle."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from backline_google.live import GeminiLiveLLM

from backline import Agent, BackgroundContext, LLMMetrics, Session, background, function_tool
from backline.llm import ChatContext, LLMError, TextDelta, ToolCallChunk, Usage
from tests.conftest import Recorder
from tests.plugins.google import fake_live as fl
from tests.plugins.google.conftest import TEST_KEY
from tests.plugins.google.fake_live import FakeLiveServer, get

WAIT = 20.0  # bounds a hang only


@pytest.fixture
async def server(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeLiveServer]:
    monkeypatch.setenv("SSL_CERT_FILE", str(fl.CERT))  # google-genai trusts the fake's TLS
    async with FakeLiveServer(api_key=TEST_KEY) as fake:
        yield fake


@pytest.fixture
async def make_llm(server: FakeLiveServer) -> AsyncIterator[Callable[..., GeminiLiveLLM]]:
    made: list[GeminiLiveLLM] = []

    def make(**kwargs: Any) -> GeminiLiveLLM:
        kwargs.setdefault("model", "gemini-live-test")
        kwargs.setdefault("base_url", server.url)
        kwargs.setdefault("api_key", TEST_KEY)
        kwargs.setdefault("text_modality", True)
        llm = GeminiLiveLLM(**kwargs)
        made.append(llm)
        return llm

    yield make
    for llm in made:
        await llm.aclose()


@function_tool
async def get_weather(city: str) -> str:
    """Get the weather.

    Args:
        city: The city.
    """
    return f"Sunny in {city}."


def user_texts(server: FakeLiveServer) -> list[tuple[str, bool]]:
    """Each clientContent's turns' text, and its turnComplete."""
    return [
        (" | ".join(server.texts(t) for t in get(body, "turns") or []), bool(get(body, "turnComplete")))
        for body in server.sent("clientContent")
    ]


async def drain(llm: GeminiLiveLLM, ctx: ChatContext) -> list[Any]:
    async with llm.chat(ctx) as stream:
        return [c async for c in stream]


async def test_a_text_turn_in_a_session(
    server: FakeLiveServer,
    make_llm: Callable[..., GeminiLiveLLM],
    no_leaked_tasks: Callable[[], Any],
) -> None:
    server.push(fl.text("Hello, how can I help?"))
    llm = make_llm()
    session: Session[Any] = Session(llm)
    rec = Recorder(session)
    await session.start(Agent("Be brief."))
    result = await session.run(user_input="hi", timeout=WAIT)
    result.expect.next_event().is_message(role="assistant", content="Hello, how can I help?")
    await session.aclose()
    await llm.aclose()
    await no_leaked_tasks()

    assert server.paths == [
        "/ws/google.ai.generativelanguage.v1.GenerativeService.BidiGenerateContent"
    ]
    (setup,) = server.setups
    assert setup["model"] == "models/gemini-live-test"
    assert get(setup, "generationConfig")["responseModalities"] == ["TEXT"]
    assert server.texts(get(setup, "systemInstruction")) == "Be brief."
    assert get(setup, "sessionResumption") == {}
    assert user_texts(server) == [("hi", True)]
    assert server.errors == []
    (metrics,) = rec.of("llm_metrics")
    assert isinstance(metrics, LLMMetrics)
    assert (metrics.llm, metrics.model, metrics.status) == (
        "GeminiLiveLLM",
        "gemini-live-test",
        "completed",
    )
    assert metrics.ttft is not None and metrics.output_tokens == 7
