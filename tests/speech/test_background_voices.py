"""Several background agents, one voice each (issue 30, item 5): with eSpeak NG (a
``VoicedTTS``: a voice per call), each background's replies are spoken in a voice of
its own, the voice agent's own speech in the engine's voice; nothing changes with one
background or an engine without voices."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from backline_local_speech.espeak import EspeakTTS

from backline import Agent, ChatMessage, Session
from backline.background import background_voices
from backline.speech import ClockSink, SpeechOutput, ThreadedTTS, VoicedTTS
from backline.testing import ScriptedLLM, VirtualClock, text
from backline.testing.scripted_llm import LLMRequest
from tests.background_kit import ctx_of, worker


def relay(request: LLMRequest) -> Any:
    """Relays the last update in the context (the one the reply is about)."""
    updates = [
        it.content.rsplit("\n", 1)[-1]
        for it in request.chat_ctx.items
        if isinstance(it, ChatMessage) and it.extra.get("silent") is False
    ]
    return text(updates[-1])


def audio(tts: EspeakTTS, sentence: str, voice: str | None = None) -> bytes:
    return b"".join(f.data for f in tts.synthesize_sync(sentence, voice=voice))


async def test_each_background_speaks_in_a_voice_of_its_own(virtual_clock: VirtualClock) -> None:
    tts = EspeakTTS()
    played: list[bytes] = []
    output = SpeechOutput(tts, ClockSink(on_frame=lambda f: played.append(f.data)))
    session: Session[Any] = Session(
        ScriptedLLM(relay),
        background=[worker.instance("api"), worker.instance("web")],
        output=output,
        user_away_timeout=None,
    )
    voices = background_voices(session, output)
    assert voices == {"api": "en-us+f3", "web": "en-us+m3"}
    try:
        await session.start(Agent("Help."))
        await session.say("Hello there, I am the assistant.")
        await ctx_of(session, "api").send("the tests pass now", kind="finished")
        assert await session.wait_for_idle(timeout=60)
        await ctx_of(session, "web").send("the page builds again", kind="finished")
        assert await session.wait_for_idle(timeout=60)
    finally:
        await session.aclose()
        await output.aclose()
    assert b"".join(played) == (
        audio(tts, "Hello there, I am the assistant.")  # the agent's own voice
        + audio(tts, "the tests pass now", "en-us+f3")
        + audio(tts, "the page builds again", "en-us+m3")
    )
    assert audio(tts, "the tests pass now", "en-us+f3") != audio(tts, "the tests pass now")


async def test_one_background_or_an_engine_without_voices_changes_nothing(
    virtual_clock: VirtualClock,
) -> None:
    class Plain(ThreadedTTS):
        name = "plain"

    one: Session[Any] = Session(ScriptedLLM(), background=[worker])
    assert background_voices(one, SpeechOutput(EspeakTTS(), ClockSink())) == {}
    two: Session[Any] = Session(ScriptedLLM(), background=[worker.instance("a"), worker])
    assert background_voices(two, SpeechOutput(Plain(), ClockSink())) == {}
    assert not isinstance(Plain(), VoicedTTS) and isinstance(EspeakTTS(), VoicedTTS)
    assert background_voices(two, object()) == {}  # a text output: nothing to voice


def test_espeak_voices_per_call() -> None:
    tts = EspeakTTS(voice="fr+f3")
    assert tts.alternate_voices[:2] == ["fr+m3", "fr+f2"]  # its own left out
    with pytest.raises(ValueError, match="not a voice name"):
        list(tts.synthesize_sync("bonjour", voice="-w /tmp/x"))
    assert audio(tts, "bonjour", "fr+m3") != audio(tts, "bonjour")


async def test_a_voice_for_a_reply_that_never_started_is_forgotten(
    virtual_clock: VirtualClock,
) -> None:
    output = SpeechOutput(EspeakTTS(), ClockSink())
    for i in range(100):
        output.set_voice(f"speech_{i}", "en-us+m3")
    assert len(output._voices) == 64 and "speech_99" in output._voices
    output.set_voice("speech_99", None)
    assert "speech_99" not in output._voices
    await output.aclose()
    await asyncio.sleep(0)
