"""Payloads a session accepts: the value rule (scalar keys, where a value is wrong) and the
size bounds of ``Limits`` on tool outputs, background sends and state (issue 12 item 4,
issue 13 items 7 and 9)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from backline import (
    Agent,
    FunctionCallOutput,
    Limits,
    RunContext,
    Session,
    ToolError,
    background,
    function_tool,
)
from backline.io._view import preview_state
from backline.llm import json_snapshot, serialize_tool_output
from backline.testing import ScriptedLLM, VirtualClock, text, tool_calls
from tests.background_kit import ctx_of, forever
from tests.conftest import Recorder

pytestmark = pytest.mark.usefixtures("close_sessions")

codex = background("codex", description="Edits code.")(forever)

STATE_CALL = tool_calls(("backline_state", {"background_session_id": "codex"}))


async def started(llm: ScriptedLLM, agent: Agent | None = None, **kw: Any) -> Session[Any]:
    session: Session[Any] = Session(llm, background=[codex], **kw)
    await session.start(agent or Agent("Help."))
    return session


def outputs(llm: ScriptedLLM, request: int = 1) -> list[FunctionCallOutput]:
    items = llm.requests[request].chat_ctx.items
    return [it for it in items if isinstance(it, FunctionCallOutput)]


async def model_reads_state(value: Any, **kw: Any) -> FunctionCallOutput:
    """Report ``value`` as state; the model calls ``backline_state``: what it reads."""
    llm = ScriptedLLM([STATE_CALL, text("ok")])
    session = await started(llm, **kw)
    ctx_of(session, "codex").set_state(value)
    await session.run(user_input="status?")
    (output,) = outputs(llm)
    return output


async def model_reads_tool(value: Any, **kw: Any) -> FunctionCallOutput:
    """A tool returns ``value``; what the model reads."""

    @function_tool
    async def lookup() -> Any:
        """Look it up."""
        return value

    llm = ScriptedLLM([tool_calls(("lookup", {})), text("ok")])
    session = await started(llm, Agent("Help.", tools=[lookup]), **kw)
    await session.run(user_input="look it up")
    (output,) = outputs(llm)
    return output


# -- dict keys are scalars (issue 12 item 4) -----------------------------------------------


async def test_state_with_mixed_scalar_keys_reaches_the_model_as_json(
    virtual_clock: VirtualClock,
) -> None:
    output = await model_reads_state({1: "one", "phase": "x"})
    assert not output.is_error
    assert output.output == '{"1": "one", "phase": "x"}'


async def test_state_is_stored_as_its_json_form(virtual_clock: VirtualClock) -> None:
    session = await started(ScriptedLLM())
    rec = Recorder(session)
    ctx = ctx_of(session, "codex")
    ctx.set_state({2: ("a", {3, 1}), True: None, 1.5: "x"})
    assert ctx.state == {"2": ["a", [1, 3]], "true": None, "1.5": "x"}
    assert rec.of("background_state")[-1].state == ctx.state


async def test_a_tool_returning_mixed_scalar_keys_is_json(virtual_clock: VirtualClock) -> None:
    output = await model_reads_tool({404: "not found", "default": "ok"})
    assert not output.is_error
    assert output.output == '{"404": "not found", "default": "ok"}'


async def test_keys_with_the_same_json_text_are_refused_at_set_state(
    virtual_clock: VirtualClock,
) -> None:
    session = await started(ScriptedLLM())
    ctx = ctx_of(session, "codex")
    ctx.set_state({"phase": "x"})
    with pytest.raises(ValueError, match=r"""state\["a"\] has the keys 1 and '1'"""):
        ctx.set_state({"a": {1: "int", "1": "str"}})
    assert ctx.state == {"phase": "x"}


async def test_a_tool_returning_colliding_keys_is_an_error_result(
    virtual_clock: VirtualClock,
) -> None:
    output = await model_reads_tool({True: 1, "true": 2})
    assert output.is_error
    assert "the return value of tool 'lookup' has the keys True and 'true'" in output.output


# -- where a value is wrong (issue 13 item 9) ------------------------------------------------


def self_referencing() -> dict[str, Any]:
    value: dict[str, Any] = {"a": [1]}
    value["a"].append(value)
    return value


def nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (
            self_referencing(),
            r"""state\["a"\]\[1\] refers back to state, which contains it \(a self-reference\)""",
        ),
        (
            {"log": nested(200)},
            r"""state\["log"\]\[0\]\[0\]\[0\]...\[0\]\[0\] is nested more than 64 levels deep""",
        ),
        ({"when": [1, 2, 3, object()]}, r"""state\["when"\]\[3\] is an object"""),
        ({"tags": {1, float("inf")}}, r"""state\["tags"\]\[<a set item>\] is inf"""),
        ({"k": {(1, 2): 3}}, r"""state\["k"\] has a key that is a tuple"""),
    ],
)
async def test_a_bad_state_says_what_is_wrong_and_where(
    virtual_clock: VirtualClock, bad: Any, says: str
) -> None:
    session = await started(ScriptedLLM())
    ctx = ctx_of(session, "codex")
    with pytest.raises(ValueError, match=says) as info:
        ctx.set_state(bad)
    assert "got list" not in str(info.value)
    assert str(info.value).startswith("the state of background session 'codex'")


async def test_a_shared_but_acyclic_value_is_fine(virtual_clock: VirtualClock) -> None:
    shared = ["x"]
    output = await model_reads_state({"a": shared, "b": shared})
    assert output.output == '{"a": ["x"], "b": ["x"]}'


async def test_the_depth_bound_comes_from_the_session_limits(virtual_clock: VirtualClock) -> None:
    session = await started(ScriptedLLM(), limits=Limits(max_value_depth=3))
    ctx = ctx_of(session, "codex")
    ctx.set_state([[["three deep"]]])
    with pytest.raises(ValueError, match=r"state\[0\]\[0\]\[0\] is nested more than 3 levels"):
        ctx.set_state([[[["four deep"]]]])


async def test_a_tool_returning_a_self_reference_is_an_error_result(
    virtual_clock: VirtualClock,
) -> None:
    output = await model_reads_tool(self_referencing())
    assert output.is_error
    assert 'result["a"][1] refers back to result' in output.output


# -- tool outputs are capped (issue 13 item 7) -----------------------------------------------


async def test_a_huge_tool_result_is_cut_with_a_marker_and_logged(
    virtual_clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="backline"):
        output = await model_reads_tool("x" * 5_000_000)
    limit = Limits().max_tool_output_chars
    assert output.output.startswith("x" * limit)
    assert len(output.output) < limit + 200
    assert output.output.endswith(
        f"[... truncated: {5_000_000 - limit} of 5000000 characters cut (the return value of "
        f"tool 'lookup' is limited to {limit})]"
    )
    assert "Make tool 'lookup' return less" in caplog.text
    assert "Limits.max_tool_output_chars" in caplog.text


async def test_a_huge_structured_result_stays_valid_json(virtual_clock: VirtualClock) -> None:
    output = await model_reads_tool(
        {"rows": list(range(1_000_000))}, limits=Limits(max_tool_output_chars=1000)
    )
    assert not output.is_error
    data = json.loads(output.output)
    assert len(output.output) < 1200
    assert data["rows"][:3] == [0, 1, 2]
    assert data["rows"][-1].startswith("[... truncated: ")
    assert (
        "more items cut (the return value of tool 'lookup' is limited to 1000" in data["rows"][-1]
    )


async def test_updates_and_tool_errors_are_capped_too(virtual_clock: VirtualClock) -> None:
    @function_tool
    async def slow(ctx: RunContext) -> str:
        """A slow job."""
        await ctx.update("u" * 500)
        raise ToolError("e" * 500)

    llm = ScriptedLLM([tool_calls(("slow", {})), text("started"), text("failed")])
    session = await started(
        llm, Agent("Help.", tools=[slow]), limits=Limits(max_tool_output_chars=50)
    )
    await session.run(user_input="go")
    assert await session.wait_for_idle(timeout=10)
    texts = [o.output for o in outputs(llm, 1)] + [o.output for o in outputs(llm, 2)]
    assert any("u" * 50 + "\n[... truncated: 450 of 500" in t for t in texts)
    assert any(
        "e" * 50 + "\n[... truncated: 450 of 500 characters cut (the error of tool 'slow'" in t
        for t in texts
    )
    assert all("u" * 51 not in t and "e" * 51 not in t for t in texts)


# -- background sends and state are capped (issue 13 item 7) -------------------------------


async def test_a_huge_send_is_cut_everywhere_and_logged(
    virtual_clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    llm = ScriptedLLM([text("Noted.")])
    session = await started(llm, limits=Limits(max_send_chars=100))
    rec = Recorder(session)
    with caplog.at_level(logging.WARNING, logger="backline"):
        await ctx_of(session, "codex").send("m" * 1_000_000)
    assert await session.wait_for_idle(timeout=10)
    (event,) = rec.of("background_message")
    assert event.content == "m" * 100 + (
        "\n[... truncated: 999900 of 1000000 characters cut (a message of background "
        "session 'codex' is limited to 100)]"
    )
    sent = llm.requests[0].chat_ctx.items
    assert any(event.content in getattr(it, "content", "") for it in sent)
    assert all(len(getattr(it, "content", "")) < 1000 for it in session.history.items)
    assert "background session 'codex' sent a message longer than 100" in caplog.text


async def test_a_huge_state_is_stored_cut_and_logged_once(
    virtual_clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    llm = ScriptedLLM([STATE_CALL, text("ok")])
    session = await started(llm, limits=Limits(max_state_chars=2000))
    ctx = ctx_of(session, "codex")
    with caplog.at_level(logging.WARNING, logger="backline"):
        ctx.set_state({"status": "indexing", "files": [f"f{i}.py" for i in range(1_000_000)]})
        ctx.set_state({"status": "indexing", "files": [f"g{i}.py" for i in range(1_000_000)]})
    assert caplog.text.count("reported a state larger than 2000 characters") == 1
    state = ctx.state
    assert state["status"] == "indexing"
    assert state["files"][:2] == ["g0.py", "g1.py"]
    assert state["files"][-1].startswith("[... truncated: ")
    assert "more items cut (the state of background session 'codex'" in state["files"][-1]
    await session.run(user_input="status?")
    (output,) = outputs(llm)
    assert json.loads(output.output) == state
    assert len(output.output) < 2300


def test_the_page_preview_is_bounded_and_cheap_to_make() -> None:
    state = json_snapshot({"status": "ok", "log": ["line"] * 10_000}).value
    preview = preview_state(state, max_chars=300)
    assert preview["status"] == "ok"
    assert len(json.dumps(preview)) < 500
    assert preview["log"][-1].startswith("[... truncated: ")
    small = {"status": "ok", "files": ["a.py"]}
    assert preview_state(small) == small


def test_limits_are_positive_and_a_session_takes_only_limits() -> None:
    with pytest.raises(ValueError, match=r"Limits\.max_send_chars must be a positive number"):
        Limits(max_send_chars=0)
    with pytest.raises(TypeError, match=r"limits must be a backline\.Limits"):
        Session(ScriptedLLM(), limits={"max_send_chars": 10})  # type: ignore[arg-type]
    assert Session(ScriptedLLM()).limits == Limits()


def test_an_integer_too_large_for_json_is_refused_not_failed_later() -> None:
    assert serialize_tool_output([10**4000]) == "[" + "1" + "0" * 4000 + "]"
    with pytest.raises(ValueError, match=r'value\["a"\]\[0\] is an integer too large for JSON'):
        serialize_tool_output({"a": [10**5000]})
