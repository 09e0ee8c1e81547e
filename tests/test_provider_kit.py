"""The provider kit on its own (``backline.llm.provider``, ``backline.llm.pairing``): backoff
and ``Retry-After``, the deadlines on a virtual clock, retries only before output, the
messages, and the pairing of tool calls with their outputs. No network: the vendor is a
scripted async generator. The adapters built on the kit are tested against their fake
servers (tests/test_anthropic_llm.py, tests/plugins/openai/)."""

from __future__ import annotations

import ast
import asyncio
import logging
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from backline.llm import (
    AgentHandoff,
    BrokenStream,
    ChatChunk,
    ChatContext,
    ChatMessage,
    FunctionCall,
    FunctionCallOutput,
    LLMError,
    LLMTimeoutError,
    ProviderFailure,
    ProviderStreams,
    RequestPolicy,
    StreamDecoder,
    TextDelta,
    ToolCallChunk,
    ToolResult,
    Usage,
    arguments_object,
    check_tool_choice,
    failed_stream,
    function_tool,
    named_tool,
    pair_tool_calls,
    retry_after_seconds,
    retryable_status,
)
from backline.llm.pairing import CONTINUE_PLACEHOLDER, MISSING_RESULT, START_PLACEHOLDER
from backline.testing import VirtualClock

LABEL = "Vendor API at http://vendor.test"
HINT = " (the vendor may be busy)"

Event = dict[str, Any]


# -- a scripted vendor -----------------------------------------------------------------------


class VendorError(Exception):
    def __init__(self, status: int, retry_after: float | None = None) -> None:
        super().__init__(f"status {status}")
        self.status = status
        self.retry_after = retry_after


class Vendor:
    """Each attempt plays one script: events (dicts), waits (numbers, virtual seconds)
    and exceptions (raised there); an exception instead of a script fails the open."""

    def __init__(self, *attempts: list[Any] | BaseException) -> None:
        self.attempts = list(attempts)
        self.opened = 0
        self.closed = 0

    async def open(self, request: str) -> AsyncIterator[Event]:
        assert request == "request"
        self.opened += 1
        script = self.attempts.pop(0)
        if isinstance(script, BaseException):
            raise script
        return self._play(script)

    async def _play(self, script: list[Any]) -> AsyncIterator[Event]:
        try:
            for step in script:
                if isinstance(step, int | float):
                    await asyncio.sleep(step)
                elif isinstance(step, BaseException):
                    raise step
                else:
                    yield step
        finally:
            self.closed += 1


class Decoder(StreamDecoder[Event]):
    def __init__(self) -> None:
        self.done = False
        self.calls: list[ToolCallChunk] = []

    def feed(self, event: Event) -> Sequence[ChatChunk]:
        kind = event["type"]  # an event without one cannot be read
        if kind == "text":
            return (TextDelta(event["text"]),)
        if kind == "call":  # held back until the end, like a streaming tool call
            self.output_started = True
            self.calls.append(ToolCallChunk(event["id"], event["name"], "{}"))
        elif kind == "done":
            self.done = True
            self.output_tokens = event.get("tokens", 0)
            self.stop_reason = "end"
        return ()

    def end(self) -> Sequence[ChatChunk]:
        if not self.done:
            raise BrokenStream("the response stream ended before done")
        return self.calls


def classify(error: BaseException) -> ProviderFailure | None:
    if isinstance(error, VendorError):
        return ProviderFailure(
            f"Vendor error {error.status}",
            retryable=retryable_status(error.status),
            status=error.status,
            retry_after=error.retry_after,
        )
    return None


def streams(vendor: Vendor, **policy: Any) -> ProviderStreams[str, Event]:
    return ProviderStreams(
        vendor.open,
        Decoder,
        classify,
        label=LABEL,
        adapter="VendorLLM",
        policy=RequestPolicy(**policy),
        stall_hint=HINT,
        log=logging.getLogger("tests.vendor"),
    )


def text(value: str) -> Event:
    return {"type": "text", "text": value}


DONE: Event = {"type": "done", "tokens": 3}


async def collect(kit: ProviderStreams[str, Event], got: list[ChatChunk] | None = None) -> Any:
    got = [] if got is None else got
    async with kit.stream("request") as stream:
        async for chunk in stream:
            got.append(chunk)
    return got


# -- backoff and Retry-After -----------------------------------------------------------------


def test_backoff_doubles_from_the_base_up_to_the_cap() -> None:
    policy = RequestPolicy(retry_base_delay=0.5, retry_max_delay=3.0)
    assert [policy.backoff(n) for n in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_a_longer_retry_after_is_honoured_up_to_the_cap() -> None:
    policy = RequestPolicy(retry_base_delay=0.5, retry_max_delay=8.0)
    assert policy.backoff(1, retry_after=2.5) == 2.5
    assert policy.backoff(3, retry_after=0.1) == 2.0  # the backoff is longer
    assert policy.backoff(1, retry_after=600) == 8.0  # never past the cap


def test_retry_after_headers() -> None:
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    assert retry_after_seconds({"retry-after-ms": "250"}) == 0.25
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_seconds({"retry-after": "-5"}) == 0.0
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) is None
    assert retry_after_seconds({"retry-after-ms": "soon", "retry-after": "2"}) == 2.0
    assert retry_after_seconds({}) is None


def test_which_statuses_are_retried() -> None:
    assert [s for s in (400, 401, 404, 408, 409, 429, 500, 503, 529) if retryable_status(s)] == [
        408,
        409,
        429,
        500,
        503,
        529,
    ]
    assert not retryable_status(503, {"x-should-retry": "false"})
    assert retryable_status(400, {"x-should-retry": "true"})
    assert retryable_status(503, {"x-should-retry": "maybe"})


def test_a_policy_says_what_is_wrong_with_it() -> None:
    with pytest.raises(ValueError, match="max_retries must be >= 0, got -1"):
        RequestPolicy(max_retries=-1)
    with pytest.raises(ValueError, match="retry_max_delay must be >= 0 seconds"):
        RequestPolicy(retry_max_delay=-1.0)
    with pytest.raises(ValueError, match="first_token_timeout must be a positive number"):
        RequestPolicy(first_token_timeout=0)
    with pytest.raises(ValueError, match="response_timeout must be a positive number"):
        RequestPolicy(response_timeout=-1)
    RequestPolicy(first_token_timeout=None, response_timeout=None, retry_base_delay=0)


# -- the attempt loop ------------------------------------------------------------------------


async def test_chunks_then_usage_with_the_time_to_first_token(
    virtual_clock: VirtualClock,
) -> None:
    vendor = Vendor([1.5, text("Hello "), 0.5, text("there."), DONE])
    got = await collect(streams(vendor))
    assert got[:2] == [TextDelta("Hello "), TextDelta("there.")]
    assert got[2] == Usage(output_tokens=3, ttft=got[2].ttft, stop_reason="end")
    assert got[2].ttft == pytest.approx(1.5)  # on the loop's clock
    assert (vendor.opened, vendor.closed) == (1, 1)


async def test_retries_wait_the_backoff_and_count_in_the_time_to_first_token(
    virtual_clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    vendor = Vendor(VendorError(529), [VendorError(503)], [text("ok"), DONE])
    with caplog.at_level(logging.WARNING, logger="tests.vendor"):
        got = await collect(streams(vendor, retry_base_delay=1.0))
    assert got[0] == TextDelta("ok")
    assert got[-1].ttft == pytest.approx(3.0)  # 1 s, then 2 s of backoff
    assert virtual_clock.elapsed == pytest.approx(3.0)
    assert [r.getMessage() for r in caplog.records] == [
        "Vendor error 529; retrying in 1.00s (attempt 2 of 4)",
        "Vendor error 503; retrying in 2.00s (attempt 3 of 4)",
    ]
    assert (vendor.opened, vendor.closed) == (3, 2)  # the first open failed: nothing to close


async def test_a_retry_after_longer_than_the_cap_waits_the_cap(
    virtual_clock: VirtualClock,
) -> None:
    vendor = Vendor(VendorError(429, retry_after=120.0), [text("ok"), DONE])
    await collect(streams(vendor, retry_max_delay=4.0))
    assert virtual_clock.elapsed == pytest.approx(4.0)


async def test_retries_give_up_after_max_retries(virtual_clock: VirtualClock) -> None:
    vendor = Vendor(*[VendorError(503)] * 3)
    with pytest.raises(LLMError) as info:
        await collect(streams(vendor, max_retries=2))
    assert str(info.value) == "Vendor error 503 (gave up after 3 attempts)"
    assert (info.value.retryable, info.value.status) == (True, 503)
    vendor = Vendor(VendorError(503))
    with pytest.raises(LLMError, match=r"\(gave up after 1 attempt\)$"):
        await collect(streams(vendor, max_retries=0))


async def test_a_failure_that_is_not_retryable_is_not_retried() -> None:
    vendor = Vendor(VendorError(401), [DONE])
    with pytest.raises(LLMError) as info:
        await collect(streams(vendor))
    assert str(info.value) == "Vendor error 401"
    assert (info.value.retryable, info.value.status, vendor.opened) == (False, 401, 1)


async def test_no_retry_once_output_started() -> None:
    vendor = Vendor([text("partial "), VendorError(503)], [text("never"), DONE])
    got: list[ChatChunk] = []
    with pytest.raises(LLMError) as info:
        await collect(streams(vendor), got)
    assert got == [TextDelta("partial ")]
    assert str(info.value) == ("Vendor error 503 (the reply was cut off after output had started)")
    assert (info.value.retryable, info.value.status) == (True, 503)
    assert (vendor.opened, vendor.closed) == (1, 1)


async def test_a_broken_stream_is_retried_and_named_by_the_label() -> None:
    vendor = Vendor([], [text("ok"), DONE])  # the first ends before "done"
    got = await collect(streams(vendor, retry_base_delay=0))
    assert got[0] == TextDelta("ok")
    vendor = Vendor([{"no": "type"}])
    with pytest.raises(LLMError) as info:
        await collect(streams(vendor, max_retries=0))
    assert str(info.value) == (
        f"{LABEL}: the response stream had an event that could not be read "
        "(KeyError: 'type') (gave up after 1 attempt)"
    )
    assert info.value.retryable


async def test_an_llm_error_or_an_unknown_exception_ends_the_request_as_it_is() -> None:
    vendor = Vendor(LLMError("no key: set VENDOR_API_KEY", status=401), [DONE])
    with pytest.raises(LLMError, match=r"^no key: set VENDOR_API_KEY$"):
        await collect(streams(vendor))
    assert vendor.opened == 1
    vendor = Vendor([RuntimeError("a bug")], [DONE])
    with pytest.raises(RuntimeError, match="a bug"):
        await collect(streams(vendor))
    assert (vendor.opened, vendor.closed) == (1, 1)


async def test_held_back_chunks_come_at_the_end_before_the_usage() -> None:
    vendor = Vendor([text("Checking."), {"type": "call", "id": "c1", "name": "get_time"}, DONE])
    got = await collect(streams(vendor))
    assert got[:2] == [TextDelta("Checking."), ToolCallChunk("c1", "get_time", "{}")]
    assert isinstance(got[2], Usage)


async def test_closing_the_stream_closes_the_vendor_stream() -> None:
    vendor = Vendor([text("one "), text("two"), DONE])
    stream = streams(vendor).stream("request")
    assert await anext(stream) == TextDelta("one ")
    await stream.aclose()
    assert vendor.closed == 1
    assert [c async for c in stream] == []


async def test_a_failed_stream_raises_when_iterated() -> None:
    stream = failed_stream(LLMError("bad tool_choice"))
    with pytest.raises(LLMError, match="bad tool_choice"):
        await anext(stream)


# -- deadlines, on the virtual clock ---------------------------------------------------------


async def test_no_output_in_time_fails_at_the_first_token_deadline(
    virtual_clock: VirtualClock,
) -> None:
    vendor = Vendor([60.0, text("late"), DONE])
    with pytest.raises(LLMTimeoutError) as info:
        await collect(streams(vendor, first_token_timeout=5.0))
    assert str(info.value) == (
        f"{LABEL}: no output within 5s of the request (first_token_timeout of VendorLLM){HINT}"
    )
    assert info.value.retryable
    assert virtual_clock.elapsed == pytest.approx(5.0)
    assert (vendor.opened, vendor.closed) == (1, 1)  # closed, and not retried


async def test_a_reply_that_stalls_after_output_fails_at_the_response_deadline(
    virtual_clock: VirtualClock,
) -> None:
    vendor = Vendor([text("Partial "), 600.0, DONE])
    got: list[ChatChunk] = []
    with pytest.raises(LLMTimeoutError) as info:
        await collect(streams(vendor, first_token_timeout=5.0, response_timeout=30.0), got)
    assert got == [TextDelta("Partial ")]
    assert str(info.value) == (
        f"{LABEL}: the response did not finish within 30s (response_timeout of VendorLLM) "
        "(the reply was cut off after output had started)"
    )
    assert virtual_clock.elapsed == pytest.approx(30.0)


async def test_retries_and_their_backoff_count_against_the_first_token_deadline(
    virtual_clock: VirtualClock,
) -> None:
    vendor = Vendor(VendorError(529), [text("too late"), DONE])
    with pytest.raises(LLMTimeoutError) as info:
        await collect(streams(vendor, first_token_timeout=3.0, retry_base_delay=10.0))
    assert str(info.value).endswith(
        "no output within 3s of the request (first_token_timeout of VendorLLM); "
        "the last attempt failed: Vendor error 529"
    )
    assert virtual_clock.elapsed == pytest.approx(3.0)
    assert vendor.opened == 1


async def test_output_held_back_by_the_decoder_stops_the_first_token_deadline(
    virtual_clock: VirtualClock,
) -> None:
    call = {"type": "call", "id": "c1", "name": "get_time"}
    vendor = Vendor([1.0, call, 10.0, DONE])
    got = await collect(streams(vendor, first_token_timeout=3.0, response_timeout=30.0))
    assert got[0] == ToolCallChunk("c1", "get_time", "{}")
    assert got[1].ttft == pytest.approx(11.0)  # the chunk came at the end


async def test_a_response_deadline_shorter_than_the_first_token_one_wins(
    virtual_clock: VirtualClock,
) -> None:
    vendor = Vendor([60.0, DONE])
    with pytest.raises(LLMTimeoutError, match=r"within 2s \(response_timeout of VendorLLM\)"):
        await collect(streams(vendor, first_token_timeout=5.0, response_timeout=2.0))
    assert virtual_clock.elapsed == pytest.approx(2.0)


async def test_no_deadlines_when_both_are_off(virtual_clock: VirtualClock) -> None:
    vendor = Vendor([3600.0, text("eventually"), DONE])
    got = await collect(streams(vendor, first_token_timeout=None, response_timeout=None))
    assert got[0] == TextDelta("eventually")


# -- tool choice -----------------------------------------------------------------------------


@function_tool
def get_time(zone: str) -> str:
    """Get the time in a zone."""
    return "noon"


def test_tool_choice_is_checked_against_the_tools() -> None:
    assert check_tool_choice(None, [get_time]) is None
    assert check_tool_choice("auto", []) is None  # no tools: nothing to choose
    for choice in ("auto", "none", "required", named_tool("get_time")):
        assert check_tool_choice(choice, [get_time]) == choice
    with pytest.raises(LLMError, match="needs tools, but none were given"):
        check_tool_choice("required", [])
    with pytest.raises(LLMError, match="'nope', which is not among the tools given"):
        check_tool_choice(named_tool("nope"), [get_time])
    with pytest.raises(LLMError, match="unknown tool_choice 'sometimes'"):
        check_tool_choice("sometimes", [get_time])  # type: ignore[arg-type]


# -- pairing ---------------------------------------------------------------------------------


def user(content: str) -> ChatMessage:
    return ChatMessage(role="user", content=content)


def assistant(content: str) -> ChatMessage:
    return ChatMessage(role="assistant", content=content)


def call(call_id: str, name: str = "get_time", arguments: str = "{}") -> FunctionCall:
    return FunctionCall(call_id=call_id, name=name, arguments=arguments)


def output(call_id: str, value: str, is_error: bool = False) -> FunctionCallOutput:
    return FunctionCallOutput(call_id=call_id, name="get_time", output=value, is_error=is_error)


def shape(*items: Any) -> list[tuple[str, list[Any]]]:
    """The turns of a context: roles, and each part as text, ("call", id) or a result."""
    paired = pair_tool_calls(ChatContext(list(items)))
    out: list[tuple[str, list[Any]]] = []
    for turn in paired.turns:
        parts: list[Any] = []
        for part in turn.parts:
            if isinstance(part, FunctionCall):
                parts.append(("call", part.call_id))
            else:
                parts.append(part)
        out.append((turn.role, parts))
    return out


def result(call_id: str, value: str, **kwargs: Any) -> ToolResult:
    return ToolResult(call_id, "get_time", value, **kwargs)


def test_a_result_comes_first_in_the_turn_after_its_call() -> None:
    assert shape(user("time?"), call("c1"), user("and hurry"), output("c1", "noon")) == [
        ("user", ["time?"]),
        ("assistant", [("call", "c1")]),
        ("user", [result("c1", "noon"), "and hurry"]),
    ]


def test_an_output_recorded_before_its_call_is_placed_after_it() -> None:
    assert shape(user("time?"), output("c1", "noon"), call("c1"), assistant("Noon.")) == [
        ("user", ["time?"]),
        ("assistant", [("call", "c1")]),
        ("user", [result("c1", "noon")]),
        ("assistant", ["Noon."]),
        ("user", [CONTINUE_PLACEHOLDER]),
    ]


def test_assistant_text_after_a_result_starts_a_new_turn() -> None:
    turns = shape(user("time?"), call("c1"), output("c1", "noon", is_error=True), assistant("Hm."))
    assert turns[2:] == [
        ("user", [result("c1", "noon", is_error=True)]),
        ("assistant", ["Hm."]),
        ("user", [CONTINUE_PLACEHOLDER]),
    ]
    # Text before any result stays in the calls' turn; the results follow it.
    assert shape(user("time?"), call("c1"), assistant("Checking."), output("c1", "noon")) == [
        ("user", ["time?"]),
        ("assistant", [("call", "c1"), "Checking."]),
        ("user", [result("c1", "noon")]),
    ]


def test_missing_outputs_are_synthesised_orphans_dropped_repeats_sent_once() -> None:
    assert shape(
        user("hi"),
        AgentHandoff(old_agent=None, new_agent="greeter"),
        output("ghost", "orphan"),
        call("c1"),
        call("c1"),
        call("c2"),
        output("c2", "first"),
        output("c2", "second"),
    ) == [
        ("user", ["hi"]),
        ("assistant", [("call", "c1"), ("call", "c2")]),
        ("user", [result("c1", MISSING_RESULT, missing=True), result("c2", "first")]),
    ]


def test_the_turns_start_and_end_with_the_user_and_system_text_is_joined() -> None:
    paired = pair_tool_calls(
        ChatContext(
            [
                ChatMessage(role="system", content="Be brief."),
                ChatMessage(role="developer", content="  "),
                ChatMessage(role="developer", content="Use tools."),
                assistant("Hello!"),
                user("   "),
            ]
        )
    )
    assert paired.system == "Be brief.\n\nUse tools."
    assert [(t.role, t.texts) for t in paired.turns] == [
        ("user", [START_PLACEHOLDER]),
        ("assistant", ["Hello!"]),
        ("user", [CONTINUE_PLACEHOLDER]),
    ]
    assert [(t.role, t.texts) for t in pair_tool_calls(ChatContext()).turns] == [
        ("user", [START_PLACEHOLDER])
    ]


def test_turn_helpers_split_texts_calls_and_results() -> None:
    (first, calls, results) = pair_tool_calls(
        ChatContext([user("a"), assistant("b"), call("c1"), user("c"), output("c1", "x")])
    ).turns
    assert (first.texts, calls.texts, [c.call_id for c in calls.calls]) == (["a"], ["b"], ["c1"])
    assert (results.results, results.texts) == ([result("c1", "x")], ["c"])


def test_arguments_are_sent_as_a_json_object() -> None:
    assert arguments_object('{"zone": "UTC"}') == {"zone": "UTC"}
    assert arguments_object("  ") == {}
    assert arguments_object("not json") == {"_invalid_arguments": "not json"}
    assert arguments_object("[1, 2]") == {"_invalid_arguments": "[1, 2]"}


# -- public, and cheap to import -------------------------------------------------------------


def test_the_kit_is_public_and_loaded_on_first_use() -> None:
    code = (
        "import sys, backline, backline.llm\n"
        "kit = ('backline.llm.provider', 'backline.llm.pairing')\n"
        "assert not any(m in sys.modules for m in kit), 'the kit was imported'\n"
        "from backline.llm import *\n"
        "assert ProviderStreams.__module__ == 'backline.llm.provider'\n"
        "assert pair_tool_calls.__module__ == 'backline.llm.pairing'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_openai_plugin_imports_only_public_backline_names() -> None:
    package = Path(__file__).parents[1] / "plugins" / "openai" / "backline_openai"
    private: list[str] = []
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            private += [
                f"{path.name}: {m}"
                for m in modules
                if m.split(".")[0] == "backline" and any(p.startswith("_") for p in m.split("."))
            ]
    assert private == []
