"""The runtime's hard rules (issue 4): owed speech, away-timer holds, the inline slot,
deferred tool replies. Each test fails on the naive implementation."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, ClassVar

from backline import (
    Agent,
    AgentTask,
    InMemoryTextOutput,
    RunContext,
    Session,
    function_tool,
)
from backline.testing import FakeRealtimeSession, ScriptedLLM, VirtualClock, text, tool_calls
from tests.conftest import Recorder


class Assistant(Agent):
    def __init__(self, **kw: Any) -> None:
        super().__init__("Help.", **kw)


def item_added(session: Session[Any], content: str) -> asyncio.Event:
    """An event set when a message containing ``content`` enters the history."""
    evt = asyncio.Event()

    def check(ev: Any) -> None:
        if content in getattr(ev.item, "content", ""):
            evt.set()

    session.on("conversation_item_added", check)
    return evt


def user_went_away(session: Session[Any], clock: VirtualClock) -> list[float]:
    times: list[float] = []
    session.on(
        "user_state_changed", lambda e: times.append(clock.now()) if e.new == "away" else None
    )
    return times


# -- 1. owed speech ends on "thinking" ----------------------------------------------


async def test_a_tool_finishing_during_a_second_reply_never_blips_listening(
    virtual_clock: VirtualClock, no_leaked_tasks: Callable[[], Any]
) -> None:
    @function_tool
    async def research(ctx: RunContext[Any], topic: str) -> str:
        """Research a topic (slow)."""
        await ctx.update("searching")
        await asyncio.sleep(5)
        return f"found {topic}"

    llm = ScriptedLLM(
        [
            tool_calls(("research", {"topic": "owls"}), ("research", {"topic": "bats"})),
            text("I'm on it."),
            text("Once upon a time " + "la " * 60),  # plays ~10 s at 20 chars/s
            text("Owls and bats found."),
        ]
    )
    session = Session(llm, tools=[research], output=InMemoryTextOutput(chars_per_second=20))
    rec = Recorder(session)
    await session.start(Assistant())
    interim = item_added(session, "I'm on it.")
    session.push_user_turn("research owls and bats")
    await asyncio.wait_for(interim.wait(), 10)
    await asyncio.sleep(1)
    mark = len(rec.agent_states)
    session.push_user_turn("tell me a story meanwhile")
    assert await session.wait_for_idle(timeout=60)
    assert rec.agent_states[mark:] == ["thinking", "speaking", "thinking", "speaking", "listening"]
    # The finals are in the history exactly once, with their ids, and voiced in one reply.
    ids = [it.call_id for it in session.history.items if it.type == "function_call_output"]
    assert sorted(ids) == ["call_1", "call_1_final", "call_2", "call_2_final"]
    replies = rec.of("tool_reply")
    assert [r.status for r in replies] == ["scheduled", "completed"]
    assert sorted(replies[0].call_ids) == ["call_1_final", "call_2_final"]
    final_request = llm.requests[-1]
    assert final_request.tool_choice == "none"
    assert "call_1_final" in final_request.instructions[-1]
    await session.aclose()
    await no_leaked_tasks()


async def test_queued_speech_keeps_the_agent_thinking_between_speeches(
    virtual_clock: VirtualClock,
) -> None:
    session = Session(ScriptedLLM(), output=InMemoryTextOutput(chars_per_second=50))
    rec = Recorder(session)
    await session.start(Assistant())
    session.say("first")
    session.say("second")
    assert await session.wait_for_idle(timeout=10)
    assert rec.agent_states == [
        "listening",
        "thinking",
        "speaking",
        "thinking",
        "speaking",
        "listening",
    ]
    await session.aclose()


# -- 2. the user-away timer -----------------------------------------------------------


async def test_a_20s_deferred_tool_never_marks_the_user_away(
    virtual_clock: VirtualClock, no_leaked_tasks: Callable[[], Any]
) -> None:
    finished_at: list[float] = []

    @function_tool
    async def crunch(ctx: RunContext[Any]) -> str:
        """Crunch numbers (20 s)."""
        await ctx.update("crunching")
        await asyncio.sleep(20)
        finished_at.append(virtual_clock.now())
        return "42"

    llm = ScriptedLLM([tool_calls(("crunch", {})), text("Working on it."), text("It is 42.")])
    session = Session(llm, tools=[crunch], user_away_timeout=15)
    away = user_went_away(session, virtual_clock)
    await session.start(Assistant())
    session.push_user_turn("crunch")
    await asyncio.sleep(19)
    assert session.agent_state == "listening" and session.user_state == "listening"
    assert not session._away.armed  # the running tool holds the timer
    await asyncio.sleep(40)
    assert finished_at and away, "the user goes away once the tool is done and answered"
    assert away[0] >= finished_at[0] + 15
    await session.aclose()
    await no_leaked_tasks()


async def test_a_20s_plain_tool_never_marks_the_user_away(virtual_clock: VirtualClock) -> None:
    @function_tool
    async def slow() -> str:
        """Slow."""
        await asyncio.sleep(20)
        return "done"

    llm = ScriptedLLM([tool_calls(("slow", {})), text("Done.")])
    session = Session(llm, tools=[slow], user_away_timeout=15)
    away = user_went_away(session, virtual_clock)
    await session.start(Assistant())
    start = virtual_clock.now()
    await session.run(user_input="go")
    assert virtual_clock.now() - start >= 20
    assert away == []
    await session.aclose()


async def test_background_work_starting_after_the_timer_armed_cancels_it(
    virtual_clock: VirtualClock,
) -> None:
    rt = FakeRealtimeSession()
    session = Session(ScriptedLLM(), realtime=rt, user_away_timeout=15)
    away = user_went_away(session, virtual_clock)
    await session.start(Assistant())
    assert session._away.armed
    await asyncio.sleep(1)
    rt.set_background_work(True)  # response.created arrives after the timer armed
    assert not session._away.armed
    await asyncio.sleep(30)
    assert away == []
    rt.set_background_work(False)
    ended = virtual_clock.now()
    await asyncio.sleep(16)
    assert away and away[0] >= ended + 15
    await session.aclose()


async def test_a_handoff_reusing_a_busy_realtime_session_keeps_the_timer_off(
    virtual_clock: VirtualClock,
) -> None:
    rt = FakeRealtimeSession()

    class Second(Agent):
        def __init__(self) -> None:
            super().__init__("Second.", realtime=rt)

    class First(Agent):
        def __init__(self) -> None:
            super().__init__("First.", realtime=rt)

        @function_tool
        async def transfer(self) -> Agent:
            """Transfer."""
            rt.set_background_work(True, notify=False)  # no listener hears it
            return Second()

    session = Session(ScriptedLLM([tool_calls(("transfer", {}))]), user_away_timeout=15)
    away = user_went_away(session, virtual_clock)
    await session.start(First())
    await session.run(user_input="transfer")
    assert isinstance(session.current_agent, Second)
    assert session.agent_state == "listening"
    assert not session._away.armed
    assert rt.listener_count == 1  # the old activity detached, the new one attached
    await asyncio.sleep(40)
    assert away == []
    await session.aclose()


async def test_a_paused_agents_tool_does_not_hold_the_timer(virtual_clock: VirtualClock) -> None:
    class Ask(AgentTask[str]):
        def __init__(self) -> None:
            super().__init__("Ask a question.")

        async def on_enter(self) -> None:
            self.session.say("What colour?")

    class Root(Assistant):
        @function_tool
        async def ask(self) -> str:
            """Ask the user."""
            return await Ask()

    session = Session(ScriptedLLM([tool_calls(("ask", {}))]), user_away_timeout=15)
    away = user_went_away(session, virtual_clock)
    await session.start(Root())
    await session.run(user_input="ask me")
    assert isinstance(session.current_agent, Ask)
    # Root's tool is still running (awaiting the task) but Root is paused: no hold.
    assert session._away.counting_holds() == 0
    asked = virtual_clock.now()
    await asyncio.sleep(16)
    assert away and away[0] >= asked + 15
    await session.aclose()


async def test_a_deferred_tools_hold_follows_its_owner_across_a_handoff(
    virtual_clock: VirtualClock,
) -> None:
    class Second(Agent):
        def __init__(self) -> None:
            super().__init__("Second.")

    class First(Assistant):
        @function_tool
        async def long_job(self, ctx: RunContext[Any]) -> str:
            """A long job."""
            await ctx.update("started")
            await asyncio.sleep(60)
            return "finished"

        @function_tool
        async def transfer(self) -> Agent:
            """Transfer."""
            return Second()

    llm = ScriptedLLM(
        [tool_calls(("long_job", {})), text("Started."), tool_calls(("transfer", {})), text("ok")]
    )
    session = Session(llm, user_away_timeout=15)
    away = user_went_away(session, virtual_clock)
    await session.start(First())
    session.push_user_turn("start the job")
    await asyncio.sleep(1)
    await session.run(user_input="transfer me")
    assert isinstance(session.current_agent, Second)
    assert session._away.counting_holds() == 1  # moved to the session, still counting
    await asyncio.sleep(50)
    assert away == []
    await session.aclose()


# -- 3. inline AgentTasks from one turn's parallel tool calls ----------------------------


class Dialog(AgentTask[str]):
    instances: ClassVar[list[Dialog]] = []

    def __init__(self, label: str) -> None:
        super().__init__(f"Ask question {label}.")
        self.label_text = label
        Dialog.instances.append(self)

    async def on_enter(self) -> None:
        self.session.say(f"Question {self.label_text}?")

    @function_tool
    async def answer(self, value: str) -> None:
        """Record the answer."""
        self.complete(value)


class TwoQuestions(Assistant):
    @function_tool
    async def ask_a(self) -> str:
        """Ask A."""
        return "A=" + await Dialog("A")

    @function_tool
    async def ask_b(self) -> str:
        """Ask B."""
        return "B=" + await Dialog("B")


async def test_parallel_tools_awaiting_tasks_run_in_turn(
    virtual_clock: VirtualClock, no_leaked_tasks: Callable[[], Any]
) -> None:
    Dialog.instances = []
    llm = ScriptedLLM(
        [
            tool_calls(("ask_a", {}), ("ask_b", {})),
            tool_calls(("answer", {"value": "1"})),
            tool_calls(("answer", {"value": "2"})),
            text("Thanks for both."),
        ]
    )
    session = Session(llm)
    await session.start(TwoQuestions())
    first = await session.run(user_input="go")
    first.expect.contains_message(content="Question A?")
    a = session.current_agent
    assert isinstance(a, Dialog) and a.label_text == "A"
    second = await session.run(user_input="one")
    second.expect.contains_message(content="Question B?")
    b = session.current_agent
    assert isinstance(b, Dialog) and b.label_text == "B" and b is not a
    third = await session.run(user_input="two")
    assert isinstance(session.current_agent, TwoQuestions)
    outputs = {
        it.name: it.output for it in session.history.items if it.type == "function_call_output"
    }
    assert outputs["ask_a"] == "A=1" and outputs["ask_b"] == "B=2"
    third.expect.contains_message(content="Thanks for both.")
    assert len(Dialog.instances) == 2
    await session.aclose()
    await no_leaked_tasks()


async def test_close_between_one_tasks_resume_and_the_next_ones_pause(
    virtual_clock: VirtualClock, no_leaked_tasks: Callable[[], Any]
) -> None:
    llm = ScriptedLLM(
        [tool_calls(("ask_a", {}), ("ask_b", {})), tool_calls(("answer", {"value": "1"}))]
    )
    session = Session(llm)
    await session.start(TwoQuestions())
    await session.run(user_input="go")
    closing: list[asyncio.Task[None]] = []
    close_started = asyncio.Event()

    def on_handoff(ev: Any) -> None:
        # Dialog A handed back: the root is resumed and B has not paused it yet.
        if isinstance(ev.new_agent, TwoQuestions) and not closing:
            closing.append(asyncio.ensure_future(session.aclose(drain=True)))
            close_started.set()

    session.on("agent_handoff", on_handoff)
    session.push_user_turn("one")
    await asyncio.wait_for(close_started.wait(), 10)
    start = virtual_clock.now()
    await closing[0]
    assert virtual_clock.now() - start < 1.0
    await no_leaked_tasks()


async def test_draining_close_does_not_wait_on_tasks_queued_for_the_slot(
    virtual_clock: VirtualClock, no_leaked_tasks: Callable[[], Any]
) -> None:
    llm = ScriptedLLM([tool_calls(("ask_a", {}), ("ask_b", {}))])
    session = Session(llm)
    await session.start(TwoQuestions())
    await session.run(user_input="go")  # A waits for the user; B is queued for the slot
    assert isinstance(session.current_agent, Dialog)
    start = virtual_clock.now()
    await session.aclose(drain=True)
    assert virtual_clock.now() - start < 1.0
    await no_leaked_tasks()


async def test_a_forced_interrupt_stops_queued_tasks_from_starting(
    virtual_clock: VirtualClock, no_leaked_tasks: Callable[[], Any]
) -> None:
    Dialog.instances = []
    llm = ScriptedLLM([tool_calls(("ask_a", {}), ("ask_b", {}))])
    session = Session(llm)
    await session.start(TwoQuestions())
    await session.run(user_input="go")
    assert isinstance(session.current_agent, Dialog)
    parent_speech = next(
        sp for sp in session._switches.activities[0].speeches() if sp.source == "user_turn"
    )
    back = asyncio.Event()
    session.on(
        "agent_handoff", lambda ev: back.set() if isinstance(ev.new_agent, TwoQuestions) else None
    )
    parent_speech.interrupt(force=True)
    await asyncio.wait_for(back.wait(), 10)
    assert await session.wait_for_idle(timeout=10)
    assert isinstance(session.current_agent, TwoQuestions)
    assert [d.label_text for d in Dialog.instances] == ["A", "B"]  # B was built ...
    handoffs = [it for it in session.history.items if it.type == "agent_handoff"]
    assert [h.new_agent for h in handoffs] == ["Dialog", "TwoQuestions"]  # ... never started
    await session.aclose()
    await no_leaked_tasks()


async def test_a_nested_task_pauses_its_own_activity(virtual_clock: VirtualClock) -> None:
    class Inner(AgentTask[str]):
        def __init__(self) -> None:
            super().__init__("Inner.")

        async def on_enter(self) -> None:
            self.complete("inner-done")

    class Outer(AgentTask[str]):
        def __init__(self) -> None:
            super().__init__("Outer.")

        async def on_enter(self) -> None:
            got = await Inner()
            self.complete("outer+" + got)

    results: list[str] = []

    class Root(Assistant):
        @function_tool
        async def run_outer(self) -> str:
            """Run."""
            results.append(await Outer())
            return results[-1]

    session = Session(ScriptedLLM([tool_calls(("run_outer", {})), text("All done.")]))
    await session.start(Root())
    result = await session.run(user_input="go")
    assert results == ["outer+inner-done"]
    result.expect.contains_message(content="All done.")
    assert isinstance(session.current_agent, Root)
    await session.aclose()


# -- 4. deferred tool replies --------------------------------------------------------


async def test_deferred_updates_get_ids_and_are_coalesced(virtual_clock: VirtualClock) -> None:
    gate = asyncio.Event()

    @function_tool
    async def job(ctx: RunContext[Any]) -> str:
        """Job."""
        await ctx.update("step one")
        await gate.wait()
        await ctx.update("step two")
        await ctx.update("step three")
        return "all done"

    llm = ScriptedLLM([tool_calls(("job", {}), text=""), text("Started it."), text("Done.")])
    session = Session(llm, tools=[job])
    rec = Recorder(session)
    await session.start(Assistant())
    session.push_user_turn("start")
    assert await session.wait_for_idle(timeout=5)
    first_output = next(it for it in session.history.items if it.type == "function_call_output")
    assert first_output.call_id == "call_1" and "step one" in first_output.output
    session.user_started_speaking()  # the user talks: no reply while they do
    gate.set()
    await asyncio.sleep(1)
    assert [r.status for r in rec.of("tool_reply")] == []
    assert session.agent_state == "thinking"  # a reply is owed
    session.user_stopped_speaking()
    assert await session.wait_for_idle(timeout=5)
    ids = [it.call_id for it in session.history.items if it.type == "function_call_output"]
    assert ids == ["call_1", "call_1_update_1", "call_1_update_2", "call_1_final"]
    (scheduled, completed) = rec.of("tool_reply")
    assert scheduled.call_ids == ["call_1_update_1", "call_1_update_2", "call_1_final"]
    assert completed.status == "completed" and completed.speech_id == scheduled.speech_id
    assert [u.item_id for u in rec.of("tool_updated")] == [
        "call_1",
        "call_1_update_1",
        "call_1_update_2",
    ]
    await session.aclose()


async def test_a_deferred_reply_not_at_the_tail_may_say_nothing_new(
    virtual_clock: VirtualClock,
) -> None:
    gate = asyncio.Event()

    @function_tool
    async def job(ctx: RunContext[Any]) -> str:
        """Job."""
        await ctx.update("working")
        await gate.wait()
        return "result"

    llm = ScriptedLLM([tool_calls(("job", {})), text("On it."), text("Story."), text("")])
    session = Session(llm, tools=[job])
    await session.start(Assistant())
    session.push_user_turn("start")
    assert await session.wait_for_idle(timeout=5)
    session.user_started_speaking()
    gate.set()
    await asyncio.sleep(0.1)
    session.user_stopped_speaking()
    session.push_user_turn("meanwhile, a story")  # moves the final off the tail
    assert await session.wait_for_idle(timeout=5)
    instructions = llm.requests[-1].instructions[-1]
    assert "only what they have not heard" in instructions and "nothing" in instructions
    await session.aclose()


async def test_a_deferred_reply_follows_a_handoff(virtual_clock: VirtualClock) -> None:
    gate = asyncio.Event()

    class Second(Agent):
        def __init__(self) -> None:
            super().__init__("Second.")

    class First(Assistant):
        @function_tool
        async def job(self, ctx: RunContext[Any]) -> str:
            """Job."""
            await ctx.update("working")
            await gate.wait()
            return "job result"

        @function_tool
        async def transfer(self) -> Agent:
            """Transfer."""
            return Second()

    llm = ScriptedLLM(
        [tool_calls(("job", {})), text("On it."), tool_calls(("transfer", {})), text("Result!")]
    )
    session = Session(llm)
    await session.start(First())
    session.push_user_turn("start")  # run() would wait for the deferred tool
    assert await session.wait_for_idle(timeout=5)
    await session.run(user_input="transfer")
    second = session.current_agent
    assert isinstance(second, Second)
    voiced = asyncio.Event()
    session.on("tool_reply", lambda ev: voiced.set() if ev.status == "completed" else None)
    gate.set()
    await asyncio.wait_for(voiced.wait(), 5)
    assert "call_1_final" in [getattr(it, "call_id", None) for it in second.chat_ctx.items]
    finals = [it for it in session.history.items if getattr(it, "call_id", "") == "call_1_final"]
    assert len(finals) == 2  # the call and its output, written once
    reply_ctx = llm.requests[-1].chat_ctx.items
    assert any(getattr(it, "output", "") == "job result" for it in reply_ctx)
    await session.aclose()


async def test_close_drops_buffered_replies_and_never_hangs(
    virtual_clock: VirtualClock, no_leaked_tasks: Callable[[], Any]
) -> None:
    gate = asyncio.Event()

    @function_tool
    async def job(ctx: RunContext[Any]) -> str:
        """Job."""
        await ctx.update("working")
        await gate.wait()
        return "result"

    llm = ScriptedLLM([tool_calls(("job", {})), text("On it.")])
    session = Session(llm, tools=[job])
    rec = Recorder(session)
    await session.start(Assistant())
    session.push_user_turn("start")
    assert await session.wait_for_idle(timeout=5)
    session.user_started_speaking()
    gate.set()
    await asyncio.sleep(0.1)
    assert session._tool_runner.scheduler.owes_reply()
    await session.aclose()
    assert rec.of("tool_reply") == []
    assert len(llm.requests) == 2
    await no_leaked_tasks()


async def test_each_user_turn_restarts_a_full_away_window_on_one_loop_timer(
    virtual_clock: VirtualClock,
) -> None:
    """The away timer is lazy: a turn disarms and re-arms the window without
    touching the loop's timers, and the user still goes away exactly one full
    window after the last turn ended (not one window after the first arm)."""
    session = Session(ScriptedLLM(lambda _: text("ok")), user_away_timeout=15)
    away = user_went_away(session, virtual_clock)
    await session.start(Assistant())
    handle = session._away._handle
    assert session._away.armed and handle is not None
    for _ in range(3):
        await asyncio.sleep(4)  # inside the first window
        await session.run(user_input="still here")
        assert session._away.armed
    assert session._away._handle is handle  # the same loop timer, never re-made
    for _ in range(3):
        await asyncio.sleep(10)  # past the first loop timer: it re-arms for the window
        await session.run(user_input="still here")
    assert away == []
    last = virtual_clock.now()
    await asyncio.sleep(40)
    assert away == [last + 15]
    assert session.user_state == "away" and not session._away.armed
    await session.aclose()


async def test_a_shorter_timeout_rearms_earlier_and_close_drops_the_loop_timer(
    virtual_clock: VirtualClock,
) -> None:
    session = Session(ScriptedLLM(lambda _: text("ok")), user_away_timeout=30)
    away = user_went_away(session, virtual_clock)
    await session.start(Assistant())
    start = virtual_clock.now()
    session._away.timeout = 5  # a window shorter than the loop timer already set
    session._away.cancel()
    session._refresh()
    await asyncio.sleep(10)
    assert away == [start + 5]
    session.user_started_speaking()
    session.user_stopped_speaking()
    assert session._away.armed and session._away._handle is not None
    await session.aclose()
    assert not session._away.armed and session._away._handle is None
