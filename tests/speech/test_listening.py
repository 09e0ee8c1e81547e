"""Ways to talk (issue 28): always-on, push-to-talk, a wake phrase, mute, with real
engines (eSpeak NG speaks, PocketSphinx listens) on the virtual clock."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from backline_local_speech.sphinx import PocketsphinxSTT

from backline import Agent, Session
from backline.speech import AudioFrame, EnergyVAD, InMemoryTextOutput, SpeechInput
from backline.speech.listening import Listener, ListenerState, chime
from backline.testing import ScriptedLLM, text
from backline.testing.clock import VirtualClock

from .conftest import microphone, play, speak

WAKE = "how are you"  # a phrase eSpeak NG says and PocketSphinx hears word for word


class Talk:
    """A session behind a ``Listener`` behind a ``SpeechInput``, and what it reported."""

    def __init__(self, llm: ScriptedLLM, **listener: Any) -> None:
        output = InMemoryTextOutput(chars_per_second=20)  # a reply takes time to say
        self.session: Session[Any] = Session(llm, output=output, user_away_timeout=None)
        self.changes: list[ListenerState] = []
        self.listener = Listener(self.session, on_change=self.changes.append, **listener)
        self.input = SpeechInput(self.listener, stt=PocketsphinxSTT(), vad=EnergyVAD())

    async def __aenter__(self) -> Talk:
        await self.session.start(Agent("Answer briefly."))
        self.input.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.listener.close()
        await self.input.aclose()
        await self.session.aclose()

    async def hear(self, *pieces: AudioFrame | float) -> None:
        await play(lambda f: self.input.push(self.listener.gate(f)), microphone(*pieces))
        assert await self.session.wait_for_idle(timeout=30)

    def user_turns(self) -> list[str]:
        return [
            str(it.content)
            for it in self.session.history.items
            if it.type == "message" and it.role == "user"
        ]

    def moments(self) -> list[str | None]:
        return [c.moment for c in self.changes]


async def test_push_to_talk_hears_only_while_the_key_is_down(virtual_clock: VirtualClock) -> None:
    question = await speak("what is the weather")
    async with Talk(ScriptedLLM([text("Sunny.")]), mode="push") as t:
        await t.hear(0.3, question, 1.0)  # the key is up: nothing is heard
        assert t.user_turns() == [] and t.input.turns == 0
        t.listener.press()
        assert t.listener.state.describe() == "talking (push-to-talk)"
        await play(lambda f: t.input.push(t.listener.gate(f)), microphone(0.3, question))
        t.listener.release()  # the rest is silence: the utterance ends
        await t.hear(1.0)
        assert t.user_turns() == ["what is the weather"]
        assert t.moments() == ["pressed", "released"]


async def test_tap_to_talk_and_a_press_takes_the_floor(virtual_clock: VirtualClock) -> None:
    long_reply = "It is sunny in Oslo today. The wind is light. " * 4
    async with Talk(ScriptedLLM([text(long_reply)]), mode="push") as t:
        speaking = asyncio.Event()
        t.session.on("agent_state_changed", lambda ev: ev.new == "speaking" and speaking.set())
        t.session.push_user_turn("tell me the weather")
        await asyncio.wait_for(speaking.wait(), 30)
        await asyncio.sleep(1.0)  # a second of the reply is said (virtual time)
        t.listener.toggle()  # a tap while the agent speaks interrupts it
        assert await t.session.wait_for_idle(timeout=30)
        (reply,) = [it for it in t.session.history.items if it.type == "message"][1:]
        assert reply.interrupted and long_reply.startswith(str(reply.content))
        assert len(str(reply.content)) < len(long_reply)
        t.listener.toggle()
        assert t.moments() == ["pressed", "released"]


async def test_the_wake_phrase_opens_a_window_and_quiet_closes_it(
    virtual_clock: VirtualClock,
) -> None:
    question = await speak("what is the weather")
    wake = await speak(WAKE)
    llm = ScriptedLLM([text("Sunny."), text("Still sunny.")])
    async with Talk(llm, mode="wake", wake_phrase=WAKE, wake_window=3.0) as t:
        await t.hear(0.3, question, 1.0)  # before the phrase: not for the agent
        assert t.user_turns() == [] and t.input.turns == 1
        assert t.listener.state.describe() == "waiting for the wake phrase"
        await t.hear(wake, 0.8, question, 1.0)
        assert t.user_turns() == ["what is the weather"]
        assert t.moments() == ["woke"]
        await t.hear(4.0)  # quiet, longer than the window
        assert t.moments() == ["woke", "window closed"]
        await t.hear(question, 1.0)
        assert t.user_turns() == ["what is the weather"]  # closed again


async def test_mute_hears_nothing_and_modes_switch_at_any_time(
    virtual_clock: VirtualClock,
) -> None:
    question = await speak("what is the weather")
    async with Talk(ScriptedLLM([text("Sunny.")]), mode="mute") as t:
        await t.hear(0.3, question, 1.0)
        assert t.input.turns == 0
        t.listener.set_mode("always")
        await t.hear(0.3, question, 1.0)
        assert t.user_turns() == ["what is the weather"]
        assert t.moments() == ["mode"]


class Recorder:
    """The TurnSink side only: which calls reach the session."""

    agent_state = "listening"

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def user_started_speaking(self, *, interrupt: bool = True) -> None:
        self.calls.append(("started", interrupt))

    def user_stopped_speaking(self) -> None:
        self.calls.append(("stopped", None))

    def push_interim_transcript(self, text: str) -> None:
        self.calls.append(("interim", text))

    def push_user_turn(self, text: str) -> None:
        self.calls.append(("turn", text))

    def interrupt(self, *, force: bool = False) -> None:
        self.calls.append(("interrupt", force))


async def test_the_wake_phrase_is_found_however_it_is_written() -> None:
    sink = Recorder()
    listener = Listener(sink, mode="wake", wake_phrase="Hey, Backline!")
    listener.push_user_turn("okay hey back line open the tests")
    assert sink.calls == [("turn", "open the tests")]
    listener.push_user_turn("and run them")
    assert sink.calls[-1] == ("turn", "and run them")
    listener.close()
    other = Listener(Recorder(), mode="wake")
    other.push_interim_transcript("hey")  # a part of the phrase opens nothing
    assert not other.hearing
    other.close()


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="one of always, push, wake, mute"):
        Listener(Recorder(), mode="loud")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one word"):
        Listener(Recorder(), wake_phrase=" ,! ")
    with pytest.raises(ValueError, match="positive"):
        Listener(Recorder(), wake_window=0)


def test_a_chime_is_short_and_audible() -> None:
    sound = chime(16000)
    assert 0.15 < sound.duration < 0.25 and sound.rms() > 1000
