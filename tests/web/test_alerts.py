"""Alerts on the page (issue 30): a background finished, failed or asks something; the
server sends ``background_alert`` (its sound's notes included), and the page plays the
sound at once (Web Audio), shows a browser notification when the user allowed them, and
a line in the conversation. Over the protocol, and in Chromium (``window.backlineAlerts``
says what the page did with each)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from backline import BackgroundContext
from backline.io._alerts import TONES
from backline.io.web import WebServer

from .browser import chromium, find_chromium, open_page
from .scenario import Controls, working

CHROMIUM = find_chromium()
WAIT = 10_000  # ms, for page conditions


async def report(ctx: BackgroundContext) -> None:
    """A task that finishes, one that fails, then a question (its answer never comes)."""
    async with ctx.turn():
        ctx.set_state(working("fix the login test", [], []))
    async with ctx.turn():
        ctx.set_state({**working("fix the signup test", [], []), "error": "2 tests fail"})
    await ctx.ask("Shall I revert the last commit?", choices=["yes", "no"], timeout=0.5)


EXPECTED = [
    ("finished", "claude_code finished: fix the login test"),
    ("failed", "claude_code failed: 2 tests fail"),
    ("question", "claude_code asks: Shall I revert the last commit?"),
]


async def test_each_alert_reaches_the_page_with_its_sound(
    open_client: Any, controls: Controls, server: WebServer
) -> None:
    async with open_client() as client:
        await client.expect("agent_state", lambda m: m["state"] == "listening")
        await report(await controls.context())
        got = [await client.expect("background_alert") for _ in EXPECTED]
    assert [(m["kind"], m["text"]) for m in got] == EXPECTED
    assert all(m["background_id"] == "claude_code" for m in got)
    assert [m["tone"] for m in got] == [[list(n) for n in TONES[k]] for k, _ in EXPECTED]
    base = f"http://127.0.0.1:{server.port}"
    async with httpx2.AsyncClient(base_url=base) as http:
        await http.get(f"/?token={server.token}")
        script = await http.get("/static/alerts.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    if CHROMIUM is None:
        pytest.skip("no Chromium found (apt-get install chromium, or set BACKLINE_CHROMIUM)")
    pytest.importorskip("playwright", reason="the playwright package is not installed")
    async with chromium(CHROMIUM) as context:
        yield context


MARK_AGENT_STATE = """() => {
  const heard = window.backlineAlerts, push = heard.push.bind(heard);
  heard.push = (r) => push({ ...r, agent: document.getElementById("agent-state").dataset.state });
}"""


@pytest.mark.timeout(90)
async def test_the_page_plays_the_sound_notifies_and_shows_each_alert(
    server: WebServer, controls: Controls, browser: Any
) -> None:
    from playwright.async_api import expect

    page = await open_page(browser, server.url)
    await expect(page.locator("#agent-state")).to_have_attribute(
        "data-state", "listening", timeout=WAIT
    )
    button = page.locator("#notify")
    await expect(button).to_have_text("🔔 Notify me")
    await browser.grant_permissions(["notifications"], origin=server.url.split("/?")[0])
    await button.click()  # the user allows notifications (and, by clicking, sound)
    await expect(button).to_have_text("🔔 Notifications on", timeout=WAIT)
    await expect(button).to_be_disabled()

    # The agent tells a story slowly; the background reports meanwhile.
    await page.fill("#text", "tell me a story, slowly")
    await page.press("#text", "Enter")
    await expect(page.locator("#agent-state")).to_have_attribute(
        "data-state", "speaking", timeout=WAIT
    )
    await page.evaluate(MARK_AGENT_STATE)
    await report(await controls.context())
    await page.wait_for_function("() => window.backlineAlerts.length === 3", timeout=WAIT)
    heard = await page.evaluate("window.backlineAlerts")
    assert [(a["kind"], a["text"]) for a in heard] == EXPECTED
    assert all(a["sound"] and a["notified"] for a in heard)  # heard, and notified
    assert [a["agent"] for a in heard] == ["speaking"] * 3  # over the story
    lines = page.locator(".entry.alert")
    await expect(lines.locator(".text")).to_have_text([text for _, text in EXPECTED])
    await expect(page.locator(".entry.alert.failed")).to_have_count(1)
    assert page.errors == []
