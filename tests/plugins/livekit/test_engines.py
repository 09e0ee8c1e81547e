"""backline's speech engines behind LiveKit's interfaces, driven with LiveKit's own APIs:
eSpeak NG's voice, recognised by PocketSphinx, found by backline's energy detector or
LiveKit's Silero; what eSpeak NG says through ``BackendTTS`` is heard back."""

from __future__ import annotations

from typing import Any

import pytest
from backline_livekit.engines import BackendSTT, BackendTTS, BackendVAD
from livekit import rtc
from livekit.agents import APIConnectionError, inference, stt, tts
from livekit.agents.stt import SpeechEventType
from livekit.agents.vad import VADEventType

from backline.speech import EnergyVAD

from .local_speech import (
    HOW_ARE_YOU,
    WEATHER,
    EspeakTTS,
    PocketsphinxSTT,
    microphone,
    seconds,
    speak,
    transcribe,
)

pytestmark = [pytest.mark.usefixtures("loop_errors"), pytest.mark.timeout(120)]


async def events_of(stream: Any, frames: list[rtc.AudioFrame]) -> list[Any]:
    """Push every frame, end the input, and read every event (LiveKit's stream API)."""
    for frame in frames:
        stream.push_frame(frame)
    stream.end_input()
    try:
        return [event async for event in stream]
    finally:
        await stream.aclose()


def said(events: list[Any]) -> list[tuple[str, str]]:
    """(type, text) of the speech events, usage reports left out."""
    return [
        (e.type.value, e.alternatives[0].text if e.alternatives else "")
        for e in events
        if e.type != SpeechEventType.RECOGNITION_USAGE
    ]


# -- speech to text ---------------------------------------------------------------------
async def test_recognize_transcribes_a_recording() -> None:
    question = microphone(0.3, await speak(WEATHER), 0.3)
    event = await BackendSTT(PocketsphinxSTT()).recognize(question)
    assert event.type == SpeechEventType.FINAL_TRANSCRIPT
    assert event.alternatives[0].text == WEATHER


def vads() -> list[Any]:
    return [
        pytest.param(lambda: BackendVAD(EnergyVAD), id="backline-energy"),
        pytest.param(lambda: inference.VAD(), id="livekit-silero"),
    ]


@pytest.mark.parametrize("make_vad", vads())
async def test_a_stream_transcribes_each_utterance_its_vad_finds(make_vad: Any) -> None:
    frames = microphone(0.5, await speak(WEATHER), 1.0, await speak(HOW_ARE_YOU), 1.0)
    engine = BackendSTT(PocketsphinxSTT(), vad=make_vad())
    assert engine.capabilities.streaming
    events = await events_of(engine.stream(), frames)
    heard = said(events)
    # Each utterance's final comes once the engine has transcribed it: after its end,
    # maybe after the next one started (the input here runs faster than real time).
    voice = [kind for kind, _ in heard if kind != "final_transcript"]
    assert voice == ["start_of_speech", "end_of_speech"] * 2
    finals = [i for i, (kind, _) in enumerate(heard) if kind == "final_transcript"]
    ends = [i for i, (kind, _) in enumerate(heard) if kind == "end_of_speech"]
    assert [heard[i][1] for i in finals] == [WEATHER, HOW_ARE_YOU]
    assert all(final > end for final, end in zip(finals, ends, strict=True))
    first, second = [e.alternatives[0] for e in events if e.type == "final_transcript"]
    # Times on the stream's clock: the first utterance within its 0.5 s to ~1.7 s.
    assert 0.0 <= first.start_time < 0.5 < first.end_time < second.start_time
    assert second.end_time <= seconds(frames) + 0.01


async def test_an_engines_interim_transcripts_come_before_its_final() -> None:
    engine = PocketsphinxSTT()
    engine.interim_every = 0.5  # what whisper is given for live captions
    frames = microphone(0.5, await speak(WEATHER), 1.0)
    heard = said(await events_of(BackendSTT(engine, vad=BackendVAD(EnergyVAD)).stream(), frames))
    interims = [i for i, (kind, _) in enumerate(heard) if kind == "interim_transcript"]
    assert interims and heard[interims[0]][1]  # words while the user still speaks
    assert heard[-1] == ("final_transcript", WEATHER) and max(interims) < len(heard) - 1


async def test_speech_cut_off_by_the_end_of_the_input_is_still_transcribed() -> None:
    frames = microphone(0.5, await speak(WEATHER))  # no silence after it
    events = await events_of(
        BackendSTT(PocketsphinxSTT(), vad=BackendVAD(EnergyVAD)).stream(), frames
    )
    assert said(events)[-1] == ("final_transcript", WEATHER)


async def test_without_a_vad_livekits_stream_adapter_finds_the_utterances() -> None:
    engine = BackendSTT(PocketsphinxSTT())
    assert not engine.capabilities.streaming  # LiveKit's agent wraps it in a StreamAdapter
    adapter = stt.StreamAdapter(stt=engine, vad=BackendVAD(EnergyVAD))
    frames = microphone(0.5, await speak(HOW_ARE_YOU), 1.0)
    try:
        events = await events_of(adapter.stream(), frames)
    finally:
        await adapter.aclose()
    assert ("final_transcript", HOW_ARE_YOU) in said(events)


# -- text to speech ---------------------------------------------------------------------
async def test_synthesize_gives_livekit_frames_at_the_engines_rate_that_say_the_words() -> None:
    voice = BackendTTS(EspeakTTS())
    assert (voice.sample_rate, voice.num_channels) == (22050, 1)
    assert not voice.capabilities.streaming
    async with voice.synthesize(WEATHER) as stream:
        frames = [event.frame async for event in stream]
    assert len(frames) > 1  # handed on as the engine produces them, not in one piece
    assert {(f.sample_rate, f.num_channels) for f in frames} == {(22050, 1)}
    assert 0.8 < seconds(frames) < 3.0
    assert await transcribe(frames) == WEATHER


async def test_a_streamed_reply_is_spoken_sentence_by_sentence_through_livekits_adapter() -> None:
    adapter = tts.StreamAdapter(tts=BackendTTS(EspeakTTS()))
    try:
        async with adapter.stream() as stream:
            for word in ["How", "are", "you?", "What", "is", "the", "weather?"]:
                stream.push_text(word + " ")
            stream.end_input()
            audio = [event async for event in stream]
    finally:
        await adapter.aclose()
    segments: dict[str, list[rtc.AudioFrame]] = {}
    for event in audio:
        segments.setdefault(event.segment_id, []).append(event.frame)
    heard = [await transcribe(frames) for frames in segments.values()]
    assert " ".join(heard) == f"{HOW_ARE_YOU} {WEATHER}"


async def test_an_engine_that_fails_is_a_livekit_api_error() -> None:
    voice = BackendTTS(EspeakTTS(program="false"))  # a synthesiser that exits with 1
    errors: list[Any] = []
    voice.on("error", errors.append)
    with pytest.raises(APIConnectionError, match="espeak could not speak: espeak-ng failed"):
        async with voice.synthesize(WEATHER) as stream:
            [event async for event in stream]
    assert [e.recoverable for e in errors] == [False]


# -- voice activity ---------------------------------------------------------------------
async def test_the_vad_reports_the_start_and_end_of_speech_with_its_audio() -> None:
    question = await speak(WEATHER)
    frames = microphone(1.0, question, 1.0)
    events = await events_of(BackendVAD(EnergyVAD).stream(), frames)
    kinds = [e.type for e in events if e.type != VADEventType.INFERENCE_DONE]
    assert kinds == [VADEventType.START_OF_SPEECH, VADEventType.END_OF_SPEECH]
    start, end = [e for e in events if e.type != VADEventType.INFERENCE_DONE]
    assert 0.9 < start.timestamp - start.speech_duration < 1.2  # the speech began at ~1 s
    assert end.speech_duration == pytest.approx(question.duration, abs=0.35)
    assert 0.4 <= end.silence_duration < 0.7  # the detector's quiet spell that ends speech
    # The end event carries the speech, with half a second before it.
    (speech,) = end.frames
    assert speech.duration == pytest.approx(
        0.5 + end.speech_duration + end.silence_duration, abs=0.1
    )
    assert await transcribe(end.frames) == WEATHER
    inferences = [e for e in events if e.type == VADEventType.INFERENCE_DONE]
    assert len(inferences) == len(frames)  # one per frame
    assert [e.speaking for e in inferences].count(True) > 0
    assert max(e.speech_duration for e in inferences) > 1.0  # what LiveKit's barge-in reads


async def test_each_stream_has_its_own_detector() -> None:
    # A LiveKit session runs two streams at once (its own and its STT's): a detector's
    # state (Silero's recurrent state, a noise floor) must not be shared between them.
    built: list[EnergyVAD] = []

    def make() -> EnergyVAD:
        built.append(EnergyVAD())
        return built[-1]

    vad = BackendVAD(make)
    frames = microphone(1.0, await speak(HOW_ARE_YOU), 1.0)
    one, two = vad.stream(), vad.stream()
    for frame in frames:  # interleaved, as two live streams see the same microphone
        one.push_frame(frame)
        two.push_frame(frame)
    one.end_input()
    two.end_input()
    try:
        first = [e.type for e in [e async for e in one] if e.type != "inference_done"]
        second = [e.type for e in [e async for e in two] if e.type != "inference_done"]
    finally:
        await one.aclose()
        await two.aclose()
    assert len(built) == 2
    assert first == second == [VADEventType.START_OF_SPEECH, VADEventType.END_OF_SPEECH]
