"""The hot-path shortcuts (see docs/performance.md) change nothing observable.

Each shortcut is checked against the general path it skips: the direct argument
check against jsonschema, the one-pass fill of an empty context against inserting
item by item; and the turn loop leaves no reference cycles behind. No timing is
asserted here: figures live in ``bench/``.
"""

from __future__ import annotations

import bisect
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from backline import Agent, ChatContext, ChatMessage, Session, TextOutput, function_tool
from backline.llm.tools import ToolArgumentsError, _fast_checker
from backline.testing import ScriptedLLM, text, tool_calls
from backline.voice.agent import INSTRUCTIONS_ID
from tests.conftest import cyclic_garbage

# -- the direct argument check never accepts what jsonschema rejects ------------------

SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "object",
        "properties": {
            "s": {"type": "string", "description": "a string"},
            "i": {"type": "integer", "default": 3},
            "n": {"type": "number"},
            "b": {"type": "boolean"},
            "z": {"type": "null"},
            "a": {},
        },
        "required": ["s"],
        "additionalProperties": False,
    },
    {"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s", "t"]},
    {"type": "object", "properties": {"i": {"type": "integer"}}, "additionalProperties": True},
    {"type": "object", "properties": {}, "required": [], "additionalProperties": False},
]

values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=2), inner),
    max_leaves=4,
)
payloads = st.dictionaries(st.sampled_from(["s", "i", "n", "b", "z", "a", "t", "q"]), values)


@given(schema=st.sampled_from(SCHEMAS), data=payloads)
def test_the_direct_check_only_accepts_what_jsonschema_accepts(
    schema: dict[str, Any], data: dict[str, Any]
) -> None:
    check = _fast_checker(schema)
    assert check is not None
    if check(data):
        assert Draft202012Validator(schema).is_valid(data)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "array"}}},
        {"type": "object", "properties": {"a": {"type": ["string", "null"]}}},
        {"type": "object", "properties": {"a": {"enum": [1, 2]}}},
        {"type": "object", "properties": {"a": {"type": "string", "minLength": 2}}},
        {"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}]}}},
        {"type": "object", "additionalProperties": {"type": "string"}},
        {"type": "object", "properties": {}, "$defs": {}},
        {"type": "array"},
        {"properties": {}},
    ],
)
def test_anything_beyond_flat_scalars_is_left_to_jsonschema(schema: dict[str, Any]) -> None:
    assert _fast_checker(schema) is None


async def test_tool_argument_errors_are_still_jsonschemas() -> None:
    @function_tool
    async def lookup(key: str, count: int = 1) -> str:
        """Look up."""
        return key * count

    assert await lookup.invoke('{"key": "a", "count": 2}') == "aa"
    # 2.0 is an integer for jsonschema: the direct check declines, jsonschema accepts.
    assert lookup.parse_arguments({"key": "a", "count": 2.0}) == {"key": "a", "count": 2.0}
    with pytest.raises(ToolArgumentsError, match="count: True is not of type 'integer'"):
        await lookup.invoke('{"key": "a", "count": true}')
    with pytest.raises(ToolArgumentsError, match="'key' is a required property"):
        await lookup.invoke("{}")
    with pytest.raises(ToolArgumentsError, match="Additional properties are not allowed"):
        await lookup.invoke('{"key": "a", "extra": 1}')


# -- filling an empty context in one pass is inserting one by one ---------------------


def _insert_one_by_one(items: list[ChatMessage]) -> tuple[list[ChatMessage], list[ChatMessage]]:
    """The general path: (the context's items, the items added in the order taken)."""
    out: list[ChatMessage] = []
    added: list[ChatMessage] = []
    seen: set[str] = set()
    for it in items:
        if it.id in seen:
            continue
        seen.add(it.id)
        added.append(it)
        if not out or out[-1].created_at <= it.created_at:
            out.append(it)
        else:
            at = bisect.bisect_right(out, it.created_at, key=lambda m: m.created_at)
            out.insert(at, it)
    return out, added


@given(
    spec=st.lists(
        st.tuples(st.integers(0, 6), st.sampled_from([0.0, 1.0, 1.0, 2.0, -1.0, float("nan")])),
        max_size=12,
    ),
    presorted=st.booleans(),
)
def test_filling_an_empty_context_matches_inserting_one_by_one(
    spec: list[tuple[int, float]], presorted: bool
) -> None:
    items = [ChatMessage(role="user", content=str(n), id=f"i{n}", created_at=t) for n, t in spec]
    if presorted:
        items.sort(key=lambda m: m.created_at if m.created_at == m.created_at else 0.0)
    ctx = ChatContext()
    added = ctx.insert(iter(items))
    expected, expected_added = _insert_one_by_one(items)
    assert list(ctx.items) == expected
    assert added == expected_added
    assert all(ctx.get(it.id) is it for it in expected)
    assert len(ctx) == len({it.id for it in items})


def test_a_copy_is_independent_of_its_source() -> None:
    ctx = ChatContext([ChatMessage(role="user", content="a", created_at=1.0)])
    copy = ctx.copy()
    copy.insert(ChatMessage(role="user", content="b", created_at=2.0))
    ctx.remove([ctx.items[0].id])
    assert len(ctx) == 0
    assert [m.content for m in copy.items] == ["a", "b"]  # type: ignore[union-attr]
    assert all(m.id in copy for m in copy.items)


async def test_update_chat_ctx_keeps_its_instructions_and_the_order() -> None:
    agent = Agent("Be brief.")
    given_ctx = ChatContext(
        [
            ChatMessage(role="system", content="stale", id=INSTRUCTIONS_ID, created_at=0.0),
            ChatMessage(role="user", content="b", created_at=2.0),
            ChatMessage(role="user", content="a", created_at=1.0),
        ]
    )
    await agent.update_chat_ctx(given_ctx)
    contents = [m.content for m in agent.chat_ctx.items]  # type: ignore[union-attr]
    assert contents == ["Be brief.", "a", "b"]
    assert agent.chat_ctx is not given_ctx


# -- a turn leaves nothing for the garbage collector ----------------------------------


class _Tools(Agent):
    def __init__(self) -> None:
        super().__init__("Be brief.")

    @function_tool
    async def lookup(self, key: str) -> str:
        """Look a key up."""
        return f"value of {key}"


async def test_turns_leave_no_reference_cycles() -> None:
    def respond(request: Any) -> Any:
        last = request.chat_ctx.items[-1]
        if isinstance(last, ChatMessage) and last.role == "user" and last.content == "tool":
            return tool_calls(("lookup", {"key": "a"}))
        return text("Done.")

    async with Session(ScriptedLLM(respond, record=False), output=TextOutput()) as session:
        await session.start(_Tools())
        for kind in ("text", "tool"):  # warm up: first-use imports and caches
            await session.run(user_input=kind)
        with cyclic_garbage() as leaked:
            for _ in range(5):
                for kind in ("text", "tool"):
                    session.push_user_turn(kind)
                    await session.wait_for_idle()
                    await session.run(user_input=kind)
    assert leaked == []


# -- an output's text hook is skipped only where it is the default's no-op -------------


async def test_an_output_that_overrides_on_text_gets_every_delta() -> None:
    class Seen(TextOutput):
        def __init__(self) -> None:
            super().__init__()
            self.deltas: list[str] = []

        def on_text(self, text: str) -> None:
            self.deltas.append(text)

    class Deeper(Seen):  # inherits the override
        pass

    for cls in (Seen, Deeper):
        out = cls()
        async with Session(ScriptedLLM([text("one two three")]), output=out) as session:
            await session.start(Agent("Hi."))
            await session.run(user_input="go")
        assert out.deltas == ["one ", "two ", "three"]
    assert not TextOutput._text_hook and Seen._text_hook and Deeper._text_hook
    assert not Seen._segment_hook and not Seen._playout_hook


async def test_an_output_that_overrides_segment_and_playout_hooks_gets_them() -> None:
    class Hooked(TextOutput):
        def __init__(self) -> None:
            super().__init__()
            self.calls: list[str] = []

        def on_segment_start(self, speech_id: str) -> None:
            self.calls.append("start")

        def on_playout(self, result: Any) -> None:
            self.calls.append(f"played {result.text!r}")

    out = Hooked()
    async with Session(ScriptedLLM([text("one two")]), output=out) as session:
        await session.start(Agent("Hi."))
        await session.run(user_input="go")
    assert out.calls == ["start", "played 'one two'"]


def test_the_fast_playout_result_is_the_dataclass_it_stands_for() -> None:
    from dataclasses import FrozenInstanceError, fields

    from backline.speech.output import PlayoutResult, _playout_result

    fast = _playout_result("s1", "hello", True, 2.5)
    slow = PlayoutResult(speech_id="s1", text="hello", interrupted=True, finished_at=2.5)
    assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
    assert [f.name for f in fields(PlayoutResult)] == list(vars(fast))  # every field set
    with pytest.raises(FrozenInstanceError):
        fast.text = "changed"  # type: ignore[misc]


async def test_the_playout_wait_is_made_only_when_someone_waits_first() -> None:
    import asyncio

    out = TextOutput()
    with pytest.raises(RuntimeError, match="no output segment"):
        await out.wait_for_playout()
    out.begin_segment("s1")
    out.write("one ")
    out.flush()  # instant: reported at once, no future made
    assert out._playout is None
    first = await out.wait_for_playout()
    assert (first.speech_id, first.text, first.interrupted) == ("s1", "one ", False)
    out.clear()  # reported already: nothing to clear
    out.report_playout("again", interrupted=True)  # a second report is ignored
    assert await out.wait_for_playout() is first

    class Slow(TextOutput):
        def on_flush(self) -> None:
            pass  # reports later

    slow = Slow()
    slow.begin_segment("s2")
    slow.write("two")
    waiting = asyncio.ensure_future(slow.wait_for_playout())
    await asyncio.sleep(0)
    slow.flush()
    slow.report_playout("tw", interrupted=True)
    result = await waiting
    assert (result.speech_id, result.text, result.interrupted) == ("s2", "tw", True)
    slow.begin_segment("s3")  # a wait on a segment that a new one replaces is cancelled
    stale = asyncio.ensure_future(slow.wait_for_playout())
    await asyncio.sleep(0)
    slow.begin_segment("s4")
    with pytest.raises(asyncio.CancelledError):
        await stale


@given(
    st.one_of(
        st.dictionaries(
            st.text(max_size=5), st.one_of(st.integers(), st.text(max_size=5), st.none())
        ).map(lambda d: __import__("json").dumps(d)),
        st.text(max_size=12),
        st.sampled_from(['{"a":1}}', '{"a":1} ', ' {"a":1}', "{}", "{", "}", '{"a":NaN}', "[]"]),
    )
)
def test_argument_parsing_matches_json_loads(arguments: str) -> None:
    """The bare-object shortcut parses what json.loads parses, and fails where it fails."""
    import json

    from backline.llm.tools import FunctionTool

    async def anything(**kwargs: Any) -> None:
        """Takes anything."""

    tool = FunctionTool(anything, name="anything", description="", parameters={"type": "object"})
    try:
        expected: Any = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        with pytest.raises(ToolArgumentsError, match="not valid JSON"):
            tool.parse_arguments(arguments)
        return
    if not isinstance(expected, dict):
        with pytest.raises(ToolArgumentsError, match="expected a JSON object"):
            tool.parse_arguments(arguments)
        return
    got = tool.parse_arguments(arguments)
    assert json.dumps(got, sort_keys=True) == json.dumps(expected, sort_keys=True)
