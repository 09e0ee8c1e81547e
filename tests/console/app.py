"""A console session for the pseudo-terminal tests: a scripted voice model and a
background that reports state and, a moment after each task, sends an update."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from backline import Agent, BackgroundContext, Session, background
from backline.io.console import run_console
from backline.testing import LLMRequest, ScriptedLLM, ScriptedResponse, text, tool_calls

WAITING = "waiting for an agent to connect (`backline mcp config --background builder`)"
"""The builder's first state with ``--waiting``: an instruction the status line keeps whole."""


@background("builder", description="Builds things when asked.")
async def builder(ctx: BackgroundContext) -> None:
    ctx.set_state({"status": WAITING if "--waiting" in sys.argv else "idle"})
    async for message in ctx.messages():
        async with ctx.turn():
            ctx.set_state({"status": "building", "recent_activity": [f"started {message}"]})
            await asyncio.sleep(0.5)
            ctx.set_state({"status": "done", "files_changed": ["out.txt"]})
        await ctx.send(f"the build of {message} finished")


def voice(request: LLMRequest) -> ScriptedResponse:
    last = request.last_message.content if request.last_message else ""
    if request.tool_choice == "none":
        return text("Update: " + last.rsplit("\n", 1)[-1])
    items = request.chat_ctx.items
    if items and items[-1].type == "function_call_output":
        return text("Sent to the builder.")
    if last.startswith("build "):
        return tool_calls(
            ("backline_send", {"background_session_id": "builder", "content": last[6:]})
        )
    return text(f"You said: {last}")


class WarmedLLM(ScriptedLLM):
    """Says when the console asks it to load ahead (``warm_up``), and whether the first
    prompt was already on the screen then."""

    def warm_up(self) -> None:
        print("warm-up asked", flush=True)


async def main() -> None:
    rich = "--plain" not in sys.argv[1:]
    session: Session[Any] = Session(WarmedLLM(voice), background=[builder])
    await run_console(session, Agent("Be brief."), rich=rich, banner="console test ready")


if __name__ == "__main__":
    asyncio.run(main())
