"""The provider kit: what every streaming model adapter shares, in one place.

An adapter (``AnthropicLLM``, ``backline-openai``'s ``OpenAILLM``, a plugin of yours)
supplies three things about its vendor and gets the rest:

- *open a stream*: ``open_stream(request)`` sends one request and returns the vendor's
  stream of events (any async iterator; it is closed when the attempt ends);
- *turn a vendor event into chunks*: a ``StreamDecoder`` subclass, one per attempt;
- *classify a vendor exception*: ``classify(error)`` returns a ``ProviderFailure``
  (message, retryable, status, retry-after), or ``None`` for an error that is not a
  failed request (it is raised as it is).

``ProviderStreams`` runs each request: one attempt loop with retries and exponential
backoff honouring ``Retry-After`` (capped), only while nothing has been yielded; the
first-token and response deadlines (``Limits.llm_first_token_timeout`` /
``llm_response_timeout``), retries included; the time to first token; and the
``LLMError`` / ``LLMTimeoutError`` messages every adapter gives ("gave up after N
attempts", "the reply was cut off after output had started"). ``RequestPolicy``
holds the numbers. No vendor import here. See docs/providers.md.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Generic, TypeVar

from ..limits import DEFAULT_LIMITS
from .llm import ChatChunk, LLMError, LLMStream, LLMTimeoutError, Usage
from .tools import FunctionTool, NamedToolChoice, ToolChoice

__all__ = [
    "BrokenStream",
    "DeadlinePassed",
    "Deadlines",
    "ProviderFailure",
    "ProviderStreams",
    "RequestPolicy",
    "StreamDecoder",
    "check_tool_choice",
    "failed_stream",
    "retry_after_seconds",
    "retryable_status",
]

_T = TypeVar("_T")
R = TypeVar("R")
E = TypeVar("E")

_log = logging.getLogger(__name__)

# What an event that cannot be read raises while it is fetched or decoded (a
# JSONDecodeError is a ValueError; a pydantic ValidationError too).
_UNREADABLE = (ValueError, TypeError, KeyError, AttributeError)


# -- failures ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProviderFailure:
    """One failed attempt, as the adapter's ``classify`` reads a vendor exception.

    ``message`` says what went wrong and what to do (it becomes the ``LLMError``'s);
    ``retryable`` whether another attempt may help; ``status`` the HTTP status, if any;
    ``retry_after`` the seconds the server asked to wait (``retry_after_seconds``).
    """

    message: str
    retryable: bool = False
    status: int | None = None
    retry_after: float | None = None


class BrokenStream(Exception):
    """The response stream broke: it ended too early, or had an event that could not be
    read. A decoder raises it (from ``end()``); the kit raises it for an unreadable
    event. A retryable failure, reported as ``"<label>: <message>"``."""


def retryable_status(status: int, headers: Mapping[str, str] | None = None) -> bool:
    """Whether an HTTP error status is worth another attempt: 408, 409, 429 and 5xx,
    unless the response's ``x-should-retry: true|false`` header says otherwise."""
    should_retry = headers.get("x-should-retry") if headers is not None else None
    if should_retry in ("true", "false"):
        return should_retry == "true"
    return status in (408, 409, 429) or status >= 500


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """The wait a response asks for: ``retry-after-ms``, else ``retry-after`` (seconds),
    never negative; ``None`` when neither is there or readable (an HTTP date is not)."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) * scale)
        except ValueError:
            continue
    return None


# -- the numbers ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RequestPolicy:
    """How one request is retried and bounded (the adapters' keyword arguments).

    ``max_retries`` retries after the first attempt; the wait before retry *n* is
    ``retry_base_delay * 2**(n-1)``, at least the response's ``retry_after``, at most
    ``retry_max_delay``. The first output must come within ``first_token_timeout``
    seconds of the request's first iteration, retries and their waits included, and the
    whole response within ``response_timeout``; ``None`` turns a deadline off.
    """

    max_retries: int = 3
    retry_base_delay: float = 0.5
    retry_max_delay: float = 8.0
    first_token_timeout: float | None = DEFAULT_LIMITS.llm_first_token_timeout
    response_timeout: float | None = DEFAULT_LIMITS.llm_response_timeout

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        for name in ("retry_base_delay", "retry_max_delay"):
            value = getattr(self, name)
            if not value >= 0:
                raise ValueError(f"{name} must be >= 0 seconds, got {value}")
        for name in ("first_token_timeout", "response_timeout"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(
                    f"{name} must be a positive number of seconds or None, got {value}"
                )

    def backoff(self, attempt: int, retry_after: float | None = None) -> float:
        """The wait after failed attempt ``attempt`` (1 is the first), in seconds."""
        delay = self.retry_base_delay * 2.0 ** (attempt - 1)
        if retry_after is not None:
            delay = max(delay, retry_after)
        return min(delay, self.retry_max_delay)


# -- deadlines -----------------------------------------------------------------------------


class DeadlinePassed(Exception):
    """A request's first-token or response deadline passed. ``which`` is the option's
    name (``"first_token_timeout"`` or ``"response_timeout"``), ``seconds`` its value."""

    def __init__(self, which: str, seconds: float) -> None:
        super().__init__(which)
        self.which = which
        self.seconds = seconds


class Deadlines:
    """The two deadlines of one request, on the loop's clock, from ``start`` (now)."""

    __slots__ = ("first_token", "first_token_timeout", "response", "response_timeout", "start")

    def __init__(self, first_token_timeout: float | None, response_timeout: float | None) -> None:
        now = asyncio.get_running_loop().time()
        self.start = now
        self.first_token_timeout = first_token_timeout
        self.response_timeout = response_timeout
        self.first_token = None if first_token_timeout is None else now + first_token_timeout
        self.response = None if response_timeout is None else now + response_timeout

    def current(self, output_started: bool) -> tuple[float | None, str, float]:
        """The deadline in force: when (loop time, ``None``: none), which, and its length."""
        first, end = self.first_token, self.response
        if first is None or output_started or (end is not None and end <= first):
            return end, "response_timeout", self.response_timeout or 0.0
        return first, "first_token_timeout", self.first_token_timeout or 0.0

    async def within(self, aw: Awaitable[_T], output_started: bool) -> _T:
        """Await ``aw``, but no longer than the deadline in force (``DeadlinePassed``)."""
        when, which, seconds = self.current(output_started)
        if when is None:
            return await aw
        timeout = asyncio.timeout_at(when)
        try:
            async with timeout:
                return await aw
        except TimeoutError:
            if timeout.expired():
                raise DeadlinePassed(which, seconds) from None
            raise


# -- decoding ------------------------------------------------------------------------------


class StreamDecoder(Generic[E]):
    """Turns one attempt's vendor events into chunks, and tallies its usage.

    Subclass it: ``feed`` each event (return the chunks it completes, usually none or
    one); ``end`` when the vendor's stream is exhausted (return chunks held back until
    then, or raise ``BrokenStream`` if the stream ended before the vendor's end marker).
    Set the usage fields as the events report them; ``usage(ttft)`` builds the final
    ``Usage``. Set ``output_started`` when output began that no chunk shows yet (a tool
    call whose chunk waits for its last piece): the first-token deadline then stops
    applying. A new decoder is made for each attempt.
    """

    #: How messages name one event of this vendor's stream, with its article.
    event_name: ClassVar[str] = "an event"

    output_started: bool = False
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    stop_reason: str | None = None

    def feed(self, event: E) -> Sequence[ChatChunk]:
        """The chunks ``event`` completes."""
        raise NotImplementedError

    def end(self) -> Sequence[ChatChunk]:
        """The stream is exhausted: the chunks held back (none by default)."""
        return ()

    def usage(self, ttft: float | None) -> Usage:
        """The request's ``Usage`` (``ttft`` is measured by ``ProviderStreams``)."""
        return Usage(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens,
            cache_creation_input_tokens=self.cache_creation_input_tokens,
            ttft=ttft,
            stop_reason=self.stop_reason,
        )


# -- the attempt loop ----------------------------------------------------------------------


class ProviderStreams(Generic[R, E]):
    """Runs an adapter's requests: ``stream(request)`` is the ``LLMStream`` of one.

    Each attempt opens a stream (``open_stream(request)``), feeds its events to a new
    decoder (``new_decoder()``) and yields the chunks, then the decoder's ``Usage``
    last. A failure — an exception ``classify`` turns into a ``ProviderFailure``, or a
    ``BrokenStream`` — is retried per ``policy`` only while nothing has been yielded;
    each retry is logged as a warning on ``log``. An ``LLMError`` raised by the adapter
    ends the request as it is. A deadline that passes raises ``LLMTimeoutError``.

    ``label`` starts the messages about the endpoint (``"Anthropic API at <url>"``);
    ``adapter`` names whose deadlines they are (``"AnthropicLLM"``); ``stall_hint`` is
    appended to a deadline's message when no attempt failed (e.g. ``" (the server may
    be overloaded)"``).
    """

    __slots__ = (
        "_adapter",
        "_classify",
        "_label",
        "_log",
        "_new_decoder",
        "_open_stream",
        "_stall_hint",
        "policy",
    )

    def __init__(
        self,
        open_stream: Callable[[R], Awaitable[AsyncIterator[E]]],
        new_decoder: Callable[[], StreamDecoder[E]],
        classify: Callable[[BaseException], ProviderFailure | None],
        *,
        label: str,
        adapter: str,
        policy: RequestPolicy | None = None,
        stall_hint: str = "",
        log: logging.Logger | None = None,
    ) -> None:
        self._open_stream = open_stream
        self._new_decoder = new_decoder
        self._classify = classify
        self._label = label
        self._adapter = adapter
        self.policy = policy if policy is not None else RequestPolicy()
        self._stall_hint = stall_hint
        self._log = log if log is not None else _log

    def stream(self, request: R) -> LLMStream:
        """The stream of one request; nothing is sent until it is iterated."""
        return LLMStream(self._attempts(request))

    async def _attempts(self, request: R) -> AsyncGenerator[ChatChunk, None]:
        policy = self.policy
        deadlines = Deadlines(policy.first_token_timeout, policy.response_timeout)
        loop = asyncio.get_running_loop()
        ttft: float | None = None
        attempt = 0
        last: ProviderFailure | None = None
        while True:
            attempt += 1
            decoder = self._new_decoder()
            yielded = False
            try:
                events = await deadlines.within(self._open_stream(request), False)
                try:
                    feed = decoder.feed
                    while True:
                        try:
                            event = await deadlines.within(
                                anext(events), yielded or decoder.output_started
                            )
                            chunks = feed(event)
                        except StopAsyncIteration:
                            break
                        except _UNREADABLE as e:
                            raise BrokenStream(
                                f"the response stream had {decoder.event_name} that could not "
                                f"be read ({type(e).__name__}: {e})"
                            ) from e
                        for chunk in chunks:
                            if not yielded:
                                yielded = True
                                ttft = loop.time() - deadlines.start
                            yield chunk
                finally:
                    await _close(events)
                for chunk in decoder.end():
                    if not yielded:
                        yielded = True
                        ttft = loop.time() - deadlines.start
                    yield chunk
            except DeadlinePassed as e:
                raise self._deadline_error(e, yielded, last) from None
            except LLMError:
                raise
            except Exception as e:
                failure = self._failure(e)
                if failure is None:
                    raise
                last = failure
                if yielded:
                    raise LLMError(
                        f"{failure.message} (the reply was cut off after output had started)",
                        retryable=failure.retryable,
                        status=failure.status,
                    ) from e
                if not failure.retryable or attempt > policy.max_retries:
                    if failure.retryable:
                        tries = f"{attempt} attempt{'s' if attempt > 1 else ''}"
                        raise LLMError(
                            f"{failure.message} (gave up after {tries})",
                            retryable=True,
                            status=failure.status,
                        ) from e
                    raise LLMError(failure.message, status=failure.status) from e
                delay = policy.backoff(attempt, failure.retry_after)
                self._log.warning(
                    "%s; retrying in %.2fs (attempt %d of %d)",
                    failure.message,
                    delay,
                    attempt + 1,
                    policy.max_retries + 1,
                )
                try:
                    await deadlines.within(asyncio.sleep(delay), False)
                except DeadlinePassed as passed:
                    raise self._deadline_error(passed, False, failure) from e
                continue
            yield decoder.usage(ttft)
            return

    def _failure(self, e: Exception) -> ProviderFailure | None:
        if isinstance(e, BrokenStream):
            return ProviderFailure(f"{self._label}: {e}", retryable=True)
        return self._classify(e)

    def _deadline_error(
        self, e: DeadlinePassed, output_started: bool, last: ProviderFailure | None
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
            tail = self._stall_hint
        return LLMTimeoutError(f"{self._label}: {what} ({e.which} of {self._adapter})" + tail)


async def _close(events: object) -> None:
    """Close a vendor stream: ``aclose()`` (async generators), else ``close()``."""
    close = getattr(events, "aclose", None) or getattr(events, "close", None)
    if close is not None:
        result = close()
        if inspect.isawaitable(result):
            await result


async def _raise(error: LLMError) -> AsyncGenerator[ChatChunk, None]:
    raise error
    yield  # pragma: no cover - makes this an async generator


def failed_stream(error: LLMError) -> LLMStream:
    """A stream that raises ``error`` when iterated: ``chat()`` converts its request when
    called, and a problem found then surfaces where the caller reads the stream."""
    return LLMStream(_raise(error))


# -- requests ------------------------------------------------------------------------------


def check_tool_choice(
    tool_choice: ToolChoice | None, tools: Sequence[FunctionTool]
) -> ToolChoice | None:
    """The tool choice to send: ``None`` when there are no tools or no choice (the APIs'
    default, auto), else ``tool_choice``. ``LLMError`` for ``"required"`` or a named tool
    without tools, a named tool that is not among ``tools``, or an unknown choice."""
    if tool_choice is None or not tools:
        if isinstance(tool_choice, NamedToolChoice) or tool_choice == "required":
            raise LLMError(f"tool_choice {tool_choice!r} needs tools, but none were given")
        return None
    if isinstance(tool_choice, NamedToolChoice):
        names = [t.name for t in tools]
        if tool_choice.name not in names:
            raise LLMError(
                f"tool_choice names the tool {tool_choice.name!r}, which is not among the "
                f"tools given: {names}"
            )
        return tool_choice
    if tool_choice in ("auto", "none", "required"):
        return tool_choice
    raise LLMError(f"unknown tool_choice {tool_choice!r}")
