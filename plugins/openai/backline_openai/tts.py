"""``OpenAITTS``: text-to-speech on any OpenAI-compatible ``/audio/speech``, streamed.

OpenAI, Kokoro-FastAPI, Speaches ... The request is JSON (``model``, ``input``,
``voice``, ``response_format``, ``speed``); the audio is read as it arrives and each
chunk is yielded as frames at once, so the first sound plays while the server is
still speaking. ``pcm`` is raw 16-bit little-endian mono (24 kHz on OpenAI's API);
``wav`` is read from its header (rate and channels), however long the server says its
data is. Closing the iterator (an interrupted reply) closes the HTTP response.
Imported on demand (it pulls in ``openai``): ``from backline_openai.tts import
OpenAITTS``.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from typing import Any, Literal

import openai

from backline.speech import AudioFrame, split_frames

from ._audio import (
    DEFAULT_VOICE,
    OpenAISpeechError,
    audio_endpoint,
    default_response_format,
    default_tts_model,
    missing_key_message,
)
from ._audio_errors import speech_failure

__all__ = ["PCM_SAMPLE_RATE", "OpenAITTS", "PCMReader", "WAVReader"]

PCM_SAMPLE_RATE = 24000
"""The rate of OpenAI's ``pcm`` output."""

FRAME_SECONDS = 0.1  # a chunk longer than this is yielded as several frames
_PATH = "/audio/speech"


class PCMReader:
    """Raw 16-bit PCM in chunks of any length -> frames of whole samples."""

    def __init__(self, sample_rate: int, channels: int = 1) -> None:
        self.sample_rate = sample_rate
        self.channels = channels
        self._rest = b""

    def feed(self, chunk: bytes) -> list[AudioFrame]:
        data = self._rest + chunk
        whole = len(data) - len(data) % (2 * self.channels)
        self._rest = data[whole:]
        if not whole:
            return []
        frame = AudioFrame(data[:whole], self.sample_rate, self.channels)
        return list(split_frames(frame, FRAME_SECONDS))

    def end(self) -> None:
        """The stream ended (a dangling half sample is dropped)."""


class WAVReader:
    """A streamed 16-bit PCM WAV file -> frames, as soon as its header has been read.
    A data size of 0 or ~4 GiB (a stream of unknown length) means "to the end"."""

    def __init__(self) -> None:
        self._head = b""
        self._pcm: PCMReader | None = None
        self._left: int | None = None  # data bytes still expected (None: to the end)

    def feed(self, chunk: bytes) -> list[AudioFrame]:
        if self._pcm is None:
            self._head += chunk
            chunk = self._parse_header()
            if self._pcm is None:
                return []
        if self._left is not None:
            chunk, self._left = chunk[: self._left], max(0, self._left - len(chunk))
        return self._pcm.feed(chunk)

    def end(self) -> None:
        if self._pcm is None:
            raise OpenAISpeechError(
                "the speech response was not a 16-bit PCM WAV file (no data chunk in "
                f"{len(self._head)} bytes): choose response_format='pcm' for this server"
            )

    def _parse_header(self) -> bytes:
        """Reads the header once ``data`` has begun; returns the audio after it."""
        head = self._head
        if len(head) < 12:
            return b""
        if head[:4] != b"RIFF" or head[8:12] != b"WAVE":
            raise OpenAISpeechError(
                f"the speech response is not a WAV file (it starts {head[:12]!r}): choose "
                "response_format='pcm' for this server"
            )
        pos = 12
        rate = channels = bits = 0
        while len(head) >= pos + 8:
            kind, size = head[pos : pos + 4], struct.unpack("<I", head[pos + 4 : pos + 8])[0]
            body = pos + 8
            if kind == b"data":
                if bits != 16 or not rate or not channels:
                    raise OpenAISpeechError(
                        f"the speech response is a WAV file of {bits}-bit samples at {rate} Hz; "
                        "backline reads 16-bit PCM: choose response_format='pcm'"
                    )
                self._pcm = PCMReader(rate, channels)
                self._left = None if size == 0 or size >= 0x7FFF0000 else size
                return head[body:]
            if len(head) < body + size:
                return b""  # the chunk is not all here yet
            if kind == b"fmt ":
                fmt, channels, rate = struct.unpack("<HHI", head[body : body + 8])
                bits = struct.unpack("<H", head[body + 14 : body + 16])[0]
                if fmt not in (1, 0xFFFE):
                    raise OpenAISpeechError(
                        f"the speech response is a WAV file in format {fmt}, not PCM: "
                        "choose response_format='pcm'"
                    )
            pos = body + size + (size & 1)
        return b""


class OpenAITTS:
    """Speech by an OpenAI-compatible API, streamed as it is made.

    ``model`` defaults to the endpoint's (``gpt-4o-mini-tts`` on OpenAI, ``tts-1``
    elsewhere); ``voice`` to ``alloy`` (on a server of your own, one of its voices,
    e.g. Kokoro's ``af_heart``); ``instructions`` steer the voice of
    ``gpt-4o-mini-tts``; ``speed`` 0.25 to 4. ``response_format``: ``pcm`` (the
    default on OpenAI's API; ``sample_rate`` says its rate, 24 kHz there) or ``wav``
    (the default elsewhere: its header says the rate). ``base_url`` and ``api_key``
    as for the LLM. ``timeout`` bounds each network wait, between chunks too;
    ``max_retries`` retries a request that failed before any audio (429, 5xx,
    connection failures). ``aclose()`` closes the HTTP client.
    """

    name = "openai"

    def __init__(
        self,
        model: str | None = None,
        *,
        voice: str | None = None,
        instructions: str | None = None,
        speed: float = 1.0,
        response_format: Literal["pcm", "wav"] | None = None,
        sample_rate: int = PCM_SAMPLE_RATE,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 1,
    ) -> None:
        if not 0.25 <= speed <= 4.0:
            raise ValueError(f"openai text-to-speech: speed is 0.25 to 4.0, got {speed}")
        self.endpoint = audio_endpoint(base_url)
        chosen = response_format or default_response_format(self.endpoint)
        if chosen not in ("pcm", "wav"):
            raise ValueError(
                f"openai text-to-speech: response_format is pcm or wav, not {chosen!r}"
            )
        if sample_rate <= 0:
            raise ValueError(f"sample_rate must be positive, got {sample_rate}")
        if api_key is None:
            missing = missing_key_message(self.endpoint, "text-to-speech")
            if missing is not None:
                raise OpenAISpeechError(missing, status=401)
            api_key = self.endpoint.find_key()
        self.model = model or default_tts_model(self.endpoint)
        self.voice = voice or DEFAULT_VOICE
        self.instructions = instructions
        self.speed = speed
        self.response_format: str = chosen
        self.sample_rate = sample_rate
        self.timeout = timeout
        self._api_key = api_key or "unused"  # a server of your own ignores it
        self._max_retries = max_retries
        self._client: openai.AsyncOpenAI | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def base_url(self) -> str:
        return self.endpoint.url

    def __repr__(self) -> str:
        return (
            f"OpenAITTS(model={self.model!r}, voice={self.voice!r}, base_url={self.endpoint.url!r})"
        )

    def _client_here(self) -> openai.AsyncOpenAI:
        """The client of the running event loop (its connections belong to one loop)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = openai.AsyncOpenAI(
                api_key=self._api_key,
                base_url=self.endpoint.url,
                max_retries=self._max_retries,
                timeout=self.timeout,
            )
            self._loop = loop
        return self._client

    def _request(self, text: str) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.model,
            "input": text,
            "voice": self.voice,
            "response_format": self.response_format,
            "speed": self.speed,
        }
        if self.instructions:
            params["instructions"] = self.instructions
        return params

    async def synthesize(self, text: str) -> AsyncIterator[AudioFrame]:
        """The audio of ``text``, frame by frame as the server sends it."""
        if not text.strip():
            return
        reader: PCMReader | WAVReader = (
            PCMReader(self.sample_rate) if self.response_format == "pcm" else WAVReader()
        )
        speech = self._client_here().audio.speech.with_streaming_response
        try:
            async with speech.create(**self._request(text)) as response:
                async for chunk in response.iter_bytes():
                    for frame in reader.feed(chunk):
                        yield frame
            reader.end()
        except Exception as e:
            failure = speech_failure(
                e,
                self.endpoint,
                what="speech",
                path=_PATH,
                model=self.model,
                voice=self.voice,
                timeout=self.timeout,
            )
            if failure is None:
                raise
            raise failure from None

    async def aclose(self) -> None:
        """Close the HTTP client."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()
