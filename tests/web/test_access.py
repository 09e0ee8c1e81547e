"""Who may talk to the web server (issue 13, item 15): the Host and Origin a browser sends
(DNS rebinding, cross-site WebSocket hijacking), the cookie the page gets instead of
keeping the token, the one-time sign-in link ``--open`` uses, and short tokens."""

from __future__ import annotations

import asyncio
import io
import os
import signal
import webbrowser
from typing import Any

import httpx2
import pytest
from click.testing import CliRunner
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from backline.cli import web
from backline.io.web import SUBPROTOCOL, WebServer, serve_web
from backline.io.web._access import Access

from .conftest import TIMEOUT, Client, ws_url
from .scenario import Controls, make_factory


def http_client(server: WebServer) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(base_url=f"http://127.0.0.1:{server.port}")


async def ws_status(url: str, *, to_port: int | None = None, **headers: str) -> int:
    """The HTTP status a WebSocket handshake gets (101 when accepted). With ``to_port``,
    connect to that port on loopback whatever host ``url`` names (the Host header)."""
    route: dict[str, Any] = {} if to_port is None else {"host": "127.0.0.1", "port": to_port}
    try:
        async with connect(
            url,
            additional_headers=headers,
            subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
            open_timeout=TIMEOUT,
            **route,
        ) as ws:
            await ws.recv()  # hello
            return 101
    except InvalidStatus as e:
        return e.response.status_code


# -- Host: DNS rebinding -----------------------------------------------------------------------
@pytest.mark.parametrize("host", ["evil.example", "evil.example:8000", "127.0.0.1.nip.io", ""])
async def test_a_foreign_host_header_is_refused_even_with_the_token(
    server: WebServer, host: str
) -> None:
    async with http_client(server) as http:
        response = await http.get(f"/?token={server.token}", headers={"Host": host})
    assert response.status_code == 403
    assert "DNS rebinding" in response.text and "--allow-host" in response.text
    if host:
        url = f"ws://{host}/ws?token={server.token}"
        assert await ws_status(url, to_port=server.port) == 403


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "[::1]"])
async def test_loopback_host_names_are_served(server: WebServer, host: str) -> None:
    async with http_client(server) as http:
        response = await http.get(
            f"/?token={server.token}", headers={"Host": f"{host}:{server.port}"}
        )
    assert response.status_code == 200


# -- Origin: cross-site WebSocket hijacking ------------------------------------------------------
async def test_a_websocket_from_another_site_is_refused_even_with_the_token(
    server: WebServer, controls: Controls
) -> None:
    url = ws_url(server)
    assert await ws_status(url, Origin="https://evil.example") == 403
    assert await ws_status(url, Origin="null") == 403
    assert await ws_status(url, Origin=f"http://127.0.0.1:{server.port + 1}") == 403
    assert controls.sessions == []  # nothing was built for them
    # The page itself (same origin) and programs (no Origin) are served.
    assert await ws_status(url, Origin=f"http://127.0.0.1:{server.port}") == 101
    assert await ws_status(url) == 101


async def test_a_cross_site_request_is_refused(server: WebServer) -> None:
    async with http_client(server) as http:
        response = await http.get(
            f"/?token={server.token}", headers={"Origin": "https://evil.example"}
        )
    assert response.status_code == 403
    assert "another site" in response.text


async def test_allowed_hosts_serve_a_reverse_proxy(controls: Controls) -> None:
    async with WebServer(make_factory(controls), allow_hosts=["Voice.Example.com"]) as web:
        async with http_client(web) as http:
            proxied = {"Host": "voice.example.com", "Origin": "https://voice.example.com"}
            response = await http.get(f"/?token={web.token}", headers=proxied)
            assert response.status_code == 200
        # nginx keeps the upstream Host; the browser's Origin is the public name
        assert await ws_status(ws_url(web), Origin="https://voice.example.com") == 101
        assert await ws_status(ws_url(web), Origin="https://other.example.com") == 403


def test_which_hosts_a_binding_answers_to() -> None:
    loopback = Access("t" * 32, bind_host="127.0.0.1")
    assert loopback.host_allowed("localhost") and loopback.host_allowed("::1")
    assert not loopback.host_allowed("192.168.1.5") and not loopback.host_allowed("evil.example")
    wildcard = Access("t" * 32, bind_host="0.0.0.0", allow_hosts=["box.lan"])
    assert wildcard.host_allowed("192.168.1.5") and wildcard.host_allowed("fe80::1")
    assert wildcard.host_allowed("box.lan") and wildcard.host_allowed("localhost")
    assert not wildcard.host_allowed("evil.example")  # a name needs --allow-host
    one = Access("t" * 32, bind_host="192.168.1.5")
    assert one.host_allowed("192.168.1.5") and not one.host_allowed("192.168.1.6")


# -- the cookie ----------------------------------------------------------------------------------
async def test_the_page_gets_a_strict_http_only_cookie_that_also_opens_the_socket(
    server: WebServer,
) -> None:
    async with http_client(server) as http:
        page = await http.get(f"/?token={server.token}")
        cookie = page.headers["set-cookie"]
        assert cookie.startswith(f"backline_{server.port}=")
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert server.token not in cookie
        value = http.cookies[f"backline_{server.port}"]
        assert (await http.get("/")).status_code == 200
    url = f"ws://127.0.0.1:{server.port}/ws"
    assert await ws_status(url) == 403  # neither token nor cookie
    assert await ws_status(url, Cookie=f"backline_{server.port}={value}") == 101
    assert await ws_status(url, Cookie=f"backline_{server.port}=forged") == 403


# -- --open: a one-time sign-in link -------------------------------------------------------------
async def test_a_sign_in_link_works_once_and_carries_no_token(server: WebServer) -> None:
    link = server.sign_in_url()
    assert server.token not in link and "?code=" in link
    async with httpx2.AsyncClient() as browser:
        page = await browser.get(link)
        assert page.status_code == 200
        assert "HttpOnly" in page.headers["set-cookie"]
        assert (await browser.get(f"http://127.0.0.1:{server.port}/")).status_code == 200
    async with httpx2.AsyncClient() as other:
        again = await other.get(link)
        assert again.status_code == 403
        assert "already used" in again.text


async def test_a_sign_in_link_used_twice_signs_out_the_first_user(
    server: WebServer, controls: Controls
) -> None:
    """Someone who read the link off the browser's command line wins the race: when the
    real browser arrives with the same link, the first session is signed out."""
    link = server.sign_in_url()
    async with httpx2.AsyncClient() as thief:
        assert (await thief.get(link)).status_code == 200
        cookie = thief.cookies[f"backline_{server.port}"]
    url = f"ws://127.0.0.1:{server.port}/ws"
    async with connect(
        url,
        additional_headers={"Cookie": f"backline_{server.port}={cookie}"},
        subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
        open_timeout=TIMEOUT,
    ) as ws:
        client = Client(ws)
        await client.expect("hello")
        async with httpx2.AsyncClient() as browser:
            assert (await browser.get(link)).status_code == 403
        error = await client.expect("error")
        assert "signed out" in error["message"]
        assert (await client.expect("closed"))["reason"] == "signed_out"
        with pytest.raises(ConnectionClosed) as info:
            await client.expect_any()
        assert info.value.rcvd is not None and info.value.rcvd.code == 4003
    await controls.wait_for(lambda: len(controls.closed) == 1)
    assert await ws_status(url, Cookie=f"backline_{server.port}={cookie}") == 403


def test_a_sign_in_code_expires() -> None:
    now = [100.0]
    access = Access("t" * 32, bind_host="127.0.0.1", clock=lambda: now[0])
    code = access.new_code()
    now[0] += 61
    refused = access.redeem(code)
    assert not isinstance(refused, str) and "expired" in refused.message
    assert isinstance(access.redeem(access.new_code()), str)


async def test_open_gives_the_browser_a_sign_in_link_not_the_token(
    controls: Controls, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop = asyncio.get_running_loop()
    opened: list[str] = []
    was_opened = asyncio.Event()

    def fake_open(url: str, *args: Any, **kwargs: Any) -> bool:  # runs in a thread
        opened.append(url)
        loop.call_soon_threadsafe(was_opened.set)
        return True

    monkeypatch.setattr(webbrowser, "open", fake_open)
    out = io.StringIO()
    ready: asyncio.Future[WebServer] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        serve_web(make_factory(controls), open_browser=True, out=out, ready=ready.set_result)
    )
    web = await asyncio.wait_for(asyncio.shield(ready), TIMEOUT)
    await asyncio.wait_for(was_opened.wait(), TIMEOUT)
    [url] = opened
    assert web.token not in url and url.startswith(f"http://127.0.0.1:{web.port}/?code=")
    async with httpx2.AsyncClient() as browser:
        assert (await browser.get(url)).status_code == 200
    os.kill(os.getpid(), signal.SIGINT)
    await asyncio.wait_for(task, TIMEOUT)
    assert web.token in out.getvalue()  # the terminal still shows the full URL


# -- the token -----------------------------------------------------------------------------------
def test_the_command_refuses_a_short_token() -> None:
    result = CliRunner().invoke(web, ["--token", "hunter2"])
    assert result.exit_code == 2
    assert "at least 16 characters (got 7)" in result.output
    result = CliRunner().invoke(web, [], env={"BACKLINE_WEB_TOKEN": "short"})
    assert result.exit_code == 2 and "at least 16 characters" in result.output
