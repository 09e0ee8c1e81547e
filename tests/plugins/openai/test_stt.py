"""OpenAISTT against the fake audio server: each utterance goes as a multipart WAV upload
the server reads back, the JSON text comes back as the final transcript, and every
failure is one line that says what to do."""

from __future__ import annotations

import math
import socket

import pytest
from backline_openai._audio import OpenAISpeechError
from backline_openai.stt import OpenAISTT

from backline.keys import set_key
from backline.speech import AudioFrame, Transcript, split_frames
from tests.plugins.openai import fake_audio as fa
from tests.plugins.openai.fake_audio import FakeAudioServer

WAIT = 20.0  # bounds a hang only


def tone(seconds: float, rate: int = 16000) -> AudioFrame:
    n = round(seconds * rate)
    return AudioFrame.from_samples(
        (int(8000 * math.sin(2 * math.pi * 440 * i / rate)) for i in range(n)), rate
    )


def make(server: FakeAudioServer, **options: object) -> OpenAISTT:
    options.setdefault("api_key", "sk-test-key")
    options.setdefault("max_retries", 0)
    return OpenAISTT(base_url=server.url, **options)  # type: ignore[arg-type]


async def final(stt: OpenAISTT, audio: AudioFrame) -> Transcript:
    stream = stt.stream()
    try:
        for frame in split_frames(audio, 0.02):
            stream.push(frame)
        stream.flush()
        async for transcript in stream:
            if transcript.final:
                return transcript
        raise AssertionError("the stream ended without a final transcript")
    finally:
        await stream.aclose()


async def test_an_utterance_is_sent_as_a_multipart_wav_and_its_text_is_the_transcript(
    audio_server: FakeAudioServer,
) -> None:
    audio_server.push(fa.Transcript("  Hello   there.  "))
    stt = make(audio_server, model="gpt-4o-mini-transcribe", language="en-US")
    audio = tone(0.5, 48000)  # a microphone's rate: sent at 16 kHz

    transcript = await final(stt, audio)

    assert transcript.text == "Hello there."
    assert transcript.start == 0.0
    assert transcript.end == pytest.approx(0.5)
    (request,) = audio_server.requests
    assert request.path == "/v1/audio/transcriptions"
    assert request.headers["content-type"].startswith("multipart/form-data; boundary=")
    assert request.fields == {
        "model": "gpt-4o-mini-transcribe",
        "language": "en",  # ISO-639-1, as the API takes it
        "response_format": "json",
    }
    file = request.parts["file"]
    assert (file.filename, file.content_type) == ("speech.wav", "audio/wav")
    assert file.data[:4] == b"RIFF" and file.data[8:12] == b"WAVE"
    assert request.wav is not None
    assert (request.wav.sample_rate, request.wav.channels) == (16000, 1)
    pushed = [f.resample(16000).data for f in split_frames(audio, 0.02)]  # as BatchSTT does
    assert request.wav.data == b"".join(pushed)
    assert request.api_key == "sk-test-key"
    stt.close()


async def test_verbose_json_and_the_endpoint_default_model(audio_server: FakeAudioServer) -> None:
    audio_server.push(fa.Transcript("bonjour", language="french"))
    stt = make(audio_server, response_format="verbose_json")
    assert stt.model == "whisper-1"  # a server of your own: the name they all take

    assert (await final(stt, tone(0.3))).text == "bonjour"

    (request,) = audio_server.requests
    assert request.fields == {"model": "whisper-1", "response_format": "verbose_json"}
    stt.close()


def test_audio_too_short_to_transcribe_sends_nothing(audio_server: FakeAudioServer) -> None:
    stt = make(audio_server)
    assert stt.transcribe(tone(0.05)) == ""
    assert audio_server.requests == []
    stt.close()


def test_a_failed_request_is_retried(audio_server: FakeAudioServer) -> None:
    audio_server.push(fa.error(503, headers={"retry-after-ms": "1"}), fa.Transcript("again"))
    stt = make(audio_server, max_retries=1)
    assert stt.transcribe(tone(0.3)) == "again"
    assert len(audio_server.requests) == 2
    stt.close()


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (
            fa.error(401),
            "OpenAI-compatible transcription error 401: the API key was rejected by "
            "http://127.0.0.1:{port}/v1 — OPENAI_API_KEY is missing or wrong: set it "
            "(export OPENAI_API_KEY=...) or store it with `backline keys set OPENAI_API_KEY`. "
            "The API said: Incorrect API key provided",
        ),
        (
            fa.error(404, message="The model `whisper-9` does not exist", code="model_not_found"),
            "OpenAI-compatible transcription error 404: The model `whisper-9` does not exist — "
            "the model 'whisper-9' is not available at http://127.0.0.1:{port}/v1: choose one it "
            "serves (the engine's model option, e.g. --stt-model)",
        ),
        (
            fa.error(429),
            "OpenAI-compatible transcription error 429: Rate limit reached for requests. Please "
            "try again in 1s. (rate limited or out of quota: wait, or check your plan)",
        ),
        (
            fa.error(500),
            "OpenAI-compatible transcription error 500: The server had an error while processing "
            "your request. Sorry about that! (the server failed: try again later)",
        ),
    ],
)
def test_errors_say_what_failed_and_what_to_do(
    audio_server: FakeAudioServer, answer: fa.OpenAIResponse, expected: str
) -> None:
    audio_server.push(answer)
    stt = make(audio_server, model="whisper-9")
    with pytest.raises(OpenAISpeechError) as info:
        stt.transcribe(tone(0.3))
    port = audio_server.url.split(":")[2].split("/")[0]
    message = str(info.value)
    assert message.startswith(expected.format(port=port))
    assert "\n" not in message
    assert "sk-test-key" not in message
    assert info.value.status == answer.status
    stt.close()


def test_a_base_url_without_the_endpoint_says_to_check_it(audio_server: FakeAudioServer) -> None:
    stt = OpenAISTT(base_url=audio_server.url.removesuffix("/v1"), api_key="k", max_retries=0)
    with pytest.raises(OpenAISpeechError) as info:
        stt.transcribe(tone(0.3))
    assert info.value.status == 404
    assert "has no /audio/transcriptions endpoint: check the base URL" in str(info.value)
    assert "it usually ends in /v1" in str(info.value)
    stt.close()


def test_a_server_that_is_not_running_says_so() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    stt = OpenAISTT(base_url=f"http://127.0.0.1:{port}/v1", max_retries=0, timeout=5.0)
    with pytest.raises(OpenAISpeechError) as info:
        stt.transcribe(tone(0.3))
    assert str(info.value).startswith(
        f"Could not reach the OpenAI-compatible audio API at http://127.0.0.1:{port}/v1 for "
        "transcription"
    )
    assert "is the server running" in str(info.value)
    stt.close()


def test_a_local_server_needs_no_key_and_gets_one_when_it_is_set(
    audio_server: FakeAudioServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    audio_server.push(fa.Transcript("one"), fa.Transcript("two"))
    monkeypatch.setenv("OPENAI_AUDIO_BASE_URL", audio_server.url)
    first = OpenAISTT(max_retries=0)
    assert first.base_url == audio_server.url
    assert first.transcribe(tone(0.3)) == "one"
    set_key("OPENAI_API_KEY", "sk-stored")
    second = OpenAISTT(max_retries=0)
    assert second.transcribe(tone(0.3)) == "two"
    assert [r.api_key for r in audio_server.requests] == ["unused", "sk-stored"]
    first.close()
    second.close()


def test_a_hosted_endpoint_without_its_key_cannot_be_built() -> None:
    with pytest.raises(OpenAISpeechError) as info:
        OpenAISTT(base_url="https://api.groq.com/openai/v1")
    assert str(info.value) == (
        "GROQ_API_KEY is not set, so the openai speech-to-text engine cannot reach Groq at "
        "https://api.groq.com/openai/v1: set it (export GROQ_API_KEY=...) or store it with "
        "`backline keys set GROQ_API_KEY`, or point OPENAI_AUDIO_BASE_URL at a server of your "
        "own (Speaches, whisper.cpp's server or Kokoro-FastAPI)"
    )


def test_each_endpoint_has_its_default_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-o")
    monkeypatch.setenv("GROQ_API_KEY", "gsk-g")
    models = {
        url: OpenAISTT(base_url=url).model
        for url in ("https://api.openai.com/v1", "https://api.groq.com/openai/v1")
    }
    assert models == {
        "https://api.openai.com/v1": "gpt-4o-mini-transcribe",
        "https://api.groq.com/openai/v1": "whisper-large-v3-turbo",
    }


def test_a_server_of_your_own_is_named_for_what_it_is() -> None:
    stt = OpenAISTT(base_url="http://localhost:8000/v1")  # Speaches' port (and vLLM's)
    assert stt.endpoint.name == "OpenAI-compatible"
    stt.close()


async def test_a_failed_utterance_gives_its_error_and_the_stream_goes_on(
    audio_server: FakeAudioServer,
) -> None:
    audio_server.push(fa.error(429), fa.Transcript("second try"))
    stt = make(audio_server)
    stream = stt.stream()
    finals: list[Transcript] = []
    try:
        for _ in range(2):
            for frame in split_frames(tone(0.3), 0.02):
                stream.push(frame)
            stream.flush()
        async for transcript in stream:
            finals.append(transcript)
            if len(finals) == 2:
                break
    finally:
        await stream.aclose()
    assert finals[0].text == "" and finals[0].error is not None
    assert "transcription error 429" in finals[0].error
    assert finals[1].text == "second try" and finals[1].error is None
    stt.close()
