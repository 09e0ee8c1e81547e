"""OpenAILLM passes the conformance suite every adapter passes (tests/llm_conformance.py)."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from backline_openai.llm import OpenAILLM

from tests.llm_conformance import *  # noqa: F403 - the shared conformance tests
from tests.llm_conformance import Harness
from tests.plugins.openai import fake_openai
from tests.plugins.openai.conftest import MakeLLM
from tests.plugins.openai.fake_openai import FakeOpenAIServer


@pytest.fixture
def llm_harness(openai_server: FakeOpenAIServer, make_openai_llm: MakeLLM) -> Harness:
    def unreachable(url: str, **kwargs: Any) -> OpenAILLM:
        return make_openai_llm(base_url=f"{url}/v1", **kwargs)

    return Harness(
        server=openai_server,
        script=fake_openai,
        make_llm=make_openai_llm,
        make_client=lambda retries: openai.AsyncOpenAI(
            base_url=openai_server.url, api_key="k", max_retries=retries
        ),
        unreachable=unreachable,
        key_env="OPENAI_API_KEY",
        logger="backline_openai.llm",
        unreachable_text="Could not reach the OpenAI-compatible API",
        tool_stop_reason="tool_calls",
    )
