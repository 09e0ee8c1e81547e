"""``AnthropicLLM``: the ``LLM`` protocol on Anthropic's streaming Messages API.

Imported on demand (``from backline.llm.anthropic import AnthropicLLM``): it pulls
in the ``anthropic`` package, which takes seconds to import. See docs/anthropic.md.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import AsyncGenerator, Awaitable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anthropic
import httpx2

from ..limits import DEFAULT_LIMITS
from ._anthropic_convert import convert_context, convert_tool_choice, convert_tools
from .chat_context import ChatContext
from .llm import ChatChunk, LLMError, LLMStream, LLMTimeoutError, TextDelta, ToolCallChunk, Usage
from .tools import FunctionTool, ToolChoice

if TYPE_CHECKING:
    from anthropic.types import MessageParam, RawMessageStreamEvent, ToolChoiceParam, ToolParam

__all__ = ["DEFAULT_MODEL", "MODEL_ENV", "AnthropicLLM"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

#: The model used when neither ``model=`` nor ``BACKLINE_MODEL`` is given: a fast one.
DEFAULT_MODEL = "claude-haiku-5-5"
#: The environment variable that chooses the model.
MODEL_ENV = "BACKLINE_MODEL"

_STATUS_OF_ERROR_TYPE = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


class _IncompleteStream(Exception):
    """The stream ended before ``message_stop``."""


class _MalformedStream(Exception):
    """An event of the stream could not be read (not JSON, or not the expected shape)."""


_RequestFailure = (
    anthropic.APIStatusError,
    anthropic.APIConnectionError,
    httpx2.TransportError,
    _IncompleteStream,
    _MalformedStream,
)

_UNREADABLE = (ValueError, TypeError, KeyError, AttributeError)  # JSONDecodeError is a ValueError


class _DeadlinePassed(Exception):
    """A request's first-token or response deadline passed."""

    def __init__(self, which: str, seconds: float) -> None:
        super().__init__(which)
        self.which = which
        self.seconds = seconds


class _Deadlines:
    """The two deadlines of one request, on the loop's clock, from its first iteration."""

    __slots__ = ("first_token", "first_token_timeout", "response", "response_timeout")

    def __init__(self, first_token_timeout: float | None, response_timeout: float | None) -> None:
        now = asyncio.get_running_loop().time()
        self.first_token_timeout = first_token_timeout
        self.response_timeout = response_timeout
        self.first_token = None if first_token_timeout is None else now + first_token_timeout
        self.response = None if response_timeout is None else now + response_timeout

    def current(self, output_started: bool) -> tuple[float | None, str, float]:
        """The deadline in force: when, which, and its length in seconds."""
        first, end = self.first_token, self.response
        if first is None or output_started or (end is not None and end <= first):
            return end, "response_timeout", self.response_timeout or 0.0
        return first, "first_token_timeout", self.first_token_timeout or 0.0

    async def within(self, aw: Awaitable[_T], output_started: bool) -> _T:
        """Await ``aw``, but no longer than the deadline in force."""
        when, which, seconds = self.current(output_started)
        if when is None:
            return await aw
        timeout = asyncio.timeout_at(when)
        try:
            async with timeout:
                return await aw
        except TimeoutError:
            if timeout.expired():
                raise _DeadlinePassed(which, seconds) from None
            raise


class AnthropicLLM:
    """Claude through Anthropic's streaming Messages API.

    ``model`` defaults to ``$BACKLINE_MODEL``, else ``DEFAULT_MODEL``. The client
    is ``anthropic.AsyncAnthropic(api_key=..., base_url=...)`` (``None`` reads
    ``ANTHROPIC_API_KEY`` / ``ANTHROPIC_BASE_URL``), or ``client`` if given (used
    with its own retries turned off). Failures with 429, 5xx and 529 are retried
    up to ``max_retries`` times with exponential backoff (``retry_base_delay``
    doubling, capped at ``retry_max_delay``; a longer ``retry-after`` is honoured
    up to the cap) — only while nothing has been yielded yet.

    Each request has two deadlines besides the HTTP client's connect/read
    ``timeout`` (which a stream of ``ping`` events never trips): its first output
    (text or a tool call) within ``first_token_timeout`` seconds, retries
    included, and its whole response within ``response_timeout`` seconds (defaults
    ``Limits.llm_first_token_timeout`` and ``Limits.llm_response_timeout``; ``None``
    turns one off). A deadline that passes fails the request with ``LLMError``.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens: int = 1024,
        max_retries: int = 3,
        retry_base_delay: float = 0.5,
        retry_max_delay: float = 8.0,
        timeout: float | None = 60.0,
        first_token_timeout: float | None = DEFAULT_LIMITS.llm_first_token_timeout,
        response_timeout: float | None = DEFAULT_LIMITS.llm_response_timeout,
        client: anthropic.AsyncAnthropic | None = None,
    ) -> None:
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        for name, value in (
            ("first_token_timeout", first_token_timeout),
            ("response_timeout", response_timeout),
        ):
            if value is not None and not value > 0:
                raise ValueError(
                    f"{name} must be a positive number of seconds or None, got {value}"
                )
        self._first_token_timeout = first_token_timeout
        self._response_timeout = response_timeout
        self._model = model or os.environ.get(MODEL_ENV) or DEFAULT_MODEL
        self._max_tokens = max_tokens
        self._max_retries = max_retries
        self._retry_base_delay = retry_base_delay
        self._retry_max_delay = retry_max_delay
        if client is None:
            self._client = anthropic.AsyncAnthropic(
                api_key=api_key,
                base_url=base_url,
                max_retries=0,
                timeout=timeout if timeout is not None else anthropic.NOT_GIVEN,
            )
            self._owns_client = True
        else:
            if api_key is not None or base_url is not None:
                raise ValueError("pass either client= or api_key=/base_url=, not both")
            self._client = client.with_options(max_retries=0)
            self._owns_client = False

    @property
    def model(self) -> str:
        """The model name sent with each request."""
        return self._model

    @property
    def client(self) -> anthropic.AsyncAnthropic:
        """The ``anthropic`` client (its own retries are off: this class retries)."""
        return self._client

    def __repr__(self) -> str:
        return f"AnthropicLLM(model={self._model!r}, base_url={str(self._client.base_url)!r})"

    async def aclose(self) -> None:
        """Close the HTTP client if this object created it."""
        if self._owns_client:
            await self._client.close()

    def chat(
        self,
        chat_ctx: ChatContext,
        *,
        tools: Sequence[FunctionTool] = (),
        tool_choice: ToolChoice | None = None,
    ) -> LLMStream:
        """Stream a reply to ``chat_ctx`` (converted now; errors surface when iterated)."""
        try:
            params: dict[str, Any] | LLMError = self._params(chat_ctx, tools, tool_choice)
        except LLMError as e:
            params = e
        return LLMStream(self._stream(params))

    def _params(
        self,
        chat_ctx: ChatContext,
        tools: Sequence[FunctionTool],
        tool_choice: ToolChoice | None,
    ) -> dict[str, Any]:
        system, messages = convert_context(chat_ctx)
        params: dict[str, Any] = {
            "model": self._model,
            "max_tokens": self._max_tokens,
            "messages": messages,
        }
        if system:
            params["system"] = system
        if tools:
            params["tools"] = convert_tools(tools)
        choice = convert_tool_choice(tool_choice, tools)
        if choice is not None:
            params["tool_choice"] = choice
        return params

    async def _open(self, params: dict[str, Any]) -> anthropic.AsyncStream[RawMessageStreamEvent]:
        try:
            return await self._client.messages.create(
                model=params["model"],
                max_tokens=params["max_tokens"],
                messages=cast("list[MessageParam]", params["messages"]),
                system=params.get("system", anthropic.omit),
                tools=cast("list[ToolParam]", params.get("tools", anthropic.omit)),
                tool_choice=cast("ToolChoiceParam", params.get("tool_choice", anthropic.omit)),
                stream=True,
            )
        except TypeError as e:
            if "authentication" not in str(e):
                raise
            raise LLMError(
                "No Anthropic API key: ANTHROPIC_API_KEY is missing. Set it in the "
                "environment or pass AnthropicLLM(api_key=...).",
                status=401,
            ) from None
        except anthropic.CredentialsError as e:
            raise LLMError(f"Anthropic credentials could not be loaded: {e}", status=401) from e

    async def _stream(self, params: dict[str, Any] | LLMError) -> AsyncGenerator[ChatChunk, None]:
        if isinstance(params, LLMError):
            raise params
        started = time.monotonic()
        deadlines = _Deadlines(self._first_token_timeout, self._response_timeout)
        attempt = 0
        output_started = False
        last_failure: _Failure | None = None
        while True:
            attempt += 1
            acc = _Accumulator(started)
            try:
                stream = await deadlines.within(self._open(params), output_started)
                try:
                    events = stream.__aiter__()
                    while True:
                        try:
                            event = await deadlines.within(anext(events), output_started)
                            chunks = acc.feed(event)
                        except StopAsyncIteration:
                            break
                        except _UNREADABLE as e:
                            raise _MalformedStream(
                                f"the response stream had an event that could not be read "
                                f"({type(e).__name__}: {e})"
                            ) from e
                        for chunk in chunks:
                            output_started = True
                            yield chunk
                finally:
                    await stream.close()
                if not acc.stopped:
                    raise _IncompleteStream("the response stream ended before message_stop")
            except _DeadlinePassed as e:
                raise self._deadline_error(e, output_started, last_failure) from None
            except _RequestFailure as e:
                failure = last_failure = self._failure(e)
                if acc.yielded:
                    raise LLMError(
                        f"{failure.message} (the reply was cut off after output had started)",
                        retryable=failure.retryable,
                        status=failure.status,
                    ) from e
                if not failure.retryable or attempt > self._max_retries:
                    if failure.retryable:
                        tries = f"{attempt} attempt{'s' if attempt > 1 else ''}"
                        raise LLMError(
                            f"{failure.message} (gave up after {tries})",
                            retryable=True,
                            status=failure.status,
                        ) from e
                    raise LLMError(failure.message, status=failure.status) from e
                delay = self._backoff(attempt, failure.retry_after)
                log.warning(
                    "%s; retrying in %.2fs (attempt %d of %d)",
                    failure.message,
                    delay,
                    attempt + 1,
                    self._max_retries + 1,
                )
                try:
                    await deadlines.within(asyncio.sleep(delay), output_started)
                except _DeadlinePassed as passed:
                    raise self._deadline_error(passed, output_started, failure) from e
                continue
            yield acc.usage()
            return

    def _deadline_error(
        self, e: _DeadlinePassed, output_started: bool, last: _Failure | None
    ) -> LLMTimeoutError:
        if e.which == "first_token_timeout":
            what = f"no output within {e.seconds:g}s of the request"
        else:
            what = f"the response did not finish within {e.seconds:g}s"
        if output_started:
            tail = " (the reply was cut off after output had started)"
        elif last is not None:
            tail = f"; the last attempt failed: {last.message}"
        else:
            tail = ""
        return LLMTimeoutError(
            f"Anthropic API at {self._client.base_url}: {what} ({e.which} of AnthropicLLM)" + tail
        )

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        delay = self._retry_base_delay * 2.0 ** (attempt - 1)
        if retry_after is not None:
            delay = max(delay, retry_after)
        return min(delay, self._retry_max_delay)

    def _failure(self, e: BaseException) -> _Failure:
        if isinstance(e, anthropic.APIStatusError):
            return self._status_failure(e)
        where = str(self._client.base_url)
        if isinstance(e, _IncompleteStream | _MalformedStream):
            return _Failure(f"Anthropic API at {where}: {e}", retryable=True)
        detail = e.__cause__ if isinstance(e, anthropic.APIConnectionError) and e.__cause__ else e
        return _Failure(f"Could not reach the Anthropic API at {where}: {detail!r}", retryable=True)

    def _status_failure(self, e: anthropic.APIStatusError) -> _Failure:
        error_type = e.type or ""
        status = e.status_code
        if status < 400:  # an ``error`` event inside a 200 stream
            status = _STATUS_OF_ERROR_TYPE.get(error_type, 500)
        api_message = e.api_message or e.message
        label = f"Anthropic API error {status}" + (f" {error_type}" if error_type else "")
        message = f"{label}: {api_message}"
        retryable = status in (408, 409, 429) or status >= 500
        headers = e.response.headers
        should_retry = headers.get("x-should-retry")
        if should_retry in ("true", "false"):
            retryable = should_retry == "true"
        if status == 401:
            message = (
                f"{label}: the API key was rejected — ANTHROPIC_API_KEY is missing or wrong "
                f"(set it, or pass AnthropicLLM(api_key=...)). The API said: {api_message}"
            )
        elif status == 403:
            message += " (the API key may not have access to this model or feature)"
        elif status in (400, 404) and "model" in api_message.lower():
            message += (
                f" — check the model name {self._model!r}: set {MODEL_ENV} or pass "
                "AnthropicLLM(model=...)"
            )
        elif status == 404:
            message += f" — check the base URL {str(self._client.base_url)!r}"
        return _Failure(message, retryable=retryable, status=status, retry_after=_retry_after(e))


@dataclass(frozen=True)
class _Failure:
    message: str
    retryable: bool
    status: int | None = None
    retry_after: float | None = None


def _retry_after(e: anthropic.APIStatusError) -> float | None:
    headers = e.response.headers
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) * scale)
        except ValueError:
            continue
    return None


@dataclass
class _ToolUse:
    call_id: str
    name: str
    initial_input: Any
    parts: list[str] = field(default_factory=list)

    def arguments(self) -> str:
        raw = "".join(self.parts)
        if raw.strip():
            return raw
        return json.dumps(self.initial_input or {}, separators=(",", ":"))


class _Accumulator:
    """Turns raw stream events into chunks; collects usage and the stop reason."""

    def __init__(self, started: float) -> None:
        self._started = started
        self._tools: dict[int, _ToolUse] = {}
        self.ttft: float | None = None
        self.yielded = False
        self.stopped = False
        self.stop_reason: str | None = None
        self.input_tokens = 0
        self.output_tokens = 0
        self.cache_read = 0
        self.cache_creation = 0

    def _emit(self, chunk: ChatChunk) -> list[ChatChunk]:
        if not self.yielded:
            self.yielded = True
            self.ttft = time.monotonic() - self._started
        return [chunk]

    def feed(self, event: RawMessageStreamEvent) -> list[ChatChunk]:
        if event.type == "message_start":
            usage = event.message.usage
            self.input_tokens = usage.input_tokens
            self.output_tokens = usage.output_tokens
            self.cache_read = usage.cache_read_input_tokens or 0
            self.cache_creation = usage.cache_creation_input_tokens or 0
        elif event.type == "content_block_start":
            block = event.content_block
            if block.type == "tool_use":
                self._tools[event.index] = _ToolUse(block.id, block.name, block.input)
        elif event.type == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta" and delta.text:
                return self._emit(TextDelta(delta.text))
            if delta.type == "input_json_delta" and event.index in self._tools:
                self._tools[event.index].parts.append(delta.partial_json)
        elif event.type == "content_block_stop":
            tool = self._tools.pop(event.index, None)
            if tool is not None:
                return self._emit(ToolCallChunk(tool.call_id, tool.name, tool.arguments()))
        elif event.type == "message_delta":
            self.stop_reason = event.delta.stop_reason or self.stop_reason
            d = event.usage
            self.output_tokens = d.output_tokens
            if d.input_tokens is not None:
                self.input_tokens = d.input_tokens
            if d.cache_read_input_tokens is not None:
                self.cache_read = d.cache_read_input_tokens
            if d.cache_creation_input_tokens is not None:
                self.cache_creation = d.cache_creation_input_tokens
        elif event.type == "message_stop":
            self.stopped = True
        return []

    def usage(self) -> Usage:
        return Usage(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cache_read_input_tokens=self.cache_read,
            cache_creation_input_tokens=self.cache_creation,
            ttft=self.ttft,
            stop_reason=self.stop_reason,
        )
