"""Random schedules of user turns, tools, deferred updates, handoffs, interrupts and
close, checked against the runtime's invariants (issue 4).

Run it long with ``pytest tests/test_randomized_schedule.py --hypothesis-profile=long``.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import looptime
from hypothesis import given
from hypothesis import strategies as st

from backline import Agent, InMemoryTextOutput, RunContext, Session, function_tool
from backline.testing import LLMRequest, ScriptedLLM, ScriptedResponse, text, tool_calls

ACTIONS = st.one_of(
    st.tuples(st.just("turn"), st.sampled_from(["chat", "defer", "plain", "handoff", "both"])),
    st.tuples(st.just("interrupt"), st.booleans()),
    st.tuples(st.just("speak"), st.booleans()),
    st.tuples(st.just("say"), st.booleans()),
    st.tuples(st.just("wait"), st.floats(min_value=0.0, max_value=6.0)),
)


@dataclass
class World:
    accepted_finals: set[str] = field(default_factory=set)
    violations: list[str] = field(default_factory=list)


def respond(request: LLMRequest) -> ScriptedResponse:
    items = request.chat_ctx.items
    last = items[-1] if items else None
    if request.tool_choice == "none" or (last is not None and last.type != "message"):
        return text("Noted, " + "here it is " * 3)
    msg = request.last_message
    content = msg.content if msg is not None else ""
    if content.startswith("defer"):
        return tool_calls(("job", {"seconds": 3.5}), text="Starting.")
    if content.startswith("plain"):
        return tool_calls(("quick", {}))
    if content.startswith("handoff"):
        return tool_calls(("transfer", {}))
    if content.startswith("both"):
        return tool_calls(("job", {"seconds": 1.0}), ("quick", {}))
    return text("A reply of a few words " * 2)


def make_agent(world: World, name: str) -> Agent:
    @function_tool
    async def job(ctx: RunContext[Any], seconds: float) -> str:
        """A deferred job."""
        await ctx.update("started")
        await asyncio.sleep(seconds / 2)
        await ctx.update("halfway")
        await asyncio.sleep(seconds / 2)
        world.accepted_finals.add(ctx.function_call.call_id + "_final")
        return "job result"

    @function_tool
    async def quick() -> str:
        """A quick tool."""
        await asyncio.sleep(0.2)
        return "quick result"

    @function_tool
    async def transfer() -> Agent:
        """Hand off."""
        return make_agent(world, "B" if name == "A" else "A")

    return Agent(f"Agent {name}.", tools=[job, quick, transfer])


async def scenario(actions: list[tuple[str, Any]], close_at: int) -> World:
    world = World()
    loop = asyncio.get_running_loop()
    before = set(asyncio.all_tasks())
    session = Session(
        ScriptedLLM(respond),
        output=InMemoryTextOutput(chars_per_second=40),
        user_away_timeout=5.0,
    )

    def owed(s: Session[Any]) -> bool:
        # An oracle stated from the parts, independent of the runtime's own rule.
        activity = s._activity
        return bool(
            (activity is not None and activity.queued)
            or s._tool_scheduler.owes_reply()
            or s._user_turns
            or s._handoffs_pending
        )

    def on_state(ev: Any) -> None:
        if ev.new == "listening" and owed(session):
            world.violations.append("listening while a follow-up was owed")

    session.on("agent_state_changed", on_state)
    await session.start(make_agent(world, "A"))
    for i, (kind, arg) in enumerate(actions):
        if i == close_at:
            break
        if kind == "turn":
            session.push_user_turn(arg)
        elif kind == "interrupt":
            session.interrupt(force=arg)
        elif kind == "speak":
            (session.user_started_speaking if arg else session.user_stopped_speaking)()
        elif kind == "say":
            session.say("An aside.", allow_interruptions=arg)
        else:
            await asyncio.sleep(arg)
    start = loop.time()
    await session.aclose()
    if loop.time() - start > 15:
        world.violations.append(f"close took {loop.time() - start:.1f}s")
    for _ in range(5):
        await asyncio.sleep(0)
    leaked = [t.get_name() for t in asyncio.all_tasks() if t not in before and not t.done()]
    leaked = [n for n in leaked if n != asyncio.current_task().get_name()]  # type: ignore[union-attr]
    if leaked:
        world.violations.append(f"tasks left behind: {leaked}")
    ids = [it.id for it in session.history.items]
    if len(ids) != len(set(ids)):
        world.violations.append("an item is in the history twice")
    finals = [
        it.call_id
        for it in session.history.items
        if it.type == "function_call_output" and it.call_id.endswith("_final")
    ]
    if len(finals) != len(set(finals)):
        world.violations.append("a deferred result is in the history twice")
    extra = set(finals) - world.accepted_finals
    if extra:
        world.violations.append(f"unexpected finals {extra}")
    calls = {it.call_id for it in session.history.items if it.type == "function_call"}
    outputs = {it.call_id for it in session.history.items if it.type == "function_call_output"}
    if outputs - calls:
        world.violations.append(f"outputs without calls: {outputs - calls}")
    json.dumps(session.history.to_dicts())  # the history stays serialisable
    return world


def run_scenario(actions: list[tuple[str, Any]], close_at: int) -> World:
    loop = looptime.new_event_loop(start=0.0)  # virtual time from the start
    try:
        return loop.run_until_complete(asyncio.wait_for(scenario(actions, close_at), 600))
    finally:
        loop.close()


@given(actions=st.lists(ACTIONS, min_size=1, max_size=14), close_at=st.integers(0, 20))
def test_random_schedules_keep_the_invariants(
    actions: list[tuple[str, Any]], close_at: int
) -> None:
    world = run_scenario(actions, close_at)
    assert world.violations == []


def test_a_known_busy_schedule() -> None:
    actions: list[tuple[str, Any]] = [
        ("turn", "defer"),
        ("wait", 1.0),
        ("turn", "chat"),
        ("wait", 2.0),
        ("turn", "handoff"),
        ("wait", 0.5),
        ("turn", "both"),
        ("interrupt", False),
        ("wait", 5.0),
        ("turn", "plain"),
        ("wait", 6.0),
    ]
    world = run_scenario(actions, close_at=99)
    assert world.violations == []
    assert world.accepted_finals
