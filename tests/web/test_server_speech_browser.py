"""The page with the server's speech (issue 27), in the machine's Chromium: a fake
microphone plays a WAV file (in a loop), the real engines listen and speak, the page
streams the microphone and plays the server's voice. Timing comes from events: the
loop says the question again while the long reply plays, which is the barge-in."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from backline import ChatMessage, Session
from backline.io.web import WebServer
from backline.speech import AudioFrame

from .browser import chromium, fake_microphone, find_chromium, open_page
from .scenario import STORY
from .speech_scenario import (
    QUESTION,
    microphone_file,
    require_engines,
    said,
    speaking_session,
    web_speech,
)

CHROMIUM = find_chromium()
pytestmark = [
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="browser tests skipped: no Chromium found (apt-get install chromium, "
        "or set BACKLINE_CHROMIUM)",
    ),
    pytest.mark.timeout(90),
]
WAIT = 20_000  # ms, for page conditions


@pytest.fixture
async def expect() -> Any:
    pytest.importorskip("playwright", reason="the playwright package is not installed")
    from playwright.async_api import expect

    return expect


def messages(session: Session[Any]) -> list[ChatMessage]:
    return [it for it in session.history.items if isinstance(it, ChatMessage)]


@contextlib.asynccontextmanager
async def browser_hearing(folder: Path, *pieces: AudioFrame | float) -> AsyncIterator[Any]:
    """Chromium whose microphone plays ``pieces`` (speech, and seconds of quiet) in a loop."""
    require_engines()
    assert CHROMIUM is not None
    wav = microphone_file(folder, *pieces)
    async with chromium(CHROMIUM, args=fake_microphone(wav)) as context:
        yield context


@pytest.fixture
async def talking_browser(tmp_path: Path) -> AsyncIterator[Any]:
    """The microphone says the question, then is quiet: a loop of 6.7 s, so it asks again
    while the reply (25 s) plays, some 4 s into it."""
    async with browser_hearing(tmp_path, 1.0, said(QUESTION), 4.0) as context:
        yield context


@pytest.fixture
async def chatty_browser(tmp_path: Path) -> AsyncIterator[Any]:
    """The microphone says the question three times with no pause (5 s of speech)."""
    question = said(QUESTION)
    async with browser_hearing(tmp_path, 0.5, question, question, question, 2.0) as context:
        yield context


async def test_spoken_words_become_a_turn_the_reply_plays_and_talking_over_it_cuts_it(
    talking_browser: Any, expect: Any
) -> None:
    sessions: list[Session[Any]] = []
    async with WebServer(speaking_session(sessions), speech=web_speech("server")) as server:
        page = await open_page(talking_browser, server.url, fake_speech=False)
        status = page.locator("#voice-status")
        await expect(status).to_have_attribute("data-voice", "server", timeout=WAIT)
        await expect(status).to_contain_text("listens with pocketsphinx")
        await page.click("#mic")  # hands-free: the microphone streams to the server
        await expect(page.locator("#mic")).to_have_attribute("aria-pressed", "true")

        # The question becomes a user turn.
        user = page.locator(".entry.user .text").first
        await expect(user).to_have_text(QUESTION, timeout=WAIT)
        session = sessions[0]
        assert messages(session)[0].content == QUESTION

        # The long reply plays in the page, until the loop asks again over it.
        [tab] = server.tabs
        assert tab.voice is not None
        cut = page.locator(".entry.agent.interrupted")
        await expect(cut).to_be_visible(timeout=WAIT)
        played = await page.evaluate("window.BacklineServerSpeech.audioState()")
        heard = tab.voice.sink.played  # what the page reported it played
        await page.click("#mic")  # the microphone off
        assert played["context"] == "running" and played["chunks"] > 0, played
        assert heard > 1.0 and abs(played["seconds"] - heard) < 0.3, (played, heard)
        reply = messages(session)[1]
        assert reply.role == "assistant" and reply.interrupted
        assert reply.content and STORY.startswith(reply.content), reply.content
        assert len(reply.content) < len(STORY)
        await expect(cut.locator(".text")).to_have_text(reply.content)
        assert page.errors == []


async def test_push_to_talk_ends_the_turn_where_it_is_let_go(
    chatty_browser: Any, expect: Any
) -> None:
    sessions: list[Session[Any]] = []
    async with WebServer(speaking_session(sessions), speech=web_speech("server")) as server:
        page = await open_page(chatty_browser, server.url, fake_speech=False)
        await expect(page.locator("#ptt")).to_be_visible(timeout=WAIT)
        await page.hover("#ptt")
        await page.mouse.down()
        you = page.locator("#user-state")
        await expect(you).to_have_attribute("data-state", "speaking", timeout=WAIT)  # barge-in
        # Let go in the middle of the talk: the voice activity detector has heard no end.
        await page.wait_for_function(
            "() => window.BacklineServerSpeech.audioState().sent >= 3", timeout=WAIT
        )
        await page.mouse.up()
        await expect(page.locator(".entry.user")).to_have_count(1, timeout=WAIT)
        words = (await page.locator(".entry.user .text").inner_text()).split()
        assert words[:3] == ["one", "two", "three"] and len(words) < 3 * 5, words
        await expect(you).to_have_attribute("data-state", "listening", timeout=WAIT)
        await expect(page.locator(".entry.agent")).to_have_count(1, timeout=WAIT)  # it answers
        assert page.errors == []
    # The server stopped with the reply playing: the tab and its session closed.
    assert sessions[0].closed


async def test_auto_the_server_listens_only_where_the_browser_cannot(expect: Any) -> None:
    require_engines()
    assert CHROMIUM is not None
    sessions: list[Session[Any]] = []
    async with (
        WebServer(speaking_session(sessions), speech=web_speech("auto")) as server,
        chromium(CHROMIUM) as context,
    ):
        given = await open_page(context, server.url)  # a speech recognition given to the page
        await expect(given.locator("#voice-status")).to_have_attribute(
            "data-voice", "browser", timeout=WAIT
        )
        own = await open_page(context, server.url, fake_speech=False)  # Chromium's: no service
        status = own.locator("#voice-status")
        await expect(status).to_have_attribute("data-voice", "server", timeout=WAIT)
        await expect(status).to_contain_text("on the machine it runs on")
        assert sorted(tab.voice is not None for tab in server.tabs) == [False, True]

        # Speaking off: the server's voice counts as delivered as it comes, as text.
        await own.uncheck("#speak")
        await own.fill("#text", "a story please")
        await own.press("#text", "Enter")
        await expect(own.locator(".entry.agent.final .text")).to_have_text(STORY, timeout=WAIT)
        reply = messages(sessions[1])[-1]
        assert reply.content == STORY and not reply.interrupted
        assert given.errors == [] and own.errors == []
