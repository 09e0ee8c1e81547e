"""``OpenAISTT``: speech-to-text on any OpenAI-compatible ``/audio/transcriptions``.

OpenAI, Groq, whisper.cpp's server (``--inference-path /v1/audio/transcriptions``),
Speaches ... Each utterance goes as a 16 kHz mono WAV file in a multipart request
(``file``, ``model``, ``language``, ``response_format``); the JSON answer's ``text`` is
the transcript. A ``BatchSTT``: the SDK buffers the utterance and calls
``transcribe`` in a worker thread when it ends. Imported on demand (it pulls in
``openai``): ``from backline_openai.stt import OpenAISTT``.
"""

from __future__ import annotations

import io
import wave
from typing import Any, Literal

import openai

from backline.speech import AudioFrame, BatchSTT

from ._audio import OpenAISpeechError, audio_endpoint, default_stt_model, missing_key_message
from ._audio_errors import speech_failure

__all__ = ["MIN_SECONDS", "OpenAISTT", "wav_bytes"]

MIN_SECONDS = 0.1
"""Shorter audio is not sent (OpenAI rejects it as too short): its transcript is empty."""

_PATH = "/audio/transcriptions"


def wav_bytes(frame: AudioFrame) -> bytes:
    """``frame`` as a 16-bit PCM WAV file."""
    out = io.BytesIO()
    with wave.open(out, "wb") as f:
        f.setnchannels(frame.channels)
        f.setsampwidth(2)
        f.setframerate(frame.sample_rate)
        f.writeframes(frame.data)
    return out.getvalue()


class OpenAISTT(BatchSTT):
    """Transcription by an OpenAI-compatible API.

    ``model`` defaults to the endpoint's (``gpt-4o-mini-transcribe`` on OpenAI,
    ``whisper-large-v3-turbo`` on Groq, ``whisper-1`` elsewhere); ``language`` is an
    ISO-639-1 code (``en``; ``en-US`` is sent as ``en``), ``None`` to detect it;
    ``prompt`` guides the style or spelling. ``base_url`` and ``api_key`` as for the
    LLM (``OPENAI_AUDIO_BASE_URL``, else ``OPENAI_BASE_URL``, else OpenAI's API; the
    endpoint's key). ``interim_every`` (seconds of new audio): transcribe the audio so
    far that often for interim transcripts, one request each (off by default).
    ``timeout`` bounds each network wait; ``max_retries`` retries 408/409/429/5xx
    and connection failures (the ``openai`` client's backoff).
    """

    name = "openai"
    sample_rate = 16000

    def __init__(
        self,
        model: str | None = None,
        *,
        language: str | None = None,
        prompt: str | None = None,
        response_format: Literal["json", "verbose_json"] = "json",
        base_url: str | None = None,
        api_key: str | None = None,
        interim_every: float | None = None,
        timeout: float = 30.0,
        max_retries: int = 1,
    ) -> None:
        if response_format not in ("json", "verbose_json"):
            raise ValueError(
                f"openai speech-to-text: response_format is json or verbose_json, not "
                f"{response_format!r}"
            )
        if interim_every is not None and interim_every <= 0:
            raise ValueError(f"interim_every must be positive seconds, got {interim_every}")
        self.endpoint = audio_endpoint(base_url)
        if api_key is None:
            missing = missing_key_message(self.endpoint, "speech-to-text")
            if missing is not None:
                raise OpenAISpeechError(missing, status=401)
            api_key = self.endpoint.find_key()
        self.model = model or default_stt_model(self.endpoint)
        self.language = _iso_639_1(language)
        self.prompt = prompt
        self.response_format: Literal["json", "verbose_json"] = response_format
        self.interim_every = interim_every
        self.timeout = timeout
        self._client = openai.OpenAI(
            api_key=api_key or "unused",  # a server of your own ignores it
            base_url=self.endpoint.url,
            max_retries=max_retries,
            timeout=timeout,
        )

    @property
    def base_url(self) -> str:
        return self.endpoint.url

    def __repr__(self) -> str:
        return f"OpenAISTT(model={self.model!r}, base_url={self.endpoint.url!r})"

    def transcribe(self, frame: AudioFrame) -> str:
        """The text of one utterance (run in a worker thread by ``BatchSTT``)."""
        if frame.duration < MIN_SECONDS:
            return ""
        options: dict[str, Any] = {}
        if self.language:
            options["language"] = self.language
        if self.prompt:
            options["prompt"] = self.prompt
        try:
            result: Any = self._client.audio.transcriptions.create(
                file=("speech.wav", wav_bytes(frame), "audio/wav"),
                model=self.model,
                response_format=self.response_format,
                **options,
            )
        except Exception as e:
            failure = speech_failure(
                e,
                self.endpoint,
                what="transcription",
                path=_PATH,
                model=self.model,
                timeout=self.timeout,
            )
            if failure is None:
                raise
            raise failure from None
        if isinstance(result, str):  # a server that answers in plain text
            return result.strip()
        return str(getattr(result, "text", "") or "").strip()

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()


def _iso_639_1(language: str | None) -> str | None:
    """``en-US`` / ``en_us`` -> ``en`` (the API takes ISO-639-1 codes)."""
    if not language or language.lower() == "auto":
        return None
    return language.replace("_", "-").split("-")[0].lower()
