"""The generated tools ``backline_send`` / ``backline_state``: schemas, routing, state
serialisation, reserved names (catalog §3, items 19–20, 27, 31, 51–56, 60–75, 183–184,
197–199)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from backline import (
    UNSET,
    Agent,
    BackgroundContext,
    BackgroundDefinition,
    FunctionCallOutput,
    FunctionTool,
    Session,
    ToolError,
    background,
    function_tool,
)
from backline.testing import ScriptedLLM, VirtualClock, text, tool_calls
from tests.background_kit import First, Second, ctx_of, forever
from tests.conftest import Recorder

SEND_INTRO = (
    "Send a message to a background session: a task, an answer to its question, or a new "
    "direction. Delivery is asynchronous: this returns at once and does not wait for a "
    "response; the background session reports back on its own."
)
STATE_INTRO = (
    "Return the real-time state a background session reports: what it is working on right "
    "now. Use it when the user asks about progress or status."
)
NO_STATE = "The background session has not reported any state yet."


codex = background("codex", description="Edits code\n   in the   repository.")(forever)
claude = background("claude", description="Answers questions.")(forever)


def tool(session: Session[Any], name: str) -> FunctionTool:
    (found,) = [t for t in session.tools if t.name == name]
    return found


async def send(session: Session[Any], background_id: Any, content: str = "hi") -> Any:
    return await tool(session, "backline_send").invoke(
        {"background_session_id": background_id, "content": content}
    )


async def state(session: Session[Any], background_id: Any) -> Any:
    return await tool(session, "backline_state").invoke({"background_session_id": background_id})


async def started(*defs: Any, llm: ScriptedLLM | None = None, **kw: Any) -> Session[Any]:
    session: Session[Any] = Session(llm or ScriptedLLM(), background=list(defs), **kw)
    await session.start(Agent("Help."))
    return session


# -- the tool list ------------------------------------------------------------------


@function_tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return key


@function_tool(name="backline_send")
async def my_send(content: str) -> str:
    """A user tool that takes the reserved name."""
    return content


@function_tool(name="backline_state")
async def my_state() -> str:
    """A user tool that takes the other reserved name."""
    return "mine"


def test_without_backgrounds_no_tools_are_generated_and_names_are_free() -> None:
    tools = [lookup, my_send]
    configurations: list[list[BackgroundDefinition] | None] = [None, []]
    for configured in configurations:
        session: Session[Any] = Session(ScriptedLLM(), tools=tools, background=configured)
        assert session.tools == [lookup, my_send]
        assert session.background is None
    assert tools == [lookup, my_send]


def test_backgrounds_append_send_then_state_without_touching_the_callers_list() -> None:
    tools = [lookup]
    session: Session[Any] = Session(ScriptedLLM(), tools=tools, background=[codex])
    names = [t.name for t in session.tools]
    assert names[:4] == ["lookup", "backline_send", "backline_state", "backline_stop"]
    assert session.tools[0] is lookup
    assert tools == [lookup]
    assert session.tools is not tools


def test_send_tool_schema_and_sorted_description() -> None:
    session: Session[Any] = Session(ScriptedLLM(), background=[codex, claude])
    send_tool = tool(session, "backline_send")
    assert send_tool.parameters == {
        "type": "object",
        "properties": {
            "background_session_id": {
                "type": "string",
                "description": "The id of the background session.",
            },
            "content": {"type": "string", "description": "The message to send."},
        },
        "required": ["background_session_id", "content"],
        "additionalProperties": False,
    }
    assert send_tool.description.startswith(SEND_INTRO)
    assert send_tool.description.endswith(
        "\n\nAvailable background sessions:\n"
        "- claude: Answers questions.\n"
        "- codex: Edits code in the repository."
    )


def test_state_tool_schema_and_sorted_description() -> None:
    session: Session[Any] = Session(ScriptedLLM(), background=[codex, claude])
    state_tool = tool(session, "backline_state")
    assert state_tool.parameters == {
        "type": "object",
        "properties": {
            "background_session_id": {
                "type": "string",
                "description": "The id of the background session.",
            }
        },
        "required": ["background_session_id"],
        "additionalProperties": False,
    }
    assert state_tool.description == (
        STATE_INTRO + "\n\nAvailable background sessions:\n"
        "- claude: Answers questions.\n"
        "- codex: Edits code in the repository."
    )


@pytest.mark.parametrize(
    "args",
    [
        {"background_session_id": "codex"},
        {"content": "x"},
        {"background_session_id": "codex", "content": "x", "extra": 1},
        {"background_session_id": 3, "content": "x"},
    ],
)
async def test_send_arguments_are_validated_strictly(args: dict[str, Any]) -> None:
    session: Session[Any] = Session(ScriptedLLM(), background=[codex])
    with pytest.raises(ToolError, match="Invalid arguments for tool 'backline_send'"):
        await tool(session, "backline_send").invoke(args)


# -- routing -------------------------------------------------------------------------


async def test_send_routes_only_to_the_selected_inbox_and_returns_at_once(
    virtual_clock: VirtualClock,
) -> None:
    session = await started(codex, claude)
    assert await send(session, "codex", "first") == "Message has been delivered."
    assert await send(session, "codex", "second") == "Message has been delivered."
    # Nobody reads the inbox, and the tool did not wait for a reader.
    assert ctx_of(session, "codex").pending() == ["first", "second"]
    assert ctx_of(session, "claude").pending() == []
    await session.aclose()


async def test_unknown_ids_are_tool_errors_naming_the_valid_ids(
    virtual_clock: VirtualClock,
) -> None:
    session = await started(codex, claude)
    for bad in ("nope", "", "Codex"):
        with pytest.raises(ToolError) as err:
            await send(session, bad)
        assert (
            err.value.message == f"Unknown background session ID '{bad}'. Valid IDs: claude, codex"
        )
        with pytest.raises(ToolError) as err:
            await state(session, bad)
        assert (
            err.value.message == f"Unknown background session ID '{bad}'. Valid IDs: claude, codex"
        )
    assert ctx_of(session, "codex").pending() == []
    assert ctx_of(session, "claude").pending() == []
    await session.aclose()


async def test_the_model_reads_tool_errors_as_error_outputs(virtual_clock: VirtualClock) -> None:
    llm = ScriptedLLM(
        [
            tool_calls(
                ("backline_send", {"background_session_id": "gpt", "content": "x"}),
                ("backline_state", {"background_session_id": "gpt"}),
            ),
            text("Sorry."),
        ]
    )
    session = await started(codex, llm=llm)
    await session.run(user_input="ask gpt")
    outputs = [it for it in llm.requests[1].chat_ctx.items if isinstance(it, FunctionCallOutput)]
    assert [(o.output, o.is_error) for o in outputs] == [
        ("Unknown background session ID 'gpt'. Valid IDs: codex", True),
        ("Unknown background session ID 'gpt'. Valid IDs: codex", True),
    ]
    await session.aclose()


async def test_send_before_start_is_a_tool_error() -> None:
    session: Session[Any] = Session(ScriptedLLM(), background=[codex])
    with pytest.raises(ToolError, match="has not started yet"):
        await send(session, "codex")
    assert await state(session, "codex") == NO_STATE


async def test_after_close_the_tools_answer_with_tool_errors(virtual_clock: VirtualClock) -> None:
    session = await started(codex)
    ctx = ctx_of(session, "codex")
    ctx.set_state({"step": 3})
    await session.aclose()
    with pytest.raises(ToolError, match="'codex' is closed"):
        await send(session, "codex")
    with pytest.raises(ToolError, match="Unknown background session ID 'x'"):
        await send(session, "x")
    # Reading state is not an error: the last report is still the truth.
    assert await state(session, "codex") == '{"step": 3}'
    assert ctx.state == {"step": 3}


@pytest.mark.parametrize("how", ["returned", "crashed"])
async def test_send_to_an_entrypoint_that_stopped_is_not_delivered(
    virtual_clock: VirtualClock, how: str
) -> None:
    @background("short", description="Stops early.")
    async def short(ctx: BackgroundContext) -> None:
        await asyncio.sleep(1)
        if how == "crashed":
            raise ValueError("boom")

    session = await started(short)
    await asyncio.sleep(2)
    ctx = ctx_of(session, "short")
    with pytest.raises(ToolError) as err:
        await send(session, "short", "are you there?")
    reason = "it crashed" if how == "crashed" else "it has finished"
    assert err.value.message == (
        f"Background session 'short' is not running ({reason}); the message was not delivered."
    )
    assert ctx.pending() == []
    await session.aclose()


# -- state ----------------------------------------------------------------------------


async def test_state_is_unset_then_the_last_write_wins(virtual_clock: VirtualClock) -> None:
    session = await started(codex, claude)
    ctx = ctx_of(session, "codex")
    assert ctx.state is UNSET
    assert await state(session, "codex") == NO_STATE
    ctx.set_state({"task": "refactor", "files": ["a.py"]})
    assert await state(session, "codex") == '{"files": ["a.py"], "task": "refactor"}'
    ctx.set_state("running tests")
    assert ctx.state == "running tests"
    assert await state(session, "codex") == "running tests"  # strings verbatim, no quotes
    assert await state(session, "claude") == NO_STATE
    await session.aclose()


@pytest.mark.parametrize(
    ("value", "seen"),
    [
        (0, "0"),
        (0.0, "0.0"),
        (False, "false"),
        ("", ""),
        ([], "[]"),
        ({}, "{}"),
        (None, "null"),
        ((1, "a"), '[1, "a"]'),
        ({3, 1, 2}, "[1, 2, 3]"),
        ({"b": [True, None], "a": "ü"}, '{"a": "ü", "b": [true, null]}'),
    ],
)
async def test_states_reach_the_model_verbatim_as_deterministic_json(
    virtual_clock: VirtualClock, value: Any, seen: str
) -> None:
    llm = ScriptedLLM(
        [tool_calls(("backline_state", {"background_session_id": "codex"})), text("ok")]
    )
    session = await started(codex, llm=llm)
    ctx_of(session, "codex").set_state(value)
    await session.run(user_input="status?")
    (output,) = [it for it in llm.requests[1].chat_ctx.items if isinstance(it, FunctionCallOutput)]
    assert output.output == seen and not output.is_error
    assert output.output != NO_STATE
    await session.aclose()


async def test_an_explicit_none_is_not_unset(virtual_clock: VirtualClock) -> None:
    session = await started(codex)
    ctx = ctx_of(session, "codex")
    ctx.set_state(None)
    assert ctx.state is None and ctx.state is not UNSET
    assert await state(session, "codex") == "null"
    await session.aclose()


async def test_state_is_a_deep_copy(virtual_clock: VirtualClock) -> None:
    session = await started(codex)
    rec = Recorder(session)
    ctx = ctx_of(session, "codex")
    value: dict[str, Any] = {"files": ["a.py"], "meta": {"n": 1}}
    ctx.set_state(value)
    value["files"].append(object())  # would not even validate
    value["meta"]["n"] = 2
    assert ctx.state == {"files": ["a.py"], "meta": {"n": 1}}
    assert await state(session, "codex") == '{"files": ["a.py"], "meta": {"n": 1}}'
    (event,) = rec.of("background_state")
    assert event.state == {"files": ["a.py"], "meta": {"n": 1}}
    assert event.state is not value
    await session.aclose()


@pytest.mark.parametrize(
    "bad",
    [object(), {"k": object()}, [1, {2, 3}, {"x": lambda: 1}], {("a", "b"): 1}, float("nan"), b"x"],
)
async def test_invalid_state_is_rejected_and_changes_nothing(
    virtual_clock: VirtualClock, bad: Any
) -> None:
    session = await started(codex)
    rec = Recorder(session)
    ctx = ctx_of(session, "codex")
    ctx.set_state({"ok": [1, {"nested": True}]})
    with pytest.raises(ValueError, match=r"the state of background session 'codex'.*must be"):
        ctx.set_state(bad)
    assert ctx.state == {"ok": [1, {"nested": True}]}
    assert len(rec.of("background_state")) == 1
    await session.aclose()


async def test_set_state_emits_state_but_inserts_and_says_nothing(
    virtual_clock: VirtualClock,
) -> None:
    llm = ScriptedLLM()
    session = await started(codex, llm=llm)
    rec = Recorder(session)
    before = list(session.current_agent.chat_ctx.items)
    ctx = ctx_of(session, "codex")
    ctx.set_state({"step": 1})
    ctx.set_state({"step": 2})
    assert [(e.background_id, e.state) for e in rec.of("background_state")] == [
        ("codex", {"step": 1}),
        ("codex", {"step": 2}),
    ]
    assert await session.wait_for_idle(timeout=5)
    await asyncio.sleep(5)
    assert list(session.current_agent.chat_ctx.items) == before
    assert len(session.history) == 0
    assert llm.requests == []
    assert rec.of("background_message") == rec.of("background_reply") == []
    assert rec.of("conversation_item_added") == []
    await session.aclose()


# -- reserved names -------------------------------------------------------------------


@pytest.mark.parametrize("reserved", [my_send, my_state])
def test_a_session_tool_with_a_reserved_name_fails_at_construction(reserved: FunctionTool) -> None:
    with pytest.raises(ValueError) as err:
        Session(ScriptedLLM(), tools=[lookup, reserved], background=[codex])
    assert str(err.value) == (
        f"duplicate function name: {reserved.name} is reserved for background sessions"
    )


async def test_an_agent_tool_with_a_reserved_name_fails_before_the_agent_starts(
    virtual_clock: VirtualClock,
) -> None:
    entered: list[str] = []
    starts: list[str] = []

    @background("worker", description="x")
    async def worker(ctx: BackgroundContext) -> None:
        starts.append("started")
        await asyncio.Event().wait()

    class Clashing(Agent):
        def __init__(self) -> None:
            super().__init__("Clash.", tools=[my_state])

        async def on_enter(self) -> None:
            entered.append("entered")

    session: Session[Any] = Session(ScriptedLLM(), background=[worker])
    agent = Clashing()
    with pytest.raises(ValueError, match="backline_state is reserved for background sessions"):
        await session.start(agent)
    await asyncio.sleep(1)
    assert entered == [] and starts == []
    with pytest.raises(RuntimeError, match="not running in a session"):
        _ = agent.session
    with pytest.raises(RuntimeError, match="not started"):
        _ = session.current_agent
    await session.aclose()


async def test_the_generated_tool_object_itself_is_rejected_on_an_agent(
    virtual_clock: VirtualClock,
) -> None:
    session: Session[Any] = Session(ScriptedLLM(), background=[codex])
    generated = tool(session, "backline_send")
    with pytest.raises(ValueError, match="backline_send is reserved"):
        await session.start(Agent("Help.", tools=[generated]))
    await session.aclose()


async def test_a_handoff_to_an_agent_with_a_reserved_tool_fails_without_switching(
    virtual_clock: VirtualClock,
) -> None:
    entered: list[str] = []

    class Clashing(Agent):
        def __init__(self) -> None:
            super().__init__("Clash.", tools=[my_send])

        async def on_enter(self) -> None:
            entered.append("entered")

    class First(Agent):
        def __init__(self) -> None:
            super().__init__("First.")

        @function_tool
        async def transfer(self) -> Agent:
            """Transfer."""
            return Clashing()

    session: Session[Any] = Session(ScriptedLLM([tool_calls(("transfer", {}))]), background=[codex])
    rec = Recorder(session)
    first = First()
    await session.start(first)
    await session.run(user_input="transfer")
    assert await session.wait_for_idle(timeout=5)
    assert session.current_agent is first
    assert entered == []
    (error,) = rec.of("error")
    assert error.source == "handoff" and "backline_send is reserved" in str(error.error)
    assert rec.of("agent_handoff") == []
    await session.aclose()


async def test_update_tools_with_a_reserved_name_changes_nothing(
    virtual_clock: VirtualClock,
) -> None:
    session = await started(codex)
    agent = session.current_agent
    await agent.update_tools([lookup])
    ctx_before = list(agent.chat_ctx.items)
    history_before = list(session.history.items)
    for bad in ([lookup, my_send], [my_state], [tool(session, "backline_state")]):
        with pytest.raises(ValueError, match="is reserved for background sessions"):
            await agent.update_tools(bad)
        assert agent.tools == [lookup]
        assert list(agent.chat_ctx.items) == ctx_before
        assert list(session.history.items) == history_before
    await session.aclose()


async def test_agent_tools_may_not_shadow_session_tools(virtual_clock: VirtualClock) -> None:
    session: Session[Any] = Session(ScriptedLLM(), tools=[lookup], background=[codex])
    with pytest.raises(ValueError, match="same name as a session tool"):
        await session.start(Agent("Help.", tools=[lookup]))
    await session.aclose()


# -- tools at session level -----------------------------------------------------------


async def test_every_agent_sees_the_same_tool_objects_across_handoffs_and_restarts(
    virtual_clock: VirtualClock,
) -> None:
    llm = ScriptedLLM([tool_calls(("transfer", {})), "hello from second", "after restart"])
    session: Session[Any] = Session(llm, background=[codex])
    generated = [tool(session, "backline_send"), tool(session, "backline_state")]
    await session.start(First())
    await session.run(user_input="transfer")
    await session.run(user_input="hi")
    assert isinstance(session.current_agent, Second)
    await session.aclose()
    await session.start(First())
    await session.run(user_input="again")
    assert len(llm.requests) == 3
    for request in llm.requests:
        sent = {t.name: t for t in request.tools}
        assert sent["backline_send"] is generated[0]
        assert sent["backline_state"] is generated[1]
    assert [tool(session, "backline_send"), tool(session, "backline_state")] == generated
    await session.aclose()


async def test_the_state_tool_reads_the_fresh_runtime_after_a_restart(
    virtual_clock: VirtualClock,
) -> None:
    session = await started(codex)
    old = ctx_of(session, "codex")
    old.set_state("old work")
    await session.aclose()
    await session.start(Agent("Help."))
    new = ctx_of(session, "codex")
    assert new is not old and new.state is UNSET
    assert await state(session, "codex") == NO_STATE
    assert await send(session, "codex", "fresh") == "Message has been delivered."
    assert new.pending() == ["fresh"]
    assert old.pending() == []
    await session.aclose()


async def test_the_voice_agent_drives_both_tools(virtual_clock: VirtualClock) -> None:
    llm = ScriptedLLM(
        [
            tool_calls(
                ("backline_send", {"background_session_id": "codex", "content": "fix the bug"}),
                ("backline_state", {"background_session_id": "codex"}),
            ),
            text("Sent it."),
        ]
    )
    session = await started(codex, claude, llm=llm)
    ctx_of(session, "codex").set_state({"phase": "idle"})
    result = await session.run(user_input="ask codex to fix the bug")
    result.expect.next_event().is_function_call(name="backline_send")
    result.expect.next_event().is_function_call(name="backline_state")
    result.expect.next_event().is_function_call_output(output="Message has been delivered.")
    result.expect.next_event().is_function_call_output(output=json.dumps({"phase": "idle"}))
    result.expect.next_event().is_message(role="assistant", content="Sent it.")
    result.expect.no_more_events()
    assert ctx_of(session, "codex").pending() == ["fix the bug"]
    assert ctx_of(session, "claude").pending() == []
    await session.aclose()
