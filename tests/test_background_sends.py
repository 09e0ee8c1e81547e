"""Outbound: ``ctx.send`` (spoken and silent), its events, and the reply scheduler seen
through background sends (catalog §2B, §2C, §2E, §4: items 36–50, 57–59, 76–98; 191,
196). Deferred-tool paths already pinned in test_hard_rules.py are not repeated."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from backline import (
    Agent,
    ChatContext,
    InMemoryTextOutput,
    RunContext,
    Session,
    background,
    function_tool,
)
from backline.testing import ScriptedLLM, VirtualClock, tool_calls
from tests.background_kit import ctx_of, forever, user_messages, worker
from tests.conftest import Recorder

pytestmark = pytest.mark.usefixtures("close_sessions")


AT_TAIL = (
    "New updates arrived from background session `{}`. Tell the user about them "
    "naturally and briefly, without repeating them word for word."
)
MAYBE_COVERED = (
    "New updates arrived from background session `{}`. You may already have mentioned "
    "them: respond only with information the user has not heard yet."
)
INTRODUCE = (
    "Several background sessions run: say first whose update this is, by its name (`{}: ...`)."
)


first = background("first", description="x")(forever)
second = background("second", description="x")(forever)


class Gated(Agent):
    """An agent whose context updates (the scheduler inserts through them) can be held."""

    def __init__(self, instructions: str = "Help.") -> None:
        super().__init__(instructions)
        self.gate: asyncio.Event | None = None
        self.waiting = asyncio.Event()
        self.updates = 0
        self.active = 0
        self.max_active = 0

    async def update_chat_ctx(self, chat_ctx: ChatContext) -> None:
        self.updates += 1
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            if self.gate is not None:
                self.waiting.set()
                await self.gate.wait()
            await super().update_chat_ctx(chat_ctx)
        finally:
            self.active -= 1


class Second(Gated):
    def __init__(self) -> None:
        super().__init__("Second.")


class First(Gated):
    def __init__(self) -> None:
        super().__init__("First.")

    @function_tool
    async def transfer(self) -> Agent:
        """Transfer."""
        return Second()


def reply_statuses(rec: Recorder) -> list[tuple[str, list[str]]]:
    return [(e.status, e.message_ids) for e in rec.of("background_reply")]


# -- spoken sends ----------------------------------------------------------------------


async def test_a_spoken_send_inserts_a_user_message_with_origin_metadata(
    virtual_clock: VirtualClock,
) -> None:
    output = InMemoryTextOutput()
    llm = ScriptedLLM(["The tests pass now."])
    session: Session[Any] = Session(llm, background=[worker], output=output)
    rec = Recorder(session)
    in_history_at_event: list[bool] = []
    session.on(
        "background_message",
        lambda e: in_history_at_event.append(
            any(
                it.extra.get("background_message_id") == e.message_id
                for it in session.history.items
            )
        ),
    )
    await session.start(Agent("Help."))
    with pytest.raises(TypeError, match="must be a string"):
        await ctx_of(session).send(42)  # type: ignore[arg-type]
    await ctx_of(session).send("tests pass")  # no inbound message needed
    assert await session.wait_for_idle(timeout=5)
    (item,) = user_messages(session.history)
    assert item.content == "Background session `worker` sent an update:\ntests pass"
    message_id = item.extra["background_message_id"]
    assert item.extra == {
        "background_id": "worker",
        "background_message_id": message_id,
        "silent": False,
        "kind": "progress",  # (its place on the floor: test_background_floor.py)
    }
    assert message_id.startswith("background_message_") and message_id != item.id
    (event,) = rec.of("background_message")
    assert (event.background_id, event.message_id, event.content, event.silent) == (
        "worker",
        message_id,
        "tests pass",
        False,
    )
    assert in_history_at_event == [True]
    # The voice agent says it in its own words: the raw update is never spoken directly.
    assert output.transcript == ["The tests pass now."]
    assert [e.source for e in rec.of("speech_created")] == ["background_reply"]


async def test_sends_are_inserted_at_once_and_voiced_in_one_coalesced_reply(
    virtual_clock: VirtualClock,
) -> None:
    seen_ids: list[list[str]] = []

    def at_tail(args: Mapping[str, Any]) -> str:
        seen_ids.append(list(args["message_ids"]))
        return "summarise"

    defn = background("worker", description="x", handling={"reply_at_tail_template": at_tail})(
        forever
    )
    llm = ScriptedLLM(["Two updates."])
    session: Session[Any] = Session(llm, background=[defn])
    rec = Recorder(session)
    agent = Gated()
    await session.start(agent)
    session.user_started_speaking()  # not idle: nothing is voiced yet
    ctx = ctx_of(session)
    await ctx.send("one")
    await ctx.send("two")
    # send returned: inserted and scheduled, not spoken.
    assert llm.requests == [] and session.agent_state == "thinking"
    in_agent = user_messages(agent.chat_ctx)
    in_history = user_messages(session.history)
    assert [m.content.rsplit("\n", 1)[1] for m in in_agent] == ["one", "two"]
    assert all(a is b for a, b in zip(in_agent, in_history, strict=True))
    assert agent.updates == 2
    await asyncio.sleep(30)
    assert llm.requests == []
    session.user_stopped_speaking()
    assert await session.wait_for_idle(timeout=5)
    ids = [m.extra["background_message_id"] for m in in_history]
    assert seen_ids == [ids]
    assert len(llm.requests) == 1
    assert reply_statuses(rec) == [("scheduled", ids), ("completed", ids)]
    assert len(user_messages(session.history)) == 2  # written once each


async def test_the_reply_request_has_tools_disabled_and_default_wording(
    virtual_clock: VirtualClock,
) -> None:
    llm = ScriptedLLM(["ok"])
    session: Session[Any] = Session(llm, background=[worker])
    await session.start(Agent("Help."))
    await ctx_of(session).send("done")
    assert await session.wait_for_idle(timeout=5)
    (request,) = llm.requests
    assert request.tool_choice == "none" and request.tools == []
    assert request.instructions == ["Help.", AT_TAIL.format("worker")]
    assert request.last_message is not None and request.last_message.content.endswith("done")


async def test_the_target_is_the_agent_current_at_send_time(virtual_clock: VirtualClock) -> None:
    llm = ScriptedLLM(["first voiced", tool_calls(("transfer", {})), "second voiced"])
    session: Session[Any] = Session(llm, background=[worker])
    a = First()
    await session.start(a)
    ctx = ctx_of(session)
    await ctx.send("to A")
    assert await session.wait_for_idle(timeout=5)
    await session.run(user_input="transfer")
    b = session.current_agent
    assert isinstance(b, Second)
    await ctx.send("to B")
    assert await session.wait_for_idle(timeout=5)
    assert [m.content[-4:] for m in user_messages(a.chat_ctx)] == ["to A", "sfer"]
    assert [m.content[-4:] for m in user_messages(b.chat_ctx)] == ["to B"]


async def test_sends_from_one_background_are_serialised(virtual_clock: VirtualClock) -> None:
    session: Session[Any] = Session(ScriptedLLM(), background=[worker])
    agent = Gated()
    await session.start(agent)
    session.user_started_speaking()
    agent.gate = asyncio.Event()
    ctx = ctx_of(session)
    sends = [asyncio.ensure_future(ctx.send(m, silent=(m == "b"))) for m in ("a", "b", "c")]
    await asyncio.wait_for(agent.waiting.wait(), 5)
    await asyncio.sleep(1)
    assert agent.updates == 1  # the others wait their turn
    agent.gate.set()
    await asyncio.wait_for(asyncio.gather(*sends), 5)
    assert agent.max_active == 1 and agent.updates == 3
    assert [m.content[-1] for m in user_messages(session.history)] == ["a", "b", "c"]


async def test_close_during_a_blocked_send_leaves_both_or_neither(
    virtual_clock: VirtualClock, no_leaked_tasks: Callable[[], Any]
) -> None:
    llm = ScriptedLLM()
    session: Session[Any] = Session(llm, background=[worker])
    rec = Recorder(session)
    agent = Gated()
    await session.start(agent)
    agent.gate = asyncio.Event()
    ctx = ctx_of(session)
    send = asyncio.ensure_future(ctx.send("racing close"))  # from a helper task
    await asyncio.wait_for(agent.waiting.wait(), 5)
    closing = asyncio.ensure_future(session.aclose())
    await asyncio.sleep(0.5)
    assert not closing.done()  # close waits for the insert in flight
    agent.gate.set()
    with pytest.raises(RuntimeError, match=r"^background session 'worker' is closed$"):
        await send
    await asyncio.wait_for(closing, 5)
    assert user_messages(agent.chat_ctx) == [] and len(session.history) == 0
    assert rec.of("background_message") == rec.of("background_reply") == []
    assert llm.requests == []
    with pytest.raises(RuntimeError, match="is closed"):
        await ctx.send("after close")
    assert agent.updates == 1  # refused without touching the agent
    await no_leaked_tasks()


# -- silent sends ----------------------------------------------------------------------


async def test_a_silent_send_enters_context_and_history_once_and_says_nothing(
    virtual_clock: VirtualClock,
) -> None:
    llm = ScriptedLLM()
    session: Session[Any] = Session(llm, background=[worker])
    rec = Recorder(session)
    agent = Gated()
    await session.start(agent)
    await ctx_of(session).send("for your information", silent=True)
    assert await session.wait_for_idle(timeout=5)
    await asyncio.sleep(30)
    (item,) = user_messages(session.history)
    assert user_messages(agent.chat_ctx) == [item] and agent.updates == 1
    assert item.content.endswith("for your information") and item.extra["silent"] is True
    (event,) = rec.of("background_message")
    assert event.silent is True and event.content == "for your information"
    assert event.message_id == item.extra["background_message_id"]
    assert llm.requests == [] and rec.of("background_reply") == []
    assert rec.agent_states == ["listening"]  # never "thinking": nothing is owed


async def test_a_silent_note_after_a_pending_message_makes_the_reply_maybe_covered(
    virtual_clock: VirtualClock,
) -> None:
    llm = ScriptedLLM(["Update."])
    session: Session[Any] = Session(llm, background=[worker])
    rec = Recorder(session)
    await session.start(Agent("Help."))
    session.user_started_speaking()
    ctx = ctx_of(session)
    await ctx.send("spoken")
    await ctx.send("context only", silent=True)
    session.user_stopped_speaking()
    assert await session.wait_for_idle(timeout=5)
    (request,) = llm.requests  # the silent note neither starts nor adds a reply
    assert request.instructions[-1] == MAYBE_COVERED.format("worker")
    assert [m.content[-12:] for m in user_messages(request.chat_ctx)] == [
        "date:\nspoken",
        "context only",
    ]
    (scheduled, _completed) = rec.of("background_reply")
    assert len(scheduled.message_ids) == 1


# -- reply events ----------------------------------------------------------------------


@pytest.mark.parametrize("outcome", ["completed", "interrupted", "skipped"])
async def test_reply_events_link_message_and_speech_ids(
    virtual_clock: VirtualClock, outcome: str
) -> None:
    reply = "" if outcome == "skipped" else "A long update about the build " * 3
    llm = ScriptedLLM([reply])
    session: Session[Any] = Session(
        llm, background=[worker], output=InMemoryTextOutput(chars_per_second=20)
    )
    rec = Recorder(session)
    await session.start(Agent("Help."))
    await ctx_of(session).send("build passed")
    if outcome == "interrupted":
        await asyncio.sleep(1)
        session.user_started_speaking()
        session.user_stopped_speaking()
    assert await session.wait_for_idle(timeout=30)
    (message,) = rec.of("background_message")
    scheduled, final = rec.of("background_reply")
    assert scheduled.status == "scheduled" and final.status == outcome
    assert scheduled.message_ids == final.message_ids == [message.message_id]
    (speech,) = rec.of("speech_created")
    assert scheduled.speech_id == final.speech_id == speech.speech.id
    order = [e.type for e in rec.events if e.type.startswith("background_m")]
    assert order[0] == "background_message"
    await asyncio.sleep(30)
    assert len(llm.requests) == 1  # an interrupted reply is not rescheduled
    assert len(user_messages(session.history)) == 1  # its items stay


async def test_tool_and_background_replies_never_mix(virtual_clock: VirtualClock) -> None:
    gate = asyncio.Event()

    @function_tool
    async def job(ctx: RunContext[Any]) -> str:
        """Job."""
        await ctx.update("working")
        await gate.wait()
        return "job result"

    llm = ScriptedLLM([tool_calls(("job", {})), "On it.", "one reply", "another reply"])
    session: Session[Any] = Session(llm, tools=[job], background=[worker])
    rec = Recorder(session)
    await session.start(Agent("Help."))
    session.push_user_turn("start the job")
    assert await session.wait_for_idle(timeout=5)
    session.user_started_speaking()
    gate.set()
    await ctx_of(session).send("background news")
    await asyncio.sleep(1)
    session.user_stopped_speaking()
    assert await session.wait_for_idle(timeout=5)
    tool_replies = rec.of("tool_reply")
    background_replies = rec.of("background_reply")
    assert [r.status for r in tool_replies] == ["scheduled", "completed"]
    assert [r.status for r in background_replies] == ["scheduled", "completed"]
    assert tool_replies[0].call_ids == ["call_1_final"]
    (message,) = rec.of("background_message")
    assert background_replies[0].message_ids == [message.message_id]
    assert tool_replies[0].speech_id != background_replies[0].speech_id
    assert [e.source for e in rec.of("speech_created")][-2:] in (
        ["tool_reply", "background_reply"],
        ["background_reply", "tool_reply"],
    )


# -- the reply scheduler ---------------------------------------------------------------


async def test_two_backgrounds_reply_separately(virtual_clock: VirtualClock) -> None:
    llm = ScriptedLLM(["reply one", "reply two"])
    session: Session[Any] = Session(llm, background=[first, second])
    rec = Recorder(session)
    await session.start(Agent("Help."))
    session.user_started_speaking()
    await ctx_of(session, "first").send("from first")
    await ctx_of(session, "second").send("from second")
    session.user_stopped_speaking()
    assert await session.wait_for_idle(timeout=5)
    assert len(llm.requests) == 2
    by_id = {e.background_id: e for e in rec.of("background_reply") if e.status == "scheduled"}
    assert set(by_id) == {"first", "second"}
    # "first" is no longer the last item of the context; "second" may have been covered
    # by the first reply, whose context already held it.
    # With several backgrounds, each reply says whose update it is first.
    assert [r.instructions[-1] for r in llm.requests] == [
        MAYBE_COVERED.format("first") + " " + INTRODUCE.format("first"),
        MAYBE_COVERED.format("second") + " " + INTRODUCE.format("second"),
    ]
    assert [e.status for e in rec.of("background_reply")].count("completed") == 2


@pytest.mark.parametrize("interrupt_first", [False, True])
async def test_a_finished_reply_does_not_disturb_the_next_delivery(
    virtual_clock: VirtualClock, interrupt_first: bool
) -> None:
    llm = ScriptedLLM(["A first rather long reply " * 3, "second reply"])
    session: Session[Any] = Session(
        llm, background=[worker], output=InMemoryTextOutput(chars_per_second=20)
    )
    rec = Recorder(session)
    await session.start(Agent("Help."))
    ctx = ctx_of(session)
    await ctx.send("one")
    if interrupt_first:
        await asyncio.sleep(1)
        session.user_started_speaking()
        session.user_stopped_speaking()
    assert await session.wait_for_idle(timeout=30)
    await ctx.send("two")
    assert await session.wait_for_idle(timeout=30)
    events = rec.of("background_reply")
    assert [e.status for e in events] == [
        "scheduled",
        "interrupted" if interrupt_first else "completed",
        "scheduled",
        "completed",
    ]
    assert events[0].message_ids != events[2].message_ids
    assert events[1].speech_id != events[3].speech_id
    assert llm.remaining == 0


async def test_a_send_during_delivery_starts_the_next_batch(virtual_clock: VirtualClock) -> None:
    llm = ScriptedLLM([tool_calls(("transfer", {})), "reply one", "reply two"])
    session: Session[Any] = Session(llm, background=[worker])
    rec = Recorder(session)
    await session.start(First())
    ctx = ctx_of(session)
    session.user_started_speaking()
    await ctx.send("one")
    await session.run(user_input="transfer")
    b = session.current_agent
    assert isinstance(b, Second)
    b.gate = asyncio.Event()
    session.user_stopped_speaking()  # delivery starts: it copies "one" onto B (blocked)
    await asyncio.wait_for(b.waiting.wait(), 5)
    late = asyncio.ensure_future(ctx.send("two"))
    await asyncio.sleep(1)
    assert not late.done()  # the delivery holds the lock
    b.gate.set()
    await asyncio.wait_for(late, 5)
    assert await session.wait_for_idle(timeout=5)
    scheduled = [e.message_ids for e in rec.of("background_reply") if e.status == "scheduled"]
    one, two = (m.extra["background_message_id"] for m in user_messages(session.history)[::2])
    assert scheduled == [[one], [two]]


async def test_a_handoff_before_delivery_copies_the_items_onto_the_new_agent(
    virtual_clock: VirtualClock,
) -> None:
    llm = ScriptedLLM([tool_calls(("transfer", {})), "voiced on B", "later on B"])
    session: Session[Any] = Session(llm, background=[worker])
    a = First()
    await session.start(a)
    session.user_started_speaking()  # not idle until the handoff is over
    await ctx_of(session).send("news")
    (item,) = user_messages(a.chat_ctx)
    await session.run(user_input="transfer")
    b = session.current_agent
    assert isinstance(b, Second) and user_messages(b.chat_ctx) == []
    session.user_stopped_speaking()
    assert await session.wait_for_idle(timeout=5)
    assert user_messages(b.chat_ctx) == [item]  # the same item, same id
    assert b.updates == 1
    assert len([m for m in user_messages(session.history) if m is item]) == 1
    assert item.id in llm.requests[1].chat_ctx and llm.requests[1].tool_choice == "none"
    await session.run(user_input="and then?")
    assert item.id in llm.requests[2].chat_ctx  # a permanent insert, not a one-off copy


async def test_a_reply_owed_when_a_handoff_is_committed_is_voiced_by_the_new_agent(
    virtual_clock: VirtualClock,
) -> None:
    llm = ScriptedLLM([tool_calls(("transfer", {})), "voiced"])
    session: Session[Any] = Session(llm, background=[worker])
    await session.start(First())
    session.user_started_speaking()
    await ctx_of(session).send("news")
    session.user_stopped_speaking()
    session.push_user_turn("transfer")  # the turn goes first; the reply waits for idle
    assert await session.wait_for_idle(timeout=5)
    b = session.current_agent
    assert isinstance(b, Second)
    # Observed: the reply was generated on First between its transfer speech and the
    # handoff (First voiced it; Second never learns of the update).
    assert [m.content[-4:] for m in user_messages(b.chat_ctx)] == ["news"]
    history = [it.type for it in session.history.items]
    assert history.index("agent_handoff") < len(history) - 1  # the reply follows it


async def test_no_listening_blip_between_a_handoff_speech_and_the_handoff(
    virtual_clock: VirtualClock,
) -> None:
    session: Session[Any] = Session(
        ScriptedLLM([tool_calls(("transfer", {}))]), background=[worker]
    )
    rec = Recorder(session)
    await session.start(First())
    await session.run(user_input="transfer")
    assert isinstance(session.current_agent, Second)
    # Observed: ["listening", "thinking", "listening", "thinking", "listening"].
    assert rec.agent_states == ["listening", "thinking", "listening"]


async def test_close_while_delivery_is_blocked_retargeting(
    virtual_clock: VirtualClock, no_leaked_tasks: Callable[[], Any]
) -> None:
    llm = ScriptedLLM([tool_calls(("transfer", {}))])
    session: Session[Any] = Session(llm, background=[worker])
    rec = Recorder(session)
    await session.start(First())
    session.user_started_speaking()
    await ctx_of(session).send("news")
    await session.run(user_input="transfer")
    b = session.current_agent
    assert isinstance(b, Second)
    b.gate = asyncio.Event()  # never released
    session.user_stopped_speaking()
    await asyncio.wait_for(b.waiting.wait(), 5)
    start = virtual_clock.now()
    await session.aclose()
    assert virtual_clock.now() - start < 1.0
    assert len(llm.requests) == 1
    assert rec.of("background_reply") == []
    await no_leaked_tasks()


async def test_a_run_waits_for_a_reply_its_turn_caused(virtual_clock: VirtualClock) -> None:
    @function_tool
    async def kick(ctx: RunContext[Any]) -> str:
        """Kick the background."""
        assert ctx.session.background is not None
        await ctx.session.background.context("worker").send("kicked off")
        return "ok"

    llm = ScriptedLLM([tool_calls(("kick", {})), "Kicked.", "The worker says hi."])
    session: Session[Any] = Session(llm, tools=[kick], background=[worker])
    await session.start(Agent("Help."))
    result = await session.run(user_input="kick it")
    assert result.final_output == "The worker says hi."
    assert len(llm.requests) == 3
