"""The model-based engines for real, each when its model is in $BACKLINE_TEST_MODELS_DIR
(skipped saying so otherwise): Silero tells speech from noise, whisper hears what eSpeak
says, Kokoro and Piper speak a sentence at a time."""

from __future__ import annotations

import asyncio
import random
import re
from typing import Any

import pytest
from backline_local_speech.catalog import (
    KOKORO_MODEL,
    PIPER_VOICES,
    SILERO_MODEL,
    WHISPER_DEFAULT,
    WHISPER_MODELS,
)

from backline import Agent, Session
from backline.speech import (
    AudioFrame,
    SpeechInput,
    Transcript,
    VADEvent,
    split_frames,
)
from backline.testing import ScriptedLLM, text
from backline.testing.clock import VirtualClock

from .conftest import entry, joined, microphone, missing_models, play, speak, use_models

WHISPER_BASE_EN = next(m for m in WHISPER_MODELS if m.name == WHISPER_DEFAULT)
PIPER_LESSAC = PIPER_VOICES[0]
NUMBERS = {"1": "one", "2": "two", "3": "three", "4": "four", "5": "five"}


def words(said: str) -> str:
    """Lower case, no punctuation, digits as words: whisper writes "1, 2, 3." or "One, two"."""
    said = re.sub(r"\d", lambda m: f" {NUMBERS.get(m.group(), m.group())} ", said.lower())
    return " ".join(re.sub(r"[^\w\s']", " ", said).split())


def noise(seconds: float, rate: int = 16000, level: float = 3000.0) -> AudioFrame:
    """Loud white noise (a fan, a hiss): well over an energy gate, not speech."""
    rnd = random.Random(7)
    samples = [rnd.gauss(0.0, level) for _ in range(int(seconds * rate))]
    return AudioFrame.from_samples(samples, rate)


def detect(vad: Any, frames: list[AudioFrame]) -> list[VADEvent]:
    stream = vad.stream()
    return [event for frame in frames for event in stream.push(frame)]


# -- silero ----------------------------------------------------------------------------------
@pytest.fixture
def silero(monkeypatch: pytest.MonkeyPatch) -> Any:
    use_models(monkeypatch, "onnxruntime", "silero", SILERO_MODEL)
    return entry("vad", "silero").build()


async def test_silero_finds_the_speech_between_silences(silero: Any) -> None:
    speech = (await speak("one two three four five")).resample(16000)
    events = detect(silero, microphone(1.0, speech, 1.0))
    assert [e.kind for e in events] == ["start", "end"]
    start, end = events
    assert 0.9 <= start.at <= 1.15  # the speech begins at 1.0 s
    assert 1.0 + speech.duration - 0.5 <= end.at <= 1.0 + speech.duration + 0.1
    # The model's state starts afresh with each stream: the same audio, the same events.
    assert detect(silero, microphone(1.0, speech, 1.0)) == events


async def test_silero_hears_no_speech_in_loud_noise_where_a_loudness_gate_does(
    silero: Any,
) -> None:
    hiss = microphone(0.5, noise(2.0), 0.5)
    assert detect(silero, hiss) == []
    energy = entry("vad", "energy").build()
    assert [e.kind for e in detect(energy, hiss)] == ["start", "end"]  # the contrast


async def test_silero_takes_frames_at_any_rate(silero: Any) -> None:
    speech = await speak("what is the weather")
    at_16k = detect(silero, microphone(0.5, speech, 1.0))
    at_48k = detect(silero, microphone(0.5, speech, 1.0, rate=48000))
    assert [e.kind for e in at_48k] == [e.kind for e in at_16k] == ["start", "end"]
    assert abs(at_48k[0].at - at_16k[0].at) < 0.1


async def test_a_session_hears_a_turn_through_silero_and_noise_is_no_turn(
    silero: Any, virtual_clock: VirtualClock
) -> None:
    from backline_local_speech.sphinx import PocketsphinxSTT

    question = await speak("what is the weather")
    session: Session[Any] = Session(ScriptedLLM([text("Sunny.")]), user_away_timeout=None)
    listening = SpeechInput(session, stt=PocketsphinxSTT(), vad=silero)
    await session.start(Agent("Answer about the weather."))
    listening.start()
    try:
        await play(listening.push, microphone(0.5, noise(1.5), 0.5, question, 1.0))
        assert await session.wait_for_idle(timeout=30)
        said = [(i.role, i.content) for i in session.history.items if i.type == "message"]
        assert said == [("user", "what is the weather"), ("assistant", "Sunny.")]
        assert listening.turns == 1
    finally:
        await listening.aclose()
        await session.aclose()


# -- whisper ---------------------------------------------------------------------------------
@pytest.fixture
async def whisper(monkeypatch: pytest.MonkeyPatch) -> Any:
    use_models(monkeypatch, "pywhispercpp", "whisper", WHISPER_BASE_EN)
    return await asyncio.to_thread(entry("stt", "whisper").build)


async def final(stt: Any, audio: AudioFrame) -> Transcript:
    stream = stt.stream()
    try:
        for frame in split_frames(audio, 0.02):
            stream.push(frame)
        stream.flush()
        async with asyncio.timeout(120):
            async for transcript in stream:
                if transcript.final:
                    return transcript
        raise AssertionError("the stream ended with no final transcript")
    finally:
        await stream.aclose()


async def test_whisper_hears_what_espeak_says(whisper: Any) -> None:
    said = await speak("one two three four five")
    heard = await final(whisper, said)  # at eSpeak's 22.05 kHz: resampled to 16 kHz
    assert words(heard.text) == "one two three four five"
    assert heard.end == pytest.approx(said.duration, abs=0.01)


async def test_whisper_annotations_never_reach_a_transcript(whisper: Any) -> None:
    heard = await final(whisper, AudioFrame.silence(0.5, 16000))  # shorter than whisper takes
    assert not re.search(r"[\[\]()*]|BLANK_AUDIO", heard.text), heard.text


# -- kokoro and piper ------------------------------------------------------------------------
TWO_SENTENCES = "The first sentence is spoken here. Then a second one follows it."


async def spoken(tts: Any, said: str) -> list[AudioFrame]:
    async with asyncio.timeout(120):
        return [frame async for frame in tts.synthesize(said)]


async def check_speech(tts: Any, rate: int, monkeypatch: pytest.MonkeyPatch) -> None:
    frames = await spoken(tts, "one two three four five")
    audio = joined(frames)
    assert audio.sample_rate == tts.sample_rate == rate and audio.channels == 1
    assert 1.0 < audio.duration < 6.0 and audio.rms() > 500
    assert max(f.duration for f in frames) <= 0.1 + 1e-9
    if missing_models("pywhispercpp", "whisper", WHISPER_BASE_EN) is None:  # heard back
        use_models(monkeypatch, "pywhispercpp", "whisper", WHISPER_BASE_EN)
        stt = await asyncio.to_thread(entry("stt", "whisper").build)
        assert words((await final(stt, audio)).text) == "one two three four five"
    longer = joined(await spoken(tts, TWO_SENTENCES))
    assert longer.duration > audio.duration


async def test_kokoro_speaks(monkeypatch: pytest.MonkeyPatch) -> None:
    use_models(monkeypatch, "kokoro_onnx", "kokoro", KOKORO_MODEL)
    tts = await asyncio.to_thread(entry("tts", "kokoro").build)
    assert tts.voice == "af_heart" and tts.lang == "en-us"
    await check_speech(tts, 24000, monkeypatch)


async def test_kokoro_hands_over_each_sentence_as_soon_as_it_is_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    use_models(monkeypatch, "kokoro_onnx", "kokoro", KOKORO_MODEL)
    tts = await asyncio.to_thread(entry("tts", "kokoro").build, voice="bf_emma")
    made: list[str] = []
    create = tts._kokoro.create

    def counted(sentence: str, **options: Any) -> Any:
        made.append(sentence)
        return create(sentence, **options)

    monkeypatch.setattr(tts._kokoro, "create", counted)
    frames = tts.synthesize_sync(TWO_SENTENCES)
    first = await asyncio.to_thread(next, frames)
    assert first.sample_rate == 24000
    assert made == ["The first sentence is spoken here."]  # the second is not made yet
    rest = await asyncio.to_thread(list, frames)
    assert rest and len(made) == 2


async def test_piper_speaks(monkeypatch: pytest.MonkeyPatch) -> None:
    use_models(monkeypatch, "piper", "piper", PIPER_LESSAC)
    tts = await asyncio.to_thread(entry("tts", "piper").build)
    assert tts.voice == "en_US-lessac-medium"
    await check_speech(tts, 22050, monkeypatch)


async def test_piper_hands_over_each_sentence_as_soon_as_it_is_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    use_models(monkeypatch, "piper", "piper", PIPER_LESSAC)
    tts = await asyncio.to_thread(entry("tts", "piper").build, voice=PIPER_LESSAC.name)
    made: list[Any] = []
    synthesize = tts._voice.phoneme_ids_to_audio

    def counted(ids: Any, *args: Any, **options: Any) -> Any:
        made.append(ids)
        return synthesize(ids, *args, **options)

    monkeypatch.setattr(tts._voice, "phoneme_ids_to_audio", counted)
    frames = tts.synthesize_sync(TWO_SENTENCES)
    first = await asyncio.to_thread(next, frames)
    assert first.sample_rate == 22050
    assert len(made) == 1  # one sentence made
    rest = await asyncio.to_thread(list, frames)
    assert rest and len(made) == 2
