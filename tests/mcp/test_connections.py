"""Agents' connections to the voice channel end cleanly: a call whose agent is gone
takes nothing, and abandoned sessions do not lock other agents out."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx2 as httpx
import pytest
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from backline import Limits
from backline.mcp import Hosting, VoiceChannel, hosted_voice_channel
from backline.testing import BackgroundDriver
from tests.mcp.conftest import WAIT, http_client, text_of, until_listening, wait_until


def channel_of(driver: BackgroundDriver) -> VoiceChannel:
    return VoiceChannel.of(driver.session.background.context("agent"))  # type: ignore[union-attr]


async def stopped_listening(channel: VoiceChannel) -> asyncio.Event:
    """An event set when no agent waits on ``channel`` any more."""
    stopped = asyncio.Event()
    channel.on_listening = lambda now: None if now else stopped.set()
    return stopped


@pytest.fixture
async def agent_process() -> AsyncIterator[Any]:
    """Starts ``tests/mcp/waiting_agent.py`` (a real MCP client in a process of its own);
    any still running at the end is killed."""
    started: list[asyncio.subprocess.Process] = []

    async def start(url: str, token: str, tool: str, mode: str) -> asyncio.subprocess.Process:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.mcp.waiting_agent",
            url,
            token,
            tool,
            mode,
            stdout=asyncio.subprocess.PIPE,
            cwd=os.getcwd(),
        )
        started.append(process)
        return process

    yield start
    for process in started:
        if process.returncode is None:
            process.kill()
        await process.wait()


# -- item: a dropped call takes nothing -------------------------------------------------------
@pytest.mark.parametrize(
    ("tool", "mode"),
    [("wait_for_user", "legacy"), ("ask_user", "legacy"), ("wait_for_user", "auto")],
)
async def test_a_wait_whose_agent_was_killed_ends_at_once_and_takes_nothing(
    hosting: Hosting, driver: BackgroundDriver, agent_process: Any, tool: str, mode: str
) -> None:
    endpoint = await hosting.endpoint(driver.session.background.context("agent"))  # type: ignore[union-attr]
    channel = channel_of(driver)
    agent = await agent_process(endpoint.url, endpoint.token, tool, mode)
    await until_listening(channel)
    stopped = await stopped_listening(channel)

    agent.kill()  # no cancellation, no DELETE: the connection just drops
    await agent.wait()
    await asyncio.wait_for(stopped.wait(), WAIT)  # the wait ended with its connection
    await driver.say("Use the staging database.")

    async with http_client(endpoint) as client:  # the next agent hears it
        result = await client.call_tool("wait_for_user", {"timeout_seconds": 20})
    assert text_of(result) == "The user says:\nUse the staging database."


# -- item: abandoned sessions do not lock agents out -------------------------------------------
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
VERSION = HANDSHAKE_PROTOCOL_VERSIONS[-1]


async def abandoned_session(http: httpx.AsyncClient, url: str, token: str) -> str:
    """Open an MCP session the way an agent does, then leave it (no stream, no DELETE):
    its id."""
    headers = {**ACCEPT, "Authorization": f"Bearer {token}"}
    opened = await http.post(url, json=initialize(VERSION), headers=headers)
    assert opened.status_code == 200, opened.text
    session_id = opened.headers["mcp-session-id"]
    headers |= {"Mcp-Session-Id": session_id, "MCP-Protocol-Version": VERSION}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(url, json=note, headers=headers)).status_code == 202
    return session_id


async def status_of(http: httpx.AsyncClient, url: str, token: str, session_id: str) -> int:
    """The HTTP status a request of ``session_id`` gets (404: it was ended)."""
    headers = {
        **ACCEPT,
        "Authorization": f"Bearer {token}",
        "Mcp-Session-Id": session_id,
        "MCP-Protocol-Version": VERSION,
    }
    listing = {"jsonrpc": "2.0", "id": 7, "method": "tools/list"}
    return (await http.post(url, json=listing, headers=headers)).status_code


def initialize(version: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "0"},
        },
    }


@contextlib.asynccontextmanager
async def limited_hosting(**limits: Any) -> AsyncIterator[Hosting]:
    async with hosted_voice_channel(limits=Limits(**limits)) as hosting:
        await hosting.host()
        yield hosting


async def test_at_the_connection_limit_a_new_agent_ends_the_session_idle_the_longest(
    driver: BackgroundDriver,
) -> None:
    async with limited_hosting(max_mcp_connections=2) as hosting:
        endpoint = await hosting.endpoint(driver.session.background.context("agent"))  # type: ignore[union-attr]
        async with httpx.AsyncClient(timeout=WAIT) as http:
            oldest = await abandoned_session(http, endpoint.url, endpoint.token)
            newer = await abandoned_session(http, endpoint.url, endpoint.token)
            assert await status_of(http, endpoint.url, endpoint.token, newer) == 200  # used last

            async with http_client(endpoint, mode="legacy") as client:  # a third, at the limit
                result = await client.call_tool("set_status", {"status": {"step": "in"}})

            assert text_of(result) == "Status updated."
            assert await status_of(http, endpoint.url, endpoint.token, oldest) == 404
            assert await status_of(http, endpoint.url, endpoint.token, newer) == 200
        host = await hosting.host()
        assert host.connections.evicted == 1


async def test_at_the_limit_with_every_session_busy_a_new_agent_gets_503_saying_why(
    driver: BackgroundDriver,
) -> None:
    async with limited_hosting(max_mcp_connections=1) as hosting:
        endpoint = await hosting.endpoint(driver.session.background.context("agent"))  # type: ignore[union-attr]
        channel = channel_of(driver)
        async with http_client(endpoint, mode="legacy") as busy:
            waiting = asyncio.ensure_future(
                busy.call_tool("wait_for_user", {"timeout_seconds": 20})
            )
            await until_listening(channel)
            async with httpx.AsyncClient(timeout=WAIT) as http:
                headers = {**ACCEPT, **endpoint.headers}
                refused = await http.post(endpoint.url, json=initialize(VERSION), headers=headers)
            await driver.say("Carry on.")
            heard = await waiting

    assert refused.status_code == 503
    assert "1 agent connections open and busy" in refused.text
    assert "Limits.max_mcp_connections" in refused.text
    assert text_of(heard) == "The user says:\nCarry on."


async def test_an_abandoned_session_is_reclaimed_once_idle_and_a_connected_agent_is_not(
    driver: BackgroundDriver,
) -> None:
    async with limited_hosting(mcp_session_idle_timeout=0.5) as hosting:
        endpoint = await hosting.endpoint(driver.session.background.context("agent"))  # type: ignore[union-attr]
        host = await hosting.host()
        async with http_client(endpoint, mode="legacy") as connected:  # keeps its event stream
            async with httpx.AsyncClient(timeout=WAIT) as http:
                abandoned = await abandoned_session(http, endpoint.url, endpoint.token)
                await wait_until(
                    lambda: host.connections.reclaimed == 1, host.connections.ended.wait
                )
                gone = await status_of(http, endpoint.url, endpoint.token, abandoned)
            result = await connected.call_tool("set_status", {"status": {"still": "here"}})

    assert gone == 404
    assert text_of(result) == "Status updated."
    assert host.connections.reclaimed == 1


async def test_a_watched_wait_over_http_still_reports_progress(
    hosting: Hosting, driver: BackgroundDriver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("backline.mcp.channel._channel.KEEPALIVE_SECONDS", 0.01)
    endpoint = await hosting.endpoint(driver.session.background.context("agent"))  # type: ignore[union-attr]
    reports: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reports.append(message)

    async with http_client(endpoint, mode="legacy") as client:
        result = await client.call_tool(
            "wait_for_user", {"timeout_seconds": 0.2}, progress_callback=on_progress
        )

    assert text_of(result).startswith("Nothing from the user yet")
    assert reports and set(reports) == {"waiting for the user"}
