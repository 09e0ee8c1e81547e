"""The user_away_signal option (behaviour catalog items 121, 135-141), on the virtual
clock: "audio" (the default) lets any detected speech hold "away" off; "transcript"
counts only transcripts."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from backline import Agent, InMemoryTextOutput, Session
from backline.testing import ScriptedLLM, VirtualClock, text

TIMEOUT = 5.0


async def started(signal: str, llm: ScriptedLLM | None = None, **kw: Any) -> Session[Any]:
    session: Session[Any] = Session(
        llm or ScriptedLLM(),
        user_away_timeout=TIMEOUT,
        user_away_signal=signal,  # type: ignore[arg-type]
        **kw,
    )
    await session.start(Agent("Help."))
    return session


def states(session: Session[Any]) -> list[str]:
    seen: list[str] = []
    session.on("user_state_changed", lambda e: seen.append(e.new))
    return seen


def test_the_option_is_checked() -> None:
    with pytest.raises(ValueError, match="user_away_signal must be 'audio' or 'transcript'"):
        Session(ScriptedLLM(), user_away_signal="video")  # type: ignore[arg-type]


async def test_audio_speech_without_a_transcript_holds_away_off(
    virtual_clock: VirtualClock,
) -> None:
    """135: in "audio" mode any detected speech holds "away" off; it ends, a full
    window starts."""
    session = await started("audio")
    seen = states(session)
    session.user_started_speaking(interrupt=False)
    await asyncio.sleep(3 * TIMEOUT)
    assert seen == ["speaking"]
    session.user_stopped_speaking()
    await asyncio.sleep(TIMEOUT - 0.1)
    assert session.user_state == "listening"
    await asyncio.sleep(0.2)
    assert seen == ["speaking", "listening", "away"]
    await session.aclose()


async def test_audio_an_interim_does_not_restart_the_window(virtual_clock: VirtualClock) -> None:
    """121: in "audio" mode an interim transcript changes nothing for "away"."""
    session = await started("audio")
    await asyncio.sleep(TIMEOUT - 1)
    session.push_interim_transcript("hello")
    await asyncio.sleep(1.1)
    assert session.user_state == "away"
    await session.aclose()


async def test_transcript_untranscribed_speech_does_not_hold_away_off(
    virtual_clock: VirtualClock,
) -> None:
    """136: noise (speech activity, no transcript) leaves the user "speaking", and
    "away" comes all the same."""
    session = await started("transcript")
    seen = states(session)
    session.user_started_speaking(interrupt=False)
    await asyncio.sleep(TIMEOUT + 0.1)
    assert seen == ["speaking", "away"]
    await session.aclose()


async def test_transcript_interims_hold_away_off(virtual_clock: VirtualClock) -> None:
    """137: each interim restarts the window, so a long answer never trips "away"."""
    session = await started("transcript")
    seen = states(session)
    transcribed: list[str] = []
    session.on("user_input_transcribed", lambda e: transcribed.append(e.text))
    session.user_started_speaking(interrupt=False)
    for i in range(8):
        await asyncio.sleep(TIMEOUT - 1)
        session.push_interim_transcript(f"word {i}")
    assert seen == ["speaking"]
    assert transcribed == [f"word {i}" for i in range(8)]
    await asyncio.sleep(TIMEOUT + 0.1)
    assert seen == ["speaking", "away"]
    await session.aclose()


async def test_transcript_once_away_only_a_transcript_ends_it(
    virtual_clock: VirtualClock,
) -> None:
    """138: speech-activity flips are ignored while away."""
    session = await started("transcript")
    await asyncio.sleep(TIMEOUT + 0.1)
    assert session.user_state == "away"
    session.user_started_speaking(interrupt=False)
    session.user_stopped_speaking()
    session.user_started_speaking(interrupt=False)
    assert session.user_state == "away"
    await session.aclose()


async def test_transcript_an_interim_ends_away_as_speaking_and_rearms(
    virtual_clock: VirtualClock,
) -> None:
    """139: an interim ends "away" as "speaking" and re-arms (the end of the speech is
    still to come); with no more transcripts the user goes away again."""
    session = await started("transcript")
    seen = states(session)
    await asyncio.sleep(TIMEOUT + 0.1)
    session.push_interim_transcript("are you")
    assert seen == ["away", "speaking"]
    await asyncio.sleep(TIMEOUT - 0.2)
    assert session.user_state == "speaking"
    await asyncio.sleep(0.3)
    assert seen == ["away", "speaking", "away"]
    await session.aclose()


async def test_transcript_a_final_ends_away_as_listening(virtual_clock: VirtualClock) -> None:
    """139: a final transcript (a user turn) ends "away" as "listening"."""
    session = await started("transcript", ScriptedLLM([text("Yes.")]))
    seen = states(session)
    await asyncio.sleep(TIMEOUT + 0.1)
    session.push_user_turn("are you there")
    assert seen == ["away", "listening"]
    await session.aclose()


async def test_leaving_away_while_the_agent_speaks_does_not_arm_until_it_listens(
    virtual_clock: VirtualClock,
) -> None:
    """140: the agent speaking keeps the timer off after the user is back; the agent
    returning to "listening" arms a full window."""
    output = InMemoryTextOutput(chars_per_second=10)
    session = await started("transcript", output=output)
    seen = states(session)
    times: dict[str, list[float]] = {"away": [], "listening": []}
    session.on(
        "user_state_changed",
        lambda e: times["away"].append(virtual_clock.now()) if e.new == "away" else None,
    )
    session.on(
        "agent_state_changed",
        lambda e: times["listening"].append(virtual_clock.now()) if e.new == "listening" else None,
    )
    await asyncio.sleep(TIMEOUT + 0.1)
    session.say("y" * 60)  # 6 s of speech
    await asyncio.sleep(0.5)
    session.push_interim_transcript("hold on")
    assert seen == ["away", "speaking"] and session.agent_state == "speaking"
    await asyncio.sleep(3 * TIMEOUT)
    assert seen == ["away", "speaking", "away"]
    back = times["listening"][-1]  # the say ended
    assert times["away"][1] == pytest.approx(back + TIMEOUT)  # a full window from then
    await session.aclose()


async def test_transcript_the_agent_listening_again_rearms_during_noise(
    virtual_clock: VirtualClock,
) -> None:
    """141: noise keeps the user "speaking"; the agent returning to "listening" arms
    the timer all the same."""
    output = InMemoryTextOutput(chars_per_second=10)
    session = await started("transcript", ScriptedLLM([text("z" * 30)]), output=output)
    seen = states(session)
    session.push_user_turn("tell me")  # a 3 s reply
    session.user_started_speaking(interrupt=False)  # noise from now on
    await asyncio.sleep(3.1)
    assert session.agent_state == "listening" and session.user_state == "speaking"
    await asyncio.sleep(TIMEOUT)
    assert seen[-1] == "away"
    await session.aclose()
