"""Alerts in the console (issue 30): a background finished, failed or asks something
while the agent speaks about something else; the terminal's bell rings at once, and a
marked line says what happened once the reply's line has ended."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from backline import Agent, BackgroundContext, Session, background
from backline.io.console import run_console

from .test_plain_lines import WAIT, PausedReply, Screen

go = asyncio.Event()


@background("ci", description="Runs the tests.")
async def ci(ctx: BackgroundContext) -> None:
    await go.wait()
    async with ctx.turn():
        ctx.set_state({"status": "working", "task": "run the tests"})
    async with ctx.turn():
        ctx.set_state({"status": "error", "error": "3 tests fail"})
    ctx.set_state({"status": "waiting", "asking": "Fix them now?"})
    await asyncio.Event().wait()


async def test_the_bell_rings_at_once_and_the_lines_follow_the_reply() -> None:
    go.clear()
    llm = PausedReply()
    session: Session[Any] = Session(llm, background=[ci], user_away_timeout=None)
    screen = Screen()
    reader, writer = os.pipe()
    with os.fdopen(reader, "r") as stdin:
        console = asyncio.ensure_future(
            run_console(session, Agent("Be brief."), rich=False, stdin=stdin, stdout=screen)
        )
        try:
            os.write(writer, b"hello\n")
            await screen.shows("agent: The first half, ")
            go.set()
            await screen.shows("\a\a\a")  # three bells, in the middle of the reply
            assert "🔔" not in screen.getvalue()  # the lines wait for the reply's end
            llm.resume.set()
            await screen.shows("🔔 ci asks: Fix them now?")
            os.write(writer, b"/quit\n")
            await asyncio.wait_for(console, WAIT)
        finally:
            os.close(writer)
            console.cancel()
            await asyncio.gather(console, return_exceptions=True)
    lines = screen.getvalue().replace("\a", "").splitlines()
    start = lines.index("agent: The first half, and the second half.")
    alerts = [line for line in lines[start + 1 :] if line.startswith("🔔")]
    assert alerts == [
        "🔔 ci finished: run the tests",
        "🔔 ci failed: 3 tests fail",
        "🔔 ci asks: Fix them now?",
    ]
