"""What did I miss? (issue 30, item 4): while the user is away, or when an update is cut
off before it was heard, backline keeps what the user missed; on return the agent
offers a catch-up, and ``backline_missed`` tells it all, in order, then forgets it. On
the virtual clock."""

from __future__ import annotations

import asyncio
from typing import Any

from backline import Agent, BackgroundContext, ChatMessage, Session, background
from backline.background._missed import (
    CATCH_UP_AT_TAIL,
    CATCH_UP_MAYBE_COVERED,
    CATCH_UP_TOLD,
    MISSED_TOOL,
    NOTHING_MISSED,
    MissedUpdates,
)
from backline.testing import LLMRequest, ScriptedLLM, VirtualClock, text, tool_calls

AWAY = 5.0  # seconds of quiet before the user is away


def missed_part(session: Session[Any]) -> MissedUpdates:
    (part,) = [p for p in session.parts if isinstance(p, MissedUpdates)]
    return part


def outputs(llm: ScriptedLLM, name: str) -> list[str]:
    """What the tool ``name`` answered, in the model's last request."""
    items = llm.requests[-1].chat_ctx.items
    calls = {i.call_id for i in items if i.type == "function_call" and i.name == name}
    return [str(i.output) for i in items if i.type == "function_call_output" and i.call_id in calls]


class Model:
    """The voice model, scripted by what it is asked: a background's update is relayed,
    the catch-up offered, "what did I miss?" answered through the tool."""

    def __init__(self) -> None:
        self.catch_ups: list[str] = []  # the instructions of each catch-up reply

    def __call__(self, request: LLMRequest) -> Any:
        for line in request.instructions:
            if line in (CATCH_UP_AT_TAIL, CATCH_UP_MAYBE_COVERED, CATCH_UP_TOLD):
                self.catch_ups.append(line)
                return text("Welcome back: ci finished and build failed. Want the details?")
        if request.tool_choice == "none":
            return text("An update from a background.")
        last = request.last_message
        if request.chat_ctx.items[-1].type == "function_call_output":
            return text("That is all you missed.")
        if last is not None and last.content == "what did I miss?":
            return tool_calls((MISSED_TOOL, {}))
        return text("OK.")


async def test_away_while_two_backgrounds_report_then_the_catch_up(
    virtual_clock: VirtualClock,
) -> None:
    @background("ci", description="Runs the tests.")
    async def ci(ctx: BackgroundContext) -> None:
        await asyncio.sleep(20)  # the user went away meanwhile
        async with ctx.turn():
            ctx.set_state({"status": "working", "task": "run the tests"})
            await asyncio.sleep(1)
            await ctx.send("All 120 tests pass.")
        await asyncio.Event().wait()

    @background("build", description="Builds.")
    async def build(ctx: BackgroundContext) -> None:
        await asyncio.sleep(30)
        async with ctx.turn():
            raise RuntimeError("the compiler crashed")

    model = Model()
    llm = ScriptedLLM(model)
    session: Session[Any] = Session(llm, background=[ci, build], user_away_timeout=AWAY)
    states: list[str] = []
    session.on("user_state_changed", lambda e: states.append(e.new))
    async with session:
        await session.start(Agent("Talk."))
        await asyncio.sleep(40)
        assert states == ["away"]
        part = missed_part(session)
        assert [(i.background_id, i.kind, i.away) for i in part.record.items] == [
            ("ci", "update", True),
            ("ci", "finished", True),
            ("build", "failed", True),
        ]
        # The update was voiced to an empty room: it played, but the user was away.
        assert part.record.items[0].heard is True
        assert model.catch_ups == []

        result = await session.run(user_input="I'm back")
        assert states == ["away", "listening"]
        # The catch-up was offered once the reply to the user's turn had ended.
        assert model.catch_ups == [CATCH_UP_MAYBE_COVERED]
        notes = [
            i
            for i in session.history.items
            if isinstance(i, ChatMessage) and "backline_catch_up" in i.extra
        ]
        assert len(notes) == 1
        assert "ci sent an update; ci finished: run the tests; " in notes[0].content
        assert "build failed: RuntimeError: the compiler crashed" in notes[0].content
        assert MISSED_TOOL in notes[0].content
        assert [e.item.content for e in result.events if e.type == "message"][-1].startswith(
            "Welcome back"
        )

        await session.run(user_input="what did I miss?")
        (told,) = outputs(llm, MISSED_TOOL)
        assert told.splitlines() == [
            "What the user missed (3 items, oldest first):",
            "1. ci said: All 120 tests pass. (spoken while the user was away)",
            "2. ci finished: run the tests (while the user was away)",
            "3. build failed: RuntimeError: the compiler crashed (while the user was away)",
        ]
        assert len(part.record) == 0  # told: forgotten
        assert part.tell() == NOTHING_MISSED
        # Back and nothing new: no second catch-up.
        await asyncio.sleep(AWAY + 1)
        assert session.user_state == "away"
        await session.run(user_input="hello again")
        assert len(model.catch_ups) == 1


async def test_an_interrupted_update_is_kept_as_not_heard(virtual_clock: VirtualClock) -> None:
    """The user is there; the agent starts relaying an update and the user talks over
    it: the update was not heard, so it is what the user missed. A second update heard
    to the end is not."""
    say = asyncio.Event()

    @background("ci", description="Runs the tests.")
    async def ci(ctx: BackgroundContext) -> None:
        await say.wait()
        await ctx.send("The deploy to staging failed on step 3.")
        await asyncio.sleep(10)
        await ctx.send("The nightly build is green.")
        await asyncio.Event().wait()

    long_update = " ".join(f"word{i}" for i in range(20))
    llm = ScriptedLLM(
        [
            text(long_update, chunk_delay=0.5),  # the first update, cut off below
            "What is it?",  # the reply to the user who talked over it
            "The nightly build is green.",  # the second update, heard
            tool_calls((MISSED_TOOL, {})),
            "You missed one update.",
        ]
    )
    session: Session[Any] = Session(llm, background=[ci], user_away_timeout=None)
    replies: list[str] = []
    session.on("background_reply", lambda e: replies.append(e.status))
    async with session:
        await session.start(Agent("Talk."))
        say.set()
        await asyncio.sleep(2)
        assert session.agent_state == "speaking"
        session.user_started_speaking()  # barge-in
        session.user_stopped_speaking()
        session.push_user_turn("wait, what?")
        await asyncio.sleep(15)
        assert replies == ["scheduled", "interrupted", "scheduled", "completed"]
        (item,) = missed_part(session).record.items
        # What the agent got to say of it before the cut (the history keeps it).
        cut_off = 'interrupted after "word0 word1 word2 word3 word4"'
        (relay,) = [
            i
            for i in session.history.items
            if isinstance(i, ChatMessage) and i.role == "assistant" and i.interrupted
        ]
        assert cut_off == f'interrupted after "{relay.content.strip()}"'
        assert (item.background_id, item.kind, item.away, item.heard, item.why) == (
            "ci",
            "update",
            False,
            False,
            cut_off,
        )
        await session.run(user_input="what did I miss?")
    (told,) = outputs(llm, MISSED_TOOL)
    assert told.splitlines()[1:] == [
        f"1. ci said: The deploy to staging failed on step 3. (NOT HEARD: {cut_off})"
    ]


async def test_an_update_sent_while_away_and_heard_on_return_is_not_missed(
    virtual_clock: VirtualClock,
) -> None:
    """An update that the agent voices only once the user is back was heard."""
    hold = asyncio.Event()

    @background("ci", description="Runs the tests.")
    async def ci(ctx: BackgroundContext) -> None:
        await asyncio.sleep(AWAY + 1)
        await ctx.send("The tests pass.")
        await asyncio.Event().wait()

    async def slow(request: LLMRequest) -> Any:
        catch_up = {CATCH_UP_AT_TAIL, CATCH_UP_MAYBE_COVERED, CATCH_UP_TOLD}
        if request.tool_choice == "none" and not catch_up & set(request.instructions):
            await hold.wait()  # the relay of the update starts only once allowed
        return text("Noted.")

    session: Session[Any] = Session(ScriptedLLM(slow), background=[ci], user_away_timeout=AWAY)
    async with session:
        await session.start(Agent("Talk."))
        await asyncio.sleep(AWAY + 2)
        assert session.user_state == "away"
        part = missed_part(session)
        assert [(i.kind, i.why) for i in part.record.items] == [("update", "not spoken yet")]
        session.user_started_speaking(interrupt=False)  # back
        session.user_stopped_speaking()
        hold.set()
        assert await session.wait_for_idle(timeout=10)
        assert part.record.items == []


async def test_a_question_asked_while_away_is_one_item(virtual_clock: VirtualClock) -> None:
    """``ctx.ask`` while the user is away: the question is spoken to an empty room and
    its alert rings; what the user missed is the question, once."""

    @background("deploy", description="Deploys.")
    async def deploy(ctx: BackgroundContext) -> None:
        await asyncio.sleep(AWAY + 5)
        await ctx.ask("Deploy to production now?", choices=["yes", "no"], timeout=600)

    session: Session[Any] = Session(
        ScriptedLLM(["Deploy asks: deploy to production now?"]),
        background=[deploy],
        user_away_timeout=AWAY,
    )
    alerts: list[str] = []
    session.on("background_alert", lambda e: alerts.append(e.kind))
    async with session:
        await session.start(Agent("Talk."))
        await asyncio.sleep(AWAY + 10)
        assert session.user_state == "away" and alerts == ["question"]
        assert [i.line() for i in missed_part(session).record.items] == [
            "deploy asks: Deploy to production now? (spoken while the user was away)"
        ]
