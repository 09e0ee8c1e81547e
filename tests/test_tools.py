from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Literal, Optional, TypedDict

import pytest

from backline.llm import (
    FunctionTool,
    ToolArgumentsError,
    find_function_tools,
    function_tool,
    serialize_tool_output,
    snapshot_tool_output,
    validate_tool_output,
)
from backline.voice import RunContext


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Address(TypedDict):
    street: str
    city: str


@dataclass
class Point:
    x: int
    y: int = 0


def test_scalar_types_and_docstring_descriptions() -> None:
    @function_tool
    def weather(city: str, days: int, celsius: bool = True, ratio: float = 0.5) -> str:
        """Get the weather.

        Looks it up somewhere.

        Args:
            city: The city name.
            days: How many days ahead.
        """
        return city

    assert weather.name == "weather"
    assert weather.description == "Get the weather.\n\nLooks it up somewhere."
    p = weather.parameters
    assert p["required"] == ["city", "days"]
    assert p["additionalProperties"] is False
    assert p["properties"]["city"] == {"type": "string", "description": "The city name."}
    assert p["properties"]["days"] == {"type": "integer", "description": "How many days ahead."}
    assert p["properties"]["celsius"] == {"type": "boolean", "default": True}
    assert p["properties"]["ratio"] == {"type": "number", "default": 0.5}


def test_literal_enum_list_dict_optional() -> None:
    @function_tool(name="paint", description="Paint things.")
    def paint(
        mode: Literal["fast", "slow"],
        color: Color,
        tags: list[str],
        weights: dict[str, float],
        note: Optional[str] = None,  # noqa: UP045 - Optional is one of the families we support
        size: int | None = None,
    ) -> None:
        pass

    props = paint.parameters["properties"]
    assert paint.name == "paint" and paint.description == "Paint things."
    assert props["mode"] == {"type": "string", "enum": ["fast", "slow"]}
    assert props["color"] == {"type": "string", "enum": ["red", "blue"]}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert props["weights"] == {"type": "object", "additionalProperties": {"type": "number"}}
    assert props["note"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    assert props["size"]["anyOf"] == [{"type": "integer"}, {"type": "null"}]
    assert paint.parameters["required"] == ["mode", "color", "tags", "weights"]


def test_typeddict_and_dataclass_are_objects() -> None:
    @function_tool
    def ship(to: Address, at: Point) -> None:
        pass

    props = ship.parameters["properties"]
    assert props["to"]["type"] == "object"
    assert props["to"]["required"] == ["street", "city"]
    assert props["to"]["properties"]["city"] == {"type": "string"}
    assert props["at"]["required"] == ["x"]
    assert props["at"]["properties"]["y"] == {"type": "integer"}


async def test_arguments_are_converted_to_python_types() -> None:
    seen: dict[str, Any] = {}

    @function_tool
    async def ship(to: Address, at: Point, color: Color, ids: set[int]) -> str:
        seen.update(to=to, at=at, color=color, ids=ids)
        return "ok"

    out = await ship.invoke(
        '{"to": {"street": "Main", "city": "Oslo"}, "at": {"x": 1}, "color": "blue", "ids": [1, 2]}'
    )
    assert out == "ok"
    assert seen["at"] == Point(x=1, y=0)
    assert seen["color"] is Color.BLUE
    assert seen["ids"] == {1, 2}
    assert seen["to"] == {"street": "Main", "city": "Oslo"}


async def test_run_context_is_injected_and_not_in_schema() -> None:
    @function_tool
    async def who(ctx: RunContext, name: str) -> str:
        return f"{ctx}:{name}"

    assert list(who.parameters["properties"]) == ["name"]
    assert await who.invoke({"name": "x"}, "CTX") == "CTX:x"


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ("{}", "'city' is a required property"),
        ('{"city": 3}', "3 is not of type 'string'"),
        ('{"city": "x", "extra": 1}', "Additional properties are not allowed"),
        ("not json", "not valid JSON"),
        ("[1]", "expected a JSON object"),
    ],
)
async def test_validation_errors_are_tool_errors_with_clear_text(
    arguments: str, fragment: str
) -> None:
    called = False

    @function_tool
    async def weather(city: str) -> str:
        nonlocal called
        called = True
        return city

    with pytest.raises(ToolArgumentsError) as info:
        await weather.invoke(arguments)
    assert fragment in info.value.message
    assert "weather" in info.value.message
    assert called is False


def test_methods_are_bound_and_collected() -> None:
    class Thing:
        def __init__(self) -> None:
            self.n = 41

        @function_tool
        async def bump(self, by: int) -> int:
            """Bump it."""
            return self.n + by

    t = Thing()
    tools = find_function_tools(t)
    assert [x.name for x in tools] == ["bump"]
    assert list(tools[0].parameters["properties"]) == ["by"]


async def test_bound_method_invocation() -> None:
    class Thing:
        n = 41

        @function_tool
        async def bump(self, by: int) -> int:
            return self.n + by

    (tool,) = find_function_tools(Thing())
    assert await tool.invoke('{"by": 1}') == 42


async def test_raw_schema_tool() -> None:
    async def handler(args: dict[str, Any], ctx: Any) -> str:
        return args["q"]

    tool = FunctionTool.from_schema(
        handler,
        name="search",
        description="Search.",
        parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    )
    assert await tool.invoke('{"q": "x"}') == "x"
    with pytest.raises(ToolArgumentsError):
        await tool.invoke("{}")


def test_unsupported_annotation_is_a_clear_type_error() -> None:
    with pytest.raises(TypeError, match="parameter 'x'"):

        @function_tool
        def bad(x: complex) -> None:
            pass


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0"),
        (0.0, "0.0"),
        (False, "false"),
        ([], "[]"),
        ({}, "{}"),
        ((), "[]"),
        (set(), "[]"),
        (None, "null"),
        ("", ""),
        ("plain", "plain"),
        ({"b": 1, "a": [True, None]}, '{"a": [true, null], "b": 1}'),
        ({3, 1, 2}, "[1, 2, 3]"),
    ],
)
def test_outputs_keep_falsy_values(value: Any, text: str) -> None:
    validate_tool_output(value)
    assert serialize_tool_output(value) == text


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (object(), "tool output is an object .*must be a string"),
        ([object()], r"value\[0\] is an object .*must be a string"),
        ({"k": object()}, r'value\["k"\] is an object'),
        (float("nan"), "tool output is nan; numbers must be finite"),
        ({(1,): 2}, r"tool output has a key that is a tuple \(\(1,\)\); dict keys must be"),
    ],
)
def test_invalid_outputs_are_rejected(value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        validate_tool_output(value)


def test_snapshot_is_a_deep_copy() -> None:
    state: dict[str, Any] = {"files": ["a"]}
    snap = snapshot_tool_output(state)
    state["files"].append("b")
    assert snap == {"files": ["a"]}
