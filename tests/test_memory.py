"""What a session holds (docs/performance.md, "Many sessions in one process").

Thousands of sessions share one process, so what is the same for all of them is
built once: the generated background tools, the metadata of an agent's bound
tools. No figure is asserted but one generous bound on an idle session (the
measured figures live in ``bench/sessions.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import tracemalloc
from typing import Any

import pytest

from backline import (
    Agent,
    AgentHandoff,
    ChatMessage,
    FunctionCall,
    FunctionCallOutput,
    Session,
    TextOutput,
    background,
    function_tool,
)
from backline.llm import peek_extra
from backline.llm.chat_context import _read_extra, item_to_dict
from backline.testing import ScriptedLLM, text, tool_calls
from tests.conftest import cyclic_garbage


async def _worker(ctx: Any) -> None:
    async for _ in ctx.messages():
        pass


WORKER = background("worker", description="Does nothing.")(_worker)
OTHER = background("other", description="Does nothing either.")(_worker)


class _Agent(Agent):
    def __init__(self) -> None:
        super().__init__("Be brief.")

    @function_tool
    async def lookup(self, key: str) -> str:
        """Look a key up.

        Args:
            key: The key to look up.
        """
        return f"{key} of {type(self).__name__}"


def _session(*defs: Any) -> Session[Any]:
    return Session(
        ScriptedLLM(lambda _: text("Fine."), record=False),
        output=TextOutput(),
        background=list(defs),
    )


def _tool(session: Session[Any], name: str) -> Any:
    (found,) = [t for t in session.tools if t.name == name]
    return found


async def test_sessions_share_their_generated_tools_but_each_reaches_its_own() -> None:
    a, b, c = _session(WORKER), _session(WORKER), _session(WORKER, OTHER)
    for name in ("backline_send", "backline_state", "backline_stop"):
        ta, tb, tc = _tool(a, name), _tool(b, name), _tool(c, name)
        assert ta is not tb
        assert ta.description is tb.description and ta.parameters is tb.parameters
        assert ta.description != tc.description  # another listing of backgrounds
        assert "- other: Does nothing either." in tc.description
    try:
        for s in (a, b, c):
            await s.start(Agent("Help."))
        got: list[str] = []
        b.background.context("worker").on_interrupt(None)  # type: ignore[union-attr]
        rt = b.background.runtime("worker")  # type: ignore[union-attr]
        assert rt is not None
        rt.deliver = got.append  # type: ignore[method-assign]
        send = _tool(b, "backline_send")
        assert await send.invoke({"background_session_id": "worker", "content": "hi"}) == (
            "Message has been delivered."
        )
        assert got == ["hi"]
        assert a.background.runtime("worker").waiting == 0  # type: ignore[union-attr]
        rt.state = {"step": 1}
        state = await _tool(b, "backline_state").invoke({"background_session_id": "worker"})
        assert "step" in state
        assert "not reported" in await _tool(a, "backline_state").invoke(
            {"background_session_id": "worker"}
        )
    finally:
        for s in (a, b, c):
            await s.aclose()


async def test_bound_tools_share_the_functions_metadata_and_call_their_own_agent() -> None:
    one, two = _Agent(), _Agent()
    (t1,), (t2,) = one.tools, two.tools
    assert t1 is not t2
    assert t1.__dict__ is t2.__dict__ is _Agent.lookup.__dict__
    assert t1.__doc__ == _Agent.lookup.__doc__ and t1.__name__ == "lookup"
    assert t1.parameters is t2.parameters
    assert await t1.invoke('{"key": "k"}') == "k of _Agent"
    assert t1._bound_to is one and t2._bound_to is two


async def test_an_idle_session_with_one_background_stays_small() -> None:
    """Generous: about 12 KB are measured on CPython 3.11 (bench/sessions.py)."""

    async def start() -> Session[Any]:
        s = _session(WORKER)
        await s.start(_Agent())
        return s

    warm = await start()  # first-use caches
    await warm.wait_for_idle()
    await warm.aclose()
    n = 200
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        sessions = [await start() for _ in range(n)]
        await asyncio.gather(*(s.wait_for_idle() for s in sessions))
        gc.collect()
        per_session = (tracemalloc.get_traced_memory()[0] - before) / n
    finally:
        tracemalloc.stop()
    for s in sessions:
        await s.aclose()
    assert per_session <= 15 * 1024, f"{per_session:.0f} bytes per idle session"


async def test_the_switch_lock_and_the_pause_slot_are_made_when_first_needed() -> None:
    """Most sessions never switch agents nor pause one for an inline task: the lock
    and the slot those take are made at first use (and kept)."""
    s = _session(WORKER)
    await s.start(_Agent())
    await s.run(user_input="hello")
    activity = s._switches.current
    assert activity is not None
    assert s._switches._mutex is None and activity._pause_slot is None
    lock, slot = s._switches._lock, activity.pause_slot
    assert s._switches._lock is lock and activity.pause_slot is slot
    await s.aclose()


def test_chat_items_have_slots_and_keep_their_own_data_in_extra() -> None:
    items = [
        ChatMessage(role="user", content="hi"),
        FunctionCall(call_id="c", name="f", arguments="{}"),
        FunctionCallOutput(call_id="c", name="f", output="ok"),
        AgentHandoff(old_agent=None, new_agent="A"),
    ]
    for item in items:
        assert not hasattr(item, "__dict__")
        item.extra["mine"] = 1  # each item its own dict
    assert all(it.extra == {"mine": 1} for it in items)
    assert len({id(it.extra) for it in items}) == len(items)


async def _busy_worker(ctx: Any) -> None:
    async for message in ctx.messages():
        async with ctx.turn():
            ctx.set_state({"doing": message})
            await ctx.send(f"done: {message}")
            await ctx.send(f"noted: {message}", silent=True)


BUSY = background("busy", description="Works on what it is sent.")(_busy_worker)


async def test_background_traffic_leaves_no_reference_cycles() -> None:
    """Sends (spoken and silent), states, the generated tools and their replies."""

    def respond(request: Any) -> Any:
        last = request.chat_ctx.items[-1]
        if isinstance(last, ChatMessage) and last.role == "user" and last.content == "delegate":
            return tool_calls(("backline_send", {"background_session_id": "busy", "content": "x"}))
        if isinstance(last, ChatMessage) and last.role == "user" and last.content == "status":
            return tool_calls(("backline_state", {"background_session_id": "busy"}))
        return text("Okay.")

    session = Session(ScriptedLLM(respond, record=False), output=TextOutput(), background=[BUSY])
    await session.start(_Agent())

    async def turn(kind: str) -> None:
        session.push_user_turn(kind)
        await session.wait_for_idle()
        await asyncio.sleep(0)  # the background's reply, if one comes
        await session.wait_for_idle()

    try:
        for kind in ("delegate", "status", "hello"):  # warm up: first-use caches
            await turn(kind)
        with cyclic_garbage() as leaked:
            for _ in range(5):
                for kind in ("delegate", "status", "hello"):
                    await turn(kind)
        relayed = [
            it
            for it in session.history.items
            if isinstance(it, ChatMessage) and it.extra.get("background_id") == "busy"
        ]
        assert len(relayed) >= 12  # the sends reached the history
    finally:
        await session.aclose()
    assert leaked == []


def test_chat_items_make_their_extra_at_first_use() -> None:
    """No dict per item until ``extra`` is read; the field's API is a dict's as before."""
    item = ChatMessage(role="user", content="hi")
    assert _read_extra(item) is None
    assert "extra" not in item_to_dict(item)
    assert _read_extra(item) is None  # serializing does not make one either
    item.extra["k"] = 1
    assert item.extra == {"k": 1} and _read_extra(item) is item.extra
    given = {"background_id": "w"}
    made = FunctionCall(call_id="c", name="f", arguments="{}", extra=given)
    assert made.extra is given
    copied = dataclasses.replace(made, name="g")
    assert copied.extra == given and copied.id == made.id
    assert "extra" in {f.name for f in dataclasses.fields(AgentHandoff)}
    assert dataclasses.asdict(item)["extra"] == {"k": 1}
    assert "extra={'k': 1}" in repr(item)
    handoff = AgentHandoff(old_agent=None, new_agent="A")
    handoff.extra = {"set": True}
    assert handoff.extra == {"set": True}
    assert item_to_dict(made)["extra"] == given


def test_peek_extra_reads_without_making_a_dict() -> None:
    class Marked(ChatMessage):
        pass

    plain = ChatMessage(role="user", content="hi")
    assert dict(peek_extra(plain)) == {} and _read_extra(plain) is None  # none made
    with pytest.raises(TypeError):
        peek_extra(plain)["k"] = 1  # type: ignore[index]  # read only
    marked = ChatMessage(role="user", content="hi", extra={"background_id": "coder"})
    assert peek_extra(marked)["background_id"] == "coder"
    sub = Marked(role="user", content="hi")  # a subclass of an item class
    assert dict(peek_extra(sub)) == {} and _read_extra(sub) is None
    sub.extra["k"] = 1
    assert peek_extra(sub) == {"k": 1}


def test_an_item_makes_its_id_at_first_read_and_keeps_it() -> None:
    from backline.llm.chat_context import _read_id

    a, b = ChatMessage(role="user", content="a"), ChatMessage(role="user", content="b")
    assert _read_id(a) is None  # no id made yet
    first = a.id
    assert first.startswith("item_") and a.id is first and _read_id(a) == first
    assert b.id != first  # unique in the process
    given = FunctionCall(call_id="c", name="f", arguments="{}", id="mine")
    assert given.id == "mine"
    copy = dataclasses.replace(a, content="a2")
    assert copy.id == first  # a copy keeps the id, as before
    # ``type`` is the class's: no slot per item, and not a constructor field.
    assert ChatMessage.type == "message" and a.type == "message"
    assert "type" not in {f.name for f in dataclasses.fields(ChatMessage)}


async def test_a_history_of_new_items_makes_no_ids_and_no_index() -> None:
    from backline.llm.chat_context import _read_id

    async with Session(ScriptedLLM([text("one"), text("two")])) as session:
        await session.start(Agent(instructions="Be brief."))
        session.push_user_turn("first")
        assert await session.wait_for_idle(timeout=5)
        session.push_user_turn("second")
        assert await session.wait_for_idle(timeout=5)
        history = session.history
        assert [_read_id(it) for it in history.items] == [None] * 4
        assert history._by_id == {}
        # Looked up: the ids are made then, and found.
        last = history.items[-1]
        assert history.get(last.id) is last and last.id in history
        assert history.index_by_id(last.id) == 3
