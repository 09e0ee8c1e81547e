"""``AnthropicLLM``: the ``LLM`` protocol on Anthropic's streaming Messages API.

The ``anthropic`` package takes seconds of CPU to import (its typed models): this
module does not import it. An ``AnthropicLLM`` imports it when its client is first
needed — in a worker thread when that is a request (the event loop never waits on
the import), or ahead with ``warm_up()``, which a front end calls once it is
interactive (the import then runs while the user types). See docs/anthropic.md.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import os
import sys
import threading
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

from ..keys import get_key
from ..limits import DEFAULT_LIMITS
from ._anthropic_convert import convert_context, convert_tool_choice, convert_tools
from .chat_context import ChatContext
from .llm import ChatChunk, LLMError, LLMStream, TextDelta, ToolCallChunk
from .provider import (
    BrokenStream,
    ProviderFailure,
    ProviderStreams,
    RequestPolicy,
    StreamDecoder,
    failed_stream,
    retry_after_seconds,
    retryable_status,
)
from .tools import FunctionTool, ToolChoice

if TYPE_CHECKING:
    import anthropic
    from anthropic.types import MessageParam, RawMessageStreamEvent, ToolChoiceParam, ToolParam

__all__ = ["DEFAULT_MODEL", "MODEL_ENV", "AnthropicLLM"]

log = logging.getLogger(__name__)

#: The model used when neither ``model=`` nor ``BACKLINE_MODEL`` is given: a fast one.
DEFAULT_MODEL = "claude-haiku-5-5"
#: The environment variable that chooses the model.
MODEL_ENV = "BACKLINE_MODEL"
#: The key's name: the environment variable, or the stored key (``backline keys``).
KEY_ENV = "ANTHROPIC_API_KEY"

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

DEFAULT_BASE_URL = "https://api.anthropic.com"


def _sdk() -> Any:
    """The ``anthropic`` package (imported on first use: seconds of CPU)."""
    return importlib.import_module("anthropic")


def _request_failures() -> tuple[type[BaseException], ...]:
    anthropic = _sdk()
    import httpx2

    return (anthropic.APIStatusError, anthropic.APIConnectionError, httpx2.TransportError)


def warm_up_sdk() -> threading.Thread | None:
    """Import ``anthropic`` in a daemon thread (``None``: imported already)."""
    if "anthropic" in sys.modules:
        return None
    thread = threading.Thread(target=_sdk, name="import anthropic", daemon=True)
    thread.start()
    return thread


class AnthropicLLM:
    """Claude through Anthropic's streaming Messages API.

    ``model`` defaults to ``$BACKLINE_MODEL``, else ``DEFAULT_MODEL``. The client
    is ``anthropic.AsyncAnthropic(api_key=..., base_url=...)`` (``None`` reads
    ``ANTHROPIC_API_KEY`` — the variable, else the stored key, see ``backline.keys`` —
    and ``ANTHROPIC_BASE_URL``), or ``client`` if given (used
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
        policy = RequestPolicy(
            max_retries=max_retries,
            retry_base_delay=retry_base_delay,
            retry_max_delay=retry_max_delay,
            first_token_timeout=first_token_timeout,
            response_timeout=response_timeout,
        )
        self._model = model or os.environ.get(MODEL_ENV) or DEFAULT_MODEL
        self._max_tokens = max_tokens
        self._client: anthropic.AsyncAnthropic | None = None
        if client is None:
            # Made when first needed (the package's import is slow); what it is given
            # is read now, as it would read it.
            self._client_options: dict[str, Any] = {
                "api_key": api_key if api_key is not None else get_key(KEY_ENV),
                "base_url": base_url,
                "timeout": timeout,
            }
            url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
            # As the client shows it: a path other than the root ends with "/".
            if urlsplit(url).path not in ("", "/") and not url.endswith("/"):
                url += "/"
            self._base_url = url
            self._owns_client = True
        else:
            if api_key is not None or base_url is not None:
                raise ValueError("pass either client= or api_key=/base_url=, not both")
            self._client = client.with_options(max_retries=0)
            self._base_url = str(self._client.base_url)
            self._owns_client = False
        self._streams = ProviderStreams(
            self._open,
            _Decoder,
            self._failure,
            label=f"Anthropic API at {self._base_url}",
            adapter="AnthropicLLM",
            policy=policy,
            log=log,
        )

    @property
    def model(self) -> str:
        """The model name sent with each request."""
        return self._model

    @property
    def client(self) -> anthropic.AsyncAnthropic:
        """The ``anthropic`` client (its own retries are off: this class retries). Made
        on first use, importing the package here if nothing did yet."""
        client = self._client
        if client is None:
            anthropic = _sdk()
            options = self._client_options
            timeout = options["timeout"]
            client = self._client = anthropic.AsyncAnthropic(
                api_key=options["api_key"],
                base_url=options["base_url"],
                max_retries=0,
                timeout=timeout if timeout is not None else anthropic.NOT_GIVEN,
            )
        return client

    def warm_up(self) -> None:
        """Import the ``anthropic`` package now, in a daemon thread, so the first request
        does not wait for it (a front end calls this once it is interactive)."""
        warm_up_sdk()

    def __repr__(self) -> str:
        return f"AnthropicLLM(model={self._model!r}, base_url={self._base_url!r})"

    async def aclose(self) -> None:
        """Close the HTTP client if this object created it (and made it)."""
        if self._owns_client and self._client is not None:
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
            params = self._params(chat_ctx, tools, tool_choice)
        except LLMError as e:
            return failed_stream(e)
        return self._streams.stream(params)

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

    async def _open(self, params: dict[str, Any]) -> AsyncIterator[RawMessageStreamEvent]:
        if self._client is None:
            # The first request: the package is imported (or its import by warm_up()
            # finished) off the event loop: seconds of CPU the loop does not wait on.
            await asyncio.to_thread(_sdk)
        anthropic = _sdk()
        try:
            return await self.client.messages.create(
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
                "environment, store it with `backline keys set ANTHROPIC_API_KEY`, or pass "
                "AnthropicLLM(api_key=...).",
                status=401,
            ) from None
        except anthropic.CredentialsError as e:
            raise LLMError(f"Anthropic credentials could not be loaded: {e}", status=401) from e

    def _failure(self, e: BaseException) -> ProviderFailure | None:
        """A failed request (``None``: not one, raised as it is)."""
        anthropic = _sdk()
        if isinstance(e, anthropic.APIStatusError):
            return self._status_failure(e)
        if not isinstance(e, _request_failures()):
            return None
        detail = e.__cause__ if isinstance(e, anthropic.APIConnectionError) and e.__cause__ else e
        return ProviderFailure(
            f"Could not reach the Anthropic API at {self._base_url}: {detail!r}",
            retryable=True,
        )

    def _status_failure(self, e: anthropic.APIStatusError) -> ProviderFailure:
        error_type = e.type or ""
        status = e.status_code
        if status < 400:  # an ``error`` event inside a 200 stream
            status = _STATUS_OF_ERROR_TYPE.get(error_type, 500)
        api_message = e.api_message or e.message
        label = f"Anthropic API error {status}" + (f" {error_type}" if error_type else "")
        message = f"{label}: {api_message}"
        headers = e.response.headers
        retryable = retryable_status(status, headers)
        if status == 401:
            message = (
                f"{label}: the API key was rejected — ANTHROPIC_API_KEY is missing or wrong "
                "(set it, store it with `backline keys set ANTHROPIC_API_KEY`, or pass "
                f"AnthropicLLM(api_key=...)). The API said: {api_message}"
            )
        elif status == 403:
            message += " (the API key may not have access to this model or feature)"
        elif status in (400, 404) and "model" in api_message.lower():
            message += (
                f" — check the model name {self._model!r}: set {MODEL_ENV} or pass "
                "AnthropicLLM(model=...)"
            )
        elif status == 404:
            message += f" — check the base URL {self._base_url!r}"
        return ProviderFailure(
            message, retryable=retryable, status=status, retry_after=retry_after_seconds(headers)
        )


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


class _Decoder(StreamDecoder["RawMessageStreamEvent"]):
    """Turns raw stream events into chunks; collects usage and the stop reason."""

    def __init__(self) -> None:
        self._tools: dict[int, _ToolUse] = {}
        self._stopped = False

    def feed(self, event: RawMessageStreamEvent) -> Sequence[ChatChunk]:
        if event.type == "message_start":
            usage = event.message.usage
            self.input_tokens = usage.input_tokens
            self.output_tokens = usage.output_tokens
            self.cache_read_input_tokens = usage.cache_read_input_tokens or 0
            self.cache_creation_input_tokens = usage.cache_creation_input_tokens or 0
        elif event.type == "content_block_start":
            block = event.content_block
            if block.type == "tool_use":
                self._tools[event.index] = _ToolUse(block.id, block.name, block.input)
        elif event.type == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta" and delta.text:
                return (TextDelta(delta.text),)
            if delta.type == "input_json_delta" and event.index in self._tools:
                self._tools[event.index].parts.append(delta.partial_json)
        elif event.type == "content_block_stop":
            tool = self._tools.pop(event.index, None)
            if tool is not None:
                return (ToolCallChunk(tool.call_id, tool.name, tool.arguments()),)
        elif event.type == "message_delta":
            self.stop_reason = event.delta.stop_reason or self.stop_reason
            d = event.usage
            self.output_tokens = d.output_tokens
            if d.input_tokens is not None:
                self.input_tokens = d.input_tokens
            if d.cache_read_input_tokens is not None:
                self.cache_read_input_tokens = d.cache_read_input_tokens
            if d.cache_creation_input_tokens is not None:
                self.cache_creation_input_tokens = d.cache_creation_input_tokens
        elif event.type == "message_stop":
            self._stopped = True
        return ()

    def end(self) -> Sequence[ChatChunk]:
        if not self._stopped:
            raise BrokenStream("the response stream ended before message_stop")
        return ()
