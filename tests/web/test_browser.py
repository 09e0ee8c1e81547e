"""The page in a real browser (the machine's Chromium through Playwright), with fake
speech recognition and synthesis injected by an init script."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from backline import ChatMessage
from backline.io.web import WebServer

from .browser import chromium, find_chromium, open_page
from .scenario import STORY, Controls, working

CHROMIUM = find_chromium()
pytestmark = [
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="browser tests skipped: no Chromium found (apt-get install chromium, "
        "or set BACKLINE_CHROMIUM)",
    ),
    pytest.mark.timeout(90),
]
WAIT = 10_000  # ms, for page conditions


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    pytest.importorskip("playwright", reason="the playwright package is not installed")
    assert CHROMIUM is not None
    async with chromium(CHROMIUM) as context:
        yield context


@pytest.fixture
async def expect() -> Any:
    from playwright.async_api import expect

    return expect


async def ready(page: Any, expect: Any) -> None:
    await expect(page.locator("#connection")).to_have_attribute(
        "data-state", "connected", timeout=WAIT
    )
    await expect(page.locator("#agent-state")).to_have_attribute(
        "data-state", "listening", timeout=WAIT
    )


def assistant_messages(session: Any) -> list[ChatMessage]:
    return [
        it for it in session.history.items if isinstance(it, ChatMessage) and it.role == "assistant"
    ]


async def test_a_spoken_turn_gets_a_spoken_reply(
    server: WebServer, controls: Controls, browser: Any, expect: Any
) -> None:
    page = await open_page(browser, server.url)
    await ready(page, expect)
    await page.click("#mic")
    await expect(page.locator("#mic")).to_have_attribute("aria-pressed", "true")
    await page.wait_for_function("() => window.__fake.active !== null", timeout=WAIT)

    await page.evaluate("window.__fake.userSpeaks('hello there')")
    await expect(page.locator(".entry.user .text")).to_have_text("hello there", timeout=WAIT)
    reply = page.locator(".entry.agent.final .text")
    await expect(reply).to_have_text("You said: hello there. What next?", timeout=WAIT)
    utterances = await page.evaluate("window.__fake.utterances")
    assert [u["text"] for u in utterances] == ["You said: hello there. ", "What next?"]
    assert all(u["ended"] and not u["cut"] for u in utterances)
    await expect(page.locator("#user-state")).to_have_attribute("data-state", "listening")
    [message] = assistant_messages(controls.sessions[0])
    assert message.content == "You said: hello there. What next?" and not message.interrupted
    assert page.errors == []


async def test_a_background_update_is_spoken_without_user_input(
    server: WebServer, controls: Controls, browser: Any, expect: Any
) -> None:
    page = await open_page(browser, server.url)
    await ready(page, expect)
    ctx = await controls.context()

    await ctx.send("reading tests/test_login.py", silent=True)
    note = page.locator(".entry.background.note")
    await expect(note.locator(".text")).to_have_text("reading tests/test_login.py", timeout=WAIT)
    await expect(note.locator(".who")).to_contain_text("context note (not spoken)")
    assert float(await note.evaluate("n => getComputedStyle(n).opacity")) < 1

    await ctx.send("the login test passes now")
    update = page.locator(".entry.agent.update.final")
    spoken = "Update from Claude Code: the login test passes now"
    await expect(update.locator(".text")).to_have_text(spoken, timeout=WAIT)
    await expect(update.locator(".who")).to_have_text("agent · update from claude_code")
    utterances = await page.evaluate("window.__fake.utterances")
    assert [u["text"] for u in utterances] == [spoken]  # the silent note was not spoken
    assert utterances[0]["ended"]
    assert page.errors == []


async def test_a_background_state_card_updates(
    server: WebServer, controls: Controls, browser: Any, expect: Any
) -> None:
    page = await open_page(browser, server.url)
    await ready(page, expect)
    card = page.locator('.card[data-background="claude_code"]')
    await expect(card.locator(".state-status")).to_have_text("idle, waiting for a task")
    await expect(card.locator(".status")).to_have_text("running")
    ctx = await controls.context()

    async with ctx.turn():
        await expect(card.locator(".status")).to_have_text("busy", timeout=WAIT)
        ctx.set_state(
            working(
                "fix the login test",
                ["Edit src/login.py", "Ran: pytest -q tests/test_login.py"],
                ["src/login.py", "tests/test_login.py"],
            )
        )
        await expect(card.locator(".state-status")).to_have_text("working", timeout=WAIT)
        await expect(card.locator(".files-changed li")).to_have_text(
            ["src/login.py", "tests/test_login.py"]
        )
        await expect(card.locator(".recent-activity li")).to_have_text(
            ["Edit src/login.py", "Ran: pytest -q tests/test_login.py"]
        )
        await expect(card.locator(".field")).to_have_text(["task: fix the login test"])
    await expect(card.locator(".status")).to_have_text("idle", timeout=WAIT)
    ctx.set_state("a plain string state")
    await expect(card.locator(".state-body")).to_have_text("a plain string state", timeout=WAIT)
    ctx.set_state({"status": "checking", "city": "Oslo", "eta": "5 min"})  # a custom state
    await expect(card.locator(".state-status")).to_have_text("checking", timeout=WAIT)
    await expect(card.locator(".field")).to_have_text(["city: Oslo", "eta: 5 min"])
    assert page.errors == []


async def test_speaking_while_the_agent_speaks_interrupts_it(
    server: WebServer, controls: Controls, browser: Any, expect: Any
) -> None:
    page = await open_page(browser, server.url, wordMs=120)
    await ready(page, expect)
    await page.click("#mic")
    await page.wait_for_function("() => window.__fake.active !== null", timeout=WAIT)
    await page.evaluate("window.__fake.userSpeaks('tell me a story')")
    first_sentence = len(STORY.split(". ")[0].split())
    await page.wait_for_function(
        f"() => window.__fake.spokenWords().length >= {first_sentence + 2}", timeout=WAIT
    )

    await page.evaluate("window.__fake.startSpeaking('wait')")  # barge-in
    cut = page.locator(".entry.agent.interrupted")
    await expect(cut).to_be_visible(timeout=WAIT)
    spoken_words = await page.evaluate("window.__fake.spokenWords()")
    [message] = assistant_messages(controls.sessions[0])
    assert message.interrupted
    assert STORY.startswith(message.content)
    assert message.content.split() == spoken_words
    assert first_sentence + 2 <= len(spoken_words) < len(STORY.split())
    await expect(cut.locator(".text")).to_have_text(message.content)
    utterances = await page.evaluate("window.__fake.utterances")
    assert utterances[-1]["cut"] and not utterances[-1]["ended"]

    await page.evaluate("window.__fake.finishSpeaking('wait, stop')")
    await expect(page.locator(".entry.agent.final").last.locator(".text")).to_have_text(
        "You said: wait, stop. What next?", timeout=WAIT
    )
    assert [m.interrupted for m in assistant_messages(controls.sessions[0])] == [True, False]
    assert page.errors == []


async def test_the_stop_button_cuts_the_reply_where_speech_was(
    server: WebServer, controls: Controls, browser: Any, expect: Any
) -> None:
    page = await open_page(browser, server.url, wordMs=120)
    await ready(page, expect)
    await page.fill("#text", "a story please")
    await page.press("#text", "Enter")
    await page.wait_for_function("() => window.__fake.spokenWords().length >= 3", timeout=WAIT)
    await page.click("#stop")
    await expect(page.locator(".entry.agent.interrupted")).to_be_visible(timeout=WAIT)
    [message] = assistant_messages(controls.sessions[0])
    assert message.interrupted
    assert message.content.split() == await page.evaluate("window.__fake.spokenWords()")
    assert page.errors == []


async def test_turning_speech_off_mid_reply_delivers_the_rest_as_text(
    server: WebServer, controls: Controls, browser: Any, expect: Any
) -> None:
    page = await open_page(browser, server.url, wordMs=120)
    await ready(page, expect)
    await page.fill("#text", "a story please")
    await page.press("#text", "Enter")
    await page.wait_for_function("() => window.__fake.spokenWords().length >= 3", timeout=WAIT)
    await page.uncheck("#speak")
    await expect(page.locator(".entry.agent.final .text")).to_have_text(STORY, timeout=WAIT)
    [message] = assistant_messages(controls.sessions[0])
    assert message.content == STORY and not message.interrupted
    assert len(await page.evaluate("window.__fake.spokenWords()")) < len(STORY.split())
    assert page.errors == []


async def test_push_to_talk_sends_one_turn_on_release(
    server: WebServer, controls: Controls, browser: Any, expect: Any
) -> None:
    page = await open_page(browser, server.url)
    await ready(page, expect)
    await page.hover("#ptt")
    await page.mouse.down()
    await expect(page.locator("#user-state")).to_have_attribute("data-state", "speaking")
    await page.wait_for_function("() => window.__fake.active !== null", timeout=WAIT)
    await page.evaluate("window.__fake.userSpeaks('what is')")
    await page.evaluate("window.__fake.userSpeaks('the time')")
    await expect(page.locator("#interim")).to_have_text("what is the time")
    await page.mouse.up()
    await expect(page.locator(".entry.user .text")).to_have_text(["what is the time"], timeout=WAIT)
    await expect(page.locator(".entry.agent.final .text")).to_have_text(
        "You said: what is the time. What next?", timeout=WAIT
    )
    await expect(page.locator("#user-state")).to_have_attribute("data-state", "listening")
    assert page.errors == []


async def test_without_browser_speech_the_page_says_so_and_typing_works(
    server: WebServer, controls: Controls, browser: Any, expect: Any
) -> None:
    page = await open_page(browser, server.url, recognition=False, synthesis=False)
    await ready(page, expect)
    await expect(page.locator("#voice-status")).to_contain_text("no speech recognition")
    await expect(page.locator("#notice")).to_contain_text("replies are shown, not spoken")
    await expect(page.locator("#mic")).to_be_hidden()
    await expect(page.locator("#ptt")).to_be_hidden()
    await page.fill("#text", "typed hello")
    await page.press("#text", "Enter")
    await expect(page.locator(".entry.agent.final .text")).to_have_text(
        "You said: typed hello. What next?", timeout=WAIT
    )
    [message] = assistant_messages(controls.sessions[0])
    assert not message.interrupted
    assert page.errors == []


# -- what works here (issue 26, item 1) -----------------------------------------------------------
async def test_in_chromium_the_page_offers_typing_and_says_which_browser_to_use(
    server: WebServer, controls: Controls, browser: Any, expect: Any
) -> None:
    # Chromium's own speech: the interface is there, the service behind it is not.
    page = await open_page(browser, server.url, fake_speech=False)
    await ready(page, expect)
    status = page.locator("#voice-status")
    await expect(status).to_have_attribute("data-voice", "none", timeout=WAIT)
    await expect(status).to_contain_text("no speech recognition service")
    await expect(status).to_contain_text("open this page in Google Chrome, Edge or Safari")
    await expect(page.locator("#mic")).to_be_hidden()
    await expect(page.locator("#ptt")).to_be_hidden()
    await page.keyboard.down("Space")  # push-to-talk's key does nothing either
    await page.keyboard.up("Space")
    await page.fill("#text", "typed in chromium")
    await page.press("#text", "Enter")
    await expect(page.locator(".entry.agent.final .text")).to_have_text(
        "You said: typed in chromium. What next?", timeout=WAIT
    )
    assert "No microphone" not in await page.locator("#notice").inner_text()
    assert page.errors == []


async def test_with_a_speech_recognition_in_the_page_talking_is_offered(
    server: WebServer, browser: Any, expect: Any
) -> None:
    page = await open_page(browser, server.url)  # a SpeechRecognition given to the page
    await ready(page, expect)
    status = page.locator("#voice-status")
    await expect(status).to_have_attribute("data-voice", "browser", timeout=WAIT)
    await expect(status).to_contain_text("You can talk")
    await expect(page.locator("#mic")).to_be_visible()
    await expect(page.locator("#ptt")).to_be_visible()


async def test_without_a_microphone_talking_waits_for_one_to_be_connected(
    server: WebServer, browser: Any, expect: Any
) -> None:
    page = await open_page(browser, server.url, microphone=False)
    await ready(page, expect)
    status = page.locator("#voice-status")
    await expect(status).to_contain_text("No microphone was found: connect one", timeout=WAIT)
    await expect(page.locator("#mic")).to_be_hidden()
    await page.evaluate("window.__fake.plugMicrophone()")
    await expect(status).to_have_attribute("data-voice", "browser", timeout=WAIT)
    await expect(page.locator("#mic")).to_be_visible()
    assert page.errors == []


@pytest.mark.parametrize(
    ("code", "says"),
    [
        ("network", "Speech recognition needs the network"),
        ("audio-capture", "No microphone was found"),
        ("not-allowed", "The microphone is blocked for this page"),
        ("service-not-allowed", "use Google Chrome or Edge"),
    ],
)
async def test_a_recognition_failure_says_what_it_means_and_typing_works(
    server: WebServer, controls: Controls, browser: Any, expect: Any, code: str, says: str
) -> None:
    page = await open_page(browser, server.url)
    await ready(page, expect)
    await page.click("#mic")
    await page.wait_for_function("() => window.__fake.active !== null", timeout=WAIT)
    await page.evaluate(f"window.__fake.recognitionFails({code!r})")
    await expect(page.locator("#notice")).to_contain_text(says)
    await expect(page.locator("#notice")).to_contain_text("type your messages below")
    await page.fill("#text", "typed instead")
    await page.press("#text", "Enter")
    await expect(page.locator(".entry.agent.final .text")).to_have_text(
        "You said: typed instead. What next?", timeout=WAIT
    )
    assert page.errors == []


async def test_a_wrong_token_gets_403(server: WebServer, browser: Any) -> None:
    page = await open_page(browser, None)
    response = await page.goto(server.url.replace(server.token, "not-the-token"))
    assert response is not None and response.status == 403
    assert "access token" in await page.inner_text("body")
    response = await page.goto(server.url.split("?")[0])
    assert response is not None and response.status == 403


async def test_the_page_keeps_no_secret_in_its_address_and_reloads_with_its_cookie(
    server: WebServer, controls: Controls, browser: Any, expect: Any
) -> None:
    base = f"http://127.0.0.1:{server.port}/"
    for link in (server.url, server.sign_in_url()):
        page = await open_page(browser, link)
        await ready(page, expect)
        assert page.url == base  # the token or the code left the address bar
        await page.reload()  # the cookie signs the page in again, socket included
        await ready(page, expect)
        await page.fill("#text", "after a reload")
        await page.press("#text", "Enter")
        await expect(page.locator(".entry.agent.final .text")).to_have_text(
            "You said: after a reload. What next?", timeout=WAIT
        )
        assert page.errors == []
        await page.close()


async def test_closing_the_tab_closes_its_session(
    server: WebServer, controls: Controls, browser: Any, expect: Any
) -> None:
    first = await open_page(browser, server.url)
    second = await open_page(browser, server.url)
    await ready(first, expect)
    await ready(second, expect)
    assert len(controls.sessions) == 2
    await first.close()
    await controls.wait_for(lambda: controls.closed == controls.sessions[:1])
    assert not controls.sessions[1].closed
