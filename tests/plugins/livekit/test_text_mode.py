"""The bridge through LiveKit's own text-mode harness: ``AgentSession.run`` and ``expect``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from backline import Agent, BackgroundContext, background, function_tool
from backline.testing import ScriptedLLM, text, tool_calls

from .conftest import WAIT, bridged, said, wait_until

pytestmark = pytest.mark.usefixtures("loop_errors")


class Assistant(Agent):
    def __init__(self) -> None:
        super().__init__("You are a concise voice assistant.")

    @function_tool
    async def weather(self, city: str) -> str:
        """Today's weather.

        Args:
            city: The city.
        """
        return f"Sunny in {city}."


class Billing(Agent):
    def __init__(self) -> None:
        super().__init__("You handle billing.")

    async def on_enter(self) -> None:
        self.session.generate_reply()


class Front(Agent):
    def __init__(self) -> None:
        super().__init__("Front desk.")

    @function_tool
    async def to_billing(self) -> tuple[str, Agent]:
        """Transfer to billing."""
        return "Transferring.", Billing()


async def test_a_text_turn_reaches_backline_and_its_reply_is_livekits() -> None:
    llm = ScriptedLLM([text("Hello! How can I help?")])
    async with bridged(llm, Assistant()) as b:
        result = await b.lk.run(user_input="hi there")
        assert said(result.expect) == "Hello! How can I help?"
        result.expect.no_more_events()
        assert str(llm.requests[0].chat_ctx.items[-1].content) == "hi there"
        await b.idle()
        assert b.messages("user") == [("hi there", False)]
        assert b.messages() == [("Hello! How can I help?", False)]
        assert b.lk_messages("user") == [("hi there", False)]
        assert b.lk_messages() == [("Hello! How can I help?", False)]


async def test_a_tool_turn_runs_backlines_tool_and_livekit_speaks_the_answer() -> None:
    llm = ScriptedLLM([tool_calls(("weather", {"city": "Oslo"})), text("It is sunny in Oslo.")])
    async with bridged(llm, Assistant()) as b:
        result = await b.lk.run(user_input="weather in Oslo?")
        # LiveKit only sees speech: the tool ran in backline, LiveKit's reply waited for it.
        assert said(result.expect) == "It is sunny in Oslo."
        result.expect.no_more_events()
        await b.idle()
        kinds = [it.type for it in b.session.history.items]
        assert kinds == ["message", "function_call", "function_call_output", "message"]
        assert b.session.history.items[2].output == "Sunny in Oslo."  # type: ignore[union-attr]
        assert b.lk_messages() == [("It is sunny in Oslo.", False)]


async def test_words_before_and_after_a_tool_step_are_two_livekit_speeches_in_order() -> None:
    llm = ScriptedLLM(
        [tool_calls(("weather", {"city": "Rome"}), text="Let me check."), text("Sunny, 25.")]
    )
    async with bridged(llm, Assistant()) as b:
        result = await b.lk.run(user_input="weather in Rome?")
        assert said(result.expect) == "Let me check."
        await b.idle()
        # The second segment is a LiveKit speech of its own (after the first played out).
        assert b.lk_messages() == [("Let me check.", False), ("Sunny, 25.", False)]
        assert b.messages() == [("Let me check.", False), ("Sunny, 25.", False)]


async def test_a_handoff_the_new_agent_answers_in_livekits_reply() -> None:
    llm = ScriptedLLM([tool_calls(("to_billing", {})), text("Billing here, what's up?")])
    async with bridged(llm, Front()) as b:
        result = await b.lk.run(user_input="I have a billing question")
        assert said(result.expect) == "Billing here, what's up?"
        result.expect.no_more_events()
        await b.idle()
        assert isinstance(b.session.current_agent, Billing)
        assert b.lk_messages() == [("Billing here, what's up?", False)]


def _worker(ready: asyncio.Event, box: list[BackgroundContext]) -> Any:
    @background("worker", description="Does long work.")
    async def worker(ctx: BackgroundContext) -> None:
        box.append(ctx)
        ready.set()
        await asyncio.Event().wait()

    return worker


async def test_a_background_update_while_idle_is_spoken_by_livekit() -> None:
    ready, box = asyncio.Event(), []
    llm = ScriptedLLM([text("The build passed.")])
    async with bridged(llm, Assistant(), background=[_worker(ready, box)]) as b:
        await asyncio.wait_for(ready.wait(), WAIT)
        await box[0].send("build passed")
        await b.idle()
        assert b.lk_messages() == [("The build passed.", False)]
        assert b.messages() == [("The build passed.", False)]
        assert len(b.lk_speeches) == 1  # one say(), no reply of LiveKit's own


async def test_a_background_update_while_livekit_speaks_waits_for_the_reply_to_end() -> None:
    ready, box = asyncio.Event(), []
    long_reply = "One two three four five six seven eight."
    llm = ScriptedLLM([text(long_reply, chunk_delay=0.02), text("Also: tests pass.")])
    async with bridged(llm, Assistant(), background=[_worker(ready, box)]) as b:
        await asyncio.wait_for(ready.wait(), WAIT)
        run = b.lk.run(user_input="count to eight")
        await wait_until(lambda: b.lk.current_speech is not None, "LiveKit speaking")
        await box[0].send("tests pass")  # arrives mid-reply
        await asyncio.wait_for(run, WAIT)
        await b.idle()
        # Not cut, not mixed: the reply whole, then the update as its own speech.
        assert b.lk_messages() == [(long_reply, False), ("Also: tests pass.", False)]
        assert b.messages() == [(long_reply, False), ("Also: tests pass.", False)]
        first, second = b.lk_speeches
        assert first.done() and second.done() and not first.interrupted


async def test_a_silent_note_reaches_backline_and_livekit_says_nothing() -> None:
    ready, box = asyncio.Event(), []
    llm = ScriptedLLM([])
    async with bridged(llm, Assistant(), background=[_worker(ready, box)]) as b:
        await asyncio.wait_for(ready.wait(), WAIT)
        await box[0].send("started the build", silent=True)
        await b.idle()
        notes = [str(m.content) for m in b.session.history.items if m.type == "message"]
        assert any("started the build" in n for n in notes)
        assert b.lk_speeches == [] and b.lk_messages() == [] and llm.requests == []


async def test_the_state_tool_answers_from_the_backgrounds_state() -> None:
    ready, box = asyncio.Event(), []

    def respond(request: Any) -> Any:
        outputs = [i for i in request.chat_ctx.items if i.type == "function_call_output"]
        if not outputs:
            return tool_calls(("backline_state", {"background_session_id": "worker"}))
        return text(f"Status: {outputs[0].output}")

    llm = ScriptedLLM(respond)
    async with bridged(llm, Assistant(), background=[_worker(ready, box)]) as b:
        await asyncio.wait_for(ready.wait(), WAIT)
        box[0].set_state({"status": "compiling"})
        result = await b.lk.run(user_input="how is it going?")
        result.expect.next_event().is_message(role="assistant")
        ((spoken, _),) = b.lk_messages()
        assert "compiling" in spoken


async def test_livekit_barge_in_truncates_backlines_history_to_what_was_heard() -> None:
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa"
    llm = ScriptedLLM([text(words, chunk_delay=0.05)])
    async with bridged(llm, Assistant()) as b:
        run = b.lk.run(user_input="say the letters")
        await wait_until(lambda: len(b.output_so_far().split()) >= 3, "a few words spoken")
        b.lk.interrupt()  # what LiveKit does on barge-in
        await asyncio.wait_for(run, WAIT)
        await b.idle()
        ((heard, interrupted),) = b.messages()
        assert interrupted and heard and words.startswith(heard) and heard != words
        ((lk_heard, lk_interrupted),) = b.lk_messages()  # the same cut on both sides
        assert lk_interrupted and lk_heard.rstrip() == heard
        (speech,) = [s for s in b.session.history.items if s.type == "message"][-1:]
        assert speech.interrupted  # type: ignore[union-attr]
