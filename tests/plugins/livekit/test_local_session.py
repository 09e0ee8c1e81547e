"""A LiveKit ``AgentSession`` with backline's own engines, bridged to a backline session:
the words eSpeak NG says into the microphone are heard by PocketSphinx (found by
backline's energy detector), reach backline's model as the user's turn, and the reply
LiveKit speaks through eSpeak NG is heard back by PocketSphinx. No speech cloud, no
fake engine: only the model is scripted."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from backline_livekit import make_speech

from backline import Agent
from backline.testing import ScriptedLLM, text

from .conftest import WAIT, bridged, wait_until
from .fakes import FakeAudioOutput, RecordedAudioInput
from .local_speech import HOW_ARE_YOU, WEATHER, microphone, speak, transcribe

pytestmark = [pytest.mark.usefixtures("loop_errors"), pytest.mark.timeout(120)]

LOCAL = {"BACKLINE_PLUGINS": "livekit,local_speech,speech"}


def local_speech(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What ``backline livekit console --stt pocketsphinx --tts espeak --vad energy``
    gives LiveKit, with the pipeline's timings shortened for a test."""
    for name, value in LOCAL.items():
        monkeypatch.setenv(name, value)
    speech = make_speech("pocketsphinx", "espeak", "energy", environ={})
    return {
        **speech,
        "turn_handling": {
            "turn_detection": "vad",
            "endpointing": {"min_delay": 0.1, "max_delay": 1.0},
        },
        "aec_warmup_duration": None,
        "session_close_transcript_timeout": 0.5,
    }


async def test_a_spoken_question_reaches_backline_and_its_spoken_answer_is_heard(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    options = local_speech(monkeypatch)
    speaker = FakeAudioOutput()
    microphone_ = RecordedAudioInput(microphone(0.5, await speak(WEATHER), 1.0))
    llm = ScriptedLLM([text("How are you?")])
    async with bridged(
        llm, Agent("Weather."), audio_input=microphone_, audio_output=speaker, **options
    ) as b:
        await wait_until(lambda: b.messages() != [], "the answer played out", timeout=30)
        await b.idle()
        assert b.messages("user") == [(WEATHER, False)]  # PocketSphinx heard eSpeak NG
        assert str(llm.requests[0].chat_ctx.items[-1].content) == WEATHER
        assert b.messages() == [("How are you?", False)]
        assert b.lk_messages() == [("How are you?", False)]
        rates = {(f.sample_rate, f.num_channels) for f in speaker.frames}
        assert rates == {(22050, 1)}  # eSpeak NG's own rate, through LiveKit's output
        assert await transcribe(speaker.frames) == HOW_ARE_YOU


async def test_a_typed_turn_is_answered_in_backlines_voice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # LiveKit's text harness (run(user_input=...)) with the adapted TTS speaking the reply.
    options = local_speech(monkeypatch)
    speaker = FakeAudioOutput()
    llm = ScriptedLLM([text("What is the weather?")])
    async with bridged(llm, Agent("Asks back."), audio_output=speaker, **options) as b:
        result = await asyncio.wait_for(b.lk.run(user_input="hello"), WAIT)
        result.expect.next_event().is_message(role="assistant")
        await b.idle()
        assert b.messages() == [("What is the weather?", False)]
        assert await transcribe(speaker.frames) == WEATHER
