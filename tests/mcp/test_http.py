"""The voice channel over streamable HTTP: the gate, the routing, every protocol version."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from backline import Agent, Session
from backline.mcp import Hosting, VoiceChannel, hosted_voice_channel
from backline.testing import BackgroundDriver, ScriptedLLM
from tests.mcp.conftest import WAIT, attached, http_client, in_own_task, text_of, until_listening
from tests.mcp.test_front_ends import announcements_in

ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def endpoint_of(hosting: Hosting, session: Session[Any]) -> Any:
    return await hosting.endpoint(session.background.context("agent"))  # type: ignore[union-attr]


def channel_of(session: Session[Any]) -> VoiceChannel:
    return VoiceChannel.of(session.background.context("agent"))  # type: ignore[union-attr]


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


def rpc_result(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of a response (JSON, or the last SSE ``data:`` line)."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return response.json()  # type: ignore[no-any-return]
    data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
    return json.loads(data[-1])  # type: ignore[no-any-return]


# -- the gate -----------------------------------------------------------------------------------
async def test_a_request_without_the_token_is_401(hosting: Hosting) -> None:
    host = await hosting.host()
    body = initialize(HANDSHAKE_PROTOCOL_VERSIONS[-1])
    async with httpx.AsyncClient() as http:
        missing = await http.post(host.endpoint("agent"), json=body, headers=ACCEPT)
        wrong = await http.post(
            host.endpoint("agent"),
            json=body,
            headers={**ACCEPT, "Authorization": "Bearer not-the-token"},
        )

    for response in (missing, wrong):
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert "backline mcp config" in response.text


@pytest.mark.parametrize(
    "headers",
    [
        {"Host": "evil.example"},
        {"Host": "evil.example:80"},
        {"Origin": "http://evil.example"},
        {"Origin": "http://127.0.0.1.evil.example:8000"},
        {"Origin": "null"},
    ],
    ids=["host", "host-port", "origin", "origin-lookalike", "origin-null"],
)
async def test_a_host_or_origin_that_is_not_loopback_is_403(
    hosting: Hosting, headers: dict[str, str]
) -> None:
    host = await hosting.host()
    auth = {"Authorization": f"Bearer {host.token}"}
    async with httpx.AsyncClient() as http:
        response = await http.post(
            host.endpoint("agent"),
            json=initialize(HANDSHAKE_PROTOCOL_VERSIONS[-1]),
            headers={**ACCEPT, **auth, **headers},
        )

    assert response.status_code == 403
    assert "127.0.0.1, localhost or ::1" in response.text


async def test_a_loopback_origin_with_the_token_is_served(hosting: Hosting) -> None:
    host = await hosting.host()
    headers = {
        **ACCEPT,
        "Authorization": f"Bearer {host.token}",
        "Origin": "http://localhost:5173",
        "Host": f"localhost:{host.port}",
    }
    async with httpx.AsyncClient() as http:
        body = initialize(HANDSHAKE_PROTOCOL_VERSIONS[-1])
        response = await http.post(host.endpoint("agent"), json=body, headers=headers)

    assert response.status_code == 200
    assert rpc_result(response)["result"]["serverInfo"]["name"] == "backline"


async def test_other_paths_are_404(hosting: Hosting) -> None:
    host = await hosting.host()
    async with httpx.AsyncClient() as http:
        response = await http.get(
            f"{host.url}/elsewhere", headers={"Authorization": f"Bearer {host.token}"}
        )

    assert response.status_code == 404
    assert "/mcp/<background>" in response.text


# -- protocol versions -------------------------------------------------------------------------
@pytest.mark.parametrize("version", HANDSHAKE_PROTOCOL_VERSIONS)
async def test_every_handshake_protocol_version_is_negotiated_and_served(
    hosting: Hosting, driver: BackgroundDriver, version: str
) -> None:
    endpoint = await endpoint_of(hosting, driver.session)
    headers = {**ACCEPT, **endpoint.headers}
    async with httpx.AsyncClient(timeout=WAIT) as http:
        opened = await http.post(endpoint.url, json=initialize(version), headers=headers)
        assert opened.status_code == 200
        assert rpc_result(opened)["result"]["protocolVersion"] == version
        headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
        headers["MCP-Protocol-Version"] = version
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await http.post(endpoint.url, json=note, headers=headers)).status_code == 202
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "send_to_user", "arguments": {"message": f"Hello ({version})."}},
        }
        answered = rpc_result(await http.post(endpoint.url, json=call, headers=headers))

    assert answered["result"]["isError"] is False
    assert answered["result"]["content"][0]["text"].startswith("Delivered")
    assert await driver.wait_for_spoken(1) == [f"Hello ({version})."]


@pytest.mark.parametrize("mode", ["auto", "legacy", *MODERN_PROTOCOL_VERSIONS])
async def test_the_mcp_client_in_each_mode_calls_the_tools(
    hosting: Hosting, driver: BackgroundDriver, mode: str
) -> None:
    endpoint = await endpoint_of(hosting, driver.session)

    async with http_client(endpoint, mode=mode) as client:
        result = await client.call_tool("set_status", {"status": {"mode": mode}})

    assert text_of(result) == "Status updated."
    assert channel_of(driver.session).ctx.state == {"mode": mode}


# -- routing -------------------------------------------------------------------------------------
async def test_the_short_path_reaches_the_newest_session_and_the_keyed_path_its_own(
    hosting: Hosting,
) -> None:
    first: Session[Any] = Session(ScriptedLLM(), background=[attached])
    second: Session[Any] = Session(ScriptedLLM(), background=[attached])
    async with first, second:
        await first.start(Agent("One."))
        await second.start(Agent("Two."))
        own = await endpoint_of(hosting, first)
        host = await hosting.host()

        async with http_client(host.endpoint("agent"), host.token) as client:
            await client.call_tool("set_status", {"status": {"to": "newest"}})
        async with http_client(own) as client:
            await client.call_tool("set_status", {"status": {"to": "first"}})

        assert channel_of(second).ctx.state == {"to": "newest"}
        assert channel_of(first).ctx.state == {"to": "first"}


async def test_an_unknown_background_is_a_tool_error_naming_the_running_ones(
    hosting: Hosting, driver: BackgroundDriver
) -> None:
    host = await hosting.host()
    await endpoint_of(hosting, driver.session)

    async with http_client(host.endpoint("nope"), host.token) as client:
        result = await client.call_tool("send_to_user", {"message": "hello"})

    assert result.is_error
    assert "Unknown background session 'nope'" in text_of(result)
    assert "runs agent" in text_of(result)


async def test_a_call_for_a_closed_session_says_it_ended_and_the_endpoint_keeps_serving(
    hosting: Hosting, driver: BackgroundDriver
) -> None:
    endpoint = await endpoint_of(hosting, driver.session)
    other: Session[Any] = Session(ScriptedLLM(), background=[attached])
    async with other:
        await other.start(Agent("Other."))
        other_endpoint = await endpoint_of(hosting, other)
        await driver.session.aclose()

        async with http_client(endpoint) as client:
            ended = await client.call_tool("send_to_user", {"message": "hello"})
        async with http_client(other_endpoint) as client:
            served = await client.call_tool("set_status", {"status": {"still": "served"}})

    assert ended.is_error and "The voice session has ended" in text_of(ended)
    assert not served.is_error


async def test_no_session_yet_is_a_clear_tool_error(hosting: Hosting) -> None:
    host = await hosting.host()

    async with http_client(host.endpoint("agent"), host.token) as client:
        result = await client.call_tool("wait_for_user", {"timeout_seconds": 1})

    assert result.is_error and "No voice session with background sessions" in text_of(result)


async def test_sessions_started_while_hosting_are_served_without_asking(hosting: Hosting) -> None:
    host = await hosting.host()
    session: Session[Any] = Session(ScriptedLLM(), background=[attached])
    async with session:
        await session.start(Agent("Hi."))

        async with http_client(host.endpoint("agent"), host.token) as client:
            result = await client.call_tool("set_status", {"status": {"seen": True}})

    assert not result.is_error
    assert channel_of(session).ctx.state == {"seen": True}


async def test_a_session_started_before_the_endpoint_is_reached_once_handed_to_it() -> None:
    session: Session[Any] = Session(ScriptedLLM(), background=[attached])
    async with session:
        await session.start(Agent("Started first."))
        async with hosted_voice_channel() as hosting:
            host = await hosting.host()
            async with http_client(host.endpoint("agent"), host.token) as client:
                before = await client.call_tool("set_status", {"status": {"n": 1}})
                hosting.serve(session)
                after = await client.call_tool("set_status", {"status": {"n": 2}})

    assert before.is_error and "No voice session with background sessions" in text_of(before)
    assert not after.is_error
    assert channel_of(session).ctx.state == {"n": 2}


# -- reconnecting loses nothing -------------------------------------------------------------
async def test_what_the_user_said_while_no_agent_was_connected_waits_for_the_next_one(
    hosting: Hosting, driver: BackgroundDriver
) -> None:
    endpoint = await endpoint_of(hosting, driver.session)
    channel = channel_of(driver.session)
    async with in_own_task(http_client(endpoint)) as client:
        waiting = asyncio.ensure_future(client.call_tool("wait_for_user", {"timeout_seconds": 20}))
        await until_listening(channel)
        stopped = asyncio.Event()
        channel.on_listening = lambda now: None if now else stopped.set()
        waiting.cancel()  # the agent goes away mid-wait
        with pytest.raises(asyncio.CancelledError):
            await waiting
    await asyncio.wait_for(stopped.wait(), WAIT)  # its call ended on the server too

    await driver.say("Also update the changelog.")  # nobody is connected now
    async with http_client(endpoint) as client:
        result = await client.call_tool("wait_for_user", {"timeout_seconds": 20})

    assert text_of(result) == "The user says:\nAlso update the changelog."


# -- announcing ---------------------------------------------------------------------------------
async def test_a_front_end_announces_its_endpoint_in_a_private_file_while_it_runs(
    runtime_dir: Path,
) -> None:
    async with hosted_voice_channel(announce="backline console") as hosting:
        host = await hosting.host()
        (path,) = announcements_in(runtime_dir)
        data = json.loads(path.read_text())
        mode = stat.S_IMODE(os.stat(path).st_mode)

    assert data == {
        "url": host.url,
        "token": host.token,
        "pid": os.getpid(),
        "front_end": "backline console",
    }
    assert mode == 0o600
    assert stat.S_IMODE(os.stat(runtime_dir).st_mode) == 0o700
    assert announcements_in(runtime_dir) == []


async def test_users_of_one_loop_share_one_endpoint(runtime_dir: Path) -> None:
    async with hosted_voice_channel() as outer:
        async with hosted_voice_channel(announce="later") as inner:
            assert await inner.host() is await outer.host()
            assert len(announcements_in(runtime_dir)) == 1
        host = await outer.host()  # still running (and announced) for its other user
        async with httpx.AsyncClient() as http:
            auth = {"Authorization": f"Bearer {host.token}"}
            alive = await http.get(f"{host.url}/x", headers=auth)
        assert alive.status_code == 404
        assert len(announcements_in(runtime_dir)) == 1
    assert announcements_in(runtime_dir) == []
    async with httpx.AsyncClient() as http:
        with pytest.raises(httpx.ConnectError):
            await http.get(f"{host.url}/x")


async def test_the_token_and_port_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BACKLINE_MCP_TOKEN", "fixed-token")
    async with hosted_voice_channel() as hosting:
        host = await hosting.host()
    assert host.token == "fixed-token"

    monkeypatch.setenv("BACKLINE_MCP_PORT", "not-a-port")
    async with hosted_voice_channel() as hosting:
        with pytest.raises(RuntimeError, match="BACKLINE_MCP_PORT must be a port number"):
            await hosting.host()


async def test_a_taken_port_leaves_the_front_end_running_and_says_why(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        monkeypatch.setenv("BACKLINE_MCP_PORT", str(taken.getsockname()[1]))
        async with hosted_voice_channel() as hosting:
            with pytest.raises(RuntimeError, match="the MCP endpoint did not start: OSError"):
                await hosting.host()
    finally:
        taken.close()
    (warning,) = [r for r in caplog.records if "did not start" in r.getMessage()]
    assert warning.levelname == "WARNING" and "everything else works" in warning.getMessage()
