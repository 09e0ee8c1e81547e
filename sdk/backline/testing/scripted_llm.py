"""``ScriptedLLM``: an ``LLM`` that answers from a script, for tests."""

from __future__ import annotations

import asyncio
import functools
import inspect
import itertools
import json
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from ..llm.chat_context import ChatContext, ChatMessage
from ..llm.llm import ChatChunk, LLMError, LLMStream, TextDelta, ToolCallChunk, Usage
from ..llm.tools import FunctionTool, ToolChoice


@dataclass(frozen=True)
class ScriptedToolCall:
    name: str
    arguments: dict[str, Any] | str
    call_id: str | None = None


@dataclass(frozen=True)
class ScriptedResponse:
    """One scripted answer: text and/or tool calls, or an error (after its text, if any);
    after ``delay`` seconds."""

    text: str = ""
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    error: BaseException | None = None
    delay: float = 0.0
    chunk_delay: float = 0.0
    chunk_size: int = 0  # 0: one chunk per word


def text(
    content: str, *, delay: float = 0.0, chunk_delay: float = 0.0, chunk_size: int = 0
) -> ScriptedResponse:
    """A text reply, streamed word by word (or ``chunk_size`` characters at a time)."""
    return ScriptedResponse(
        text=content, delay=delay, chunk_delay=chunk_delay, chunk_size=chunk_size
    )


def tool_calls(
    *calls: tuple[str, dict[str, Any] | str] | tuple[str, dict[str, Any] | str, str],
    text: str = "",
    delay: float = 0.0,
    chunk_delay: float = 0.0,
) -> ScriptedResponse:
    """Tool calls (run concurrently by the runtime), with optional preamble ``text``.

    Each call is ``(name, arguments)`` or ``(name, arguments, call_id)``.
    """
    parsed = tuple(
        ScriptedToolCall(name=c[0], arguments=c[1], call_id=(c[2] if len(c) > 2 else None))
        for c in calls
    )
    return ScriptedResponse(text=text, tool_calls=parsed, delay=delay, chunk_delay=chunk_delay)


def error(
    exc: BaseException,
    *,
    delay: float = 0.0,
    text: str = "",
    chunk_delay: float = 0.0,
    chunk_size: int = 0,
) -> ScriptedResponse:
    """The request fails with ``exc`` after ``delay`` seconds; with ``text``, after
    streaming that text first (a reply cut off mid-way)."""
    return ScriptedResponse(
        text=text, error=exc, delay=delay, chunk_delay=chunk_delay, chunk_size=chunk_size
    )


@dataclass(slots=True)
class LLMRequest:
    """What the runtime asked: a copy of the context, the tools, the tool choice."""

    chat_ctx: ChatContext
    tools: list[FunctionTool]
    tool_choice: ToolChoice | None
    index: int = 0

    @property
    def tool_names(self) -> list[str]:
        return [t.name for t in self.tools]

    @property
    def instructions(self) -> list[str]:
        """The system/developer messages, in order."""
        return [
            it.content
            for it in self.chat_ctx.items
            if isinstance(it, ChatMessage) and it.role in ("system", "developer")
        ]

    @property
    def last_message(self) -> ChatMessage | None:
        for it in reversed(self.chat_ctx.items):
            if isinstance(it, ChatMessage) and it.role not in ("system", "developer"):
                return it
        return None


Responder: TypeAlias = Callable[
    [LLMRequest], "ScriptedResponse | str | Awaitable[ScriptedResponse | str]"
]


class ScriptedLLM:
    """An ``LLM`` scripted by a list of responses or by a callable ``request -> response``.

    Responses are ``text(...)``, ``tool_calls(...)`` or ``error(...)`` (a plain
    string means ``text(string)``). ``requests`` records every request. A request
    with nothing left in the script fails with ``LLMError`` saying so.
    """

    def __init__(
        self,
        script: Iterable[ScriptedResponse | str] | Responder = (),
        *,
        record: bool = True,
    ) -> None:
        self._responder: Responder | None = None
        # Made when a script is given or pushed (a deque is about 700 bytes even empty:
        # a callable script, as thousands of benchmarked sessions use, needs none).
        self._queue: deque[ScriptedResponse | str] | None = None
        if callable(script):
            self._responder = script
        else:
            self._queue = deque(script)
        self._record = record
        self.requests: list[LLMRequest] = []
        self._call_ids = itertools.count(1)
        self._n = 0

    def push(self, *responses: ScriptedResponse | str) -> None:
        """Append responses to the script."""
        if self._queue is None:
            self._queue = deque()
        self._queue.extend(responses)

    @property
    def remaining(self) -> int:
        return len(self._queue) if self._queue is not None else 0

    def chat(
        self,
        chat_ctx: ChatContext,
        *,
        tools: Sequence[FunctionTool] = (),
        tool_choice: ToolChoice | None = None,
    ) -> LLMStream:
        self._n += 1
        record = self._record
        request = LLMRequest(
            chat_ctx=chat_ctx.copy() if record else chat_ctx,
            # Kept requests get copies; unkept ones (benchmarks) the runtime's own list.
            tools=list(tools) if record or type(tools) is not list else tools,
            tool_choice=tool_choice,
            index=self._n,
        )
        if record:
            self.requests.append(request)
        return LLMStream(self._stream(request))

    def _next_scripted(self, request: LLMRequest) -> ScriptedResponse | str:
        if self._queue:
            return self._queue.popleft()
        raise LLMError(
            f"ScriptedLLM: no response scripted for request #{request.index}; "
            "push() more responses or pass a callable"
        )

    async def _stream(self, request: LLMRequest) -> AsyncGenerator[ChatChunk, None]:
        responder = self._responder
        got: Any
        if responder is not None:
            got = responder(request)
            # Checked by type first: isawaitable's ABC check is slow, once per request.
            if type(got) is not ScriptedResponse and inspect.isawaitable(got):
                got = await got
        else:
            got = self._next_scripted(request)
        response: ScriptedResponse = text(got) if isinstance(got, str) else got
        if response.delay:
            await asyncio.sleep(response.delay)
        if response.error is not None and not response.text:
            raise response.error
        deltas, words = _split(response.text, response.chunk_size)
        if response.chunk_delay:
            for i, delta in enumerate(deltas):
                if i:
                    await asyncio.sleep(response.chunk_delay)
                yield delta
        else:
            for delta in deltas:
                yield delta
        if response.error is not None:
            raise response.error
        for call in response.tool_calls:
            if response.chunk_delay:
                await asyncio.sleep(response.chunk_delay)
            args = (
                call.arguments
                if isinstance(call.arguments, str)
                else json.dumps(call.arguments, separators=(",", ":"))
            )
            yield ToolCallChunk(
                call_id=call.call_id or f"call_{next(self._call_ids)}",
                name=call.name,
                arguments=args,
            )
        yield Usage(
            input_tokens=len(request.chat_ctx),
            output_tokens=words + len(response.tool_calls),
            stop_reason="tool_use" if response.tool_calls else "end_turn",
        )


@functools.lru_cache(maxsize=256)
def _split(content: str, size: int) -> tuple[tuple[TextDelta, ...], int]:
    """The deltas of a scripted text and its word count (a script repeats its texts;
    deltas are frozen, so each is made once)."""
    deltas = tuple(TextDelta(c) for c in _chunks(content, size)) if content else ()
    return deltas, len(content.split())


def _chunks(content: str, size: int) -> list[str]:
    if size > 0:
        return [content[i : i + size] for i in range(0, len(content), size)]
    # Word by word, each word keeping the space that follows it.
    words = content.split(" ")
    parts = [w + " " for w in words[:-1]]
    if words[-1]:
        parts.append(words[-1])
    return parts
