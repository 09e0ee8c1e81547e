"""States and interruptions both ways, in text mode."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from backline import Agent, function_tool
from backline.testing import ScriptedLLM, text, tool_calls

from .conftest import WAIT, bridged, said, wait_until

pytestmark = pytest.mark.usefixtures("loop_errors")


class Slow(Agent):
    def __init__(self, gate: asyncio.Event) -> None:
        super().__init__("Slow tools.")
        self.gate = gate

    @function_tool
    async def build(self) -> str:
        """Build the project."""
        await self.gate.wait()
        return "built"


async def test_livekit_shows_thinking_while_a_backline_tool_runs() -> None:
    gate = asyncio.Event()
    llm = ScriptedLLM([tool_calls(("build", {}), text="Building."), text("Done, it built.")])
    async with bridged(llm, Slow(gate)) as b:
        run = b.lk.run(user_input="build it")
        await wait_until(lambda: b.lk_messages() == [("Building.", False)], "the preamble")
        # The first speech has ended; backline waits on its tool and owes the answer.
        await wait_until(lambda: b.session.agent_state == "thinking", "backline on its tool")
        await asyncio.sleep(0.05)  # the tool is blocked: give a wrong "listening" time to show
        assert b.lk.agent_state == "thinking"
        gate.set()
        await asyncio.wait_for(run, WAIT)
        await b.idle()
        assert b.lk.agent_state == "listening" and b.session.agent_state == "listening"
        assert b.lk_messages() == [("Building.", False), ("Done, it built.", False)]
        assert "listening" in b.lk_agent_states


async def test_a_new_user_turn_cuts_the_livekit_speech_backline_interrupted() -> None:
    words = "one two three four five six seven eight nine ten eleven twelve"
    llm = ScriptedLLM([text(words, chunk_delay=0.05), text("Sure, stopping.")])
    async with bridged(llm, Agent("Counts.")) as b:
        first = b.lk.run(user_input="count")
        await wait_until(lambda: len(b.output_so_far().split()) >= 3, "counting")
        (counting,) = b.lk_speeches
        # backline's own rule: a new final turn interrupts the current speech.
        b.session.push_user_turn("stop")
        await asyncio.wait_for(first, WAIT)
        await b.idle()
        assert counting.interrupted  # backline -> LiveKit
        (cut, interrupted), answer = b.messages()
        assert interrupted and words.startswith(cut) and cut != words
        assert answer == ("Sure, stopping.", False)
        assert b.lk_messages()[-1] == ("Sure, stopping.", False)


async def test_livekit_user_speaking_holds_backline_replies_without_barging_in() -> None:
    llm = ScriptedLLM([text("a b c d e f g h i j", chunk_delay=0.03)])
    async with bridged(llm, Agent("Talks.")) as b:
        speech = b.session.say("a long notice that keeps going on and on")
        # LiveKit's VAD says the user speaks: backline knows, but LiveKit decides barge-in.
        b.lk._update_user_state("speaking")
        assert b.session.user_state == "speaking"
        await asyncio.wait_for(speech, WAIT)
        assert not speech.interrupted
        b.lk._update_user_state("listening")
        assert b.session.user_state == "listening"


async def test_backline_user_away_is_shown_by_livekit_and_cleared_by_activity() -> None:
    llm = ScriptedLLM([text("Welcome back.")])
    async with bridged(llm, Agent("Hi."), user_away_timeout=0.05) as b:
        await wait_until(lambda: b.session.user_state == "away", "backline's away timer")
        assert b.lk.user_state == "away"
        result = await b.lk.run(user_input="I'm back")
        assert said(result.expect) == "Welcome back."
        assert b.session.user_state == "listening" and b.lk.user_state == "listening"


async def test_an_uninterruptible_backline_speech_is_uninterruptible_in_livekit() -> None:
    llm = ScriptedLLM([])
    async with bridged(llm, Agent("Hi.")) as b:
        speech = b.session.say("do not cut me off", allow_interruptions=False)
        await wait_until(lambda: bool(b.lk_speeches), "the LiveKit speech")
        (lk_speech,) = b.lk_speeches
        assert lk_speech.allow_interruptions is False
        await asyncio.wait_for(speech, WAIT)
        assert b.messages() == [("do not cut me off", False)]


def story(changes: list[tuple[str, str]]) -> list[str]:
    """The states a listener saw, checked to be one coherent story: each change starts
    where the previous one ended (a listener called during another's change would see
    them out of order)."""
    for (_, new), (old, _) in itertools.pairwise(changes):
        assert old == new, f"out of order: {changes}"
    return [new for _, new in changes]


async def test_a_speech_end_settles_livekit_on_backlines_state_without_a_flap() -> None:
    # What the room shows (lk.agent.state) is set from these same events by LiveKit's
    # room I/O, so a listener here sees what the room sees.
    llm = ScriptedLLM([text("Hello! How can I help?"), text("Anything else?")])
    async with bridged(llm, Agent("Hi.")) as b:
        seen: list[tuple[str, str]] = []
        b.lk.on("agent_state_changed", lambda ev: seen.append((ev.old_state, ev.new_state)))
        for words in ("hi", "thanks"):
            await b.lk.run(user_input=words)
            await b.idle()
            # LiveKit's audio ends a moment before backline hears its speech ended:
            # LiveKit stays "speaking" until then and changes once.
            assert story(seen) == ["thinking", "speaking", "listening"], seen
            seen.clear()
        assert b.lk_agent_states[-6:] == ["thinking", "speaking", "listening"] * 2


async def test_a_tool_step_between_two_speeches_is_shown_once() -> None:
    gate = asyncio.Event()
    llm = ScriptedLLM([tool_calls(("build", {}), text="Building."), text("Done, it built.")])
    async with bridged(llm, Slow(gate)) as b:
        seen: list[tuple[str, str]] = []
        b.lk.on("agent_state_changed", lambda ev: seen.append((ev.old_state, ev.new_state)))
        run = b.lk.run(user_input="build it")
        await wait_until(lambda: b.session.agent_state == "thinking" and bool(seen), "the tool")
        await wait_until(lambda: b.lk_messages() == [("Building.", False)], "the preamble")
        gate.set()
        await asyncio.wait_for(run, WAIT)
        await b.idle()
        assert story(seen) == ["thinking", "speaking", "thinking", "speaking", "listening"], seen
