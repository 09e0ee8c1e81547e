"""Floor control (issue 30, item 5): background updates are voiced one at a time, in
priority order (a question, then failures, then completions, then progress; the oldest
first among equals), each introduced by its background's name when several run;
``ctx.send(text, kind=...)`` says what an update is, a background's failure or end
raises what it still has waiting. (Tool replies take no part: they keep their own
rules, which test_hard_rules.py and the randomized schedules pin.)"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from backline import (
    Agent,
    BackgroundContext,
    ChatMessage,
    InMemoryTextOutput,
    Session,
    background,
)
from backline.testing import ScriptedLLM, VirtualClock, text
from backline.testing.scripted_llm import LLMRequest
from tests.background_kit import ctx_of, forever
from tests.conftest import Recorder

pytestmark = pytest.mark.usefixtures("close_sessions")

worker = background("worker", description="Does work.")(forever)
NAMED = re.compile(r"by its name \(`([\w.-]+): \.\.\.`\)")


def relay(request: LLMRequest) -> Any:
    """A voice model that follows the reply's instructions: it names the background the
    instructions name, then relays that background's last update word for word."""
    named = NAMED.search(request.instructions[-1]) if request.instructions else None
    if named is None:
        return text("Okay.")
    name = named.group(1)
    updates = [
        it.content.rsplit("\n", 1)[-1]
        for it in request.chat_ctx.items
        if isinstance(it, ChatMessage)
        and it.extra.get("background_id") == name
        and it.extra.get("silent") is False
    ]
    return text(f"{name}: {updates[-1]}")


def spoken(session: Session[Any]) -> list[str]:
    return [
        it.content
        for it in session.history.items
        if isinstance(it, ChatMessage) and it.role == "assistant"
    ]


async def started(*ids: str, output: Any = None, llm: Any = None) -> tuple[Session[Any], Recorder]:
    session: Session[Any] = Session(
        llm or ScriptedLLM(relay),
        background=[worker.instance(i) for i in ids],
        output=output or InMemoryTextOutput(chars_per_second=40),
        user_away_timeout=None,
    )
    rec = Recorder(session)
    await session.start(Agent("Help."))
    return session, rec


async def test_updates_queued_while_the_agent_speaks_go_one_at_a_time_most_urgent_first(
    virtual_clock: VirtualClock,
) -> None:
    session, rec = await started("api", "web", "docs", "db")
    loop = asyncio.get_running_loop()
    speech = session.say("A long answer about something else entirely, " * 4)  # ~4.5 s
    await asyncio.sleep(0.5)
    assert session.agent_state == "speaking"
    # Sent oldest first, least urgent first: the floor reverses them.
    await ctx_of(session, "api").send("halfway through the migration", kind="progress")
    await ctx_of(session, "web").send("the build is green", kind="finished")
    await ctx_of(session, "docs").send("the link checker failed", kind="failed")
    await ctx_of(session, "db").send("may I drop the old table?")  # a question: it ends with ?
    await ctx_of(session, "api").send("the migration copied the rows")  # joins api's batch
    sent_at = loop.time()
    assert not rec.of("background_reply")  # nothing is voiced over the agent
    await speech
    assert await session.wait_for_idle(timeout=60)
    assert spoken(session)[1:] == [
        "db: may I drop the old table?",
        "docs: the link checker failed",
        "web: the build is green",
        "api: the migration copied the rows",  # one reply for both of api's updates
    ]
    # One at a time: each reply is scheduled only once the previous one has ended.
    events = [(e.background_id, e.status) for e in rec.of("background_reply")]
    assert events == [
        (bid, status)
        for bid in ("db", "docs", "web", "api")
        for status in ("scheduled", "completed")
    ]
    assert loop.time() - sent_at >= 4.0  # all of it waited for the agent's own speech
    (api,) = [e for e in rec.of("background_reply") if e.background_id == "api"][:1]
    assert len(api.message_ids) == 2


async def test_equal_updates_go_oldest_first_and_a_later_question_jumps_the_line(
    virtual_clock: VirtualClock,
) -> None:
    session, _rec = await started("a", "b", "c")
    session.user_started_speaking()  # the user holds the floor: everything waits
    await ctx_of(session, "b").send("b is halfway")
    await ctx_of(session, "a").send("a is halfway")
    await ctx_of(session, "c").send("c is done", kind="finished")
    session.user_stopped_speaking()
    await asyncio.sleep(0.2)  # c's reply is being spoken: the floor is taken
    await ctx_of(session, "a").send("which branch?")
    assert await session.wait_for_idle(timeout=60)
    assert spoken(session) == ["c: c is done", "a: which branch?", "b: b is halfway"]


async def test_a_failure_or_an_end_raises_what_a_background_still_has_to_say(
    virtual_clock: VirtualClock,
) -> None:
    gate = asyncio.Event()

    @background("quitter", description="Says one thing, then stops.")
    async def quitter(ctx: BackgroundContext) -> None:
        await ctx.send("the report is written")  # progress by default
        await gate.wait()
        if ctx.id == "crasher":
            raise RuntimeError("disk full")

    llm = ScriptedLLM(relay)
    session: Session[Any] = Session(
        llm,
        background=[
            worker.instance("chatty"),
            quitter.instance("ender"),
            quitter.instance("crasher"),
        ],
        user_away_timeout=None,
    )
    await session.start(Agent("Help."))
    session.user_started_speaking()
    await ctx_of(session, "chatty").send("chatty is still going")
    gate.set()  # "ender" ends (a completion), "crasher" crashes (a failure)
    await asyncio.sleep(0.1)
    session.user_stopped_speaking()
    assert await session.wait_for_idle(timeout=60)
    assert spoken(session) == [
        "crasher: the report is written",
        "ender: the report is written",
        "chatty: chatty is still going",
    ]


async def test_a_turn_that_raises_counts_as_a_failure(virtual_clock: VirtualClock) -> None:
    @background("flaky", description="Fails its turns.")
    async def flaky(ctx: BackgroundContext) -> None:
        async for message in ctx.messages():
            try:
                async with ctx.turn():
                    await ctx.send(f"started {message}")
                    raise ValueError("boom")
            except ValueError:
                pass

    session: Session[Any] = Session(
        ScriptedLLM(relay), background=[worker.instance("calm"), flaky], user_away_timeout=None
    )
    await session.start(Agent("Help."))
    session.user_started_speaking()
    await ctx_of(session, "calm").send("calm is fine")
    assert session.background is not None
    session.background.deliver("flaky", "the job")
    await asyncio.sleep(0.1)
    session.user_stopped_speaking()
    assert await session.wait_for_idle(timeout=60)
    assert spoken(session) == ["flaky: started the job", "calm: calm is fine"]


async def test_one_background_is_introduced_by_nothing_and_kinds_are_checked(
    virtual_clock: VirtualClock,
) -> None:
    llm = ScriptedLLM(["Relayed."])
    session: Session[Any] = Session(llm, background=[worker], user_away_timeout=None)
    await session.start(Agent("Help."))
    ctx = ctx_of(session)
    with pytest.raises(
        ValueError, match="kind must be one of question, failed, finished, progress"
    ):
        await ctx.send("x", kind="done")  # type: ignore[arg-type]
    await ctx.send("done?", kind="finished")  # the kind given wins over the question mark
    assert await session.wait_for_idle(timeout=10)
    assert "Several background sessions run" not in llm.requests[-1].instructions[-1]
    (item,) = [it for it in session.history.items if it.extra.get("background_id") == "worker"]
    assert item.extra["kind"] == "finished"
    await ctx.send("a note", silent=True)  # a silent note has no kind: nothing is voiced
    note = session.history.items[-1]
    assert "kind" not in note.extra
