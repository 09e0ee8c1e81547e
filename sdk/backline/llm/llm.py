"""The LLM protocol: ``chat()`` returns a closable async stream of chunks."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol, TypeAlias, runtime_checkable

from .chat_context import ChatContext
from .tools import FunctionTool, ToolChoice


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the reply's text."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallChunk:
    """One complete tool call (arguments are the whole JSON text)."""

    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class AudioDelta:
    """A piece of a spoken reply, from a model that speaks (a realtime model with audio
    output): ``data`` is 16-bit signed little-endian mono PCM at ``sample_rate`` (may be
    empty), ``transcript`` the text of what is said (may be empty). Such a model sends
    these instead of ``TextDelta``: a front end that plays audio plays ``data``; one that
    shows text shows ``transcript``."""

    data: bytes
    sample_rate: int
    transcript: str = ""


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage of one request, and its time to first token in seconds."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    ttft: float | None = None
    stop_reason: str | None = None


ChatChunk: TypeAlias = TextDelta | ToolCallChunk | AudioDelta | Usage


class LLMError(Exception):
    """A model request failed. ``retryable`` says whether trying again may help."""

    def __init__(self, message: str, *, retryable: bool = False, status: int | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.status = status


class LLMTimeoutError(LLMError):
    """A model request ran past its deadline (no first output, or no end, in time): the
    provider stalled rather than failed. Always ``retryable``."""

    def __init__(self, message: str, *, status: int | None = None):
        super().__init__(message, retryable=True, status=status)


async def _exhausted() -> ChatChunk:
    raise StopAsyncIteration


class LLMStream:
    """A stream of chunks from one request.

    Iterate it, and close it when done (``async with`` does both). Closing, or
    cancelling the task that iterates, closes the underlying connection.
    """

    __slots__ = ("_agen", "_closed")

    def __init__(self, agen: AsyncGenerator[ChatChunk, None]) -> None:
        self._agen = agen
        self._closed = False

    def __aiter__(self) -> AsyncIterator[ChatChunk]:
        if not self._closed and type(self).__anext__ is LLMStream.__anext__:
            # The generator itself: its own __anext__ per chunk, no call through this
            # wrapper (a closed generator ends an iteration as a closed stream does).
            return self._agen
        return self

    def __anext__(self) -> Awaitable[ChatChunk]:
        # The generator's own awaitable, not a coroutine wrapping it: one frame less
        # per chunk (several per reply).
        if self._closed:
            return _exhausted()
        return self._agen.__anext__()

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            await self._agen.aclose()

    async def __aenter__(self) -> LLMStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


@runtime_checkable
class LLM(Protocol):
    """A chat model. The system prompt is the context's system messages, in order."""

    def chat(
        self,
        chat_ctx: ChatContext,
        *,
        tools: Sequence[FunctionTool] = (),
        tool_choice: ToolChoice | None = None,
    ) -> LLMStream: ...


async def close_llm(llm: object, timeout: float = 5.0) -> None:
    """Close ``llm`` if it holds a connection (it has an ``aclose()``: a realtime model's
    socket), within ``timeout``. What goes wrong is logged, never raised: a front end
    calls it after its session closed."""
    aclose = getattr(llm, "aclose", None)
    if not callable(aclose):
        return
    try:
        async with asyncio.timeout(timeout):
            await aclose()
    except Exception as e:
        logging.getLogger("backline.llm").warning("closing %s failed: %r", type(llm).__name__, e)


def warm_up_llm(llm: object) -> None:
    """Let ``llm`` load ahead what its first request needs, if it can (a ``warm_up()``
    method: the Anthropic adapter imports its package in a thread). A front end calls
    it once it is interactive, so that work runs while the user types. Never raises."""
    warm_up = getattr(llm, "warm_up", None)
    if callable(warm_up):
        try:
            warm_up()
        except Exception as e:
            logging.getLogger("backline.llm").warning(
                "warming up %s failed: %r", type(llm).__name__, e
            )


def llm_label(llm: LLM) -> tuple[str, str | None]:
    """A readable name for ``llm``: its class name, and its model (its ``model``
    attribute, when it has one)."""
    model = getattr(llm, "model", None)
    return type(llm).__name__, model if isinstance(model, str) else None
