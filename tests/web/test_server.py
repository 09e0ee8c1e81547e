"""The web server without a browser: the token, the protocol over a real WebSocket,
playout reports truncating the history, and the life of each tab's session."""

from __future__ import annotations

import asyncio
import io
import os
import signal
from typing import Any

import httpx2
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus

from backline import Agent, ChatMessage, Session
from backline.io.web import WebServer, is_loopback, serve_web
from backline.testing import ScriptedLLM

from .conftest import TIMEOUT, Client, ws_url
from .scenario import STORY, Controls, make_factory, working


def assistant_messages(session: Any) -> list[ChatMessage]:
    return [
        it for it in session.history.items if isinstance(it, ChatMessage) and it.role == "assistant"
    ]


# -- the token ---------------------------------------------------------------------------------
async def test_page_and_assets_need_the_token(server: WebServer) -> None:
    base = f"http://127.0.0.1:{server.port}"
    async with httpx2.AsyncClient(base_url=base) as http:
        for path in ("/", "/?token=wrong", "/static/app.js", "/static/app.js?token=x"):
            response = await http.get(path)
            assert response.status_code == 403, path
            assert "access token" in response.text
        page = await http.get(f"/?token={server.token}")
        assert page.status_code == 200
        assert server.token not in page.text  # the page gets a cookie, not the token
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        assert page.headers["referrer-policy"] == "no-referrer"
        assets = (("app.js", "javascript"), ("speech.js", "javascript"), ("app.css", "css"))
        for name, kind in assets:  # with the cookie the page set
            asset = await http.get(f"/static/{name}")
            assert asset.status_code == 200 and kind in asset.headers["content-type"]
        missing = await http.get("/static/secrets.txt")
        assert missing.status_code == 404


@pytest.mark.parametrize("query", ["?token=wrong", "", "?token="])
async def test_websocket_with_a_wrong_token_gets_403(server: WebServer, query: str) -> None:
    from websockets.asyncio.client import connect

    url = f"ws://127.0.0.1:{server.port}/ws{query}"
    with pytest.raises(InvalidStatus) as info:
        async with connect(url, open_timeout=TIMEOUT):
            pass
    assert info.value.response.status_code == 403


async def test_a_chosen_token_is_used(controls: Controls) -> None:
    async with WebServer(make_factory(controls), token="s3cret-token-of-mine") as web:
        assert web.url == f"http://127.0.0.1:{web.port}/?token=s3cret-token-of-mine"
    for short in ("", "s3cret-token"):
        with pytest.raises(ValueError, match="at least 16 characters"):
            WebServer(make_factory(controls), token=short)


# -- a conversation ----------------------------------------------------------------------------
async def test_hello_then_a_spoken_turn(open_client: Any, controls: Controls) -> None:
    async with open_client() as client:
        hello = await client.expect("hello")
        assert hello["protocol"] == 1
        assert [b["id"] for b in hello["backgrounds"]] == ["claude_code"]
        assert hello["backgrounds"][0]["description"].startswith("Claude Code")
        await client.expect("agent_state", lambda m: m["state"] == "listening")

        await client.send(type="user_turn", text="  hello there ")
        user = await client.expect("transcript", lambda m: m["kind"] == "user")
        assert user["text"] == "hello there"
        segment, spoken = await client.segment()
        assert spoken == "You said: hello there. What next?"
        assert any(m == {"type": "agent_state", "state": "speaking"} for m in client.seen)
        await client.send(type="playout", segment=segment, text=spoken, interrupted=False)
        agent = await client.expect("transcript", lambda m: m["kind"] == "agent")
        assert agent["text"] == spoken and agent["interrupted"] is False
        assert agent["segment"] == segment and agent["source"] == "user_turn"
        await client.expect("agent_state", lambda m: m["state"] == "listening")
        [message] = assistant_messages(controls.sessions[0])
        assert message.content == spoken and not message.interrupted


async def test_barge_in_keeps_only_the_spoken_text_in_the_history(
    open_client: Any, controls: Controls
) -> None:
    async with open_client() as client:
        await client.expect("hello")
        await client.send(type="user_turn", text="tell me a story")
        segment, text = await client.segment()
        assert text == STORY
        # The page has spoken the first sentence and three words when the user speaks.
        spoken = STORY.split(". ")[0] + ". Every night it"
        await client.send(type="user_started_speaking")
        await client.expect("user_state", lambda m: m["state"] == "speaking")
        await client.expect("segment_clear", lambda m: m["segment"] == segment)
        await client.send(type="playout", segment=segment, text=spoken, interrupted=True)
        agent = await client.expect("transcript", lambda m: m["kind"] == "agent")
        assert agent["text"] == spoken and agent["interrupted"] is True
        [message] = assistant_messages(controls.sessions[0])
        assert message.content == spoken and message.interrupted


async def test_a_cut_report_that_strays_from_the_text_keeps_the_common_prefix(
    open_client: Any, controls: Controls
) -> None:
    async with open_client() as client:
        await client.expect("hello")
        await client.send(type="user_turn", text="a story please")
        segment, _ = await client.segment()
        await client.send(type="interrupt")
        await client.expect("segment_clear")
        await client.send(
            type="playout", segment=segment, text="Once upon a time a BIG", interrupted=True
        )
        agent = await client.expect("transcript", lambda m: m["kind"] == "agent")
        assert agent["text"] == "Once upon a time a "
        assert assistant_messages(controls.sessions[0])[0].content == "Once upon a time a "


async def test_bad_and_stale_messages_are_answered_and_the_tab_goes_on(
    open_client: Any, controls: Controls
) -> None:
    async with open_client() as client:
        await client.expect("hello")
        for bad, says in (
            ("not json", "not JSON"),
            ('{"type": "dance"}', "unknown message type 'dance'"),
            ('{"type": "user_turn", "text": "   "}', "'text' is empty"),
            ('{"type": "playout", "segment": true, "text": "", "interrupted": 1}', "segment"),
            ("[1, 2]", "JSON object"),
        ):
            await client.ws.send(bad)
            error = await client.expect("error")
            assert error["source"] == "protocol" and says in error["message"], error
        await client.send(type="user_turn", text="tell me a story, slowly")
        start = await client.expect("segment_start")
        await client.send(type="playout", segment=start["segment"], text="", interrupted=False)
        error = await client.expect("error")
        assert "cannot have finished before segment_end" in error["message"]
        await client.expect("segment_end")
        await client.send(type="interrupt")
        await client.expect("segment_clear")
        await client.send(type="playout", segment=start["segment"], text="", interrupted=True)
        await client.expect("agent_state", lambda m: m["state"] == "listening")

        await client.send(type="user_turn", text="hi")
        segment, spoken = await client.segment()
        # A report for another segment is stale: ignored.
        await client.send(type="playout", segment=segment + 5, text="", interrupted=True)
        await client.send(type="playout", segment=segment, text=spoken, interrupted=False)
        agent = await client.expect("transcript", lambda m: m["kind"] == "agent")
        assert agent["text"] == spoken and not agent["interrupted"]


async def test_background_updates_state_and_notes_reach_the_page_without_input(
    open_client: Any, controls: Controls
) -> None:
    async with open_client() as client:
        await client.expect("hello")
        await client.expect("background_status", lambda m: m["status"] == "running")
        state = await client.expect("background_state")
        assert state["state"]["status"] == "idle, waiting for a task"
        ctx = await controls.context()

        ctx.set_state(working("fix the login test", ["Edit src/login.py"], ["src/login.py"]))
        state = await client.expect("background_state")
        assert state["background_id"] == "claude_code"
        assert state["state"]["files_changed"] == ["src/login.py"]
        assert (
            state["summary"]
            == "working · Edit src/login.py · 1 file changed · task fix the login test"
        )

        await ctx.send("reading tests/test_login.py", silent=True)
        note = await client.expect("transcript", lambda m: m["kind"] == "background")
        assert note["silent"] is True and note["text"] == "reading tests/test_login.py"

        await ctx.send("the login test passes now")
        sent = await client.expect("transcript", lambda m: m["kind"] == "background")
        assert sent["silent"] is False
        start = await client.expect("segment_start")
        assert start["source"] == "background_reply"
        assert start["background_id"] == "claude_code"
        segment, spoken = start["segment"], ""
        while (m := await client.expect_any())["type"] != "segment_end":
            spoken += m.get("text", "")
        assert spoken == "Update from Claude Code: the login test passes now"
        await client.send(type="playout", segment=segment, text=spoken, interrupted=False)
        agent = await client.expect("transcript", lambda m: m["kind"] == "agent")
        assert agent["source"] == "background_reply" and agent["background_id"] == "claude_code"


async def test_delegating_shows_the_tool_call(open_client: Any, controls: Controls) -> None:
    async with open_client() as client:
        await client.expect("hello")
        await client.send(type="user_turn", text="fix the login test")
        tool = await client.expect("transcript", lambda m: m["kind"] == "tool")
        assert tool["name"] == "backline_send" and "claude_code" in tool["text"]
        segment, spoken = await client.segment()
        await client.send(type="playout", segment=segment, text=spoken, interrupted=False)
        await controls.wait_for(lambda: controls.received == ["fix the login test"])


# -- tabs and their sessions -------------------------------------------------------------------
async def test_closing_the_tab_closes_its_session(open_client: Any, controls: Controls) -> None:
    async with open_client() as client:
        await client.expect("hello")
        await client.send(type="user_turn", text="tell me a story")
        await client.expect("segment_end")  # the page goes away mid-speech
    await controls.wait_for(lambda: controls.closed == controls.sessions)
    session = controls.sessions[0]
    assert session.closed
    # Nothing was confirmed spoken, so the cut reply left nothing in the history.
    assert assistant_messages(session) == []


async def test_each_tab_has_its_own_session_and_tabs_are_bounded(
    server: WebServer, open_client: Any, controls: Controls
) -> None:
    async with open_client() as a, open_client() as b, open_client() as c:
        hellos = [await x.expect("hello") for x in (a, b, c)]
        assert len({h["session_id"] for h in hellos}) == 3
        assert len({id(s) for s in controls.sessions}) == 3 == len(server.tabs)
        async with open_client() as d:
            error = await d.expect("error")
            assert "at most 3" in error["message"] and error["recoverable"] is False
            with pytest.raises(ConnectionClosed) as info:
                await d.expect_any()
            assert info.value.rcvd is not None and info.value.rcvd.code == 1013
        await a.send(type="user_turn", text="only in a")
        await a.expect("transcript", lambda m: m["kind"] == "user")
        await b.send(type="user_turn", text="only in b")
        await b.expect("transcript", lambda m: m["kind"] == "user")
        users = [
            [m.content for m in s.history.items if isinstance(m, ChatMessage) and m.role == "user"]
            for s in controls.sessions[:2]
        ]
        assert users == [["only in a"], ["only in b"]]


async def test_an_unsupported_protocol_version_is_refused(open_client: Any) -> None:
    async with open_client(subprotocols=["backline.v9"]) as client:
        error = await client.expect("error")
        assert "backline.v1" in error["message"]
        with pytest.raises(ConnectionClosed):
            await client.expect_any()


async def test_stopping_the_server_closes_every_session(controls: Controls) -> None:
    web = WebServer(make_factory(controls))
    await web.start()
    try:
        from websockets.asyncio.client import connect

        async with connect(ws_url(web), open_timeout=TIMEOUT) as ws:
            client = Client(ws)
            await client.expect("hello")
            await client.send(type="user_turn", text="tell me a story")
            await client.expect("segment_end")
            async with asyncio.timeout(TIMEOUT):
                await web.aclose()
            with pytest.raises(ConnectionClosed):
                await client.expect_any()
    finally:
        await web.aclose()
    assert controls.closed == controls.sessions and len(controls.sessions) == 1


async def test_a_factory_that_fails_is_reported_to_the_page(open_client: Any) -> None:
    def broken() -> Any:
        raise RuntimeError("no LLM configured")

    async with WebServer(broken) as web:
        from websockets.asyncio.client import connect

        async with connect(ws_url(web), open_timeout=TIMEOUT) as ws:
            error = await Client(ws).expect("error")
            assert "no LLM configured" in error["message"]


async def test_a_session_that_fails_to_start_is_reported_then_closed() -> None:
    async def started_already() -> Any:  # an async factory, whose session cannot start again
        session: Session[Any] = Session(ScriptedLLM([]))
        await session.start(Agent("first"))
        return session, Agent("second")

    async with WebServer(started_already) as web:
        from websockets.asyncio.client import connect

        async with connect(ws_url(web), open_timeout=TIMEOUT) as ws:
            client = Client(ws)
            await client.expect("hello")
            error = await client.expect("error")
            assert "failed to start" in error["message"] and "already started" in error["message"]
            assert (await client.expect("closed"))["reason"] == "error"
            with pytest.raises(ConnectionClosed) as info:
                await client.expect_any()
            assert info.value.rcvd is not None and info.value.rcvd.code == 1000


# -- serve_web -----------------------------------------------------------------------------------
def test_loopback_hosts() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "localhost", "::1", "[::1]", "127.1.2.3"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "192.168.1.2", "example.com"))


async def test_serve_web_prints_the_url_and_stops_cleanly_on_ctrl_c(controls: Controls) -> None:
    out = io.StringIO()
    ready: asyncio.Future[WebServer] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(serve_web(make_factory(controls), out=out, ready=ready.set_result))
    web = await asyncio.wait_for(asyncio.shield(ready), TIMEOUT)
    async with httpx2.AsyncClient() as http:
        assert (await http.get(web.url)).status_code == 200
    os.kill(os.getpid(), signal.SIGINT)
    await asyncio.wait_for(task, TIMEOUT)
    printed = out.getvalue()
    assert f"open http://127.0.0.1:{web.port}/?token={web.token}" in printed
    assert "WARNING" not in printed
