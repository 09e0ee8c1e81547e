"""The voice channel's five tools, through an in-process ``mcp.Client``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import Client

from backline.limits import Limits
from backline.mcp import TOOL_NAMES, VoiceChannel, channel_server
from backline.testing import BackgroundDriver
from tests.mcp.conftest import in_own_task, text_of, until_listening


@pytest.fixture(params=["auto", "legacy"])
async def client(request: pytest.FixtureRequest, driver: BackgroundDriver) -> AsyncIterator[Any]:
    """A client of the ``agent`` background's channel (the modern per-request
    protocol, and the initialize handshake)."""
    channel = VoiceChannel.of(driver.session.background.context("agent"))  # type: ignore[union-attr]
    async with in_own_task(Client(channel_server(channel), mode=request.param)) as made:
        yield made


def channel_of(driver: BackgroundDriver) -> VoiceChannel:
    return VoiceChannel.of(driver.session.background.context("agent"))  # type: ignore[union-attr]


def deliver(driver: BackgroundDriver, *messages: str) -> None:
    for message in messages:
        driver.session.background.deliver("agent", message)  # type: ignore[union-attr]


async def test_the_server_lists_the_five_tools_as_plain_text_tools(client: Any) -> None:
    listed = (await client.list_tools()).tools

    assert [t.name for t in listed] == list(TOOL_NAMES)
    assert all(t.output_schema is None for t in listed)  # answers reach the model as text
    status = next(t for t in listed if t.name == "set_status")
    assert status.input_schema["properties"]["status"]["type"] == "object"


async def test_send_to_user_is_spoken_by_the_voice_agent(
    client: Any, driver: BackgroundDriver
) -> None:
    result = await client.call_tool("send_to_user", {"message": "The tests pass now."})

    assert not result.is_error
    assert text_of(result) == "Delivered: the voice assistant will tell the user."
    await driver.wait_until_done()
    run = driver.result()
    assert run.spoken == ["The tests pass now."]
    assert "The tests pass now." in run.transcript


async def test_add_context_is_known_but_not_said(client: Any, driver: BackgroundDriver) -> None:
    result = await client.call_tool("add_context", {"note": "Edited app.py and util.py."})

    assert text_of(result).startswith("Noted")
    await driver.wait_until_done()
    run = driver.result()
    assert run.silent == ["Edited app.py and util.py."]
    assert run.spoken == [] and run.transcript == []


async def test_set_status_is_what_the_state_tool_returns(
    client: Any, driver: BackgroundDriver
) -> None:
    status = {"step": "running the tests", "progress": "3 of 10"}

    result = await client.call_tool("set_status", {"status": status})

    assert text_of(result) == "Status updated."
    state_tool = next(t for t in driver.session.tools if t.name == "backline_state")
    assert json.loads(await state_tool.invoke({"background_session_id": "agent"})) == status


async def test_a_status_sent_as_json_text_is_taken_as_the_object(
    client: Any, driver: BackgroundDriver
) -> None:
    await client.call_tool("set_status", {"status": '{"step": "linting"}'})

    assert channel_of(driver).ctx.state == {"step": "linting"}


@pytest.mark.parametrize(
    ("status", "kind"), [([1, 2], "a list"), ("just text", "a string"), (7, "a number")]
)
async def test_a_status_that_is_not_an_object_is_a_clear_error(
    client: Any, driver: BackgroundDriver, status: Any, kind: str
) -> None:
    await client.call_tool("set_status", {"status": {"step": "first"}})

    result = await client.call_tool("set_status", {"status": status})

    assert result.is_error
    assert "status must be a JSON object" in text_of(result) and kind in text_of(result)
    assert channel_of(driver).ctx.state == {"step": "first"}  # the previous status stays


async def test_over_size_messages_and_statuses_are_refused_and_nothing_is_delivered(
    client: Any, driver: BackgroundDriver
) -> None:
    driver.session.limits = Limits(max_mcp_message_chars=20, max_mcp_status_chars=30)  # type: ignore[attr-defined]

    for tool, args in [
        ("send_to_user", {"message": "x" * 21}),
        ("add_context", {"note": "y" * 21}),
        ("ask_user", {"question": "z" * 21, "timeout_seconds": 0}),
    ]:
        result = await client.call_tool(tool, args)
        assert result.is_error, tool
        assert "21 characters; the limit is 20 (Limits.max_mcp_message_chars)" in text_of(result)
    result = await client.call_tool("set_status", {"status": {"log": "w" * 40}})

    assert result.is_error
    assert "the limit is 30 (Limits.max_mcp_status_chars)" in text_of(result)
    assert driver.messages == [] and driver.states == []


async def test_an_empty_message_is_refused(client: Any, driver: BackgroundDriver) -> None:
    result = await client.call_tool("send_to_user", {"message": "   "})

    assert result.is_error and "message is empty" in text_of(result)
    assert driver.messages == []


async def test_wait_for_user_returns_what_the_user_said(
    client: Any, driver: BackgroundDriver
) -> None:
    waiting = asyncio.ensure_future(client.call_tool("wait_for_user", {"timeout_seconds": 20}))
    await until_listening(channel_of(driver))

    await driver.say("Use tabs, not spaces.")  # the voice agent forwards it

    result = await waiting
    assert text_of(result) == "The user says:\nUse tabs, not spaces."
    assert channel_of(driver).ctx.waiting == 0


async def test_wait_for_user_says_nothing_yet_after_its_timeout(client: Any) -> None:
    result = await client.call_tool("wait_for_user", {"timeout_seconds": 0.05})

    assert not result.is_error
    assert text_of(result).startswith("Nothing from the user yet (waited 0.05 s).")


async def test_a_wait_longer_than_the_limit_is_cut_to_it(
    client: Any, driver: BackgroundDriver
) -> None:
    driver.session.limits = Limits(max_mcp_wait=0.05)  # type: ignore[attr-defined]

    result = await client.call_tool("wait_for_user", {"timeout_seconds": 600})

    assert "(waited 0.05 s (the longest wait))" in text_of(result)


async def test_a_negative_timeout_is_an_error(client: Any) -> None:
    result = await client.call_tool("wait_for_user", {"timeout_seconds": -1})

    assert result.is_error and "timeout_seconds" in text_of(result)


async def test_every_answer_carries_what_the_user_said_meanwhile(
    client: Any, driver: BackgroundDriver
) -> None:
    deliver(driver, "stop", "use the other branch")

    first = await client.call_tool("add_context", {"note": "Working on it."})
    second = await client.call_tool("set_status", {"status": {"step": "switching"}})
    deliver(driver, "and rebase")
    third = await client.call_tool("send_to_user", {"message": "Switching branches."})

    assert text_of(first).endswith("The user said meanwhile: stop\nuse the other branch")
    assert "meanwhile" not in text_of(second)  # each message reaches the agent once
    assert text_of(third).endswith("The user said meanwhile: and rebase")


async def test_ask_user_speaks_the_question_and_returns_the_answer(
    client: Any, driver: BackgroundDriver
) -> None:
    deliver(driver, "earlier remark")
    asking = asyncio.ensure_future(
        client.call_tool("ask_user", {"question": "Tabs or spaces?", "timeout_seconds": 20})
    )
    assert await driver.wait_for_spoken(1) == ["Tabs or spaces?"]
    await until_listening(channel_of(driver))

    await driver.send("Tabs.")

    answer = text_of(await asking)
    assert answer.startswith("The user answered:\nTabs.")
    assert "(Before the question, the user said: earlier remark)" in answer


async def test_ask_user_without_an_answer_says_so(client: Any, driver: BackgroundDriver) -> None:
    result = await client.call_tool(
        "ask_user", {"question": "Shall I push?", "timeout_seconds": 0.05}
    )

    assert text_of(result).startswith("No answer yet (waited 0.05 s).")
    assert await driver.wait_for_spoken(1) == ["Shall I push?"]


async def test_calls_after_the_session_closed_are_errors(
    client: Any, driver: BackgroundDriver
) -> None:
    await driver.session.aclose()

    for tool, args in [
        ("send_to_user", {"message": "hello"}),
        ("add_context", {"note": "hello"}),
        ("set_status", {"status": {"step": "x"}}),
        ("wait_for_user", {"timeout_seconds": 5}),
        ("ask_user", {"question": "hello?"}),
    ]:
        result = await client.call_tool(tool, args)
        assert result.is_error, tool
        assert "The voice session has ended" in text_of(result), tool


async def test_a_wait_ends_with_an_error_when_the_session_closes(
    client: Any, driver: BackgroundDriver
) -> None:
    waiting = asyncio.ensure_future(client.call_tool("wait_for_user", {"timeout_seconds": 20}))
    await until_listening(channel_of(driver))

    await driver.session.aclose()

    result = await waiting
    assert result.is_error and "The voice session has ended" in text_of(result)


async def test_progress_is_reported_while_waiting(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("backline.mcp.channel._channel.KEEPALIVE_SECONDS", 0.01)
    reports: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reports.append((progress, total, message))

    result = await client.call_tool(
        "wait_for_user", {"timeout_seconds": 0.2}, progress_callback=on_progress
    )

    assert text_of(result).startswith("Nothing from the user yet")
    assert reports and all(m == "waiting for the user" and t == 0.2 for _, t, m in reports)
    assert [p for p, _, _ in reports] == sorted(p for p, _, _ in reports)


# -- the channel's owner: hold, on_status, cancellation --------------------------------------------
async def test_a_cancelled_wait_takes_nothing(driver: BackgroundDriver) -> None:
    channel = channel_of(driver)
    waiting = asyncio.ensure_future(channel.wait_for_user(20))
    await until_listening(channel)

    deliver(driver, "do not lose me")  # wakes the wait ...
    waiting.cancel()  # ... which is cancelled before it runs again

    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert channel.ctx.pending() == ["do not lose me"]
    assert not channel.listening


async def test_a_held_channel_hands_out_nothing_until_released(
    driver: BackgroundDriver,
) -> None:
    channel = channel_of(driver)
    channel.hold()
    waiting = asyncio.ensure_future(channel.wait_for_user(20))
    await asyncio.sleep(0)
    deliver(driver, "for the next run")

    answer = await channel.send_to_user("Stopping.")
    assert "meanwhile" not in answer
    assert not waiting.done() and not channel.listening
    assert channel.ctx.waiting == 1

    channel.release()
    assert await waiting == "The user says:\nfor the next run"


async def test_on_status_receives_the_status_instead_of_the_state(
    driver: BackgroundDriver,
) -> None:
    channel = channel_of(driver)
    seen: list[dict[str, Any]] = []
    channel.on_status = seen.append

    channel.set_status({"step": "one"})

    assert seen == [{"step": "one"}]
    assert driver.states == []


# -- the inbox wait the channel is built on (BackgroundContext.wait_for_message) -------------------
async def test_wait_for_message_returns_at_once_when_one_waits_and_takes_nothing(
    driver: BackgroundDriver,
) -> None:
    ctx = channel_of(driver).ctx
    deliver(driver, "first")

    assert await ctx.wait_for_message(0) is True
    assert ctx.waiting == 1


@pytest.mark.parametrize("steps", [0, 1, 2])
async def test_wait_for_message_wakes_for_a_delivery_right_after_it_started(
    driver: BackgroundDriver, steps: int
) -> None:
    ctx = channel_of(driver).ctx
    waiting = asyncio.ensure_future(ctx.wait_for_message(20))
    for _ in range(steps):  # let the wait run this many scheduling steps first
        await asyncio.sleep(0)
    deliver(driver, "right after the wait started")  # no lost wakeup at any point

    assert await asyncio.wait_for(waiting, 5) is True


async def test_wait_for_message_is_false_after_its_timeout_and_at_close(
    driver: BackgroundDriver,
) -> None:
    ctx = channel_of(driver).ctx
    assert await ctx.wait_for_message(0.01) is False

    waiting = asyncio.ensure_future(ctx.wait_for_message(20))
    await asyncio.sleep(0)
    await driver.session.aclose()
    assert await asyncio.wait_for(waiting, 5) is False
