"""``backline web --llm openai-realtime`` with the server's speech (issue 29): the page's
microphone goes to the realtime model, which hears it (its transcript is the user's
turn) and answers in its own voice, streamed to the page; the tab's close closes the
model's socket."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from backline_openai.realtime import OpenAIRealtimeLLM
from websockets.asyncio.client import connect

from backline import Agent, Session
from backline.io.web import SUBPROTOCOL, WebServer, WebSpeech
from backline.speech import AudioFrame, EnergyVAD
from tests.plugins.openai import fake_realtime as fr
from tests.plugins.openai.fake_realtime import FakeRealtimeServer
from tests.web.conftest import TIMEOUT, Client, ws_url

pytestmark = pytest.mark.timeout(60)
RATE = 16000


class NoSynthesis:
    """The server's other words would be synthesized here: none are in this test."""

    name = "none"
    sample_rate = 24000
    local = True

    async def synthesize(self, text: str) -> Any:
        raise AssertionError(f"synthesized {text!r}: the model speaks itself")


@pytest.fixture
async def realtime() -> AsyncIterator[FakeRealtimeServer]:
    async with FakeRealtimeServer() as fake:
        yield fake


@pytest.fixture
async def server(realtime: FakeRealtimeServer) -> AsyncIterator[WebServer]:
    def factory() -> tuple[Session[Any], Agent]:
        llm = OpenAIRealtimeLLM(base_url=realtime.url, api_key="sk-test", ping_interval=None)
        return Session(llm, user_away_timeout=None), Agent("Answer about the weather.")

    speech = WebSpeech(
        "server",
        tts=NoSynthesis(),  # type: ignore[arg-type]
        vad=EnergyVAD(),
        names={"stt": "openai-realtime", "tts": "none", "vad": "energy"},
        local=False,
        model="openai-realtime",
    )
    async with WebServer(factory, speech=speech) as web:
        yield web


def tone(seconds: float) -> bytes:
    samples = [(8000 if (i // 20) % 2 else -8000) for i in range(int(seconds * RATE))]
    return AudioFrame.from_samples(samples, RATE).data


async def test_the_pages_microphone_reaches_the_model_and_its_voice_comes_back(
    server: WebServer, realtime: FakeRealtimeServer
) -> None:
    realtime.transcripts.append("what is the weather")
    realtime.push(fr.text("It is sunny today"))
    url = ws_url(server) + "&speech=server"
    async with connect(url, subprotocols=[SUBPROTOCOL], open_timeout=TIMEOUT) as ws:  # type: ignore[list-item]
        client = Client(ws)
        hello = await client.expect("hello")
        assert hello["speech"]["by"] == "server"
        assert hello["speech"]["engines"]["stt"] == "openai-realtime"
        await client.send(type="audio_input", sample_rate=RATE)
        audio = bytes(RATE) + tone(0.6) + bytes(2 * RATE)  # 0.5 s, speech, 1 s
        step = RATE // 20 * 2
        for i in range(0, len(audio), step):
            await client.ws.send(audio[i : i + step])
        user = await client.expect("transcript", lambda m: m["kind"] == "user")
        assert user["text"] == "what is the weather"
        start = await client.expect("audio_start")
        assert start["sample_rate"] == 24000
        await client.expect_audio(0.8, 24000)  # four words of the model's own voice
        assert set(b"".join(client.audio)) == set(fr.SPOKEN)
        await client.send(type="audio_played", stream=start["stream"], seconds=0.8, done=True)
        agent = await client.expect("transcript", lambda m: m["kind"] == "agent")
        assert agent["text"] == "It is sunny today" and not agent["interrupted"]
    # The tab closed: so did its model's socket.
    await asyncio.wait_for(realtime.all_closed.wait(), TIMEOUT)
    assert realtime.connections == 1
    assert realtime.sent("conversation.item.create") == []
    assert realtime.errors == []
