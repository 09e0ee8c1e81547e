"""Rule breaks found by trying the runtime as a user would (issue 12), one test each,
on the virtual clock. Each failed before its fix."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from backline import (
    Agent,
    AgentTask,
    BackgroundContext,
    InMemoryTextOutput,
    RunContext,
    Session,
    background,
    function_tool,
)
from backline.testing import ScriptedLLM, VirtualClock, text, tool_calls


def agent_states(session: Session[Any]) -> list[str]:
    states: list[str] = []
    session.on("agent_state_changed", lambda e: states.append(e.new))
    return states


def away_times(session: Session[Any], clock: VirtualClock) -> list[float]:
    times: list[float] = []
    session.on(
        "user_state_changed", lambda e: times.append(clock.elapsed) if e.new == "away" else None
    )
    return times


# -- 1. a running on_enter is unfinished work: no "listening" blip, no away --------------


class Greeter(Agent):
    def __init__(self, wait: float = 0.0) -> None:
        super().__init__("b")
        self.wait = wait

    async def on_enter(self) -> None:
        await asyncio.sleep(self.wait)
        self.session.generate_reply()


class Transferring(Agent):
    def __init__(self, to: Agent) -> None:
        super().__init__("a")
        self.to = to

    @function_tool
    async def transfer(self) -> Agent:
        """Transfer."""
        return self.to


async def test_a_handoff_never_blips_listening_before_the_new_agents_greeting(
    virtual_clock: VirtualClock,
) -> None:
    llm = ScriptedLLM([tool_calls(("transfer", {})), text("Hi, B here.")])
    async with Session(llm) as session:
        await session.start(Transferring(Greeter()))
        states = agent_states(session)
        await session.run(user_input="transfer")
        assert states == ["thinking", "speaking", "listening"]


async def test_the_user_is_not_marked_away_while_on_enter_runs(
    virtual_clock: VirtualClock,
) -> None:
    llm = ScriptedLLM([tool_calls(("transfer", {})), text("Hi, B here.")])
    async with Session(llm, user_away_timeout=10) as session:
        await session.start(Transferring(Greeter(wait=20)))
        away = away_times(session, virtual_clock)
        states = agent_states(session)
        await session.run(user_input="transfer")
        assert virtual_clock.elapsed >= 20  # run() waited for on_enter and the greeting
        assert "listening" not in states[:-1]
        assert away == []
        await asyncio.sleep(11)
        assert away and away[0] >= 30


# -- 2. a hold has one owner record; the release reads it -------------------------------


class LongJob(Agent):
    def __init__(self) -> None:
        super().__init__("a")

    @function_tool
    async def long_job(self, ctx: RunContext[Any]) -> str:
        """Long job."""
        await ctx.update("started")
        await asyncio.sleep(60)
        return "finished"

    @function_tool
    async def transfer(self) -> Agent:
        """Transfer."""
        return Agent("b")


async def test_a_deferred_tools_hold_is_released_after_a_handoff(
    virtual_clock: VirtualClock,
) -> None:
    llm = ScriptedLLM(
        [
            tool_calls(("long_job", {})),
            text("Started."),
            tool_calls(("transfer", {})),
            text("Done."),
        ]
    )
    async with Session(llm, user_away_timeout=15) as session:
        away = away_times(session, virtual_clock)
        await session.start(LongJob())
        session.push_user_turn("start")
        await asyncio.sleep(1)
        await session.run(user_input="transfer me")
        await asyncio.sleep(300)
        assert len(llm.requests) == 4  # the job's result was voiced
        assert session.user_state == "away"
        assert 75 <= away[0] < 80
        assert session._away.counting_holds() == 0


class JobTask(AgentTask[str]):
    def __init__(self) -> None:
        super().__init__("task")

    @function_tool
    async def long_job(self, ctx: RunContext[Any]) -> str:
        """Long job."""
        await ctx.update("started")
        await asyncio.sleep(60)
        return "finished"

    @function_tool
    async def finish(self) -> str:
        """Finish."""
        self.complete("ok")
        return "finished the task"


class RunsJobTask(Agent):
    def __init__(self) -> None:
        super().__init__("root")

    @function_tool
    async def start_task(self) -> str:
        """Start the task."""
        return await JobTask()


async def test_a_deferred_tools_hold_is_released_after_its_task_completes(
    virtual_clock: VirtualClock,
) -> None:
    llm = ScriptedLLM(
        [
            tool_calls(("start_task", {})),
            tool_calls(("long_job", {})),
            text("Started."),
            tool_calls(("finish", {})),
            text("Back."),
            text("The job finished."),
        ]
    )
    async with Session(llm, user_away_timeout=15) as session:
        away = away_times(session, virtual_clock)
        await session.start(RunsJobTask())
        await session.run(user_input="task")
        assert isinstance(session.current_agent, JobTask)
        session.push_user_turn("job")
        await asyncio.sleep(1)
        await session.run(user_input="finish")
        assert isinstance(session.current_agent, RunsJobTask)
        await asyncio.sleep(300)
        assert session.user_state == "away"
        assert away and 75 <= away[0] < 80
        assert session._away.counting_holds() == 0


# -- 3. a silent send made during a handoff reaches the new agent ------------------------


async def test_a_silent_send_from_on_exit_reaches_the_new_agent(
    virtual_clock: VirtualClock,
) -> None:
    contexts: dict[str, BackgroundContext] = {}

    @background("bg", description="bg")
    async def bg(ctx: BackgroundContext) -> None:
        contexts["bg"] = ctx
        await asyncio.Event().wait()

    class A(Agent):
        def __init__(self) -> None:
            super().__init__("a")

        async def on_exit(self) -> None:
            await contexts["bg"].send("SILENT-NOTE", silent=True)

        @function_tool
        async def transfer(self) -> Agent:
            """Transfer."""
            return Agent("b")

    async with Session(ScriptedLLM([tool_calls(("transfer", {}))]), background=[bg]) as session:
        await session.start(A())
        await session.run(user_input="transfer")
        notes = [it for it in session.current_agent.chat_ctx.items if "SILENT-NOTE" in str(it)]
        assert len(notes) == 1
        in_history = [it for it in session.history.items if "SILENT-NOTE" in str(it)]
        assert [it.id for it in in_history] == [notes[0].id]  # written once


async def test_a_silent_send_while_on_exit_awaits_reaches_the_new_agent(
    virtual_clock: VirtualClock,
) -> None:
    exiting = asyncio.Event()

    class SlowA(Agent):
        def __init__(self) -> None:
            super().__init__("a")

        async def on_exit(self) -> None:
            exiting.set()
            await asyncio.sleep(2)

        @function_tool
        async def transfer(self) -> Agent:
            """Transfer."""
            return Agent("b")

    @background("bg", description="bg")
    async def bg(ctx: BackgroundContext) -> None:
        await exiting.wait()
        await asyncio.sleep(1)
        await ctx.send("NOTE-DURING-HANDOFF", silent=True)
        await asyncio.Event().wait()

    async with Session(ScriptedLLM([tool_calls(("transfer", {}))]), background=[bg]) as session:
        await session.start(SlowA())
        await session.run(user_input="transfer")
        assert type(session.current_agent) is Agent
        items = session.current_agent.chat_ctx.items
        assert [it for it in items if "NOTE-DURING-HANDOFF" in str(it)]


# -- 5. an interrupt carries the identity of the turn it targets -------------------------


async def test_an_interrupt_decided_for_a_turn_that_ended_is_dropped(
    virtual_clock: VirtualClock,
) -> None:
    log: list[Any] = []
    events: list[asyncio.Event] = []

    @background("cc", description="x", interrupt_grace=2.0)
    async def cc(ctx: BackgroundContext) -> None:
        n = [0]

        async def on_interrupt() -> None:
            log.append(("interrupt", n[0]))

        ctx.on_interrupt(on_interrupt)
        async for batch in ctx.batches():
            async with ctx.turn():
                n[0] += 1
                log.append(("turn", n[0], batch))
                ev = asyncio.Event()
                events.append(ev)
                await ev.wait()

    async with Session(ScriptedLLM(), background=[cc]) as session:
        await session.start(Agent("a"))
        assert session.background is not None
        session.background.deliver("cc", "task")
        await asyncio.sleep(5)
        events[-1].set()  # turn 1 ends ...
        session.background.deliver("cc", "correction")  # ... as the correction arrives
        await asyncio.sleep(1)
        assert log == [("turn", 1, ["task"]), ("turn", 2, ["correction"])]
        # A message to the running turn 2 still interrupts it.
        await asyncio.sleep(2)
        session.background.deliver("cc", "stop")
        await asyncio.sleep(0.1)
        assert log[-1] == ("interrupt", 2)
        events[-1].set()


# -- 6. close owns the hand-back: nothing runs after aclose() -----------------------------


class SlowExit(AgentTask[str]):
    def __init__(self) -> None:
        super().__init__("t")

    async def on_enter(self) -> None:
        self.complete("done")

    async def on_exit(self) -> None:
        await asyncio.sleep(60)


class Goes(Agent):
    def __init__(self) -> None:
        super().__init__("a")

    @function_tool
    async def go(self) -> str:
        """Go."""
        return await SlowExit()


async def test_close_leaves_no_hand_back_running(virtual_clock: VirtualClock) -> None:
    before = set(asyncio.all_tasks())
    session = Session(ScriptedLLM([tool_calls(("go", {})), text("ok")]))
    await session.start(Goes())
    session.push_user_turn("go")
    await asyncio.sleep(1)
    await session.aclose()
    left = [t for t in asyncio.all_tasks() - before if not t.done()]
    assert left == []
    assert virtual_clock.elapsed < 10


async def test_a_forced_interrupt_during_the_hand_back_does_not_stop_it(
    virtual_clock: VirtualClock,
) -> None:
    llm = ScriptedLLM([tool_calls(("go", {})), text("ok"), text("Root again.")])
    async with Session(llm) as session:
        await session.start(Goes())
        session.push_user_turn("go")
        await asyncio.sleep(1)  # SlowExit completed; its on_exit runs for 60 s
        session.interrupt(force=True)  # cancels the tool awaiting the task
        await asyncio.sleep(1)
        assert session.agent_state == "thinking"  # the hand-back is still owed
        assert await session.wait_for_idle(timeout=120)
        assert isinstance(session.current_agent, Goes)
        result = await session.run(user_input="hello")
        assert result.final_output == "Root again."


# -- 7. a closed session reports a true state ---------------------------------------------


async def test_a_session_closed_while_speaking_is_not_speaking(
    virtual_clock: VirtualClock,
) -> None:
    session = Session(
        ScriptedLLM([text("word " * 40)]), output=InMemoryTextOutput(chars_per_second=5)
    )
    states = agent_states(session)
    await session.start(Agent("a"))
    session.generate_reply()
    await asyncio.sleep(2)
    assert session.agent_state == "speaking"
    await session.aclose()
    assert session.closed
    assert session.agent_state == "listening"
    assert states[-1] == "listening"


# -- 8 and 9. a speech blocked on an inline task does not hold run() up -------------------


class Ask(AgentTask[None]):
    def __init__(self) -> None:
        super().__init__("ask")

    @function_tool
    async def finish(self) -> str:
        """Finish."""
        self.complete(None)
        return "done"


class AwaitsGreeting(Agent):
    async def on_enter(self) -> None:
        await self.session.generate_reply(instructions="begin")

    @function_tool
    async def ask(self) -> str:
        """Ask."""
        await Ask()
        return "ok"


async def test_run_returns_when_on_enter_awaits_a_speech_blocked_on_a_task(
    virtual_clock: VirtualClock,
) -> None:
    llm = ScriptedLLM([tool_calls(("ask", {})), text("Hello from the task.")])
    async with Session(llm) as session:
        await session.start(AwaitsGreeting("root"))
        await asyncio.sleep(1)
        assert isinstance(session.current_agent, Ask)
        result = await asyncio.wait_for(session.run(user_input="hi"), 5)
        assert result.final_output == "Hello from the task."
        assert session.agent_state == "listening"


class StartsGreeting(Agent):
    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="begin", allow_interruptions=False)

    @function_tool
    async def ask(self) -> str:
        """Ask."""
        await Ask()
        return "ok"


async def test_a_turn_queued_behind_a_speech_that_starts_a_task_is_answered_by_the_task(
    virtual_clock: VirtualClock,
) -> None:
    llm = ScriptedLLM(
        [
            tool_calls(("ask", {}), delay=2.0),
            text("hello!"),
            tool_calls(("finish", {})),
            text("Task done."),
        ]
    )
    async with Session(llm) as session:
        await session.start(StartsGreeting("root"))
        states = agent_states(session)
        result = await asyncio.wait_for(session.run(user_input="hi"), 5)
        assert isinstance(session.current_agent, Ask)
        assert result.final_output == "hello!"
        assert "hi" in [getattr(it, "content", None) for it in session.current_agent.chat_ctx.items]
        assert "listening" not in states[:-1]  # the turn was owed until the task answered
        await asyncio.wait_for(session.run(user_input="bye"), 5)
        assert isinstance(session.current_agent, StartsGreeting)
        history = [getattr(it, "content", None) for it in session.history.items]
        assert history.count("hi") == 1


@pytest.mark.parametrize("when", [0.5, 1.5])
async def test_close_while_a_moved_turn_waits_for_the_task(
    virtual_clock: VirtualClock, when: float
) -> None:
    llm = ScriptedLLM([tool_calls(("ask", {}), delay=1.0), text("hello!", delay=5)])
    session = Session(llm)
    await session.start(StartsGreeting("root"))
    session.push_user_turn("hi")
    await asyncio.sleep(when)
    await session.aclose()
    assert virtual_clock.elapsed < when + 5


# -- found by the randomized schedules: every call in the history keeps one output ----


def outputs_per_call(session: Session[Any]) -> dict[str, int]:
    calls = [it.call_id for it in session.history.items if it.type == "function_call"]
    outputs = [it.call_id for it in session.history.items if it.type == "function_call_output"]
    return {c: outputs.count(c) for c in calls}


@pytest.mark.parametrize("deferred", [False, True])
async def test_close_while_a_tool_runs_leaves_every_call_with_an_output(
    virtual_clock: VirtualClock, deferred: bool
) -> None:
    @function_tool
    async def job(ctx: RunContext[Any]) -> str:
        """A job."""
        if deferred:
            await ctx.update("started")
        await asyncio.sleep(10)
        return "done"

    session = Session(ScriptedLLM([tool_calls(("job", {}))]), tools=[job])
    await session.start(Agent("a"))
    session.push_user_turn("go")
    await asyncio.sleep(0.5)
    await session.aclose()
    assert outputs_per_call(session) == {"call_1": 1}


async def test_a_tool_that_stops_the_response_still_has_an_output(
    virtual_clock: VirtualClock,
) -> None:
    from backline import StopResponse

    @function_tool
    async def hang_up() -> str:
        """Hang up."""
        raise StopResponse()

    llm = ScriptedLLM([tool_calls(("hang_up", {})), text("Next turn.")])
    async with Session(llm, tools=[hang_up]) as session:
        await session.start(Agent("a"))
        await session.run(user_input="bye")
        assert outputs_per_call(session) == {"call_1": 1}
        result = await session.run(user_input="hello again")
        assert result.final_output == "Next turn."
        # The model saw a call paired with its output (as a model API requires).
        assert any(it.type == "function_call_output" for it in llm.requests[-1].chat_ctx.items)


# -- found by the randomized schedules: there is never a closed current agent ---------


async def test_say_while_the_old_agent_is_torn_down_goes_to_the_new_agent(
    virtual_clock: VirtualClock,
) -> None:
    tearing_down = asyncio.Event()

    class SlowToStop(Agent):
        def __init__(self) -> None:
            super().__init__("a")

        async def on_enter(self) -> None:
            try:
                await asyncio.Event().wait()
            finally:  # cleanup that takes a while once cancelled
                tearing_down.set()
                await asyncio.sleep(1)

        @function_tool
        async def transfer(self) -> Agent:
            """Transfer."""
            return Agent("b")

    output = InMemoryTextOutput()
    async with Session(ScriptedLLM([tool_calls(("transfer", {}))]), output=output) as session:
        await session.start(SlowToStop())
        session.push_user_turn("transfer")
        await asyncio.wait_for(tearing_down.wait(), 5)
        handle = session.say("Still here.")  # raised "no longer active" before
        await handle
        assert type(session.current_agent) is Agent
        assert "Still here." in [getattr(it, "content", None) for it in session.history.items]


async def test_an_agent_can_hand_off_to_itself(virtual_clock: VirtualClock) -> None:
    entered: list[float] = []

    class Restarts(Agent):
        def __init__(self) -> None:
            super().__init__("a")

        async def on_enter(self) -> None:
            entered.append(virtual_clock.elapsed)

        @function_tool
        async def restart(self) -> Agent:
            """Start over."""
            return self

    llm = ScriptedLLM([tool_calls(("restart", {})), text("Fresh start.")])
    async with Session(llm) as session:
        agent = Restarts()
        await session.start(agent)
        await session.run(user_input="restart")
        assert session.current_agent is agent and len(entered) == 2
        result = await session.run(user_input="hello")
        assert result.final_output == "Fresh start."


async def test_a_handoff_to_an_agent_running_elsewhere_keeps_the_old_agent(
    virtual_clock: VirtualClock,
) -> None:
    elsewhere = Agent("busy")

    class A(Agent):
        def __init__(self) -> None:
            super().__init__("a")

        @function_tool
        async def transfer(self) -> Agent:
            """Transfer."""
            return elsewhere

    llm = ScriptedLLM([tool_calls(("transfer", {})), text("Still A.")])
    async with Session(ScriptedLLM()) as other, Session(llm) as session:
        await other.start(elsewhere)
        await session.start(A())
        errors: list[Any] = []
        session.on("error", errors.append)
        await session.run(user_input="transfer")
        assert [e.source for e in errors] == ["handoff"]
        assert "already running" in str(errors[0].error)
        assert isinstance(session.current_agent, A)  # not a closed agent
        result = await session.run(user_input="hello")
        assert result.final_output == "Still A."


async def test_a_tool_that_finishes_before_the_next_call_streams_stays_after_the_calls(
    virtual_clock: VirtualClock,
) -> None:
    @function_tool
    async def left() -> str:
        """Left."""
        return "LEFT"

    @function_tool
    async def right() -> str:
        """Right."""
        return "RIGHT"

    # The second call streams 0.5 s after the first, which has finished by then.
    llm = ScriptedLLM([tool_calls(("left", {}), ("right", {}), chunk_delay=0.5), text("Both.")])
    async with Session(llm, tools=[left, right]) as session:
        await session.start(Agent("a"))
        await session.run(user_input="both")
        kinds = [it.type for it in session.history.items]
        # One step is one assistant turn: both calls, then both outputs.
        assert kinds[1:5] == ["function_call"] * 2 + ["function_call_output"] * 2
