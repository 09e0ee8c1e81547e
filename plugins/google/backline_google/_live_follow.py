"""A Gemini Live session that follows its agent between requests (``ContextFollower``).

``agent_changed`` (the runtime attached the model to an agent: at the start, after a
handoff) remembers the agent's instructions and tools as the setup of the session the
user's voice opens, and brings the session in line ahead: with the voice
(``use_audio()``), the session is opened (or resumed) with that setup and holds the
agent's context before the user speaks, so the server's own answer to the first
utterance is made for this agent and is the reply; an open session with another
setup gets a context update (or, with the voice, a new session seeded with the
context when what it holds is not the agent's). ``context_changed`` (a silent update
reached the context) sends what the session lacks at once, as client content with
``turn_complete=False`` (a result of a call the session made: ``SILENT``); the session
then holds it, so the next request does not send it again.

Both return at once; the work runs in the model's task scope under its request lock,
best effort (a failure is logged: the next request syncs in any case), and never asks
for a reply. Nothing is sent while a turn runs, an answer to the voice waits for its
``chat()``, or the user is speaking: the next request brings it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from backline.llm import ChatContext, FunctionTool, LLMError
from backline.tasks import TaskScope

from ._live_audio import LiveVoice
from ._live_items import (
    Converted,
    Op,
    convert_context,
    model_unit,
    operations,
    plan,
    tools_signature,
    unheld,
)

log = logging.getLogger("backline_google.live")


class LiveFollower(LiveVoice):
    """The ``ContextFollower`` side of ``GeminiLiveLLM`` (which opens, closes and sends:
    ``_open``, ``_close_session``, ``_update_context``, ``_send``)."""

    _lock: asyncio.Lock
    _scope: TaskScope
    _session: Any
    _system: str | None
    _tools: list[FunctionTool]
    _tools_key: str
    _session_audio: bool
    _settle_timeout: float
    _closed: bool
    _missing_key: str | None

    def __init__(self) -> None:
        super().__init__()
        self._agent_setup: tuple[str, list[FunctionTool]] | None = None  # the agent's
        self._follower: asyncio.Task[None] | None = None  # one at a time
        self._follow_ctx: Converted | None = None  # the latest context to follow
        self._follow_wait = False  # for the request lock (the agent changed)

    async def _open(self, system: str, tools: Sequence[FunctionTool]) -> None:  # pragma: no cover
        raise NotImplementedError

    async def _close_session(self, error: LLMError | None) -> None:  # pragma: no cover
        raise NotImplementedError

    async def _update_context(  # pragma: no cover
        self, system: str, tools: list[FunctionTool]
    ) -> None:
        raise NotImplementedError

    async def _send(self, op: Op) -> None:  # pragma: no cover
        raise NotImplementedError

    # -- ContextFollower ------------------------------------------------------------
    def agent_changed(self, chat_ctx: ChatContext, tools: Sequence[FunctionTool]) -> None:
        """The model speaks for this agent now: its setup is the voice's, and the
        session is brought in line in the background (see the module doc)."""
        try:
            converted = convert_context(chat_ctx)
        except Exception as e:
            log.warning("Gemini Live: the agent's context could not be read (%s)", e)
            return
        self._agent_setup = (converted.system, list(tools))
        if self._session is None and not self._audio:
            return  # text: the first request opens the session with this setup
        self._follow(converted, wait=True)

    def context_changed(self, chat_ctx: ChatContext) -> None:
        """Items reached the context with no reply (a silent update): sent now when the
        session is there (or the voice needs it) and nothing runs (see the module doc)."""
        if self._session is None and not self._audio:
            return  # the first request sends everything
        try:
            converted = convert_context(chat_ctx)
        except Exception as e:
            log.warning("Gemini Live: the context could not be read (%s)", e)
            return
        self._follow(converted, wait=False)

    def _follow(self, converted: Converted, *, wait: bool) -> None:
        """Follow ``converted`` in the background: one task, which takes the latest
        context given (an agent's change and the updates after it coalesce)."""
        if self._closed or self._missing_key is not None or self._scope.closed:
            return
        self._follow_ctx = converted
        self._follow_wait = self._follow_wait or wait
        if self._follower is None or self._follower.done():
            self._follower = self._scope.create_task(
                self._sync_ahead(), name="GeminiLiveLLM follow"
            )

    async def _sync_ahead(self) -> None:
        """Under the request lock (after an agent's change: waited for, up to
        ``settle_timeout``; else only if free: a request that runs syncs): the setup,
        then what the session lacks, with no reply asked."""
        while self._follow_ctx is not None:
            converted, wait = self._follow_ctx, self._follow_wait
            self._follow_ctx, self._follow_wait = None, False
            if self._lock.locked() and not wait:
                continue  # a request runs: it syncs
            try:
                async with asyncio.timeout(self._settle_timeout):
                    await self._lock.acquire()
            except TimeoutError:
                log.info("Gemini Live: a request runs; it brings the session in line")
                continue
            try:
                await self._bring_in_line(converted)
            except LLMError as e:
                log.warning("Gemini Live: the session waits for the next request (%s)", e)
            except Exception:
                log.exception("Gemini Live: the session could not follow its agent")
            finally:
                self._lock.release()

    def _running(self) -> bool:
        """A turn runs, an answer to the voice waits for its chat(), or the user speaks:
        client content now would cut in."""
        return (
            any(not t.done for t in self._turns)
            or self._pending_answer() is not None
            or self._hearing is not None
        )

    async def _bring_in_line(self, converted: Converted) -> None:
        if self._closed:
            return
        await self._settle()
        if self._running():
            return
        system, tools = self._agent_setup or (converted.system, self._tools)
        if self._going_away and self._session is not None and self._handle is not None:
            await self._close_session(None)  # the server goes away: resume elsewhere
        await self._for_audio()
        if not self._audio and (self._session is None or plan(self._held, converted.units) is None):
            return  # the next request opens a session (seeded with the context)
        if self._session is None:
            await self._open(system, tools)
        elif system != self._system or tools_signature(tools) != self._tools_key:
            await self._update_context(system, tools)
        new = plan(self._held, converted.units)
        if new is None:  # with the voice: its session must hold the agent's context
            log.info("the context differs from the Gemini Live session's: a new session")
            self._handle = None
            await self._close_session(None)
            await self._open(system, tools)
            new = list(converted.units)
        if self._running():
            return  # the user started speaking meanwhile: the next request sends it
        ops = operations(new, self._session_calls, "", seed=not self._held, reply=False)
        for op in ops:
            await self._send(op)

    # -- shared with the requests and the voice -------------------------------------
    async def _settle(self) -> None:
        """Wait (bounded) for the turns the runtime stopped reading to end: what they add
        to the session must be known before the sync. One that does not end in time is
        left behind with its session (the context is taken as diverged)."""
        waiting = [t for t in self._turns if not t.done and (t.abandoned or not t.audio)]
        if not waiting:
            return
        try:
            async with asyncio.timeout(self._settle_timeout):
                for turn in waiting:
                    while not turn.done:
                        await turn.events.get()
        except TimeoutError:
            log.warning(
                "a Gemini Live turn did not end in %gs: a new session", self._settle_timeout
            )
            self._held = [("unsettled",)]
            for turn in waiting:
                turn.held_at = None

    async def _sync_turns(self, converted: Converted) -> None:
        """Before a request: the turns the runtime stopped reading end first (``_settle``)
        unless the context brings an urgent update the session has not got. Then they
        are not waited for: the update is sent at once, and the server cuts them
        (client content interrupts a generation: ``interrupted``, then
        ``turnComplete``). What the session then holds is known now, as for any cut
        reply: the turns as far as they came, before the update. When the context
        holds exactly that (each turn what was heard of it), the session is kept: each
        turn takes its place in what the session holds, and the rest of it (what was
        in flight) goes to it, not to the update's answer. Otherwise the session would
        hold what was not heard, and cannot delete it: it is closed (which ends the
        generation) and the request seeds a new one with the context (the divergence
        rule)."""
        if not any(unit.urgent for unit in unheld(self._held, converted.units)):
            await self._settle()
            return
        cut = [t for t in self._turns if not t.done]
        if not cut:
            return
        held = list(self._held)
        shown = [t for t in cut if t.text.strip() or t.calls]
        held.extend(model_unit(t.text, t.calls).signature for t in shown)
        if self._session is not None and plan(held, converted.units) is not None:
            log.info("an urgent update: the running turn is cut on the same session")
            for turn in cut:
                turn.claimed, turn.abandoned = False, True
            for turn in shown:
                turn.held_at = len(self._held)
                self._held.append(model_unit(turn.text, turn.calls).signature)
            return
        log.info("an urgent update: the running turn held more than was heard; a new session")
        self._handle = None
        await self._close_session(None)

    async def _for_audio(self) -> None:
        """A session set up for text since ``use_audio()`` is replaced (fresh: the
        modality is the setup's)."""
        if self._session is not None and self._session_audio != self._audio:
            self._handle = None
            await self._close_session(None)

    async def _voice_session(self) -> None:
        """The session the user's voice goes to: the open one, else one opened (resumed
        with the handle, if any) with the agent's setup (else the last request's)."""
        await self._for_audio()
        if self._session is None:
            system, tools = self._agent_setup or (self._system or "", self._tools)
            await self._open(system, tools)
