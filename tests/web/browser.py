"""Driving the page in the machine's Chromium (Playwright, never a downloaded browser),
with the browser's speech replaced by the fake in ``fake_speech.js``."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

FAKE_SPEECH = Path(__file__).with_name("fake_speech.js")
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    # A machine with a microphone: Chromium's own fake capture device (a real device list,
    # no sound card needed). Speech recognition stays Chromium's: an interface, no service.
    "--use-fake-device-for-media-stream",
]
VIEWPORT = {"width": 1280, "height": 800}


def fake_microphone(wav: str) -> tuple[str, ...]:
    """Chromium's arguments for a microphone that plays ``wav`` (16-bit PCM) in a loop,
    granted to the page without asking."""
    return ("--use-fake-ui-for-media-stream", f"--use-file-for-fake-audio-capture={wav}")


def find_chromium() -> str | None:
    """``$BACKLINE_CHROMIUM``, else a Chromium on the PATH (Debian's ``chromium`` package)."""
    configured = os.environ.get("BACKLINE_CHROMIUM")
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


@contextlib.asynccontextmanager
async def chromium(executable: str, *, args: tuple[str, ...] = ()) -> AsyncIterator[Any]:
    """A fresh browser context (a new user-data directory) on the given Chromium, with
    ``args`` added to its command line."""
    from playwright.async_api import async_playwright

    with tempfile.TemporaryDirectory(prefix="backline-chromium-") as profile:
        async with async_playwright() as pw:
            context = await pw.chromium.launch_persistent_context(
                profile,
                executable_path=executable,
                headless=True,
                args=[*CHROMIUM_ARGS, *args],
                viewport=VIEWPORT,  # type: ignore[arg-type]
            )
            try:
                yield context
            finally:
                await context.close()


async def open_page(
    context: Any, url: str | None, *, fake_speech: bool = True, **config: Any
) -> Any:
    """A page with the fake speech installed (``config``: wordMs, recognition, synthesis,
    microphone), or with the browser's own (``fake_speech=False``)."""
    page = await context.new_page()
    page.errors = []  # console errors and uncaught exceptions, for the tests to check
    page.on(
        "console",
        lambda msg: page.errors.append(msg.text) if msg.type == "error" else None,
    )
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    if fake_speech:
        await page.add_init_script(script=f"window.__fakeSpeechConfig = {json.dumps(config)};")
        await page.add_init_script(path=str(FAKE_SPEECH))
    if url is not None:
        await page.goto(url)
    return page
