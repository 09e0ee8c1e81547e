"""``OpenAILLM``: backline's ``LLM`` protocol on any OpenAI-compatible Chat Completions API.

Imported on demand (``from backline_openai.llm import OpenAILLM``): it pulls in the
``openai`` package. See the plugin's README and docs/providers.md.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import httpx2
import openai

from backline.limits import DEFAULT_LIMITS
from backline.llm import (
    BrokenStream,
    ChatChunk,
    ChatContext,
    FunctionTool,
    LLMError,
    LLMStream,
    ProviderFailure,
    ProviderStreams,
    RequestPolicy,
    StreamDecoder,
    TextDelta,
    ToolCallChunk,
    ToolChoice,
    failed_stream,
    retry_after_seconds,
    retryable_status,
)

from ._convert import convert_context, convert_tool_choice, convert_tools
from ._endpoints import DEFAULT_MODEL, Endpoint

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionChunk

__all__ = ["DEFAULT_MODEL", "MODEL_ENV", "OpenAILLM"]

log = logging.getLogger(__name__)

#: The environment variable that chooses the model.
MODEL_ENV = "BACKLINE_MODEL"

# The ``type`` of an error event inside a stream, as an HTTP status.
_STATUS_OF_ERROR_TYPE = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "server_error": 500,
    "api_error": 500,
    "overloaded_error": 529,
}

#: Appended to a passed deadline's message when no attempt failed.
_STALL_HINT = " (the server may be overloaded, or the model too slow or still loading)"


class OpenAILLM:
    """A chat model behind an OpenAI-compatible Chat Completions API, streamed.

    ``base_url`` defaults to ``$OPENAI_BASE_URL``, else OpenAI's API. ``model``
    defaults to ``$BACKLINE_MODEL``, else (on OpenAI's API only) ``DEFAULT_MODEL``.
    ``api_key`` defaults to the endpoint's key (``OPENAI_API_KEY``, or e.g.
    ``GROQ_API_KEY`` on Groq); a local server needs none. Failures with 408, 409,
    429 and 5xx, connection failures and cut streams are retried up to
    ``max_retries`` times with exponential backoff (``retry_base_delay`` doubling,
    capped at ``retry_max_delay``; a longer ``retry-after`` is honoured up to the
    cap) — only while nothing has been yielded yet. ``timeout`` bounds each network
    wait. Like ``AnthropicLLM``, each request has two deadlines, retries included: its
    first output (text or a tool call) within ``first_token_timeout`` seconds and its
    whole response within ``response_timeout`` (defaults ``Limits.llm_first_token_timeout``
    and ``Limits.llm_response_timeout``; ``None`` turns one off); a deadline that passes
    fails the request with ``LLMTimeoutError``.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens: int | None = None,
        max_retries: int = 3,
        retry_base_delay: float = 0.5,
        retry_max_delay: float = 8.0,
        timeout: float | None = 60.0,
        first_token_timeout: float | None = DEFAULT_LIMITS.llm_first_token_timeout,
        response_timeout: float | None = DEFAULT_LIMITS.llm_response_timeout,
        client: openai.AsyncOpenAI | None = None,
    ) -> None:
        if max_tokens is not None and max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        policy = RequestPolicy(
            max_retries=max_retries,
            retry_base_delay=retry_base_delay,
            retry_max_delay=retry_max_delay,
            first_token_timeout=first_token_timeout,
            response_timeout=response_timeout,
        )
        if client is not None and (api_key is not None or base_url is not None):
            raise ValueError("pass either client= or api_key=/base_url=, not both")
        where = str(client.base_url) if client is not None else base_url
        self._endpoint = Endpoint.of(where)
        chosen = model or os.environ.get(MODEL_ENV) or self._endpoint.default_model
        if not chosen:
            raise ValueError(
                f"no model named for {self._endpoint.url}: pass -m MODEL (or set "
                f"{MODEL_ENV}), e.g. {self._endpoint.example_model}"
            )
        self._model = chosen
        self._max_tokens = max_tokens
        self._timeout = timeout
        self._missing_key: str | None = None
        if client is None:
            key = api_key if api_key is not None else self._endpoint.find_key()
            if key is None:
                self._missing_key = self._endpoint.missing_key_message()
            self._client = openai.AsyncOpenAI(
                api_key=key or "unused",  # a local server ignores it; a missing one is reported
                base_url=self._endpoint.url,
                max_retries=0,
                timeout=timeout if timeout is not None else openai.NOT_GIVEN,
            )
            self._owns_client = True
        else:
            self._client = client.with_options(max_retries=0)
            self._owns_client = False
        self._streams = ProviderStreams(
            self._open,
            _Decoder,
            self._failure,
            label=f"{self._endpoint.name} API at {self._endpoint.url}",
            adapter="OpenAILLM",
            policy=policy,
            stall_hint=_STALL_HINT,
            log=log,
        )

    @property
    def model(self) -> str:
        """The model name sent with each request."""
        return self._model

    @property
    def base_url(self) -> str:
        """The endpoint requests go to."""
        return self._endpoint.url

    @property
    def client(self) -> openai.AsyncOpenAI:
        """The ``openai`` client (its own retries are off: this class retries)."""
        return self._client

    @property
    def missing_key(self) -> str | None:
        """What to do when the endpoint needs an API key and none was found, else ``None``."""
        return self._missing_key

    def __repr__(self) -> str:
        return f"OpenAILLM(model={self._model!r}, base_url={self._endpoint.url!r})"

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
        if self._missing_key is not None:
            raise LLMError(self._missing_key, status=401)
        params: dict[str, Any] = {
            "model": self._model,
            "messages": convert_context(chat_ctx),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self._max_tokens is not None:
            params[self._endpoint.max_tokens_field] = self._max_tokens
        if tools:
            params["tools"] = convert_tools(tools)
        choice = convert_tool_choice(tool_choice, tools)
        if choice is not None:
            params["tool_choice"] = choice
        return params

    async def _open(self, params: dict[str, Any]) -> AsyncIterator[ChatCompletionChunk]:
        stream = await cast(Any, self._client.chat.completions).create(**params)
        return cast("AsyncIterator[ChatCompletionChunk]", stream)

    def _failure(self, e: BaseException) -> ProviderFailure | None:
        """A failed request (``None``: not one, raised as it is)."""
        where = self._endpoint.url
        if isinstance(e, openai.APIStatusError):
            return self._status_failure(e)
        if isinstance(e, openai.APITimeoutError):
            waited = f" after {self._timeout:g}s" if self._timeout is not None else ""
            return ProviderFailure(
                f"Timed out{waited} waiting for {where} (the server is slow or overloaded, "
                "or a local model is still loading: try again)",
                retryable=True,
            )
        if isinstance(e, openai.APIConnectionError | httpx2.TransportError):
            detail = e.__cause__ if isinstance(e, openai.APIError) and e.__cause__ else e
            return ProviderFailure(
                f"Could not reach the OpenAI-compatible API at {where}: {detail!r} — is the "
                "server running, and is --base-url (OPENAI_BASE_URL) right?",
                retryable=True,
            )
        if isinstance(e, openai.APIError):
            return self._stream_error_failure(e)
        return None

    def _stream_error_failure(self, e: openai.APIError) -> ProviderFailure:
        """An ``error`` object inside a 200 stream."""
        body = e.body if isinstance(e.body, dict) else {}
        kind = str(body.get("type") or body.get("code") or "")
        status = _STATUS_OF_ERROR_TYPE.get(kind, 500)
        label = f"{self._endpoint.name} API error {status}" + (f" {kind}" if kind else "")
        return ProviderFailure(
            f"{label}: {e.message}", retryable=retryable_status(status), status=status
        )

    def _status_failure(self, e: openai.APIStatusError) -> ProviderFailure:
        status = e.status_code
        body = e.body if isinstance(e.body, dict) else {}
        kind = str(body.get("type") or body.get("code") or "")
        api_message = str(body.get("message") or e.body or e.message)
        label = f"{self._endpoint.name} API error {status}" + (f" {kind}" if kind else "")
        message = f"{label}: {api_message}"
        headers = e.response.headers
        retryable = retryable_status(status, headers)
        mentions_model = "model" in api_message.lower() or body.get("code") == "model_not_found"
        if status == 401:
            message = (
                f"{label}: the API key was rejected by {self._endpoint.url} — "
                f"{self._endpoint.key_hint()}. The API said: {api_message}"
            )
        elif status == 403:
            message += " (the API key may not have access to this model or feature)"
        elif status in (400, 404) and mentions_model:
            message += (
                f" — the model {self._model!r} is not available at {self._endpoint.url}: "
                f"check -m MODEL (or {MODEL_ENV}){self._endpoint.model_hint}"
            )
        elif status == 404:
            message += (
                f" — check the base URL {self._endpoint.url!r} (--base-url / OPENAI_BASE_URL; "
                "it usually ends in /v1)"
            )
        elif status == 429:
            message += " (rate limited)"
        return ProviderFailure(
            message, retryable=retryable, status=status, retry_after=retry_after_seconds(headers)
        )


@dataclass
class _ToolCall:
    """One tool call, gathered from its pieces.

    Every string field is joined by the call's index, as the ``openai`` SDK's stream
    accumulator does (``accumulate_delta``): OpenAI sends the id and the name whole in
    the first piece, but a server may split them. One difference: an id or a name
    that repeats the whole value so far is taken once, not joined (LiteLLM, DeepSeek,
    Qwen and Fireworks send the id, Fireworks the name too, in every piece).
    """

    fallback_id: str
    call_id_so_far: str = ""
    name: str = ""
    parts: list[str] = field(default_factory=list)

    @property
    def call_id(self) -> str:
        return self.call_id_so_far or self.fallback_id

    def add(self, call_id: str | None, name: str | None, arguments: str | None) -> None:
        self.call_id_so_far = _joined(self.call_id_so_far, call_id)
        self.name = _joined(self.name, name)
        if arguments:
            self.parts.append(arguments)

    def chunk(self) -> ToolCallChunk:
        raw = "".join(self.parts)
        return ToolCallChunk(self.call_id, self.name, raw if raw.strip() else "{}")


def _joined(so_far: str, piece: str | None) -> str:
    if not piece or piece == so_far:
        return so_far
    return so_far + piece


class _Decoder(StreamDecoder["ChatCompletionChunk"]):
    """Turns stream chunks into backline chunks; collects tool calls, usage, finish."""

    event_name = "a chunk"

    def __init__(self) -> None:
        self._calls: dict[int, _ToolCall] = {}
        self._finished = False

    def feed(self, event: ChatCompletionChunk) -> Sequence[ChatChunk]:
        usage = event.usage
        if usage is not None:
            self.input_tokens = usage.prompt_tokens or 0
            self.output_tokens = usage.completion_tokens or 0
            details = usage.prompt_tokens_details
            self.cache_read_input_tokens = (
                (details.cached_tokens or 0) if details is not None else 0
            )
        out: list[ChatChunk] = []
        for choice in event.choices:
            if choice.index != 0:
                continue
            delta = choice.delta
            for call in delta.tool_calls or ():
                index = self._index_of(call.index, call.id)
                acc = self._calls.get(index)
                if acc is None:
                    acc = self._calls[index] = _ToolCall(f"call_{len(self._calls) + 1}")
                    # Output has begun (for the deadlines): its chunk comes at the end.
                    self.output_started = True
                function = call.function
                acc.add(
                    call.id,
                    function.name if function is not None else None,
                    function.arguments if function is not None else None,
                )
            text = delta.content or delta.refusal
            if text:
                out.append(TextDelta(text))
            if choice.finish_reason is not None:
                self._finished = True
                self.stop_reason = choice.finish_reason
        return out

    def _index_of(self, index: int | None, call_id: str | None) -> int:
        """The call a piece belongs to. Some servers leave ``index`` out: a new id starts
        a new call, a piece without one continues the last."""
        if isinstance(index, int):
            return index
        known = {c.call_id: i for i, c in self._calls.items()}
        if call_id and call_id not in known:
            return max(self._calls, default=-1) + 1
        return known.get(call_id or "", max(self._calls, default=0))

    def end(self) -> Sequence[ChatChunk]:
        """The tool calls, complete, in index order (sent once the reply finished)."""
        if not self._finished:
            raise BrokenStream("the response stream ended before a finish_reason")
        calls = [self._calls[index] for index in sorted(self._calls)]
        return [call.chunk() for call in calls if call.name]
