"""``backline mcp serve``: the stdio proxy, run as a subprocess the way an agent runs it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

from backline.mcp import VoiceChannel, hosted_voice_channel
from backline.testing import BackgroundDriver
from tests.mcp.conftest import WAIT, text_of, until_listening


@contextlib.asynccontextmanager
async def proxy(
    runtime_dir: Path, background: str = "agent", **env: str
) -> AsyncIterator[tuple[Any, Any]]:
    """A ``backline mcp serve`` subprocess and an ``mcp.Client`` on its stdio;
    yields the client and the proxy's stderr (a file)."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "backline", "mcp", "serve", "--background", background],
        env={"BACKLINE_RUNTIME_DIR": str(runtime_dir), **env},
        cwd=os.getcwd(),
    )
    with tempfile.TemporaryFile("w+") as errors:
        from mcp.client.stdio import stdio_client

        async with asyncio.timeout(WAIT), Client(stdio_client(params, errlog=errors)) as client:
            yield client, errors


def channel_of(driver: BackgroundDriver) -> VoiceChannel:
    return VoiceChannel.of(driver.session.background.context("agent"))  # type: ignore[union-attr]


async def test_the_proxy_forwards_to_the_announced_front_end(
    runtime_dir: Path, driver: BackgroundDriver
) -> None:
    async with hosted_voice_channel(announce="backline console") as hosting:
        await hosting.endpoint(driver.session.background.context("agent"))  # type: ignore[union-attr]
        async with proxy(runtime_dir) as (client, _):
            tools = [t.name for t in (await client.list_tools()).tools]
            spoken = await client.call_tool("send_to_user", {"message": "Build is green."})
            waiting = asyncio.ensure_future(
                client.call_tool("wait_for_user", {"timeout_seconds": 20})
            )
            await until_listening(channel_of(driver))
            await driver.say("Now deploy it.")
            heard = await waiting
            bad = await client.call_tool("set_status", {"status": [1]})

    assert tools == ["send_to_user", "add_context", "set_status", "wait_for_user", "ask_user"]
    assert text_of(spoken).startswith("Delivered")
    assert await driver.wait_for_spoken(1) == ["Build is green."]
    assert text_of(heard) == "The user says:\nNow deploy it."
    # The front end's error text, not wrapped twice.
    assert bad.is_error
    assert text_of(bad).startswith("Error executing tool set_status: status must be a JSON")


async def test_without_a_front_end_the_tools_say_so(runtime_dir: Path) -> None:
    async with proxy(runtime_dir) as (client, errors):
        result = await client.call_tool("send_to_user", {"message": "Anyone there?"})
        errors.seek(0)
        stderr = errors.read()

    assert result.is_error
    assert "No backline front end is running" in text_of(result)
    assert "backline console --background agent" in text_of(result)
    assert "no backline front end is running yet" in stderr


async def test_the_front_end_going_away_mid_call_is_a_tool_error_and_a_new_one_is_found(
    runtime_dir: Path, driver: BackgroundDriver
) -> None:
    ctx = driver.session.background.context("agent")  # type: ignore[union-attr]
    async with proxy(runtime_dir) as (client, _):
        async with hosted_voice_channel(announce="first front end") as hosting:
            await hosting.endpoint(ctx)
            waiting = asyncio.ensure_future(
                client.call_tool("wait_for_user", {"timeout_seconds": 20})
            )
            await until_listening(channel_of(driver))
        gone = await waiting  # the endpoint stopped under the call

        await driver.say("Meanwhile: use the staging database.")  # no endpoint now
        async with hosted_voice_channel(announce="second front end") as hosting:
            await hosting.endpoint(ctx)
            heard = await client.call_tool("wait_for_user", {"timeout_seconds": 20})

    assert gone.is_error
    assert "did not answer" in text_of(gone) and "what they said meanwhile waits" in text_of(gone)
    assert text_of(heard) == "The user says:\nMeanwhile: use the staging database."


async def test_an_endpoint_given_in_the_environment_is_used_as_is(
    runtime_dir: Path, driver: BackgroundDriver
) -> None:
    ctx = driver.session.background.context("agent")  # type: ignore[union-attr]
    async with hosted_voice_channel() as hosting:  # not announced: only the variables lead here
        endpoint = await hosting.endpoint(ctx)
        env = {"BACKLINE_MCP_URL": endpoint.url, "BACKLINE_MCP_TOKEN": endpoint.token}
        async with proxy(runtime_dir, background="ignored", **env) as (client, _):
            result = await client.call_tool("set_status", {"status": {"via": "environment"}})

    assert not result.is_error, text_of(result)
    assert ctx.state == {"via": "environment"}
