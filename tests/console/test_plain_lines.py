"""The plain console's lines: a background's state is a line when it reads differently,
the agent's listening/thinking flips are none, and nothing lands inside a reply that
is streaming on its own line (issue 17)."""

from __future__ import annotations

import asyncio
import io
import os
from collections.abc import AsyncGenerator, Sequence
from typing import Any

from backline import Agent, BackgroundContext, Session, background
from backline.io.console import run_console
from backline.llm.chat_context import ChatContext
from backline.llm.llm import ChatChunk, LLMStream, TextDelta, Usage
from backline.llm.tools import FunctionTool, ToolChoice
from backline.testing import ScriptedLLM

WAIT = 10.0


class PausedReply(ScriptedLLM):
    """Every reply streams its first half, waits for ``resume``, then streams the rest."""

    def __init__(self) -> None:
        super().__init__()
        self.resume = asyncio.Event()

    def chat(
        self,
        chat_ctx: ChatContext,
        *,
        tools: Sequence[FunctionTool] = (),
        tool_choice: ToolChoice | None = None,
    ) -> LLMStream:
        async def stream() -> AsyncGenerator[ChatChunk, None]:
            yield TextDelta("The first half, ")
            await self.resume.wait()
            yield TextDelta("and the second half.")
            yield Usage(input_tokens=1, output_tokens=2, stop_reason="end_turn")

        return LLMStream(stream())


class Screen(io.StringIO):
    """The console's stdout, with a way to wait for text to appear."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = asyncio.Event()

    def write(self, text: str) -> int:
        self.changed.set()
        return super().write(text)

    async def shows(self, text: str) -> None:
        async with asyncio.timeout(WAIT):
            while text not in self.getvalue():
                self.changed.clear()
                await self.changed.wait()


@background("watcher", description="Watches things.")
async def watcher(ctx: BackgroundContext) -> None:
    ctx.set_state({"status": "checking", "city": "Oslo", "eta": "5 min"})
    async for _ in ctx.messages():
        pass


async def test_state_and_notes_wait_for_the_reply_to_end() -> None:
    llm = PausedReply()
    session: Session[Any] = Session(llm, background=[watcher])
    screen = Screen()
    reader, writer = os.pipe()
    with os.fdopen(reader, "r") as stdin:
        console = asyncio.ensure_future(
            run_console(session, Agent("Be brief."), rich=False, stdin=stdin, stdout=screen)
        )
        try:
            await screen.shows("[watcher] checking · city Oslo · eta 5 min\n")
            os.write(writer, b"hello\n")
            await screen.shows("agent: The first half, ")
            ctx = session.background.context("watcher")  # type: ignore[union-attr]
            ctx.set_state({"status": "looking"})
            ctx.set_state({"status": "found it", "city": "Oslo"})
            await ctx.send("a note for the agent", silent=True)
            llm.resume.set()
            await screen.shows("[watcher] found it")
            os.write(writer, b"/quit\n")
            await asyncio.wait_for(console, WAIT)
        finally:
            os.close(writer)
            console.cancel()
            await asyncio.gather(console, return_exceptions=True)
    lines = screen.getvalue().splitlines()
    assert lines[:5] == [
        "[watcher] checking · city Oslo · eta 5 min",
        "agent: The first half, and the second half.",
        "[watcher] looking",  # held while the reply streamed, every change in order
        "[watcher] found it · city Oslo",
        "  · watcher (context only): a note for the agent",
    ]
    assert not [line for line in lines if "listening" in line or "thinking" in line]
