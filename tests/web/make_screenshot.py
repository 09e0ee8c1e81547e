"""Make docs/web.png: the page in a scripted conversation with a Claude Code-like background.

Run from the repository root (needs a Chromium, as the browser tests do):

    .venv/bin/python -m tests.web.make_screenshot [--out docs/web.png]
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from backline import Agent, BackgroundContext, Session, background
from backline.io.web import WebServer
from backline.testing import LLMRequest, ScriptedLLM, ScriptedResponse, text, tool_calls

from .browser import chromium, find_chromium, open_page
from .scenario import IDLE, working

FIX = "Please fix the failing login test."
MORE = "Great. Add a test for expired tokens too."
FIXED = "Fixed the login test: the token expiry check was off by one. All 42 tests pass."


def voice(request: LLMRequest) -> ScriptedResponse:
    last = request.last_message.content if request.last_message else ""
    if request.tool_choice == "none":
        return text(
            "Good news from Claude Code: the login test is fixed. The expiry check was "
            "off by one, and all 42 tests pass now."
        )
    items = request.chat_ctx.items
    if items and items[-1].type == "function_call_output":
        if "expired" in getattr(items[-2], "arguments", ""):
            return text(
                "On it. I've asked Claude Code to add a test for expired tokens, "
                "and I'll tell you when it's done."
            )
        return text("On it. Claude Code is looking at the login test now.")
    return tool_calls(("backline_send", {"background_session_id": "claude_code", "content": last}))


@background("claude_code", description="Claude Code, editing the repository.")
async def coder(ctx: BackgroundContext) -> None:
    ctx.set_state(IDLE)
    activity: list[str] = []
    files: list[str] = []
    async for message in ctx.messages():
        async with ctx.turn():
            if "login" in message:
                for step, file in (
                    ("Read tests/test_login.py", None),
                    ("Edit src/auth/session.py", "src/auth/session.py"),
                    ("Ran: pytest -q tests/test_login.py", None),
                ):
                    activity.append(step)
                    if file:
                        files.append(file)
                    ctx.set_state(working(message, activity[-8:], files))
                    await asyncio.sleep(0.3)
                await ctx.send("Found it: the expiry check used < where it needs <=.", silent=True)
                await ctx.send(FIXED)
                done = {"status": "idle, waiting for the next task", "last_task": message}
                ctx.set_state({**IDLE, **done, "recent_activity": activity, "files_changed": files})
            else:
                activity += ["Read tests/test_login.py", "Edit tests/test_login.py"]
                files.append("tests/test_login.py")
                ctx.set_state(working(message, activity[-8:], files))
                await asyncio.Event().wait()  # still working when the picture is taken


async def main(out: Path) -> None:
    executable = find_chromium()
    if executable is None:
        raise SystemExit("no Chromium found (apt-get install chromium, or set BACKLINE_CHROMIUM)")

    def factory() -> tuple[Session[Any], Agent]:
        return Session(ScriptedLLM(voice), background=[coder]), Agent("Be brief.")

    async with WebServer(factory) as server, chromium(executable) as browser:
        page = await open_page(browser, server.url, wordMs=70)
        await page.wait_for_selector('#agent-state[data-state="listening"]')
        await page.click("#mic")
        await page.wait_for_function("() => window.__fake.active !== null")
        await page.evaluate(f"window.__fake.userSpeaks({FIX!r})")
        await page.wait_for_selector(".entry.agent.update.final", timeout=30_000)
        await page.evaluate(f"window.__fake.userSpeaks({MORE!r})")
        await page.wait_for_function(
            "() => (document.querySelector('.entry.agent.live .spoken')?.textContent.length ?? 0)"
            " > 40",
            timeout=30_000,
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(out))
    print(f"wrote {out}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("docs/web.png"))
    asyncio.run(main(parser.parse_args().out))
