"""What a page cannot do to the server (issue 13, item 14): stop reading while a background
chatters (the tab's queue is bounded, states coalesce, a tab too far behind is dropped
with a reason), or send JSON nested deep enough to break the parser (refused; the tab
goes on)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from backline import Agent, BackgroundContext, Session, background
from backline.io.web import SUBPROTOCOL, WebServer
from backline.limits import Limits
from backline.testing import ScriptedLLM

from .conftest import TIMEOUT, Client, ws_url
from .scenario import voice_model


async def test_json_nested_too_deep_is_refused_and_the_tab_goes_on(open_client: Any) -> None:
    async with open_client() as client:
        await client.expect("hello")
        await client.ws.send("[" * 100_000 + "]" * 100_000)  # 200 KB, under the size bound
        error = await client.expect("error")
        assert error["source"] == "protocol" and error["recoverable"] is True
        assert "nested too deeply" in error["message"]
        await client.send(type="user_turn", text="still there?")
        _, spoken = await client.segment()
        assert spoken == "You said: still there?. What next?"


async def test_a_burst_of_states_reaches_the_page_as_the_latest_one() -> None:
    @background("counter", description="Counts fast.")
    async def counter(ctx: BackgroundContext) -> None:
        for n in range(5_000):  # no await in between: one burst
            ctx.set_state({"n": n})
        await ctx.send("counted", silent=True)

    def factory() -> tuple[Session[Any], Agent]:
        return Session(ScriptedLLM(voice_model), background=[counter]), Agent("Be brief.")

    async with (
        WebServer(factory) as web,
        connect(
            ws_url(web),
            subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
            open_timeout=TIMEOUT,
        ) as ws,
    ):
        client = Client(ws)
        await client.expect("transcript", lambda m: m["text"] == "counted")
    counts = [m["state"]["n"] for m in client.seen if m["type"] == "background_state"]
    assert counts == [4_999]


async def test_a_page_that_stops_reading_is_dropped_with_a_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    limits = Limits(max_web_queue_messages=50, max_web_queue_bytes=512 * 1024)
    closed = asyncio.Event()

    @background("chatty", description="Never stops talking.")
    async def chatty(ctx: BackgroundContext) -> None:
        with contextlib.suppress(RuntimeError):  # "closed": the tab was dropped
            while True:
                # Random text: the socket compresses messages (permessage-deflate).
                await ctx.send(secrets.token_urlsafe(24_000), silent=True)
                await asyncio.sleep(0)

    def factory() -> tuple[Session[Any], Agent]:
        session: Session[Any] = Session(ScriptedLLM(voice_model), background=[chatty])
        session.on("close", lambda _: closed.set())
        return session, Agent("Be brief.")

    caplog.set_level(logging.WARNING, logger="backline")
    async with WebServer(factory, limits=limits) as web:
        # max_queue=1: the client stops reading from its socket after one message.
        async with connect(
            ws_url(web),
            subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
            open_timeout=TIMEOUT,
            max_queue=1,
        ) as ws:
            await asyncio.wait_for(closed.wait(), 60)  # the server gave up on the tab
            client = Client(ws)
            with pytest.raises(ConnectionClosed) as info:
                await read_to_the_end(client)  # the backlog, then why
        error = next(m for m in client.seen if m["type"] == "error")
        assert "fell too far behind" in error["message"] and error["recoverable"] is False
        assert client.seen[-1] == {"type": "closed", "reason": "too_far_behind"}
        assert info.value.rcvd is not None and info.value.rcvd.code == 4008
        assert "too far behind" in caplog.text
        assert web.tabs == []


async def read_to_the_end(client: Client) -> None:
    while True:
        await client.expect_any()


async def test_bounds_too_small_for_one_message_end_the_tab_cleanly() -> None:
    limits = Limits(max_web_queue_messages=1, max_web_queue_bytes=1)  # not even hello fits

    def factory() -> tuple[Session[Any], Agent]:
        return Session(ScriptedLLM(voice_model)), Agent("Be brief.")

    async with (
        WebServer(factory, limits=limits) as web,
        connect(ws_url(web), subprotocols=[SUBPROTOCOL], open_timeout=TIMEOUT) as ws,  # type: ignore[list-item]
    ):
        client = Client(ws)
        with pytest.raises(ConnectionClosed) as info:
            await read_to_the_end(client)
    assert [m["type"] for m in client.seen] == ["error", "closed"]
    assert info.value.rcvd is not None and info.value.rcvd.code == 4008
