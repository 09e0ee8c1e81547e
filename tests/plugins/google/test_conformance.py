"""GeminiLLM passes the conformance suite every adapter passes (tests/llm_conformance.py)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from backline_google.llm import GeminiLLM
from google import genai
from google.genai import types

from backline.llm import TextDelta
from tests.llm_conformance import *  # noqa: F403 - the shared conformance tests
from tests.llm_conformance import Harness, collect, hi
from tests.plugins.google import fake_gemini
from tests.plugins.google.conftest import TEST_KEY, MakeLLM
from tests.plugins.google.fake_gemini import FakeGeminiServer


def _client(server: FakeGeminiServer, retries: int) -> genai.Client:
    options = types.HttpOptions(
        base_url=server.url, retry_options=types.HttpRetryOptions(attempts=retries + 1)
    )
    return genai.Client(api_key=TEST_KEY, vertexai=False, http_options=options)


@pytest.fixture
def llm_harness(gemini_server: FakeGeminiServer, make_gemini_llm: MakeLLM) -> Harness:
    def unreachable(url: str, **kwargs: Any) -> GeminiLLM:
        return make_gemini_llm(base_url=url, **kwargs)

    return Harness(
        server=gemini_server,
        script=fake_gemini,
        make_llm=make_gemini_llm,
        make_client=lambda retries: _client(gemini_server, retries),
        unreachable=unreachable,
        key_env="GEMINI_API_KEY",
        logger="backline_google.llm",
        unreachable_text="Could not reach the Gemini API",
        tool_stop_reason="STOP",  # Gemini's finishReason for a reply with function calls
    )


# Replaces the suite's test of that name (it reads openai's ``max_retries``). A stock
# client uses aiohttp when it is installed; google-genai subclasses its session.
@pytest.mark.filterwarnings("ignore:Inheritance class AiohttpClientSession:DeprecationWarning")
async def test_a_given_client_is_used_without_its_retries(
    llm_harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """google-genai's client has no ``max_retries`` to read: the retry is seen to be
    backline's (logged), and the client, not closed by ``aclose``, still works."""
    h = llm_harness
    client = h.make_client(7)
    llm = h.make_llm(client=client)
    h.server.push(h.script.error(503), "fine")
    with caplog.at_level(logging.WARNING, logger=h.logger):
        chunks = await collect(llm, hi())
    assert chunks[0] == TextDelta("fine")
    assert len(h.server.requests) == 2
    assert "retrying in" in caplog.text  # backline's retry, not the client's
    await llm.aclose()  # does not close a client it did not create
    h.server.push("still open")
    stream = await client.aio.models.generate_content_stream(model="gemini-test", contents="hi")
    assert "".join([r.text or "" async for r in stream]) == "still open"
    await client.aio.aclose()
    with pytest.raises(ValueError, match="either client"):
        h.make_llm(client=client, api_key="k")
