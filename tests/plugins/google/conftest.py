"""Fixtures for the Google plugin: the fake Gemini API, and adapters pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from backline_google.llm import GeminiLLM

from tests.plugins.google.fake_gemini import FakeGeminiServer

MakeLLM = Callable[..., GeminiLLM]
TEST_KEY = "gemini-test-key"


@pytest.fixture(autouse=True)
def _no_google_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's GEMINI_* / GOOGLE_* variables never steer these tests."""
    for name in (
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "GOOGLE_GEMINI_BASE_URL",
        "GOOGLE_VERTEX_BASE_URL",
        "GOOGLE_GENAI_USE_VERTEXAI",
        "GOOGLE_GENAI_USE_ENTERPRISE",
        "GOOGLE_GENAI_API_VERSION",
        "GOOGLE_GENAI_HTTP_CLIENT",
        "GOOGLE_CLOUD_PROJECT",
        "GOOGLE_CLOUD_LOCATION",
        "BACKLINE_MODEL",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def gemini_server() -> Iterator[FakeGeminiServer]:
    with FakeGeminiServer(api_key=TEST_KEY) as server:
        yield server


@pytest.fixture
async def make_gemini_llm(gemini_server: FakeGeminiServer) -> AsyncIterator[MakeLLM]:
    made: list[GeminiLLM] = []

    def make(**kwargs: Any) -> GeminiLLM:
        kwargs.setdefault("model", "gemini-test")
        if kwargs.get("client") is None:
            kwargs.pop("client", None)
            kwargs.setdefault("base_url", gemini_server.url)
            kwargs.setdefault("api_key", TEST_KEY)
        kwargs.setdefault("retry_base_delay", 0.001)
        llm = GeminiLLM(**kwargs)
        made.append(llm)
        return llm

    yield make
    for llm in made:
        await llm.aclose()
