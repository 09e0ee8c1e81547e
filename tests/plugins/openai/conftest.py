"""Fixtures for the OpenAI plugin: the fake server, and adapters pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from backline_openai.llm import OpenAILLM

from tests.plugins.openai.fake_audio import FakeAudioServer
from tests.plugins.openai.fake_openai import FakeOpenAIServer

MakeLLM = Callable[..., OpenAILLM]


@pytest.fixture(autouse=True)
def _no_openai_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's OPENAI_* / GROQ_* ... variables never steer these tests."""
    for name in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "OPENAI_AUDIO_BASE_URL",
        "OPENAI_ORG_ID",
        "OPENAI_PROJECT_ID",
        "OPENAI_CUSTOM_HEADERS",
        "GROQ_API_KEY",
        "CEREBRAS_API_KEY",
        "OPENROUTER_API_KEY",
        "BACKLINE_MODEL",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def audio_server() -> Iterator[FakeAudioServer]:
    with FakeAudioServer() as server:
        yield server


@pytest.fixture
async def make_openai_llm(openai_server: FakeOpenAIServer) -> AsyncIterator[MakeLLM]:
    made: list[OpenAILLM] = []

    def make(**kwargs: Any) -> OpenAILLM:
        kwargs.setdefault("model", "gpt-test")
        kwargs.setdefault("base_url", openai_server.url)
        kwargs.setdefault("api_key", "sk-test-key")
        kwargs.setdefault("retry_base_delay", 0.001)
        llm = OpenAILLM(**kwargs)
        made.append(llm)
        return llm

    yield make
    for llm in made:
        await llm.aclose()
