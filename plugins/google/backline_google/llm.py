"""``GeminiLLM``: backline's ``LLM`` protocol on Google's Gemini API, through google-genai.

Imported on demand (``from backline_google.llm import GeminiLLM``): it pulls in
``google-genai``. See the plugin's README and docs/providers.md.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import sys
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import httpx2
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

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

from . import _config
from ._config import DEFAULT_MODEL, MODEL_ENV
from ._convert import CallMemory, convert_context, convert_tool_choice, convert_tools

__all__ = ["DEFAULT_MODEL", "MODEL_ENV", "GeminiLLM"]

log = logging.getLogger(__name__)

#: Appended to a passed deadline's message when no attempt failed.
_STALL_HINT = " (the API may be overloaded, or the model slow to start: try again)"

# One attempt per request in google-genai (its own retries, and the aiohttp path's
# implicit retry on a connection error, are off): ProviderStreams retries.
_ONE_ATTEMPT = types.HttpOptions(retry_options=types.HttpRetryOptions(attempts=1))


@dataclass(frozen=True, slots=True)
class _Request:
    contents: list[dict[str, Any]]
    config: types.GenerateContentConfig


class GeminiLLM:
    """A Gemini model behind the Gemini API (or a compatible endpoint), streamed.

    ``model`` defaults to ``$BACKLINE_MODEL``, else ``DEFAULT_MODEL``. ``api_key``
    defaults to ``$GEMINI_API_KEY``, else ``$GOOGLE_API_KEY``, else the stored key
    (``backline keys set GEMINI_API_KEY``). ``base_url`` defaults to
    ``$GOOGLE_GEMINI_BASE_URL``, else the Gemini API. Failures with 408, 409, 429 and
    5xx, connection failures and cut streams are retried up to ``max_retries`` times
    with exponential backoff (``retry_base_delay`` doubling, capped at
    ``retry_max_delay``; a longer ``retry-after`` or ``RetryInfo`` delay is honoured up
    to the cap), only while nothing has been yielded. ``timeout`` bounds each network
    wait. ``thinking_budget`` (tokens; ``0`` turns thinking off where the model allows
    it) and ``thinking_level`` (``"minimal"``, ``"low"``, ``"medium"``, ``"high"``, on
    models that take a level) are sent as the ``thinking_config`` when given (a voice
    agent waits for the thinking before the first word). Like every adapter, a
    request's first output must come within ``first_token_timeout`` and its whole
    response within ``response_timeout`` (``Limits``' defaults; ``None`` turns one
    off): ``LLMTimeoutError`` otherwise.
    ``client=`` uses a ``genai.Client`` of yours instead (its retries are not used;
    ``aclose`` leaves it open).
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens: int | None = None,
        thinking_budget: int | None = None,
        thinking_level: str | None = None,
        max_retries: int = 3,
        retry_base_delay: float = 0.5,
        retry_max_delay: float = 8.0,
        timeout: float | None = 60.0,
        first_token_timeout: float | None = DEFAULT_LIMITS.llm_first_token_timeout,
        response_timeout: float | None = DEFAULT_LIMITS.llm_response_timeout,
        client: genai.Client | None = None,
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
        self._model = model or os.environ.get(MODEL_ENV) or DEFAULT_MODEL
        self._max_tokens = max_tokens
        thinking: dict[str, Any] = {}
        if thinking_budget is not None:
            thinking["thinking_budget"] = thinking_budget
        if thinking_level is not None:
            thinking["thinking_level"] = thinking_level.upper()
        self._thinking = thinking
        self._timeout = timeout
        self._missing_key: str | None = None
        self._key_name: str | None = None
        self._memory = CallMemory()
        self._http: httpx2.AsyncClient | None = None
        if client is None:
            self._url = _config.base_url(base_url)
            key = api_key
            if key is None:
                found = _config.find_key()
                key, self._key_name = (found.value, found.name) if found else (None, None)
            if not key:
                self._missing_key = _config.missing_key_message(self._url)
            # Our own HTTP client: one transport whatever is installed (google-genai
            # would use aiohttp when it is there), closed by aclose.
            self._http = httpx2.AsyncClient(
                timeout=timeout, event_hooks={"response": [_note_response]}
            )
            options = types.HttpOptions(base_url=self._url, httpx_async_client=self._http)
            if timeout is not None:
                options.timeout = max(1, round(timeout * 1000))  # milliseconds
            if response_timeout is not None:
                # google-genai would ask the server to finish within ``timeout`` (the
                # header's default); the whole response has response_timeout.
                options.headers = {"X-Server-Timeout": str(math.ceil(response_timeout))}
            self._client = genai.Client(
                api_key=key or "unused", vertexai=False, http_options=options
            )
        else:
            self._url = "the Gemini API (a given client)"
            self._client = client
        self._streams: ProviderStreams[_Request, types.GenerateContentResponse] = ProviderStreams(
            self._open,
            self._new_decoder,
            self._failure,
            label=f"Gemini API at {self._url}",
            adapter="GeminiLLM",
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
        return self._url

    @property
    def client(self) -> genai.Client:
        """The ``google-genai`` client (each request asks it for one attempt only)."""
        return self._client

    @property
    def missing_key(self) -> str | None:
        """What to do when no API key was found, else ``None``."""
        return self._missing_key

    def __repr__(self) -> str:
        return f"GeminiLLM(model={self._model!r}, base_url={self._url!r})"

    async def aclose(self) -> None:
        """Close the clients this object created (a given client is left open)."""
        if self._http is None:
            return
        http, self._http = self._http, None
        try:
            await self._client.aio.aclose()
            self._client.close()
        finally:
            await http.aclose()

    def chat(
        self,
        chat_ctx: ChatContext,
        *,
        tools: Sequence[FunctionTool] = (),
        tool_choice: ToolChoice | None = None,
    ) -> LLMStream:
        """Stream a reply to ``chat_ctx`` (converted now; errors surface when iterated)."""
        try:
            request = self._request(chat_ctx, tools, tool_choice)
        except LLMError as e:
            return failed_stream(e)
        return self._streams.stream(request)

    def _request(
        self,
        chat_ctx: ChatContext,
        tools: Sequence[FunctionTool],
        tool_choice: ToolChoice | None,
    ) -> _Request:
        if self._missing_key is not None:
            raise LLMError(self._missing_key, status=401)
        system, contents = convert_context(chat_ctx, self._memory)
        config: dict[str, Any] = {
            "http_options": _ONE_ATTEMPT,
            # backline runs the tools, and retries: google-genai's automatic function
            # calling and automatic continuation are off.
            "automatic_function_calling": {"disable": True},
            "automatic_continuation": False,
        }
        if system is not None:
            config["system_instruction"] = system
        if self._max_tokens is not None:
            config["max_output_tokens"] = self._max_tokens
        if self._thinking:
            config["thinking_config"] = self._thinking
        if tools:
            config["tools"] = convert_tools(tools)
        choice = convert_tool_choice(tool_choice, tools)
        if choice is not None:
            config["tool_config"] = choice
        try:
            return _Request(contents, types.GenerateContentConfig.model_validate(config))
        except ValueError as e:  # pydantic's ValidationError is a ValueError
            raise LLMError(f"GeminiLLM could not build the request: {e}") from None

    async def _open(self, request: _Request) -> AsyncIterator[types.GenerateContentResponse]:
        stream = await self._client.aio.models.generate_content_stream(
            model=self._model,
            contents=request.contents,  # ContentDicts: google-genai validates them
            config=request.config,
        )
        return _Events(stream)

    def _new_decoder(self) -> _Decoder:
        return _Decoder(self._memory)

    def _failure(self, e: BaseException) -> ProviderFailure | None:
        """A failed request (``None``: not one, raised as it is)."""
        if isinstance(e, genai_errors.APIError):
            return self._status_failure(e)
        if isinstance(e, httpx2.TimeoutException | TimeoutError):
            waited = f" after {self._timeout:g}s" if self._timeout is not None else ""
            return ProviderFailure(
                f"Timed out{waited} waiting for the Gemini API at {self._url} (it is slow "
                "or overloaded: try again)",
                retryable=True,
            )
        if isinstance(e, httpx2.TransportError | ConnectionError) or _is_aiohttp_error(e):
            return ProviderFailure(
                f"Could not reach the Gemini API at {self._url}: {e!r} — is the network up, "
                f"and is --gemini-base-url ({_config.BASE_URL_ENV}) right, if set?",
                retryable=True,
            )
        return None

    def _status_failure(self, e: genai_errors.APIError) -> ProviderFailure:
        status = int(e.code) if isinstance(e.code, int) else 500
        kind = str(e.status or "")
        api_message = " ".join(str(e.message or e.details or e).split())
        label = f"Gemini API error {status}" + (f" {kind}" if kind else "")
        message = f"{label}: {api_message}"
        headers = _headers(e)
        lowered = api_message.lower()
        if status == 401 or (status in (400, 403) and "api key" in lowered):
            message = (
                f"{label}: the API key was rejected by {self._url} — "
                f"{_config.key_hint(self._key_name)}. The API said: {api_message}"
            )
        elif status == 403:
            message += (
                " (the API key may not have access to this model, or the Generative "
                "Language API is not enabled for its project)"
            )
        elif status in (400, 404) and "model" in lowered:
            message += (
                f" — the model {self._model!r} is not available at {self._url}: check -m "
                f"MODEL (or {MODEL_ENV}), e.g. {DEFAULT_MODEL} (`backline models` lists some)"
            )
        elif status == 404:
            message += (
                f" — check the base URL {self._url!r} (--gemini-base-url / {_config.BASE_URL_ENV})"
            )
        elif status == 429:
            message += " (rate limited, or the key's quota is used up)"
        retry_after = retry_after_seconds(headers)
        if retry_after is None:
            retry_after = _retry_delay(e.details)
        return ProviderFailure(
            message,
            retryable=retryable_status(status, headers),
            status=status,
            retry_after=retry_after,
        )


# The HTTP responses the current attempt opened (set by ``_Events`` around each read).
_RESPONSES: ContextVar[list[httpx2.Response] | None] = ContextVar(
    "backline_google_responses", default=None
)


async def _note_response(response: httpx2.Response) -> None:
    """The HTTP client's response hook: remember the response for ``_Events.aclose``."""
    responses = _RESPONSES.get()
    if responses is not None:
        responses.append(response)


class _Events:
    """google-genai's stream of one request, closed for sure: its generators do not close
    the ones they iterate, so closing it would leave the HTTP response open until garbage
    collection; ``aclose`` also closes the responses it opened (on our own client)."""

    def __init__(self, stream: AsyncIterator[types.GenerateContentResponse]) -> None:
        self._stream = stream
        self._responses: list[httpx2.Response] = []

    def __aiter__(self) -> _Events:
        return self

    async def __anext__(self) -> types.GenerateContentResponse:
        token = _RESPONSES.set(self._responses)
        try:
            return await anext(self._stream)
        finally:
            _RESPONSES.reset(token)

    async def aclose(self) -> None:
        try:
            close = getattr(self._stream, "aclose", None)
            if close is not None:
                await close()
        finally:
            for response in self._responses:
                await response.aclose()


def _headers(e: genai_errors.APIError) -> dict[str, str]:
    raw = getattr(getattr(e, "response", None), "headers", None)
    if not isinstance(raw, Mapping):
        return {}
    return {str(k).lower(): str(v) for k, v in raw.items()}


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def _retry_delay(details: Any) -> float | None:
    """The ``retryDelay`` of a ``google.rpc.RetryInfo`` in an error body (``"17s"``)."""
    error = details.get("error", details) if isinstance(details, dict) else None
    items = error.get("details") if isinstance(error, dict) else None
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict) and str(item.get("@type", "")).endswith("RetryInfo"):
            match = _DURATION.match(str(item.get("retryDelay", "")))
            if match:
                return float(match.group(1))
    return None


def _is_aiohttp_error(e: BaseException) -> bool:
    """A connection failure of aiohttp (a given client may use it; never imported here)."""
    aiohttp = sys.modules.get("aiohttp")
    client_error = getattr(aiohttp, "ClientError", None)
    return isinstance(client_error, type) and isinstance(e, client_error)


class _Decoder(StreamDecoder[types.GenerateContentResponse]):
    """Turns streamed ``GenerateContentResponse`` s into backline chunks: text as it
    comes; function calls (each whole in one part) held until the reply finished."""

    event_name = "a response chunk"

    def __init__(self, memory: CallMemory) -> None:
        self._memory = memory
        self._calls: list[tuple[ToolCallChunk, bool, bytes | None]] = []

    def feed(self, event: types.GenerateContentResponse) -> Sequence[ChatChunk]:
        usage = event.usage_metadata
        if usage is not None:
            self.input_tokens = usage.prompt_token_count or 0
            self.output_tokens = (usage.candidates_token_count or 0) + (
                usage.thoughts_token_count or 0
            )
            self.cache_read_input_tokens = usage.cached_content_token_count or 0
        candidates = event.candidates or []
        feedback = event.prompt_feedback
        if not candidates and feedback is not None and feedback.block_reason is not None:
            reason = _name(feedback.block_reason)
            why = f": {feedback.block_reason_message}" if feedback.block_reason_message else ""
            raise LLMError(f"Gemini blocked the prompt ({reason}){why}", status=400)
        out: list[ChatChunk] = []
        for candidate in candidates[:1]:
            content = candidate.content
            for part in (content.parts if content is not None else None) or ():
                call = part.function_call
                if call is not None:
                    self._add_call(call, part.thought_signature)
                elif part.text and not part.thought:
                    out.append(TextDelta(part.text))
            if candidate.finish_reason is not None:
                self.stop_reason = _name(candidate.finish_reason)
        return out

    def _add_call(self, call: types.FunctionCall, signature: bytes | None) -> None:
        own_id = bool(call.id)
        call_id = call.id or f"gemini_call_{uuid.uuid4().hex[:16]}"
        arguments = json.dumps(call.args or {}, ensure_ascii=False, separators=(",", ":"))
        self._calls.append((ToolCallChunk(call_id, call.name or "", arguments), own_id, signature))
        self.output_started = True  # its chunk comes when the reply finished

    def end(self) -> Sequence[ChatChunk]:
        if self.stop_reason is None:
            raise BrokenStream("the response stream ended before a finishReason")
        chunks: list[ChatChunk] = []
        for chunk, own_id, signature in self._calls:
            if not chunk.name:
                continue
            self._memory.remember(chunk.call_id, own_id=own_id, signature=signature)
            chunks.append(chunk)
        return chunks


def _name(value: Any) -> str:
    """An enum's wire name (``FinishReason.STOP`` -> ``"STOP"``), else the text."""
    return str(getattr(value, "value", value))
