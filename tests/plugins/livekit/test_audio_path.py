"""The audio path: LiveKit's VAD, STT, turn detection and TTS (fakes of its interfaces)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from backline import Agent, ErrorEvent
from backline.testing import ScriptedLLM, text

from .conftest import WAIT, bridged, wait_until
from .fakes import FakeSTT, FakeTTS, FakeVAD

pytestmark = pytest.mark.usefixtures("loop_errors")


def audio(tts: FakeTTS | None = None) -> dict[str, Any]:
    return {
        "vad": FakeVAD(),
        "stt": FakeSTT(),
        "tts": tts or FakeTTS(),
        "turn_handling": {
            "turn_detection": "vad",
            "endpointing": {"min_delay": 0.05, "max_delay": 0.5},
            "interruption": {"min_duration": 0.05, "resume_false_interruption": False},
        },
        "aec_warmup_duration": None,
        "session_close_transcript_timeout": 0.1,
    }


def speak(options: dict[str, Any], words: str) -> None:
    """The user says ``words``: voice activity, the final transcript, silence."""
    options["vad"].start_speech()
    options["stt"].final(words)
    options["vad"].end_speech()


async def test_a_recognised_turn_reaches_backline_and_the_reply_reaches_the_tts() -> None:
    options = audio()
    llm = ScriptedLLM([text("It is sunny. Take sunglasses.")])
    async with bridged(llm, Agent("Weather."), **options) as b:
        speak(options, "what's the weather")
        await wait_until(lambda: b.messages() != [], "the reply played out", timeout=WAIT)
        await b.idle()
        assert b.messages("user") == [("what's the weather", False)]
        assert b.messages() == [("It is sunny. Take sunglasses.", False)]
        assert "".join(options["tts"].texts).replace(" ", "") == "Itissunny.Takesunglasses."
        assert b.lk_messages() == [("It is sunny. Take sunglasses.", False)]


async def test_a_spoken_turn_changes_livekits_agent_state_once_per_step() -> None:
    options = audio()
    llm = ScriptedLLM([text("It is sunny. Take sunglasses.")])
    async with bridged(llm, Agent("Weather."), **options) as b:
        seen: list[tuple[str, str]] = []
        b.lk.on("agent_state_changed", lambda ev: seen.append((ev.old_state, ev.new_state)))
        speak(options, "what's the weather")
        await wait_until(lambda: b.messages() != [], "the reply played out", timeout=WAIT)
        await b.idle()
        # At the speech's end: no listening, thinking, listening, thinking burst.
        assert seen == [
            ("listening", "thinking"),
            ("thinking", "speaking"),
            ("speaking", "listening"),
        ]


async def test_backlines_words_reach_the_tts_in_order() -> None:
    options = audio()
    llm = ScriptedLLM([text("First sentence. Second one."), text("Third, from say.")])
    async with bridged(llm, Agent("Order."), **options) as b:
        speak(options, "go")
        await wait_until(lambda: len(b.messages()) == 1, "the reply")
        b.session.say("A notice. Then more.")
        b.session.generate_reply()
        await wait_until(lambda: len(b.messages()) == 3, "everything said")
        await b.idle()
        spoken = " ".join(t.strip() for t in options["tts"].texts)
        assert spoken == "First sentence. Second one. A notice. Then more. Third, from say."


async def test_an_interruption_mid_sentence_truncates_backlines_history() -> None:
    options = audio(FakeTTS(seconds_per_char=0.03))  # about 3 s of speech
    long = "This is a long answer that goes on for quite a while before it ends."
    llm = ScriptedLLM([text(long), text("Yes?")])
    async with bridged(llm, Agent("Talks."), **options) as b:
        speak(options, "tell me something long")
        await wait_until(lambda: b.lk.agent_state == "speaking", "audio playing")
        await asyncio.sleep(0.6)  # let about a second of the answer play out (real audio time)
        options["vad"].start_speech()  # the user talks over it: LiveKit's barge-in
        await wait_until(lambda: b.messages() != [], "the cut reply recorded")
        ((heard, interrupted),) = b.messages()
        assert interrupted and heard and long.startswith(heard) and len(heard) < len(long) / 2
        options["stt"].final("wait")
        options["vad"].end_speech()
        await wait_until(lambda: len(b.messages()) == 2, "the answer to 'wait'")
        await b.idle()
        assert b.messages("user") == [("tell me something long", False), ("wait", False)]
        assert b.messages()[1] == ("Yes?", False)


async def test_a_tts_failure_keeps_the_words_and_the_session_goes_on() -> None:
    tts = FakeTTS()
    tts.fail_when = "broken"
    options = audio(tts)
    llm = ScriptedLLM([text("This part is broken audio."), text("Still here.")])
    errors: list[ErrorEvent] = []
    async with bridged(llm, Agent("Resilient."), **options) as b:
        b.session.on("error", errors.append)
        speak(options, "hello")
        await wait_until(lambda: b.messages() != [], "the failed reply recorded")
        assert b.messages() == [("This part is broken audio.", False)]  # the words stay
        assert errors and errors[0].source == "livekit"
        speak(options, "are you there")
        await wait_until(lambda: len(b.messages()) == 2, "the next reply")
        await b.idle()
        assert b.messages()[1] == ("Still here.", False)
