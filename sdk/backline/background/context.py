"""BackgroundContext: what a background session's entrypoint works with."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from ._kinds import UpdateKind


class _Unset:
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET: Final[Any] = _Unset()
"""The state of a background that has not reported any (distinct from ``None``)."""


@dataclass(frozen=True, slots=True)
class Answer:
    """The user's answer to ``ctx.ask``.

    ``text`` is what the voice agent sent back (the user's words, maybe reworded; ""
    after a timeout). ``choice`` is the one of the given choices the text names, as
    given (case-insensitive, word by word: "yes please" names "yes", "allow once"
    names "once", "once, not always" names "once"), or None: no choices given, none
    named, or two named. ``timed_out``: nothing came back within the timeout.
    """

    text: str
    choice: str | None = None
    timed_out: bool = False


class _Definition(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def value(self) -> str | None: ...


class _Runtime(Protocol):
    """A running background (``BackgroundRuntime``), as its context uses it."""

    interrupt_callback: Callable[[], Awaitable[None]] | None
    stop_callback: Callable[[], Awaitable[None]] | None

    @property
    def definition(self) -> _Definition: ...

    @property
    def session(self) -> Any: ...

    @property
    def closed(self) -> bool: ...

    @property
    def reported_state(self) -> Any: ...

    @property
    def waiting(self) -> int: ...

    def iterate(self, *, batch: bool) -> AsyncGenerator[Any, None]: ...

    def take_pending(self) -> list[str]: ...

    async def wait_for_message(self, timeout: float | None) -> bool: ...

    async def send(
        self, text: str, *, silent: bool, kind: Any = None, interrupt: bool = False
    ) -> None: ...

    def set_state(self, value: Any) -> None: ...

    async def ask(self, question: str, *, choices: Any, timeout: float) -> Answer: ...

    def turn(self) -> contextlib.AbstractAsyncContextManager[None]: ...


class BackgroundContext:
    """The three channels of a background session, plus its inbox.

    - spoken: ``await send(text)`` — the voice agent relays it (maybe reworded)
      when the conversation is idle; sends are coalesced into one reply;
    - context-only: ``await send(text, silent=True)`` — the voice agent knows it,
      nothing is said;
    - state: ``set_state(value)`` — what the voice agent reads when the user asks
      what is going on (through the generated ``backline_state`` tool);
    - a question: ``await ask(question, choices=...)`` — the voice agent puts it to
      the user and sends the answer back (an ``Answer``).

    ``messages()`` yields what the voice agent sent this background, in order.
    Wrap each unit of work in ``async with ctx.turn():`` and register
    ``ctx.on_interrupt(callback)``: a message that arrives mid-turn interrupts it
    (once per burst, not within ``interrupt_grace`` seconds of the turn start).
    """

    __slots__ = ("__weakref__", "_runtime")

    def __init__(self, runtime: _Runtime) -> None:
        self._runtime = runtime

    def __repr__(self) -> str:
        return f"BackgroundContext({self.id!r})"

    @property
    def id(self) -> str:
        return self._runtime.definition.id

    @property
    def description(self) -> str:
        return self._runtime.definition.description

    @property
    def value(self) -> str | None:
        """The value this instance was configured with (``--background ID:NAME=VALUE``,
        ``definition.instance(name, value)``), or None."""
        return self._runtime.definition.value

    @property
    def session(self) -> Any:
        """The ``backline.Session`` this background runs in."""
        return self._runtime.session

    @property
    def closed(self) -> bool:
        return self._runtime.closed

    @property
    def state(self) -> Any:
        """The last reported state, or ``UNSET`` (without the ``asking`` key that
        front ends and the voice agent see while a question waits)."""
        return self._runtime.reported_state

    def messages(self) -> AsyncGenerator[str, None]:
        """Messages from the voice agent, FIFO, one at a time. Single consumer:
        a second concurrent reader raises ``RuntimeError``. Ends only at close."""
        return self._runtime.iterate(batch=False)

    def batches(self) -> AsyncGenerator[list[str], None]:
        """Like ``messages()``, but yields everything waiting at once (oldest first),
        so a correction split into several sends can run as one turn."""
        return self._runtime.iterate(batch=True)

    @property
    def waiting(self) -> int:
        """How many messages wait, not yet read (``pending()`` takes them)."""
        return self._runtime.waiting

    def pending(self) -> list[str]:
        """Take the messages waiting right now (possibly none), oldest first."""
        return self._runtime.take_pending()

    async def wait_for_message(self, timeout: float | None = None) -> bool:
        """Wait until a message waits (at once if one does), without taking it.

        Returns True when one waits; False after ``timeout`` seconds or when the
        session closes. For code that reads the inbox with ``pending()`` from
        outside the entrypoint (the MCP voice channel's ``wait_for_user`` does).
        """
        return await self._runtime.wait_for_message(timeout)

    async def send(
        self,
        text: str,
        *,
        silent: bool = False,
        kind: UpdateKind | None = None,
        interrupt: bool = False,
    ) -> None:
        """Tell the voice agent something. Spoken (relayed) unless ``silent``.

        ``kind`` says what a spoken update is: ``"question"``, ``"failed"``,
        ``"finished"`` or ``"progress"``. Updates waiting to be voiced go one at a
        time, in that order (a question first), across the session's backgrounds.
        Without it, a text ending with ``?`` is a question and anything else progress.
        ``interrupt=True``: urgent: the agent stops what it is saying (as when the
        user talks over it: what was heard is kept) and voices this update first.
        Speech that disallows interruptions is left to finish.
        """
        if interrupt and silent:
            raise ValueError("a silent update interrupts nothing: use silent or interrupt")
        await self._runtime.send(text, silent=silent, kind=kind, interrupt=interrupt)

    def set_state(self, value: Any) -> None:
        """Report live state (a JSON-compatible value; stored as a deep copy)."""
        self._runtime.set_state(value)

    async def ask(
        self, question: str, *, choices: Sequence[str] | None = None, timeout: float = 60.0
    ) -> Answer:
        """Have the voice agent put ``question`` to the user; return the user's answer.

        The question is spoken like ``send(question)``, with a note telling the voice
        agent to ask it and send the answer back. The next message the voice agent
        sends this background is the answer (not a message for ``messages()``, and it
        interrupts nothing); what was sent before the question stays in the inbox.
        With ``choices``, the answer is matched to one of them (``Answer.choice``).
        ``timeout``: how long to wait for the answer once the question is asked
        (``Answer.timed_out``). While it waits, the state shown to the voice agent and
        front ends has ``"asking": question``. Questions from one background are asked
        one at a time, in the order ``ask`` was called. Raises ``RuntimeError`` when
        the session is closed, or closes while it waits; cancelling it withdraws the
        question.
        """
        return await self._runtime.ask(question, choices=choices, timeout=timeout)

    def turn(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Mark this background busy for one unit of work (holds the user-away timer)."""
        return self._runtime.turn()

    def on_interrupt(self, callback: Callable[[], Awaitable[None]] | None) -> None:
        """Register how to stop the current work when a new message interrupts it."""
        self._runtime.interrupt_callback = callback

    def on_stop(self, callback: Callable[[], Awaitable[None]] | None) -> None:
        """Register how to stop the current work when the user asks to stop it (the
        voice agent's ``backline_stop``), when that differs from an interrupt by a new
        message (a research round finishes with what it verified, while a message is
        a steering note). Without it, ``backline_stop`` calls the ``on_interrupt``
        callback."""
        self._runtime.stop_callback = callback
