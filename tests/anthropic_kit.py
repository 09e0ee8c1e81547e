"""Shared fixtures for the tests of ``AnthropicLLM`` against the fake server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from backline.llm.anthropic import AnthropicLLM
from backline.testing.fake_anthropic import FakeAnthropicServer

MakeLLM = Callable[..., AnthropicLLM]


@pytest.fixture
def server() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as s:
        yield s


@pytest.fixture
async def make_llm(server: FakeAnthropicServer) -> AsyncIterator[MakeLLM]:
    """``make_llm(**kwargs)``: an ``AnthropicLLM`` on ``server`` (tiny backoff), closed after."""
    made: list[AnthropicLLM] = []

    def make(**kwargs: Any) -> AnthropicLLM:
        kwargs.setdefault("base_url", server.url)
        kwargs.setdefault("api_key", "test-key")
        kwargs.setdefault("retry_base_delay", 0.001)
        llm = AnthropicLLM(**kwargs)
        made.append(llm)
        return llm

    yield make
    for llm in made:
        await llm.aclose()
