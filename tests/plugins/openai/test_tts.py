"""OpenAITTS against the fake audio server: speech streams (the first frame before the
server has sent the rest), closing or cancelling it closes the connection, WAV is read
from its header, and every failure is one line that says what to do."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import struct

import pytest
from backline_openai._audio import OpenAISpeechError
from backline_openai.tts import OpenAITTS, PCMReader, WAVReader

from backline.speech import AudioFrame, ClockSink, SpeechOutput
from tests.plugins.openai import fake_audio as fa
from tests.plugins.openai.fake_audio import FakeAudioServer

WAIT = 10.0  # bounds a hang only


def pcm(seconds: float, rate: int = 24000) -> bytes:
    n = round(seconds * rate)
    return AudioFrame.from_samples(
        (int(8000 * math.sin(2 * math.pi * 220 * i / rate)) for i in range(n)), rate
    ).data


def wav_header(rate: int, channels: int = 1, data_size: int = 0xFFFFFFFF) -> bytes:
    fmt = struct.pack("<HHIIHH", 1, channels, rate, rate * 2 * channels, 2 * channels, 16)
    riff = 0xFFFFFFFF if data_size == 0xFFFFFFFF else 36 + data_size
    return (
        b"RIFF"
        + struct.pack("<I", riff)
        + b"WAVE"
        + b"fmt "
        + struct.pack("<I", len(fmt))
        + fmt
        + b"LIST"  # a chunk before the data, as some encoders write
        + struct.pack("<I", 4)
        + b"INFO"
        + b"data"
        + struct.pack("<I", data_size)
    )


def make(server: FakeAudioServer, **options: object) -> OpenAITTS:
    options.setdefault("api_key", "sk-test-key")
    options.setdefault("max_retries", 0)
    return OpenAITTS(base_url=server.url, **options)  # type: ignore[arg-type]


async def test_speech_streams_its_first_frame_before_the_server_has_sent_the_rest(
    audio_server: FakeAudioServer,
) -> None:
    audio = pcm(0.5)
    first_chunk = audio[:4801]  # 2400 samples and half of the next one
    chunks = [first_chunk, audio[4801:9000], audio[9000:]]
    audio_server.push(fa.Speech(chunks, hold=1))
    tts = make(audio_server, model="gpt-4o-mini-tts", voice="coral", response_format="pcm")
    speech = tts.synthesize("Hello there, how are you?")

    first = await asyncio.wait_for(anext(speech), WAIT)

    (request,) = audio_server.requests
    assert (request.sent_chunks, request.completed) == (1, False)  # the rest is held
    assert (first.sample_rate, first.channels) == (24000, 1)
    assert first.data == audio[:4800]
    audio_server.release()
    rest = [frame async for frame in speech]
    assert b"".join(f.data for f in [first, *rest]) == audio
    assert all(f.duration <= 0.1 + 1e-9 for f in [first, *rest])
    assert request.path == "/v1/audio/speech"
    assert request.json == {
        "model": "gpt-4o-mini-tts",
        "input": "Hello there, how are you?",
        "voice": "coral",
        "response_format": "pcm",
        "speed": 1.0,
    }
    assert request.api_key == "sk-test-key"
    await asyncio.to_thread(audio_server.wait_for, lambda: request.completed)
    await tts.aclose()


async def test_closing_the_speech_mid_stream_closes_the_connection(
    audio_server: FakeAudioServer,
) -> None:
    audio_server.push(fa.Speech([pcm(0.1), pcm(0.4)], hold=1))
    tts = make(audio_server, response_format="pcm")
    speech = tts.synthesize("A long answer that is interrupted.")
    await asyncio.wait_for(anext(speech), WAIT)

    await asyncio.wait_for(speech.aclose(), WAIT)  # type: ignore[attr-defined]

    request = await audio_server.wait_for_disconnect_async(WAIT)
    assert (request.disconnected, request.completed, request.sent_chunks) == (True, False, 1)
    await tts.aclose()


async def test_cancelling_the_reader_closes_the_connection(audio_server: FakeAudioServer) -> None:
    audio_server.push(fa.Speech([pcm(0.1), pcm(0.4)], hold=1))
    tts = make(audio_server, response_format="pcm")
    got_first = asyncio.Event()

    async def play() -> None:
        async for _ in tts.synthesize("Interrupted by the user."):
            got_first.set()

    task = asyncio.create_task(play())
    await asyncio.wait_for(got_first.wait(), WAIT)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(task, WAIT)

    request = await audio_server.wait_for_disconnect_async(WAIT)
    assert request.disconnected and not request.completed
    await tts.aclose()


async def test_wav_is_read_from_its_header_however_it_is_cut(
    audio_server: FakeAudioServer,
) -> None:
    audio = pcm(0.3, 22050)
    body = wav_header(22050) + audio  # streamed: the data size is unknown (~4 GiB)
    cuts = [0, 7, 30, 45, 61, 2000, 2001, len(body)]  # through the header, mid-sample
    audio_server.push(fa.Speech([body[a:b] for a, b in itertools.pairwise(cuts)]))
    tts = make(audio_server, voice="af_heart", model="kokoro")
    assert tts.response_format == "wav"  # a server of your own: its header says the rate

    frames = [frame async for frame in tts.synthesize("Bonjour.")]

    assert {(f.sample_rate, f.channels) for f in frames} == {(22050, 1)}
    assert b"".join(f.data for f in frames) == audio
    (request,) = audio_server.requests
    assert request.json["response_format"] == "wav"
    assert (request.json["voice"], request.json["model"]) == ("af_heart", "kokoro")
    await tts.aclose()


def test_a_wav_data_size_is_honoured_when_it_is_known() -> None:
    audio = pcm(0.05, 16000)
    reader = WAVReader()
    frames = reader.feed(wav_header(16000, data_size=len(audio)) + audio + b"LIST\x04\x00\x00\x00")
    reader.end()
    assert b"".join(f.data for f in frames) == audio


def test_pcm_keeps_a_half_sample_for_the_next_chunk() -> None:
    reader = PCMReader(24000)
    assert reader.feed(b"\x01") == []
    (frame,) = reader.feed(b"\x02\x03")
    assert frame.data == b"\x01\x02"
    (frame,) = reader.feed(b"\x04")
    assert frame.data == b"\x03\x04"


async def test_a_response_that_is_not_wav_says_to_choose_pcm(audio_server: FakeAudioServer) -> None:
    audio_server.push(fa.Speech([b"ID3\x04\x00" + bytes(100)], content_type="audio/mpeg"))
    tts = make(audio_server, response_format="wav")
    with pytest.raises(OpenAISpeechError, match=r"not a WAV file .* response_format='pcm'"):
        [frame async for frame in tts.synthesize("Hi.")]
    await tts.aclose()


async def test_empty_text_sends_nothing(audio_server: FakeAudioServer) -> None:
    tts = make(audio_server)
    assert [frame async for frame in tts.synthesize("  \n")] == []
    assert audio_server.requests == []


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (
            fa.error(401),
            "OpenAI-compatible speech error 401: the API key was rejected by "
            "http://127.0.0.1:{port}/v1 — OPENAI_API_KEY is missing or wrong",
        ),
        (
            fa.error(400, message="Voice 'bella' not found. Available voices: af_heart"),
            "OpenAI-compatible speech error 400: Voice 'bella' not found. Available voices: "
            "af_heart — the voice 'bella' is not one http://127.0.0.1:{port}/v1 has: choose "
            "another (the engine's voice option, e.g. --tts-voice)",
        ),
        (
            fa.error(404, message="The model `tts-9` does not exist", code="model_not_found"),
            "OpenAI-compatible speech error 404: The model `tts-9` does not exist — the model "
            "'tts-9' is not available at http://127.0.0.1:{port}/v1",
        ),
        (fa.error(429), "OpenAI-compatible speech error 429: Rate limit reached"),
        (fa.error(503), "OpenAI-compatible speech error 503: The engine is currently overloaded"),
    ],
)
async def test_errors_say_what_failed_and_what_to_do(
    audio_server: FakeAudioServer, answer: fa.OpenAIResponse, expected: str
) -> None:
    audio_server.push(answer)
    tts = make(audio_server, model="tts-9", voice="bella")
    with pytest.raises(OpenAISpeechError) as info:
        await anext(tts.synthesize("Hello."))
    port = audio_server.url.split(":")[2].split("/")[0]
    assert str(info.value).startswith(expected.format(port=port))
    assert "\n" not in str(info.value) and "sk-test-key" not in str(info.value)
    assert info.value.status == answer.status
    await tts.aclose()


async def test_a_base_url_without_the_endpoint_says_to_check_it(
    audio_server: FakeAudioServer,
) -> None:
    tts = OpenAITTS(base_url=audio_server.url.removesuffix("/v1"), api_key="k", max_retries=0)
    with pytest.raises(OpenAISpeechError, match="has no /audio/speech endpoint: check the base"):
        await anext(tts.synthesize("Hello."))
    await tts.aclose()


async def test_a_reply_is_spoken_through_speech_output(audio_server: FakeAudioServer) -> None:
    """The engine in backline's own speech output: each sentence is one request."""
    audio_server.push(fa.Speech([pcm(0.2)]), fa.Speech([pcm(0.3)]))
    tts = make(audio_server, response_format="pcm")
    played: list[AudioFrame] = []
    output = SpeechOutput(tts, ClockSink(on_frame=played.append))
    output.begin_segment("s1")
    output.write("The first sentence is here. And the second one follows it.")
    output.flush()
    result = await asyncio.wait_for(output.wait_for_playout(), WAIT)
    assert not result.interrupted
    assert sum(f.duration for f in played) == pytest.approx(0.5)
    assert [r.json["input"] for r in audio_server.requests] == [
        "The first sentence is here.",
        "And the second one follows it.",
    ]
    await output.aclose()
    await tts.aclose()
