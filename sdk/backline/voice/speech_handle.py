"""SpeechHandle: one unit of agent output (a reply, possibly with tool steps, or a ``say``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator
from typing import Any, Literal, TypeAlias

from ..llm.chat_context import ChatItem, ChatMessage, new_id

SpeechPhase: TypeAlias = Literal["queued", "thinking", "speaking", "done"]

PRIORITY_LOW = 0
PRIORITY_NORMAL = 5
PRIORITY_HIGH = 10


class SpeechHandle:
    """A handle on one speech: await it to wait for its playout to end.

    ``interrupt()`` stops it unless it disallows interruptions (then it raises);
    ``interrupt(force=True)`` always lands. Interruption holds (taken by the
    runtime, e.g. while a tool awaits an inline ``AgentTask``) are counted: the
    first disables interruptions, the last restores what was there.
    """

    __slots__ = (
        "_allow_interruptions",
        "_blocked",
        "_done",
        "_done_callbacks",
        "_hold_count",
        "_hold_saved",
        "_interrupt_fut",
        "_on_change",
        "_phase",
        "_user_turn",
        "chat_items",
        "id",
        "priority",
        "source",
    )

    def __init__(
        self,
        *,
        allow_interruptions: bool = True,
        priority: int = PRIORITY_NORMAL,
        source: str = "generate_reply",
    ) -> None:
        self.id = new_id("speech_")
        self.priority = priority
        self.source = source
        self.chat_items: list[ChatItem] = []
        self._allow_interruptions = allow_interruptions
        self._interrupt_fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._done = False
        self._done_callbacks: list[Callable[[SpeechHandle], None]] | None = None  # at first
        self._hold_count = 0
        self._hold_saved = allow_interruptions
        self._phase: SpeechPhase = "queued"
        self._blocked = 0
        # Called with the handle (a bound method: no closure over the handle, so no
        # reference cycle and the handle is freed as soon as nobody holds it).
        self._on_change: Callable[[SpeechHandle], None] | None = None
        self._user_turn: ChatMessage | None = None  # the user message this reply answers

    def __repr__(self) -> str:
        return (
            f"SpeechHandle({self.id}, {self._phase}{', interrupted' if self.interrupted else ''})"
        )

    @property
    def allow_interruptions(self) -> bool:
        return self._allow_interruptions

    @allow_interruptions.setter
    def allow_interruptions(self, value: bool) -> None:
        if self.interrupted and not value:
            raise RuntimeError(
                f"{self.id} is already interrupted; it cannot disallow interruptions"
            )
        if self._hold_count:
            self._hold_saved = value
        else:
            self._allow_interruptions = value

    @property
    def interrupted(self) -> bool:
        return self._interrupt_fut.done()

    def done(self) -> bool:
        return self._done

    @property
    def phase(self) -> SpeechPhase:
        return self._phase

    def interrupt(self, *, force: bool = False) -> None:
        """Stop this speech. Raises ``RuntimeError`` if it disallows interruptions
        and ``force`` is false."""
        if self._done or self._interrupt_fut.done():
            return
        if not force and not self._allow_interruptions:
            raise RuntimeError(
                f"{self.id} does not allow interruptions; "
                "use interrupt(force=True) to stop it anyway"
            )
        self._interrupt_fut.set_result(None)
        self._changed()

    def add_done_callback(self, callback: Callable[[SpeechHandle], None]) -> None:
        if self._done:
            asyncio.get_running_loop().call_soon(callback, self)
        else:
            if self._done_callbacks is None:
                self._done_callbacks = []
            self._done_callbacks.append(callback)

    def remove_done_callback(self, callback: Callable[[SpeechHandle], None]) -> None:
        callbacks = self._done_callbacks
        if callbacks and callback in callbacks:
            callbacks.remove(callback)

    async def wait_for_playout(self) -> None:
        """Wait until this speech has finished (played out, interrupted or failed)."""
        if self._done:
            return
        # Woken from _mark_done itself (a done callback), never by cancelling anything
        # of the handle: like a shield over the done future, one loop step sooner.
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake(_: SpeechHandle) -> None:
            if not waiter.done():
                waiter.set_result(None)

        if self._done_callbacks is None:
            self._done_callbacks = []
        self._done_callbacks.append(wake)
        try:
            await waiter
        finally:
            self.remove_done_callback(wake)

    def __await__(self) -> Generator[Any, None, SpeechHandle]:
        yield from self.wait_for_playout().__await__()
        return self

    # -- runtime internals -----------------------------------------------------
    def _hold_interruptions(self) -> None:
        if self._hold_count == 0:
            self._hold_saved = self._allow_interruptions
            self._allow_interruptions = False
        self._hold_count += 1

    def _release_interruptions(self) -> None:
        if self._hold_count == 0:
            return
        self._hold_count -= 1
        if self._hold_count == 0 and not self.interrupted:
            self._allow_interruptions = self._hold_saved

    def _set_phase(self, phase: SpeechPhase) -> None:
        old = self._phase
        if old != phase and old != "done":
            self._phase = phase
            if old == "queued" and phase == "thinking":
                return  # nothing derived changes: a queued speech already reads as thinking
            if self._on_change is not None:
                self._on_change(self)

    def _block(self) -> None:
        self._blocked += 1
        self._changed()

    def _unblock(self) -> None:
        self._blocked = max(0, self._blocked - 1)
        self._changed()

    @property
    def _is_blocked(self) -> bool:
        return self._blocked > 0

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change(self)

    def _mark_done(self, *, notify: bool = True) -> None:
        """Done: wake its waiters; ``notify=False``: without telling the activity (its
        scheduling loop, which refreshes the session right after)."""
        if self._done:
            return
        self._phase = "done"
        self._done = True
        callbacks, self._done_callbacks = self._done_callbacks, None
        for cb in callbacks or ():
            try:
                cb(self)
            except Exception:
                import logging

                logging.getLogger("backline").exception("a speech done-callback raised")
        if notify:
            self._changed()
