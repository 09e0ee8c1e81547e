"""The voice channel of one background session: what the MCP tools do, without MCP.

``VoiceChannel.of(ctx)`` is the one channel of a background context. Its five
operations are the five MCP tools (``backline.mcp`` serves them over HTTP and
stdio); each answers with the text the agent reads, or raises ``ChannelError``
whose text is the tool error. Every answer also carries what the user said
meanwhile, so an agent that cannot receive pushes still hears a correction at
its next call. Messages are taken from the inbox only when an answer is ready:
a call cancelled while waiting (the agent went away) takes nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from ...background.context import Answer, BackgroundContext
from ...limits import DEFAULT_LIMITS, Limits
from ...llm.tool_output import snapshot_tool_output
from ...tasks import TaskScope

logger = logging.getLogger("backline.mcp")

Progress = Callable[[float, float, str], Awaitable[None]]
"""``progress(waited_seconds, total_seconds, message)``: reported while a call waits."""

KEEPALIVE_SECONDS = 15.0
"""How often a waiting call reports progress (agents' MCP clients cut silent calls)."""

MEANWHILE = "The user said meanwhile:"
CLOSED = (
    "The voice session has ended, so nothing reaches the user any more (nothing was "
    "delivered). Finish or stop here."
)


class ChannelError(Exception):
    """A voice-channel call that cannot be done; the text says why and what to do."""


TOKEN_REFUSED = (
    "An agent tried to connect over MCP without the right token and was refused: "
    "`backline mcp config -b NAME` prints a working configuration."
)


class TokenRefused(ChannelError):
    """An agent tried to reach the voice channel without the right token (HTTP 401).

    The endpoint tells each conversation it serves once, as a recoverable
    ``ErrorEvent`` (``source="mcp"``) that front ends show like any error.
    """

    def __init__(self, message: str = TOKEN_REFUSED) -> None:
        super().__init__(message)


def limits_of(ctx: BackgroundContext) -> Limits:
    """The limits of the context's session (``Session(limits=...)``, else the defaults)."""
    limits = getattr(ctx.session, "limits", None)
    return limits if isinstance(limits, Limits) else DEFAULT_LIMITS


class VoiceChannel:
    """The voice channel of one background session (one per context: ``of(ctx)``).

    The owner of the background may ``hold()`` it (messages then stay in the inbox:
    nothing is handed to an agent that is being stopped) and set ``on_status`` to
    receive ``set_status`` values instead of ``ctx.set_state`` (to merge them into
    its own state). ``listening`` says whether an agent waits for the user now, and
    ``on_listening(listening)`` is called whenever that changes. ``spoken`` counts what
    agents said to the user through it (``send_to_user``, ``ask_user``).
    """

    _channels: ClassVar[weakref.WeakKeyDictionary[BackgroundContext, VoiceChannel]] = (
        weakref.WeakKeyDictionary()
    )

    def __init__(self, ctx: BackgroundContext) -> None:
        self.ctx = ctx
        self.on_status: Callable[[dict[str, Any]], None] | None = None
        self.on_listening: Callable[[bool], None] | None = None
        self.spoken = 0
        self._listeners = 0
        self._held = False
        self._hold_changed = asyncio.Event()  # replaced by a new one at each change

    @classmethod
    def of(cls, ctx: BackgroundContext) -> VoiceChannel:
        """The channel of ``ctx`` (made on first use)."""
        channel = cls._channels.get(ctx)
        if channel is None:
            channel = cls._channels[ctx] = cls(ctx)
        return channel

    def __repr__(self) -> str:
        return f"VoiceChannel({self.ctx.id!r})"

    # -- the owner's controls -------------------------------------------------------
    @property
    def listening(self) -> bool:
        """An agent is inside ``wait_for_user`` or ``ask_user`` (and the channel is not held)."""
        return self._listeners > 0 and not self._held

    @property
    def held(self) -> bool:
        return self._held

    def hold(self) -> None:
        """Hand no message to agents until ``release()`` (they stay in the inbox)."""
        self._update(held=True)

    def release(self) -> None:
        self._update(held=False)

    def _update(self, *, held: bool | None = None, listeners: int = 0) -> None:
        before = self.listening
        if held is not None:
            self._held = held
            changed, self._hold_changed = self._hold_changed, asyncio.Event()
            changed.set()  # waiting calls re-check what they may take
        self._listeners += listeners
        if self.listening != before and self.on_listening is not None:
            try:
                self.on_listening(self.listening)
            except Exception:
                logger.exception("%r: on_listening raised", self)

    # -- the tools --------------------------------------------------------------------
    async def send_to_user(self, message: Any) -> str:
        text = self._text(message, "message", "send_to_user")
        await self._send(text, silent=False)
        return "Delivered: the voice assistant will tell the user." + self._meanwhile()

    async def add_context(self, note: Any) -> str:
        text = self._text(note, "note", "add_context")
        await self._send(text, silent=True)
        return "Noted: the voice assistant knows it (nothing is said aloud)." + self._meanwhile()

    def set_status(self, status: Any) -> str:
        self._check_open()
        value = _status_object(status)
        size = len(json.dumps(value, ensure_ascii=False))
        limit = limits_of(self.ctx).max_mcp_status_chars
        if size > limit:
            raise ChannelError(
                f"The status is {size} characters of JSON; the limit is {limit} "
                "(Limits.max_mcp_status_chars). Report a summary: the current step, counts, "
                "the last few items. The previous status stays."
            )
        try:
            if self.on_status is not None:
                self.on_status(value)
            else:
                self.ctx.set_state(value)
        except RuntimeError:
            raise ChannelError(CLOSED) from None
        return "Status updated." + self._meanwhile()

    async def wait_for_user(
        self, timeout_seconds: Any = 60.0, *, progress: Progress | None = None
    ) -> str:
        timeout, cut = self._timeout(timeout_seconds)
        batch = await self._next_batch(timeout, progress)
        if batch:
            return "The user says:\n" + "\n".join(batch)
        longest = " (the longest wait)" if cut else ""
        return (
            f"Nothing from the user yet (waited {_seconds(timeout)}{longest}). Keep "
            "working, and call wait_for_user again when you need their input."
        )

    async def ask_user(
        self, question: Any, timeout_seconds: Any = 60.0, *, progress: Progress | None = None
    ) -> str:
        text = self._text(question, "question", "ask_user")
        timeout, _ = self._timeout(timeout_seconds)
        earlier = self._take()  # what the user said before the question is not its answer
        answer = await self._ask(text, timeout, progress)
        before = ""
        if earlier:
            before = f"\n\n(Before the question, the user said: {' / '.join(earlier)})"
        if not answer.timed_out:
            batch = [answer.text, *self._take()]  # and what followed it at once
            return "The user answered:\n" + "\n".join(batch) + before
        return (
            f"No answer yet (waited {_seconds(timeout)}). The question was asked aloud; "
            "their answer reaches you through wait_for_user or on your next tool call. "
            "Continue with what you can do meanwhile." + before
        )

    # -- helpers ------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self.ctx.closed:
            raise ChannelError(CLOSED)

    def _text(self, value: Any, name: str, tool: str) -> str:
        self._check_open()
        if not isinstance(value, str):
            raise ChannelError(f"{name} must be a string, got {type(value).__name__}.")
        text = value.strip()
        if not text:
            raise ChannelError(f"Nothing to send: {name} is empty.")
        limit = limits_of(self.ctx).max_mcp_message_chars
        if len(text) > limit:
            hint = (
                "put the details in add_context or set_status"
                if tool != "add_context"
                else "send a summary, and the rest in several notes"
            )
            raise ChannelError(
                f"The {name} is {len(text)} characters; the limit is {limit} "
                f"(Limits.max_mcp_message_chars). Nothing was delivered: {hint}."
            )
        return text

    def _timeout(self, value: Any) -> tuple[float, bool]:
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value < 0
        ):
            raise ChannelError(
                f"timeout_seconds must be a number of seconds, 0 or more (like 60); got {value!r}."
            )
        longest = limits_of(self.ctx).max_mcp_wait
        return (float(value), False) if value <= longest else (longest, True)

    async def _send(self, text: str, *, silent: bool) -> None:
        try:
            await self.ctx.send(text, silent=silent)
        except RuntimeError:
            raise ChannelError(CLOSED) from None
        if not silent:
            self.spoken += 1

    def _take(self) -> list[str]:
        if self._held or self.ctx.closed:
            return []
        return self.ctx.pending()

    def _meanwhile(self) -> str:
        taken = self._take()
        if not taken:
            return ""
        return f"\n\n{MEANWHILE} " + "\n".join(taken)

    async def _ask(self, text: str, timeout: float, progress: Progress | None) -> Answer:
        """``ctx.ask`` (the one way a background asks), reporting progress meanwhile."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        scope = TaskScope("voice channel question", log_failures=False)  # read here
        asking = scope.create_task(self.ctx.ask(text, timeout=timeout))
        every = None if progress is None else KEEPALIVE_SECONDS
        self._update(listeners=+1)
        try:
            while not (await asyncio.wait((asking,), timeout=every))[0]:
                assert progress is not None
                await _report(progress, loop.time() - started, timeout)
            answer = asking.result()
        except RuntimeError:
            raise ChannelError(CLOSED) from None
        except ValueError as e:  # longer than the session's Limits.max_send_chars
            raise ChannelError(f"{e}. Nothing was asked.") from None
        finally:
            self._update(listeners=-1)
            await scope.aclose()  # a cancelled call withdraws its question
        self.spoken += 1
        return answer

    async def _next_batch(self, timeout: float, progress: Progress | None) -> list[str]:
        """The next messages for this agent, or ``[]`` after ``timeout`` seconds."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        deadline = started + timeout
        next_report = started + KEEPALIVE_SECONDS
        self._update(listeners=+1)
        try:
            while True:
                self._check_open()
                batch = self._take()
                if batch:
                    return batch
                now = loop.time()
                if now >= deadline:
                    return []
                if progress is not None and now >= next_report:
                    next_report = now + KEEPALIVE_SECONDS
                    await _report(progress, now - started, timeout)
                    continue
                wake = min(deadline, next_report) if progress is not None else deadline
                await self._wait(wake - now)
        finally:
            self._update(listeners=-1)

    async def _wait(self, seconds: float) -> None:
        """Until a message may be taken, the hold changes, the session closes, or ``seconds``."""
        scope = TaskScope("voice channel wait")  # each of its waits ends at once when cancelled
        waiting: set[asyncio.Future[bool]] = {scope.create_task(self._hold_changed.wait())}
        if not self._held:
            waiting.add(scope.create_task(self.ctx.wait_for_message(seconds)))
        try:
            await asyncio.wait(waiting, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await scope.aclose()


async def _report(progress: Progress, waited: float, total: float) -> None:
    try:
        await progress(waited, total, "waiting for the user")
    except asyncio.CancelledError:
        raise
    except Exception:  # the client went away: the call ends when the transport notices
        logger.debug("reporting progress failed", exc_info=True)


def _status_object(status: Any) -> dict[str, Any]:
    value = status
    if isinstance(status, str):
        try:
            value = json.loads(status)
        except ValueError:
            value = status
    if not isinstance(value, dict):
        raise ChannelError(
            "status must be a JSON object, like "
            '{"step": "running the tests", "progress": "3 of 10"}; '
            f"got {_kind(value)}. The previous status stays."
        )
    try:
        snapshot: dict[str, Any] = snapshot_tool_output(value, what="status")
    except ValueError as e:
        raise ChannelError(f"{e}. The previous status stays.") from None
    return snapshot


def _kind(value: Any) -> str:
    names = {str: "a string", list: "a list", bool: "a boolean", type(None): "null"}
    for kind, name in names.items():
        if isinstance(value, kind):
            return name
    if isinstance(value, int | float):
        return "a number"
    return type(value).__name__


def _seconds(value: float) -> str:
    return f"{value:g} s"
