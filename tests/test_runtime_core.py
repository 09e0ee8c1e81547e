"""The voice runtime core (issue 3): generation, tools, handoffs, tasks, interruption."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from backline import (
    Agent,
    AgentTask,
    ChatContext,
    ChatMessage,
    InMemoryTextOutput,
    LLMError,
    RunContext,
    Session,
    StopResponse,
    ToolError,
    function_tool,
)
from backline.testing import ScriptedLLM, error, text, tool_calls
from tests.conftest import Recorder


class Assistant(Agent):
    def __init__(self, **kw: Any) -> None:
        super().__init__("You are a helpful assistant.", **kw)


async def test_text_turn_streams_to_output_and_history(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.push(text("Hello there, friend."))
    output = InMemoryTextOutput()
    async with Session(scripted_llm, output=output) as session:
        rec = Recorder(session)
        await session.start(Assistant())
        result = await session.run(user_input="hi")
        result.expect.next_event().is_message(role="assistant", content="Hello there, friend.")
        result.expect.no_more_events()
        assert output.transcript == ["Hello there, friend."]
        assert [(m.role, m.content) for m in session.history.items] == [  # type: ignore[union-attr]
            ("user", "hi"),
            ("assistant", "Hello there, friend."),
        ]
        assert rec.agent_states == ["listening", "thinking", "speaking", "listening"]
        req = scripted_llm.requests[0]
        assert req.instructions == ["You are a helpful assistant."]
        assert req.last_message is not None and req.last_message.content == "hi"


async def test_two_parallel_tool_calls_run_concurrently(scripted_llm: ScriptedLLM) -> None:
    both_started = asyncio.Event()
    started: list[str] = []

    @function_tool
    async def lookup(key: str) -> str:
        """Look a key up."""
        started.append(key)
        if len(started) == 2:
            both_started.set()
        await asyncio.wait_for(both_started.wait(), 5)  # each waits for the other
        return f"value of {key}"

    scripted_llm.push(
        tool_calls(("lookup", {"key": "a"}), ("lookup", {"key": "b"})), text("Both found.")
    )
    async with Session(scripted_llm, tools=[lookup]) as session:
        rec = Recorder(session)
        await session.start(Assistant())
        result = await session.run(user_input="look up a and b")
        result.expect.next_event().is_function_call(name="lookup", arguments={"key": "a"})
        result.expect.next_event().is_function_call(name="lookup", arguments={"key": "b"})
        result.expect.next_event().is_function_call_output(output="value of a")
        result.expect.next_event().is_function_call_output(output="value of b")
        result.expect.next_event().is_message(role="assistant", content="Both found.")
        result.expect.no_more_events()
        (executed,) = rec.of("function_tools_executed")
        assert [c.name for c in executed.calls] == ["lookup", "lookup"]
        assert [o.output for o in executed.outputs] == ["value of a", "value of b"]
        # The second request carried both outputs back to the model.
        second = scripted_llm.requests[1].chat_ctx.items
        assert [it.type for it in second[-4:]] == [
            "function_call",
            "function_call",
            "function_call_output",
            "function_call_output",
        ]


async def test_tool_errors_and_invalid_arguments_go_back_to_the_model(
    scripted_llm: ScriptedLLM,
) -> None:
    @function_tool
    async def book(city: str) -> str:
        """Book a trip."""
        raise ToolError("no flights to " + city)

    @function_tool
    async def boom() -> str:
        """Crash."""
        raise ValueError("secret internals")

    scripted_llm.push(
        tool_calls(("book", {"city": "Oslo"}), ("book", {"town": 3}), ("boom", {}), ("nope", {})),
        text("Sorry."),
    )
    async with Session(scripted_llm, tools=[book, boom]) as session:
        await session.start(Assistant())
        result = await session.run(user_input="book")
        outputs = [e.item for e in result.events if e.type == "function_call_output"]
        assert all(o.is_error for o in outputs)
        assert outputs[0].output == "no flights to Oslo"
        assert "'city' is a required property" in outputs[1].output
        assert "ValueError" in outputs[2].output and "secret internals" not in outputs[2].output
        assert "Unknown tool 'nope'" in outputs[3].output
        result.expect.contains_message(role="assistant", content="Sorry.")


async def test_falsy_tool_outputs_reach_the_model_verbatim(scripted_llm: ScriptedLLM) -> None:
    @function_tool
    async def count() -> int:
        """Count."""
        return 0

    @function_tool
    async def flag() -> bool:
        """Flag."""
        return False

    @function_tool
    async def items() -> list[str]:
        """Items."""
        return []

    scripted_llm.push(tool_calls(("count", {}), ("flag", {}), ("items", {})), text("ok"))
    async with Session(scripted_llm, tools=[count, flag, items]) as session:
        await session.start(Assistant())
        result = await session.run(user_input="go")
        outputs = [e.item.output for e in result.events if e.type == "function_call_output"]
        assert outputs == ["0", "false", "[]"]


async def test_max_tool_steps_stops_a_tool_loop(scripted_llm: ScriptedLLM) -> None:
    calls = 0

    @function_tool
    async def again() -> str:
        """Do it again."""
        nonlocal calls
        calls += 1
        return "more"

    scripted_llm.push(*[tool_calls(("again", {})) for _ in range(10)])
    async with Session(scripted_llm, tools=[again], max_tool_steps=3) as session:
        await session.start(Assistant())
        result = await session.run(user_input="loop")
        assert calls == 3
        assert len(scripted_llm.requests) == 4
        assert result.final_output == "I'm sorry, I couldn't finish that."
        # The refused calls never entered the history, so the context stays paired.
        call_ids = [it.call_id for it in session.history.items if it.type == "function_call"]
        out_ids = [it.call_id for it in session.history.items if it.type == "function_call_output"]
        assert call_ids == out_ids


async def test_required_tool_choice_is_relaxed_after_the_first_step(
    scripted_llm: ScriptedLLM,
) -> None:
    @function_tool
    async def ping() -> str:
        """Ping."""
        return "pong"

    scripted_llm.push(tool_calls(("ping", {})), text("done"))
    async with Session(scripted_llm, tools=[ping]) as session:
        await session.start(Assistant())
        handle = session.generate_reply(tool_choice="required")
        await handle
        assert [r.tool_choice for r in scripted_llm.requests] == ["required", "auto"]
        assert not handle.interrupted and len(handle.chat_items) == 3


async def test_llm_error_is_recoverable_and_the_next_turn_works(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.push(error(LLMError("overloaded", retryable=True)), text("Back again."))
    async with Session(scripted_llm) as session:
        rec = Recorder(session)
        await session.start(Assistant())
        first = await session.run(user_input="one")
        assert [type(e).__name__ for e in first.errors] == ["LLMError"]
        (err,) = rec.of("error")
        assert err.recoverable is True and err.source == "llm"
        first.expect.no_more_events()
        second = await session.run(user_input="two")
        second.expect.next_event().is_message(role="assistant", content="Back again.")
        assert session.agent_state == "listening"


async def test_say_adds_to_history_unless_told_not_to(scripted_llm: ScriptedLLM) -> None:
    async with Session(scripted_llm) as session:
        await session.start(Assistant())
        await session.say("Welcome!")
        await session.say("(not recorded)", add_to_chat_ctx=False)
        contents = [it.content for it in session.history.items]  # type: ignore[union-attr]
        assert contents == ["Welcome!"]
        assert session.output.transcript == ["Welcome!", "(not recorded)"]  # type: ignore[attr-defined]


async def test_on_user_turn_completed_can_edit_or_stop(scripted_llm: ScriptedLLM) -> None:
    class Gate(Assistant):
        async def on_user_turn_completed(
            self, turn_ctx: ChatContext, new_message: ChatMessage
        ) -> None:
            if new_message.content == "shh":
                raise StopResponse()
            new_message.content = new_message.content.upper()

    scripted_llm.push(text("Yes."))
    async with Session(scripted_llm) as session:
        await session.start(Gate())
        quiet = await session.run(user_input="shh")
        quiet.expect.no_more_events()
        loud = await session.run(user_input="hello")
        loud.expect.next_event().is_message(content="Yes.")
        assert scripted_llm.requests[0].last_message.content == "HELLO"  # type: ignore[union-attr]
        assert [it.content for it in session.history.items] == ["shh", "HELLO", "Yes."]  # type: ignore[union-attr]


async def test_handoff_by_returning_an_agent(scripted_llm: ScriptedLLM) -> None:
    order: list[str] = []

    class Billing(Agent):
        def __init__(self) -> None:
            super().__init__("You handle billing.")

        async def on_enter(self) -> None:
            order.append("billing.on_enter")
            self.session.generate_reply(instructions="greet")

    class Front(Assistant):
        async def on_exit(self) -> None:
            order.append("front.on_exit")

        @function_tool
        async def to_billing(self) -> tuple[str, Agent]:
            """Transfer to billing."""
            order.append("tool")
            return "transferring", Billing()

    scripted_llm.push(
        tool_calls(("to_billing", {}), text="One moment."),
        text("Billing here, how can I help?"),
    )
    async with Session(scripted_llm) as session:
        rec = Recorder(session)
        await session.start(Front())
        result = await session.run(user_input="billing please")
        result.expect.next_event().is_message(content="One moment.")
        result.expect.next_event().is_function_call(name="to_billing")
        result.expect.next_event().is_function_call_output(output="transferring")
        result.expect.next_event().is_agent_handoff(new_agent_type=Billing)
        result.expect.next_event().is_message(content="Billing here")
        result.expect.no_more_events()
        assert order == ["tool", "front.on_exit", "billing.on_enter"]
        assert type(session.current_agent).__name__ == "Billing"
        # The new agent starts from its own context.
        assert scripted_llm.requests[1].instructions == ["You handle billing.", "greet"]
        assert len(rec.of("agent_handoff")) == 1
        assert session.agent_state == "listening"


async def test_agent_task_awaited_from_a_tool_returns_its_value(scripted_llm: ScriptedLLM) -> None:
    class AskName(AgentTask[str]):
        def __init__(self) -> None:
            super().__init__("Ask the user's name.")

        async def on_enter(self) -> None:
            self.session.generate_reply(instructions="ask for the name")

        @function_tool
        async def record_name(self, name: str) -> None:
            """Record the name."""
            self.complete(name)

    got: list[str] = []

    class Root(Assistant):
        @function_tool
        async def get_name(self) -> str:
            """Find out the user's name."""
            name = await AskName()
            got.append(name)
            return f"the name is {name}"

    scripted_llm.push(
        tool_calls(("get_name", {})),
        text("What is your name?"),
        tool_calls(("record_name", {"name": "Ada"})),
        text("Nice to meet you, Ada."),
    )
    async with Session(scripted_llm) as session:
        await session.start(Root())
        first = await session.run(user_input="hi")
        first.expect.next_event().is_function_call(name="get_name")
        first.expect.next_event().is_agent_handoff(new_agent_type=AskName)
        first.expect.next_event().is_message(content="What is your name?")
        first.expect.no_more_events()
        assert isinstance(session.current_agent, AskName)
        second = await session.run(user_input="Ada")
        second.expect.contains_function_call(name="record_name", arguments={"name": "Ada"})
        second.expect.contains_message(content="Nice to meet you, Ada.")
        assert got == ["Ada"]
        assert isinstance(session.current_agent, Root)
        outs = [e.item.output for e in second.events if e.type == "function_call_output"]
        assert "the name is Ada" in outs


async def test_interrupting_mid_stream_keeps_only_what_was_delivered(
    scripted_llm: ScriptedLLM, virtual_clock: Any
) -> None:
    output = InMemoryTextOutput(chars_per_second=10)  # 1 character per 0.1 s
    scripted_llm.push(text("0123456789abcdefghij"))
    async with Session(scripted_llm, output=output) as session:
        await session.start(Assistant())
        handle = session.generate_reply()
        await asyncio.sleep(1.05)  # virtual time: 10 characters delivered
        session.interrupt()
        await handle
        assert handle.interrupted
        (msg,) = [it for it in session.history.items if it.type == "message"]
        assert msg.content == "0123456789" and msg.interrupted is True  # type: ignore[union-attr]
        assert output.segments[-1].interrupted


async def test_a_new_user_turn_interrupts_the_current_speech(
    scripted_llm: ScriptedLLM, virtual_clock: Any
) -> None:
    output = InMemoryTextOutput(chars_per_second=10)
    scripted_llm.push(text("a long answer that takes a while"), text("Sure."))
    async with Session(scripted_llm, output=output) as session:
        await session.start(Assistant())
        first = session.generate_reply()
        await asyncio.sleep(0.5)
        result = await session.run(user_input="stop, do something else")
        assert first.interrupted
        result.expect.next_event().is_message(content="a lon", interrupted=True)
        result.expect.next_event().is_message(content="Sure.")
        msgs = [it for it in session.history.items if it.type == "message"]
        assert msgs[0].content == "a lon" and msgs[0].interrupted  # type: ignore[union-attr]


async def test_uninterruptible_speech_refuses_interrupt_but_yields_to_force(
    scripted_llm: ScriptedLLM, virtual_clock: Any
) -> None:
    output = InMemoryTextOutput(chars_per_second=10)
    async with Session(scripted_llm, output=output) as session:
        await session.start(Assistant())
        handle = session.say("please listen to this", allow_interruptions=False)
        await asyncio.sleep(0.3)
        with pytest.raises(RuntimeError, match="does not allow interruptions"):
            handle.interrupt()
        session.interrupt()  # the session-level call leaves it alone
        session.user_started_speaking()  # so does barge-in
        await asyncio.sleep(0.2)
        assert not handle.interrupted and not handle.done()
        handle.interrupt(force=True)
        await handle
        assert handle.interrupted
        assert session.history.items[-1].content == "pleas"  # type: ignore[union-attr]


async def test_user_speaking_without_interrupt_sets_the_state_and_leaves_speech_alone(
    scripted_llm: ScriptedLLM, virtual_clock: Any
) -> None:
    output = InMemoryTextOutput(chars_per_second=10)
    async with Session(scripted_llm, output=output) as session:
        await session.start(Assistant())
        handle = session.say("a notice that keeps going")
        await asyncio.sleep(0.3)
        session.user_started_speaking(interrupt=False)  # the front end decides barge-in
        assert session.user_state == "speaking"
        await asyncio.sleep(0.2)
        assert not handle.interrupted and not handle.done()
        session.user_stopped_speaking()
        await handle
        assert not handle.interrupted
        session.user_started_speaking()  # the default still barges in
        assert session.user_state == "speaking"


async def test_user_turn_during_uninterruptible_speech_is_answered_after_it(
    scripted_llm: ScriptedLLM, virtual_clock: Any
) -> None:
    output = InMemoryTextOutput(chars_per_second=100)
    scripted_llm.push(text("Now your question."))
    async with Session(scripted_llm, output=output) as session:
        await session.start(Assistant())
        notice = session.say("an important notice", allow_interruptions=False)
        await asyncio.sleep(0.05)  # the user speaks while the notice plays
        result = await session.run(user_input="a question")
        assert notice.done() and not notice.interrupted
        result.expect.next_event().is_message(content="an important notice", interrupted=False)
        result.expect.next_event().is_message(content="Now your question.")
        contents = [it.content for it in session.history.items]  # type: ignore[union-attr]
        assert contents == ["an important notice", "a question", "Now your question."]


async def test_agent_states_are_emitted_only_on_change(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.push(text("one"), text("two"))
    async with Session(scripted_llm) as session:
        rec = Recorder(session)
        assert session.agent_state == "initializing"
        await session.start(Assistant())
        await session.run(user_input="a")
        await session.run(user_input="b")
        states = rec.agent_states
        assert all(a != b for a, b in itertools.pairwise(states))
        assert states[0] == "listening" and states[-1] == "listening"


async def test_run_context_gives_the_call_and_userdata(scripted_llm: ScriptedLLM) -> None:
    seen: list[Any] = []

    @function_tool
    async def whoami(ctx: RunContext[dict[str, str]]) -> str:
        """Who am I."""
        seen.append((ctx.function_call.name, ctx.userdata["user"], ctx.speech_handle.id))
        return "ok"

    scripted_llm.push(tool_calls(("whoami", {})), text("done"))
    async with Session(scripted_llm, tools=[whoami], userdata={"user": "ada"}) as session:
        await session.start(Assistant())
        await session.run(user_input="?")
        assert seen[0][:2] == ("whoami", "ada")


async def test_update_tools_rejects_duplicates_without_changing_anything(
    scripted_llm: ScriptedLLM,
) -> None:
    @function_tool
    async def a() -> None:
        """A."""

    agent = Assistant(tools=[a])
    async with Session(scripted_llm) as session:
        await session.start(agent)
        with pytest.raises(ValueError, match="duplicate tool name"):
            await agent.update_tools([a, a])
        assert [t.name for t in agent.tools] == ["a"]


async def test_generate_reply_after_close_raises(scripted_llm: ScriptedLLM) -> None:
    session = Session(scripted_llm)
    await session.start(Assistant())
    await session.aclose()
    with pytest.raises(RuntimeError, match="closed"):
        session.generate_reply()
    await session.aclose()  # idempotent


async def test_a_closed_session_can_start_again(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.push(text("first life"), text("second life"))
    session = Session(scripted_llm)
    agent = Assistant()
    await session.start(agent)
    await session.run(user_input="one")
    await session.aclose()
    await session.start(agent)
    assert session.agent_state == "listening" and not session.closed
    result = await session.run(user_input="two")
    result.expect.next_event().is_message(content="second life")
    contents = [getattr(it, "content", None) for it in session.history.items]
    assert contents == ["one", "first life", "two", "second life"]
    await session.aclose()


async def test_tools_changed_between_requests_reach_the_next_request() -> None:
    """The agent's tool map is reused across requests while nothing changes, and
    rebuilt when the agent's tools are replaced (a tool can change them mid-reply)."""

    @function_tool
    async def first() -> str:
        """First."""
        return "1"

    @function_tool
    async def second() -> str:
        """Second."""
        return "2"

    agent = Assistant(tools=[first])

    @function_tool
    async def swap() -> str:
        """Swap the tools."""
        await agent.update_tools([second, swap])
        return "swapped"

    await agent.update_tools([first, swap])
    llm = ScriptedLLM([text("a"), tool_calls(("swap", {})), text("b"), text("c")])
    async with Session(llm) as session:
        await session.start(agent)
        await session.run(user_input="one")
        activity = session._switches.current
        assert activity is not None
        assert activity.tool_map() is activity.tool_map()  # reused while unchanged
        await session.run(user_input="two")  # swap runs, then the reply goes on
        await session.run(user_input="three")
    names = [r.tool_names for r in llm.requests]
    assert names == [["first", "swap"], ["first", "swap"], ["second", "swap"], ["second", "swap"]]
