"""The model's turns on a Gemini Live session, as the reader sees them.

A ``Turn`` is one model turn the server produces: asked for by a ``chat()`` (client
content with ``turn_complete``, a tool response ``WHEN_IDLE``/``INTERRUPT``), by the
user's voice (``activity_end``), or by nobody (the server's own). The reader hands
each server message's pieces to the first unfinished turn; a ``chat()`` that claimed
the turn reads them from its queue. A ``Hearing`` is one utterance of the user's voice:
the server's input transcription of it, made final when the model starts answering it
(or the transcription says it is finished); its ``listener`` (the speech-to-text
stream that sent the voice) is told each step.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from backline.llm import ChatChunk, LLMError

from ._live_items import Call

END = object()
"""Put on a turn's queue when it ended (completed, interrupted, or failed)."""


class Listener(Protocol):
    """Who hears of an utterance's transcription (a hearing stream)."""

    def interim(self, text: str) -> None: ...

    def final(self, text: str, error: str | None) -> None: ...


class Hearing:
    """The server's transcription of one utterance of the user's voice, on the session
    of ``generation`` (its audio went to that session only)."""

    __slots__ = ("done", "generation", "listener", "texts")

    def __init__(self, listener: Listener | None = None, generation: int = 0) -> None:
        self.texts: list[str] = []
        self.done = asyncio.Event()
        self.listener = listener
        self.generation = generation

    @property
    def text(self) -> str:
        return " ".join("".join(self.texts).split())

    def add(self, piece: str) -> None:
        """A piece of the transcription (the listener hears the text so far)."""
        if self.done.is_set():
            return
        self.texts.append(piece)
        if self.listener is not None and self.text:
            self.listener.interim(self.text)

    def finish(self, error: str | None = None) -> None:
        """The transcription is final (``error``: the utterance was lost; no words)."""
        if self.done.is_set():
            return
        self.done.set()
        if self.listener is not None:
            self.listener.final("" if error is not None else self.text, error)


class Turn:
    """One model turn (see the module doc)."""

    __slots__ = (
        "abandoned",
        "audio",
        "calls",
        "claimed",
        "done",
        "error",
        "events",
        "hearing",
        "held_at",
        "interrupted",
        "started",
        "texts",
        "usage",
    )

    def __init__(self, *, claimed: bool = False, hearing: Hearing | None = None) -> None:
        self.events: asyncio.Queue[ChatChunk | object] = asyncio.Queue()
        self.texts: list[str] = []
        self.calls: list[Call] = []
        self.usage: dict[str, int] = {}
        self.claimed = claimed  # a chat() reads it
        self.abandoned = False  # the chat() that read it closed its stream before its end
        self.audio = hearing is not None  # asked for by the user's voice
        self.hearing = hearing
        self.started = False  # the model produced something
        self.interrupted = False
        self.held_at: int | None = None  # its place in what the session holds, if taken
        self.done = False
        self.error: LLMError | None = None

    @property
    def text(self) -> str:
        return "".join(self.texts)

    def put(self, chunk: ChatChunk) -> None:
        self.started = True
        self.events.put_nowait(chunk)

    def end(self, error: LLMError | None = None) -> None:
        if self.done:
            return
        self.done = True
        self.error = error
        self.events.put_nowait(END)
