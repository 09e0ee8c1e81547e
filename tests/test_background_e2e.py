"""End to end, and the catalog's race scenarios: a reused definition isolated per
session, restart after close, a handoff during a silent insert, close during a silent
retarget, the retarget loop across several handoffs (items 16, 32, 34, 47, 49, 56, 69,
89, 190), and a full conversation with a background that reports, notes and speaks."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from backline import (
    UNSET,
    Agent,
    BackgroundContext,
    ChatContext,
    ChatMessage,
    FunctionCall,
    FunctionCallOutput,
    Session,
    background,
    function_tool,
)
from backline.testing import ScriptedLLM, VirtualClock, text, tool_calls
from tests.background_kit import ctx_of, user_messages
from tests.conftest import Recorder

pytestmark = pytest.mark.usefixtures("close_sessions")


def send_call(background_id: str, content: str) -> tuple[str, dict[str, Any]]:
    return ("backline_send", {"background_session_id": background_id, "content": content})


class Gated(Agent):
    """An agent whose context updates (the scheduler inserts through them) can be held."""

    def __init__(self, instructions: str) -> None:
        super().__init__(instructions)
        self.gate: asyncio.Event | None = None
        self.waiting = asyncio.Event()

    async def update_chat_ctx(self, chat_ctx: ChatContext) -> None:
        if self.gate is not None:
            self.waiting.set()
            await self.gate.wait()
        await super().update_chat_ctx(chat_ctx)


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


# -- a reused definition --------------------------------------------------------------


class Echo:
    """One definition, used by two sessions at once."""

    def __init__(self) -> None:
        self.contexts: list[BackgroundContext] = []
        self.received: dict[int, list[str]] = {}
        self.definition = background("echo", description="Echoes.")(self.entry)

    async def entry(self, ctx: BackgroundContext) -> None:
        self.contexts.append(ctx)
        mine = self.received.setdefault(id(ctx), [])
        async for message in ctx.messages():
            mine.append(message)
            await ctx.send(f"echo {message}")


async def test_a_reused_definition_is_isolated_per_session(virtual_clock: VirtualClock) -> None:
    echo = Echo()
    llm_a = ScriptedLLM([tool_calls(send_call("echo", "a1")), "ok", "voiced a1"])
    llm_b = ScriptedLLM([tool_calls(send_call("echo", "b1")), "ok", "voiced b1"])
    a: Session[Any] = Session(llm_a, background=[echo.definition])
    b: Session[Any] = Session(llm_b, background=[echo.definition])
    rec_a, rec_b = Recorder(a), Recorder(b)
    await a.start(Agent("A."))
    await b.start(Agent("B."))
    ctx_a, ctx_b = ctx_of(a, "echo"), ctx_of(b, "echo")
    assert ctx_a is not ctx_b and echo.contexts == [ctx_a, ctx_b]
    assert ctx_a.session is a and ctx_b.session is b
    await a.run(user_input="send a1")
    await b.run(user_input="send b1")
    assert await a.wait_for_idle(timeout=5) and await b.wait_for_idle(timeout=5)
    assert echo.received == {id(ctx_a): ["a1"], id(ctx_b): ["b1"]}
    assert [m.content[-7:] for m in user_messages(a.history)] == ["send a1", "echo a1"]
    assert [m.content[-7:] for m in user_messages(b.history)] == ["send b1", "echo b1"]
    ids_a = [e.message_id for e in rec_a.of("background_message")]
    ids_b = [e.message_id for e in rec_b.of("background_message")]
    assert len(ids_a) == len(ids_b) == 1 and ids_a != ids_b
    assert [e.status for e in rec_a.of("background_reply")] == ["scheduled", "completed"]
    assert [e.message_ids for e in rec_b.of("background_reply")] == [ids_b, ids_b]
    (echoed,) = [m for m in user_messages(a.history) if m.content.endswith("echo a1")]
    assert echoed.id in llm_a.requests[-1].chat_ctx
    assert not any(m.content.endswith("echo a1") for m in user_messages(b.history))
    ctx_a.set_state("a only")
    assert ctx_b.state is UNSET
    await a.aclose()
    assert ctx_a.closed and not ctx_b.closed
    await ctx_b.send("b still works", silent=True)
    assert user_messages(b.history)[-1].content.endswith("b still works")


# -- restart ----------------------------------------------------------------------------


async def test_restart_after_close_builds_fresh_runtimes(
    virtual_clock: VirtualClock, no_leaked_tasks: Callable[[], Any]
) -> None:
    starts: list[BackgroundContext] = []

    @background("worker", description="x")
    async def entry(ctx: BackgroundContext) -> None:
        starts.append(ctx)
        await asyncio.Event().wait()

    llm = ScriptedLLM(["only after restart"])
    session: Session[Any] = Session(llm, background=[entry])
    rec = Recorder(session)
    tools = list(session.tools)
    await session.start(Agent("Help."))
    old = ctx_of(session, "worker")
    old.set_state({"step": 7})
    session.user_started_speaking()
    await old.send("owed before close")  # buffered, then dropped by close
    await tools[0].invoke({"background_session_id": "worker", "content": "unread"})
    await session.aclose()
    history_before = list(session.history.items)

    await session.start(Agent("Help again."))
    new = ctx_of(session, "worker")
    assert starts == [old, new] and new is not old
    assert old.closed and not new.closed
    assert new.state is UNSET and old.state == {"step": 7}
    assert new.pending() == []  # the old inbox is not carried over
    assert session.user_state == "listening" and session.agent_state == "listening"
    assert await session.wait_for_idle(timeout=5)
    await asyncio.sleep(10)
    assert llm.requests == []  # the old scheduler's buffered reply is gone
    with pytest.raises(RuntimeError, match="is closed"):
        await old.send("old context")
    assert list(session.tools) == tools and all(
        a is b for a, b in zip(session.tools, tools, strict=True)
    )
    await tools[0].invoke({"background_session_id": "worker", "content": "fresh"})
    assert new.pending() == ["fresh"]
    await new.send("after restart")
    assert await session.wait_for_idle(timeout=5)
    assert len(llm.requests) == 1
    assert list(session.history.items)[: len(history_before)] == history_before
    assert [m.content.split("\n")[-1] for m in user_messages(session.history)] == [
        "owed before close",
        "after restart",
    ]
    statuses = [e.status for e in rec.of("background_status")]
    assert statuses == ["running", "closed", "running"]
    await session.aclose()
    await no_leaked_tasks()


# -- silent inserts racing handoffs and close ---------------------------------------------


async def test_a_handoff_during_a_silent_insert_copies_it_onto_the_new_agent(
    virtual_clock: VirtualClock,
) -> None:
    worker = background("worker", description="x")(_forever)
    session: Session[Any] = Session(
        ScriptedLLM([tool_calls(("transfer", {}))]), background=[worker]
    )
    a = First()
    await session.start(a)
    a.gate = asyncio.Event()
    note = asyncio.ensure_future(ctx_of(session, "worker").send("a note", silent=True))
    await asyncio.wait_for(a.waiting.wait(), 5)
    await session.run(user_input="transfer")  # the handoff lands while the insert waits
    b = session.current_agent
    assert isinstance(b, Second)
    a.gate.set()
    await asyncio.wait_for(note, 5)
    (item,) = [m for m in user_messages(a.chat_ctx) if m.content.endswith("a note")]
    assert [m.id for m in user_messages(b.chat_ctx)] == [item.id]
    assert [m.id for m in user_messages(session.history) if m.content.endswith("a note")] == [
        item.id
    ]


async def test_close_during_a_silent_retarget_is_bounded_and_consistent(
    virtual_clock: VirtualClock, no_leaked_tasks: Callable[[], Any]
) -> None:
    worker = background("worker", description="x")(_forever)
    session: Session[Any] = Session(
        ScriptedLLM([tool_calls(("transfer", {}))]), background=[worker]
    )
    rec = Recorder(session)
    a = First()
    await session.start(a)
    a.gate = asyncio.Event()
    note = asyncio.ensure_future(ctx_of(session, "worker").send("a note", silent=True))
    await asyncio.wait_for(a.waiting.wait(), 5)
    await session.run(user_input="transfer")
    b = session.current_agent
    assert isinstance(b, Second)
    b.gate = asyncio.Event()
    a.gate.set()  # the insert into A finishes; the copy onto B now waits
    await asyncio.wait_for(b.waiting.wait(), 5)
    closing = asyncio.ensure_future(session.aclose())
    await asyncio.sleep(0.5)
    b.gate.set()
    with pytest.raises(RuntimeError, match="is closed"):
        await note
    await asyncio.wait_for(closing, 5)
    # The note had reached A's context and the history: it stays in both, once.
    in_history = [m for m in user_messages(session.history) if m.content.endswith("a note")]
    assert len(in_history) == 1 and in_history[0].id in a.chat_ctx
    assert rec.of("background_message") == []
    await no_leaked_tasks()


# -- the retarget loop --------------------------------------------------------------------


class Hop(Agent):
    """Agent ``chain[0]``; its ``hop`` tool hands on to ``chain[1]``. With ``hop_on_update``,
    its first context update pushes a user turn that hops on, and waits for the handoff."""

    def __init__(self, chain: list[str], *, hop_on_update: bool = True) -> None:
        super().__init__(f"{chain[0]}.")
        self.chain = chain
        self.hop_on_update = hop_on_update
        self.updates = 0

    @property
    def label(self) -> str:
        return self.chain[0]

    @function_tool
    async def hop(self) -> Agent:
        """Hand on."""
        return Hop(self.chain[1:], hop_on_update=len(self.chain) > 2)

    async def update_chat_ctx(self, chat_ctx: ChatContext) -> None:
        self.updates += 1
        if self.hop_on_update and self.updates == 1:
            session = self.session
            moved = asyncio.Event()
            session.on(
                "agent_handoff",
                lambda e: moved.set() if e.new_agent.label == self.chain[1] else None,
            )
            session.push_user_turn(f"hop to {self.chain[1]}")
            await asyncio.wait_for(moved.wait(), 10)
        await super().update_chat_ctx(chat_ctx)


async def test_delivery_follows_handoffs_that_happen_inside_each_copy(
    virtual_clock: VirtualClock,
) -> None:
    worker = background("worker", description="x")(_forever)
    llm = ScriptedLLM([tool_calls(("hop", {}))] * 3 + [text("News, on D.")])
    session: Session[Any] = Session(llm, background=[worker])
    rec = Recorder(session)
    agents: list[Agent] = []
    session.on("agent_handoff", lambda e: agents.append(e.new_agent))
    await session.start(Hop(["A", "B", "C", "D"], hop_on_update=False))
    session.user_started_speaking()
    await ctx_of(session, "worker").send("news")
    await session.run(user_input="hop to B")
    session.user_stopped_speaking()  # delivery: copy onto B, whose update hops to C ...
    assert await session.wait_for_idle(timeout=10)
    assert [a.label for a in agents] == ["B", "C", "D"]
    d = session.current_agent
    assert d.label == "D"
    (item,) = [m for m in user_messages(session.history) if m.content.endswith("news")]
    for agent in agents:
        assert item.id in agent.chat_ctx, agent.label
    reply = llm.requests[-1]
    assert reply.tool_choice == "none" and reply.instructions[0] == "D."
    assert item.id in reply.chat_ctx
    assert [e.status for e in rec.of("background_reply")] == ["scheduled", "completed"]


async def _forever(ctx: BackgroundContext) -> None:
    await asyncio.Event().wait()


# -- end to end -------------------------------------------------------------------------


@background("coder", description="Writes code in the repository.", interrupt_grace=2.0)
async def coder(ctx: BackgroundContext) -> None:
    """Reports state, notes each start silently, and speaks each result."""
    done: list[str] = []
    ctx.set_state({"status": "idle", "done": done})
    async for task in ctx.messages():
        async with ctx.turn():
            ctx.set_state({"status": "working", "task": task, "done": done})
            await ctx.send(f"started: {task}", silent=True)
            await asyncio.sleep(20)
            done.append(task)
            ctx.set_state({"status": "idle", "done": done})
            await ctx.send(f"finished: {task}")


async def test_a_conversation_with_a_background_that_reports_notes_and_speaks(
    virtual_clock: VirtualClock, no_leaked_tasks: Callable[[], Any]
) -> None:
    llm = ScriptedLLM(
        [
            tool_calls(send_call("coder", "fix the login bug")),
            text("I've asked the coder."),
            tool_calls(("backline_state", {"background_session_id": "coder"})),
            text("It is working on the login bug."),
            text("The login bug is fixed."),
        ]
    )
    session: Session[Any] = Session(llm, background=[coder], user_away_timeout=15)
    rec = Recorder(session)
    spoken = asyncio.Event()
    session.on("background_reply", lambda e: spoken.set() if e.status == "completed" else None)
    await session.start(Agent("You front a coding agent."))

    await session.run(user_input="please fix the login bug")
    await asyncio.sleep(1)
    status = await session.run(user_input="what is it doing?")
    status.expect.next_event().is_function_call(name="backline_state")
    status.expect.next_event().is_function_call_output(
        output=json.dumps({"done": [], "status": "working", "task": "fix the login bug"})
    )
    status.expect.next_event().is_message(role="assistant", content="It is working")
    status.expect.no_more_events()
    await asyncio.wait_for(spoken.wait(), 60)
    assert await session.wait_for_idle(timeout=5)

    # The voice LLM saw the silent note before the spoken update, and was asked to voice it.
    reply = llm.requests[-1]
    assert reply.tool_choice == "none" and "`coder`" in reply.instructions[-1]
    assert [m.content.split("\n", 1)[-1] for m in user_messages(reply.chat_ctx)] == [
        "please fix the login bug",
        "started: fix the login bug",
        "what is it doing?",
        "finished: fix the login bug",
    ]
    # Every item is in the history exactly once, in order.
    items = session.history.items
    assert len({it.id for it in items}) == len(items)
    described = [
        (it.role, it.content.split("\n", 1)[-1])
        if isinstance(it, ChatMessage)
        else (it.type, it.name if isinstance(it, FunctionCall) else it.output)
        if isinstance(it, FunctionCall | FunctionCallOutput)
        else (it.type, "")
        for it in items
    ]
    assert described == [
        ("user", "please fix the login bug"),
        ("function_call", "backline_send"),
        ("function_call_output", "Message has been delivered."),
        ("user", "started: fix the login bug"),
        ("assistant", "I've asked the coder."),
        ("user", "what is it doing?"),
        ("function_call", "backline_state"),
        ("function_call_output", '{"done": [], "status": "working", "task": "fix the login bug"}'),
        ("assistant", "It is working on the login bug."),
        ("user", "finished: fix the login bug"),
        ("assistant", "The login bug is fixed."),
    ]
    # Agent states: two turns, then the owed update; never "listening" while one is owed.
    assert rec.agent_states == ["listening"] + ["thinking", "speaking", "listening"] * 3
    assert session.user_state == "listening"  # the busy background held the away timer
    assert [e.state["status"] for e in rec.of("background_state")] == ["idle", "working", "idle"]
    assert rec.of("background_state")[-1].state == {"status": "idle", "done": ["fix the login bug"]}
    assert [(e.content, e.silent) for e in rec.of("background_message")] == [
        ("started: fix the login bug", True),
        ("finished: fix the login bug", False),
    ]
    assert [e.status for e in rec.of("background_status")] == ["running", "busy", "idle"]
    assert llm.remaining == 0
    await session.aclose()
    await no_leaked_tasks()
