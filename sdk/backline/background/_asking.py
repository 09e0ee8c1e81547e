"""Asking the user from a background (``ctx.ask``): one question at a time, in order.

A question is a spoken message with a note for the voice agent (put it to the user,
send the answer back). Once it is in the voice agent's context, the next message the
voice agent sends this background is its answer: it goes to the question, not to the
inbox, and it interrupts nothing. What the user said before the question stays in the
inbox (it is not the answer). While a question waits, the background's state carries
it under ``ASKING``. The MCP voice channel's ``ask_user`` asks through here too.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Sequence
from typing import Any, Final, Protocol

from .context import UNSET, Answer

ASKING: Final = "asking"
"""The state key that holds the question a background waits on (docs/background.md)."""
NEGATIONS = frozenset({"not", "never", "dont", "don't", "nor"})
"""A choice right after one of these words is not chosen ("once, not always")."""
_WORD = re.compile(r"\w+(?:'\w+)?")


class _Definition(Protocol):
    @property
    def id(self) -> str: ...


class _Host(Protocol):
    """A running background (``BackgroundRuntime``), as its questions use it."""

    @property
    def definition(self) -> _Definition: ...

    @property
    def closed(self) -> bool: ...

    @property
    def session(self) -> Any: ...

    async def send(self, text: str, *, silent: bool, note: str | None = None) -> None: ...

    def publish_state(self) -> None: ...

    def put_back(self, content: str) -> None: ...


def words(text: str) -> list[str]:
    """The words of ``text``, case-folded (apostrophes inside a word kept)."""
    return _WORD.findall(text.casefold().replace("\u2019", "'"))


def match_choice(text: str, choices: Sequence[str]) -> str | None:
    """The one choice ``text`` names, as given, or None.

    Case-insensitive, word by word: a choice matches where its words appear together
    in the answer ("yes please" names "yes", "allow once" names "once"), except right
    after a negation ("once, not always" names "once"). A choice that matches inside
    a longer matching choice gives way to it. Two different choices named, or none:
    None.
    """
    said = words(text)
    found: list[tuple[int, int, str]] = []  # (start, end, choice) of each match
    for choice in choices:
        wanted = words(choice)
        if not wanted:
            continue
        size = len(wanted)
        for start in range(len(said) - size + 1):
            if said[start : start + size] != wanted:
                continue
            if start > 0 and said[start - 1] in NEGATIONS:
                continue
            found.append((start, start + size, choice))
    kept = {
        choice
        for start, end, choice in found
        if not any(s <= start and end <= e and (e - s) > (end - start) for s, e, _ in found)
    }
    return kept.pop() if len(kept) == 1 else None


def check_question(question: Any, limit: int) -> str:
    if not isinstance(question, str):
        raise TypeError(f"a question must be a string, got {type(question).__name__}")
    text = question.strip()
    if not text:
        raise ValueError("a question must not be empty")
    if len(text) > limit:
        raise ValueError(
            f"a question is {len(text)} characters; the limit is {limit} "
            "(Limits.max_send_chars): ask a short question (put details in set_state)"
        )
    return text


def check_choices(choices: Any) -> tuple[str, ...]:
    if choices is None:
        return ()
    if isinstance(choices, str) or not isinstance(choices, Sequence):
        raise TypeError('choices must be a list of strings, like ["yes", "no"]')
    checked: list[str] = []
    for choice in choices:
        if not isinstance(choice, str) or not words(choice):
            raise ValueError(f"each choice must be a non-blank string, got {choice!r}")
        if any(words(c) == words(choice) for c in checked):
            raise ValueError(f"the choice {choice!r} is given twice")
        checked.append(choice.strip())
    return tuple(checked)


def check_timeout(timeout: Any) -> float:
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout < 0
    ):
        raise ValueError(
            f"timeout must be a number of seconds, 0 or more (like 60); got {timeout!r}"
        )
    return float(timeout)


class Asking:
    """The questions of one background: a line (FIFO), and the one open question."""

    def __init__(self, host: _Host) -> None:
        self._host = host
        # FIFO: each question waits for the ones before it (made at the first question:
        # most backgrounds never ask one).
        self._line: asyncio.Lock | None = None
        self._answer: asyncio.Future[str] | None = None
        self.question: str | None = None
        """The question the background waits on now (asked, not yet answered)."""

    def _closed_error(self) -> RuntimeError:
        return RuntimeError(f"background session '{self._host.definition.id}' is closed")

    async def ask(self, question: Any, *, choices: Any = None, timeout: Any = 60.0) -> Answer:
        host = self._host
        text = check_question(question, host.session.limits.max_send_chars)
        options = check_choices(choices)
        seconds = check_timeout(timeout)
        if host.closed:
            raise self._closed_error()
        line = self._line
        if line is None:
            line = self._line = asyncio.Lock()
        async with line:
            if host.closed:
                raise self._closed_error()
            # Sent first: what arrives before the question is in context is not its answer.
            await host.send(text, silent=False, note=self._note(options))
            answer = self._answer = asyncio.get_running_loop().create_future()
            self.question = text
            host.publish_state()
            try:
                await asyncio.wait((answer,), timeout=seconds)
            except asyncio.CancelledError:
                if answer.done() and not answer.cancelled() and answer.exception() is None:
                    host.put_back(answer.result())  # taken, never read: back to the inbox
                raise
            finally:
                self._answer = self.question = None
                if not host.closed:
                    host.publish_state()
                if not answer.done():
                    answer.cancel()
        if answer.cancelled():
            return Answer("", None, timed_out=True)
        error = answer.exception()
        if error is not None:
            raise error
        said = answer.result()
        return Answer(said, match_choice(said, options) if options else None)

    def _note(self, options: tuple[str, ...]) -> str:
        bid = self._host.definition.id
        offer = f", with its choices ({', '.join(options)})" if options else ""
        return (
            f"(A question for the user: `{bid}` waits for the answer. Ask the user{offer}, "
            f"then send their answer to `{bid}` with backline_send, in their words.)"
        )

    def take(self, content: str) -> bool:
        """A message from the voice agent: the open question's answer, if one waits."""
        answer = self._answer
        if answer is None or answer.done():
            return False
        answer.set_result(content)
        return True

    def close(self) -> None:
        """The session closes: the open question ends with an error (later ones at once)."""
        answer = self._answer
        if answer is not None and not answer.done():
            answer.set_exception(self._closed_error())

    def overlay(self, state: Any) -> Any:
        """The state as shown: the background's own, with the open question."""
        question = self.question
        if question is None:
            return state
        if isinstance(state, dict):
            return {**state, ASKING: question}
        if state is UNSET:
            return {ASKING: question}
        return {"state": state, ASKING: question}
