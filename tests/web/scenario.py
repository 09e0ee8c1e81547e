"""A scripted conversation for the web tests: a voice model that
delegates to a Claude Code-like background, and controls to drive that background."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from backline import Agent, BackgroundContext, BackgroundDefinition, Session, background
from backline.testing import LLMRequest, ScriptedLLM, ScriptedResponse, text, tool_calls

STORY = (
    "Once upon a time a small robot lived in a lighthouse by the sea. "
    "Every night it polished the great lamp until it shone like the moon. "
    "One stormy evening a ship lost its way among the rocks below. "
    "The robot climbed to the top and swung the light toward the harbour. "
    "The sailors saw the beam and steered safely home before the dawn."
)

IDLE = {
    "status": "idle, waiting for a task",
    "task": None,
    "recent_activity": [],
    "files_changed": [],
    "last_task": None,
    "error": None,
}


def working(task: str, activity: list[str], files: list[str]) -> dict[str, Any]:
    """Claude Code's state shape, while it works."""
    return {
        **IDLE,
        "status": "working",
        "task": task,
        "recent_activity": activity,
        "files_changed": files,
    }


def voice_model(request: LLMRequest) -> ScriptedResponse:
    """The voice agent: relays background updates, delegates "fix ..." and tells stories."""
    last = request.last_message.content if request.last_message else ""
    if request.tool_choice == "none":  # a background reply
        return text("Update from Claude Code: " + last.rsplit("\n", 1)[-1])
    items = request.chat_ctx.items
    if items and items[-1].type == "function_call_output":
        return text("On it. I asked Claude Code to do that.")
    if last.lower().startswith(("fix ", "please fix ")):
        return tool_calls(
            ("backline_send", {"background_session_id": "claude_code", "content": last})
        )
    if "slowly" in last.lower():
        return text(STORY, chunk_delay=0.02)
    if "story" in last.lower():
        return text(STORY)
    return text(f"You said: {last}. What next?")


@dataclass
class Controls:
    """What the tests drive: each tab's background context, and what it was sent."""

    contexts: list[BackgroundContext] = field(default_factory=list)
    received: list[str] = field(default_factory=list)
    sessions: list[Session[Any]] = field(default_factory=list)
    closed: list[Session[Any]] = field(default_factory=list)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    def notify(self) -> None:
        self._changed.set()

    async def wait_for(self, predicate: Any, timeout: float = 10.0) -> None:
        """Wait (event driven) until ``predicate()`` holds."""
        async with asyncio.timeout(timeout):
            while not predicate():
                self._changed.clear()
                await self._changed.wait()

    async def context(self, index: int = -1) -> BackgroundContext:
        await self.wait_for(lambda: len(self.contexts) > (index if index >= 0 else 0))
        return self.contexts[index]


def claude_code_like(controls: Controls) -> BackgroundDefinition:
    @background("claude_code", description="Claude Code, editing the repository.")
    async def coder(ctx: BackgroundContext) -> None:
        ctx.set_state(IDLE)
        controls.contexts.append(ctx)
        controls.notify()
        async for message in ctx.messages():
            controls.received.append(message)
            controls.notify()

    return coder


def make_factory(controls: Controls, *, backgrounds: bool = True) -> Any:
    """A tab factory: a new session (scripted model, the background) for every tab."""

    def factory() -> tuple[Session[Any], Agent]:
        defs = [claude_code_like(controls)] if backgrounds else []
        session: Session[Any] = Session(ScriptedLLM(voice_model), background=defs)
        controls.sessions.append(session)

        def closed(_: Any) -> None:
            controls.closed.append(session)
            controls.notify()

        session.on("close", closed)
        session.on("conversation_item_added", lambda _: controls.notify())
        controls.notify()
        return session, Agent("You are a concise voice assistant.")

    return factory
