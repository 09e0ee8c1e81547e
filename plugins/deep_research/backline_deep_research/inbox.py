"""The background's inbox: one reader of ``ctx.messages()`` feeding a queue, so each
stage waits for the next message with its own bound (clarify answers, steering, the
next question), and what the user says is read by exactly one stage."""

from __future__ import annotations

import asyncio
import contextlib
import re
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from backline import BackgroundContext

CLOSED: Final = None
"""What ``get`` returns once the background is closing: no message will come."""

_JUST_START = re.compile(
    r"\b(just (start|go|begin|research)|skip (the )?(clarifying )?questions|"
    r"no (more )?(clarifying )?questions|don'?t ask|stop asking)\b",
    re.IGNORECASE,
)
_STOP_WORDS = frozenset({"stop", "halt", "enough", "that's enough", "stop now", "finish now"})


def wants_just_start(text: str) -> bool:
    """The user asked to skip clarifying questions ("just start", "no questions" ...)."""
    return bool(_JUST_START.search(text))


def is_stop(text: str) -> bool:
    """An explicit stop: "stop", "stop now", "stop the research" and the like."""
    words = re.sub(r"[^\w' ]+", " ", text.lower()).split()
    phrase = " ".join(words)
    if phrase in _STOP_WORDS:
        return True
    return bool(words) and words[0] == "stop" and len(words) <= 5


class Inbox:
    """Messages from the voice agent, in order. ``pump()`` runs for the background's
    life (its owner cancels it); ``get()`` waits for the next one."""

    def __init__(self, ctx: BackgroundContext) -> None:
        self._ctx = ctx
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._closed = False

    async def pump(self) -> None:
        try:
            async with contextlib.aclosing(self._ctx.messages()) as messages:
                async for message in messages:
                    self._queue.put_nowait(message)
        finally:
            self._closed = True
            self._queue.put_nowait(CLOSED)

    async def get(self, timeout: float | None = None) -> str | None:
        """The next message; ``CLOSED`` when closing. Raises ``TimeoutError`` after
        ``timeout`` seconds without one."""
        if self._closed and self._queue.empty():
            return CLOSED
        if timeout is None:
            item = await self._queue.get()
        else:
            async with asyncio.timeout(timeout):
                item = await self._queue.get()
        if item is CLOSED:
            self._queue.put_nowait(CLOSED)  # every later get() sees it too
        return item
