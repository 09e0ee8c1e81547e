"""A failed audio request as one line: what failed, and what to do.

Shaped like the LLM adapter's messages (``OpenAILLM``): the endpoint's name and
status, the API's own message, and the fix (the key's variable, the model or voice
option, the base URL). Imports ``openai``: used by the engines only.
"""

from __future__ import annotations

from typing import Any

import httpx2
import openai

from ._audio import AUDIO_BASE_URL_ENV, OpenAISpeechError
from ._endpoints import BASE_URL_ENV, Endpoint


def speech_failure(
    e: BaseException,
    endpoint: Endpoint,
    *,
    what: str,
    path: str,
    model: str,
    voice: str | None = None,
    timeout: float | None = None,
) -> OpenAISpeechError | None:
    """``e`` as an ``OpenAISpeechError``, or ``None`` if it is not a failed request.
    ``what``: ``transcription`` or ``speech``; ``path``: the endpoint's path."""
    where = endpoint.url
    if isinstance(e, openai.APIStatusError):
        return _status_failure(e, endpoint, what=what, path=path, model=model, voice=voice)
    if isinstance(e, openai.APITimeoutError | httpx2.TimeoutException):
        waited = f" after {timeout:g}s" if timeout is not None else ""
        return OpenAISpeechError(
            f"{endpoint.name} {what} timed out{waited} waiting for {where} (the server is slow "
            "or overloaded, or a local model is still loading: try again)"
        )
    if isinstance(e, openai.APIConnectionError | httpx2.TransportError):
        detail = e.__cause__ if isinstance(e, openai.APIError) and e.__cause__ else e
        return OpenAISpeechError(
            f"Could not reach the OpenAI-compatible audio API at {where} for {what}: "
            f"{detail!r} — is the server running, and is the base URL right "
            f"({AUDIO_BASE_URL_ENV} or {BASE_URL_ENV})?"
        )
    if isinstance(e, openai.APIError):
        return OpenAISpeechError(f"{endpoint.name} {what} failed: {e.message}")
    return None


def _api_message(e: openai.APIStatusError) -> str:
    """The server's own words: OpenAI's ``error.message``, FastAPI's ``detail``, or the
    body as it is."""
    body: Any = e.body
    if isinstance(body, dict):
        detail = body.get("message") or body.get("detail") or body.get("error")
        if isinstance(detail, dict):
            detail = detail.get("message") or detail
        if isinstance(detail, list) and detail and isinstance(detail[0], dict):
            detail = detail[0].get("msg") or detail[0]
        if detail:
            return " ".join(str(detail).split())
    if isinstance(body, str) and body.strip():
        return " ".join(body.split())[:300]
    return e.message


def _status_failure(
    e: openai.APIStatusError,
    endpoint: Endpoint,
    *,
    what: str,
    path: str,
    model: str,
    voice: str | None,
) -> OpenAISpeechError:
    status = e.status_code
    said = _api_message(e)
    lowered = said.lower()
    code = str(e.code or "")
    label = f"{endpoint.name} {what} error {status}"
    where = endpoint.url
    if status == 401:
        message = (
            f"{label}: the API key was rejected by {where} — {endpoint.key_hint()}. "
            f"The API said: {said}"
        )
    elif status == 403:
        message = f"{label}: {said} (the API key may not have access to {model!r})"
    elif status in (400, 404, 422) and ("model" in lowered or code == "model_not_found"):
        message = (
            f"{label}: {said} — the model {model!r} is not available at {where}: choose one "
            f"it serves (the engine's model option, e.g. --{_flag(what)}-model)"
        )
    elif status in (400, 404, 422) and voice is not None and "voice" in lowered:
        message = (
            f"{label}: {said} — the voice {voice!r} is not one {where} has: choose another "
            "(the engine's voice option, e.g. --tts-voice)"
        )
    elif status == 404:
        message = (
            f"{label}: {said} — {where} has no {path} endpoint: check the base URL "
            f"({AUDIO_BASE_URL_ENV} or {BASE_URL_ENV}; it usually ends in /v1; whisper.cpp's "
            "server needs --inference-path /v1/audio/transcriptions)"
        )
    elif status == 429:
        message = f"{label}: {said} (rate limited or out of quota: wait, or check your plan)"
    elif status >= 500:
        message = f"{label}: {said} (the server failed: try again later)"
    else:
        message = f"{label}: {said}"
    return OpenAISpeechError(message, status=status)


def _flag(what: str) -> str:
    return "stt" if what == "transcription" else "tts"
