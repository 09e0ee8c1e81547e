"""The server's speech over the WebSocket protocol, with the real engines and no browser
(issue 27): a client that sends microphone audio and reports how much of the server's
voice it played, as the page does; bad audio refused; tabs closed mid-utterance and
mid-reply."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from websockets.asyncio.client import connect

from backline import ChatMessage, Session
from backline.io.web import SUBPROTOCOL, WebServer

from .conftest import TIMEOUT, Client, ws_url
from .scenario import STORY
from .speech_scenario import (
    ASKED,
    RATE,
    TALKED_OVER,
    recording,
    require_engines,
    said,
    speaking_session,
    web_speech,
)

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def sessions() -> list[Session[Any]]:
    return []


@pytest.fixture
async def server(sessions: list[Session[Any]]) -> AsyncIterator[WebServer]:
    require_engines()
    async with WebServer(speaking_session(sessions), speech=web_speech("auto")) as web:
        yield web


def connection(server: WebServer, prefer: str | None = "server") -> Any:
    """A client for a page that prefers ``prefer``'s speech. It buffers what it has not
    read (``max_queue=None``): a client that stops reading mid-reply would otherwise
    stop reading the server's close frame too, and its close would wait 10 s."""
    url = ws_url(server) + (f"&speech={prefer}" if prefer else "")
    return connect(
        url,
        subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
        open_timeout=TIMEOUT,
        max_queue=None,
    )


async def speak(client: Client, *pieces: Any) -> None:
    """Send speech as the page does: ``audio_input``, then 50 ms binary messages."""
    audio = recording(*pieces)
    await client.send(type="audio_input", sample_rate=RATE)
    step = RATE // 20 * 2
    for i in range(0, len(audio.data), step):
        await client.ws.send(audio.data[i : i + step])


def messages(session: Session[Any]) -> list[ChatMessage]:
    return [it for it in session.history.items if isinstance(it, ChatMessage)]


async def test_a_page_that_asks_gets_the_servers_speech_and_another_the_browsers(
    server: WebServer,
) -> None:
    async with connection(server) as ws:
        hello = await Client(ws).expect("hello")
        assert hello["speech"] == {
            "by": "server",
            "mode": "auto",
            "engines": {"stt": "pocketsphinx", "tts": "espeak", "vad": "energy"},
            "local": True,
            "unavailable": None,
        }
    async with connection(server, prefer=None) as ws:  # a client that does not say
        client = Client(ws)
        hello = await client.expect("hello")
        assert hello["speech"]["by"] == "browser"
        await client.ws.send(bytes(3200))
        error = await client.expect("error")
        assert "the browser listens and speaks in this tab" in error["message"]
        await client.send(type="audio_input", sample_rate=RATE)
        assert "audio_input: the browser listens" in (await client.expect("error"))["message"]
        await client.send(type="user_turn", text="hi")  # the page speaks it, as before
        start = await client.expect("segment_start")
        assert start["speaker"] == "page"


async def test_bad_audio_is_refused_and_the_tab_goes_on(server: WebServer) -> None:
    async with connection(server) as ws:
        client = Client(ws)
        await client.expect("hello")
        await client.ws.send(bytes(1600))
        assert "audio before audio_input" in (await client.expect("error"))["message"]
        await client.send(type="audio_input", sample_rate=1234)
        assert "8000 to 48000 Hz" in (await client.expect("error"))["message"]
        await client.send(type="audio_input", sample_rate=RATE)
        for bad, says in (
            (b"\x01\x02\x03", "not whole 16-bit samples"),
            (bytes(2 * RATE + 2), "at most 1 s"),
        ):
            await client.ws.send(bad)
            error = await client.expect("error")
            assert error["source"] == "protocol" and says in error["message"], error
        for _ in range(4):  # 4 s at once: more than a person can say
            await client.ws.send(bytes(2 * RATE))
        assert "faster than real time" in (await client.expect("error"))["message"]
        await client.send(type="audio_played", stream=7, seconds=1.0, done=True)  # stale
        await client.send(type="user_turn", text="still there?")
        start = await client.expect("segment_start")
        assert start["speaker"] == "server"


async def test_speech_becomes_a_turn_the_reply_is_heard_and_talking_over_it_cuts_it(
    server: WebServer, sessions: list[Session[Any]]
) -> None:
    async with connection(server) as ws:
        client = Client(ws)
        await client.expect("hello")
        await speak(client, 0.5, said(ASKED), 0.6)
        user = await client.expect("transcript", lambda m: m["kind"] == "user")
        assert user["text"] == ASKED

        # The reply's text is shown at once, its audio comes as the page plays it.
        segment = await client.expect("segment_start")
        assert segment["speaker"] == "server"
        await client.expect("segment_end")
        start = await client.expect("audio_start")
        assert start["sample_rate"] == 22050
        await client.expect_audio(1.0, 22050)
        await client.send(type="audio_played", stream=start["stream"], seconds=1.0, done=False)

        # Talking over it: the server stops the page's audio; the history keeps 1 s of it.
        await speak(client, said(TALKED_OVER), 0.6)
        await client.expect("audio_clear", lambda m: m["stream"] == start["stream"])
        sent = client.audio_seconds(22050)
        assert sent <= 1.0 + 2.0 + 0.1  # never more than 2 s ahead of the page
        cut = await client.expect("transcript", lambda m: m["kind"] == "agent")
        assert cut["interrupted"] and cut["segment"] == segment["segment"]
        heard = cut["text"]
        assert heard and STORY.startswith(heard) and len(heard.split()) <= 5, heard
        assert messages(sessions[0])[1].content == heard

        # What was said over it gets an answer that plays to its end.
        again = await client.expect("transcript", lambda m: m["kind"] == "user")
        assert again["text"] == TALKED_OVER
        second = await client.expect("audio_start")
        end = await client.expect("audio_end")
        played = client.audio_seconds(22050) - sent  # all this stream sent
        await client.send(type="audio_played", stream=end["stream"], seconds=played, done=True)
        answer = await client.expect("transcript", lambda m: m["kind"] == "agent")
        assert not answer["interrupted"] and answer["text"] == f"You said {TALKED_OVER}."
        assert second["stream"] == start["stream"] + 1


async def test_closing_the_tab_mid_reply_or_mid_utterance_never_hangs(
    server: WebServer, sessions: list[Session[Any]]
) -> None:
    before = asyncio.all_tasks()
    async with connection(server) as ws:  # mid-reply: the page has played 0.5 s of it
        client = Client(ws)
        await client.expect("hello")
        [replying] = server.tabs
        await client.send(type="user_turn", text="tell me a story")
        start = await client.expect("audio_start")
        await client.expect_audio(0.5, 22050)
        await client.send(type="audio_played", stream=start["stream"], seconds=0.5, done=False)
    async with connection(server) as ws:  # mid-utterance: the user is speaking
        client = Client(ws)
        await client.expect("hello")
        [listening] = [tab for tab in server.tabs if tab is not replying]
        await speak(client, 0.5, said(ASKED))
        await client.expect("user_state", lambda m: m["state"] == "speaking")
    async with asyncio.timeout(TIMEOUT):
        await replying.wait_closed()
        await listening.wait_closed()
    assert server.tabs == [] and all(s.closed for s in sessions)
    assert [m.role for m in messages(sessions[1])] == []  # the turn never ended
    left = {t for t in asyncio.all_tasks() - before if not t.done()}
    assert left == set(), left
