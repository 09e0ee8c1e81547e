"""Conversation recorders: the session tells each fact of a turn directly, no event built."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from backline import Agent, ChatMessage, FunctionCall, FunctionCallOutput, Session, function_tool
from backline.testing import ScriptedLLM, text, tool_calls
from backline.voice import ConversationRecorder


class Assistant(Agent):
    def __init__(self) -> None:
        super().__init__("You are terse.")


@function_tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return "42"


class Notes:
    """A recorder that keeps what it was told, in order."""

    def __init__(self) -> None:
        self.told: list[tuple[str, Any]] = []

    def item_added(self, item: Any) -> None:
        self.told.append(("item", item))

    def agent_state_changed(self, old: str, new: str) -> None:
        self.told.append(("state", (old, new)))

    def llm_request(self, llm: Any, speech_id: str, **timings: Any) -> None:
        self.told.append(("request", (llm, speech_id, timings)))

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.told]


def as_recorder(notes: Notes) -> ConversationRecorder:
    return notes  # (mypy: Notes is a ConversationRecorder)


async def test_a_recorder_is_told_a_text_turn_in_order(virtual_clock: Any) -> None:
    llm = ScriptedLLM([text("Hello there.", delay=0.5)])
    async with Session(llm) as session:
        notes = Notes()
        session.add_recorder(as_recorder(notes))
        session.add_recorder(notes)  # once only
        speeches: list[Any] = []
        session.on("speech_created", speeches.append)
        await session.start(Assistant())
        await session.run(user_input="hi")
        told = list(notes.told)
    user, reply = [value for kind, value in told if kind == "item"]
    assert isinstance(user, ChatMessage) and (user.role, user.content) == ("user", "hi")
    assert isinstance(reply, ChatMessage) and reply.content == "Hello there."
    states = [value for kind, value in told if kind == "state"]
    assert ("listening", "thinking") in states and states[-1][1] == "listening"
    ((llm_told, speech_id, timings),) = [value for kind, value in told if kind == "request"]
    assert llm_told is llm and speech_id == speeches[0].speech.id
    assert timings["status"] == "completed"
    assert timings["first"] - timings["started"] == pytest.approx(0.5)  # the loop's clock
    assert timings["ended"] >= timings["first"] and timings["first_audio"] is None
    assert timings["usage"] is not None and timings["usage"].output_tokens > 0
    # The request is told as its stream ends, before the reply enters the history;
    # the turn ends last.
    assert notes.kinds().index("request") < told.index(("item", reply))
    assert told[-1] == ("state", ("speaking", "listening"))


async def test_a_recorder_is_told_a_tool_turn(virtual_clock: Any) -> None:
    llm = ScriptedLLM([tool_calls(("lookup", {"key": "a"})), text("It is 42.")])
    async with Session(llm, tools=[lookup]) as session:
        notes = Notes()
        session.add_recorder(notes)
        await session.start(Assistant())
        await session.run(user_input="look a up")
    items = [value for kind, value in notes.told if kind == "item"]
    (call,) = [i for i in items if isinstance(i, FunctionCall)]
    (output,) = [i for i in items if isinstance(i, FunctionCallOutput)]
    assert (call.name, output.output, output.call_id) == ("lookup", "42", call.call_id)
    assert notes.kinds().count("request") == 2  # one per model request


async def test_a_recorder_that_raises_is_logged_and_the_session_goes_on(
    caplog: pytest.LogCaptureFixture, no_leaked_tasks: Callable[[], Any]
) -> None:
    class Broken(Notes):
        def item_added(self, item: Any) -> None:
            raise RuntimeError("recorder bug")

        def agent_state_changed(self, old: str, new: str) -> None:
            raise RuntimeError("recorder bug")

        def llm_request(self, llm: Any, speech_id: str, **timings: Any) -> None:
            raise RuntimeError("recorder bug")

    after = Notes()
    async with Session(ScriptedLLM([text("Still here.")])) as session:
        session.add_recorder(Broken())
        session.add_recorder(after)  # a later recorder is still told
        await session.start(Assistant())
        with caplog.at_level(logging.ERROR, logger="backline"):
            result = await session.run(user_input="hi")
    assert result.final_output == "Still here."
    assert "a conversation recorder raised" in caplog.text
    assert {"item", "state", "request"} <= set(after.kinds())
    await no_leaked_tasks()


async def test_a_removed_recorder_hears_nothing_more_and_a_restart_keeps_one() -> None:
    notes, removed = Notes(), Notes()
    session: Session[Any] = Session(ScriptedLLM([text("One."), text("Two.")]))
    session.add_recorder(notes)
    session.add_recorder(removed)
    async with session:
        await session.start(Assistant())
        session.remove_recorder(removed)
        session.remove_recorder(removed)  # (not added: nothing happens)
        await session.run(user_input="first")
    assert removed.kinds().count("request") == 0
    async with session:  # restarted: the recorder is kept
        await session.start(Assistant())
        await session.run(user_input="second")
    contents = [v.content for k, v in notes.told if k == "item" and isinstance(v, ChatMessage)]
    assert contents == ["first", "One.", "second", "Two."]
