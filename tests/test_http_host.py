"""The one loopback HTTP host (``backline.http_host``): it serves once ``start`` returns,
says why it could not start, stops within its bound (a stuck request, a cancelled
closer), and its loopback checks refuse names of other machines."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from backline.http_host import (
    HttpHost,
    host_is_loopback,
    hostname_of,
    is_ip_address,
    is_loopback,
    origin_is_loopback,
)

TIMEOUT = 30.0  # a bound against hangs, not a speed check


def hello_app(*, stuck: asyncio.Event | None = None, lifespan: Any = None) -> Starlette:
    async def hello(request: Request) -> PlainTextResponse:
        return PlainTextResponse("hello")

    async def stuck_request(request: Request) -> PlainTextResponse:
        assert stuck is not None
        stuck.set()
        await asyncio.Event().wait()  # never answers: only a forced stop ends it
        raise AssertionError("unreachable")

    return Starlette(routes=[Route("/", hello), Route("/stuck", stuck_request)], lifespan=lifespan)


async def test_it_serves_as_soon_as_start_returns_and_stops_on_close() -> None:
    host = HttpHost(hello_app(), name="the test host")
    await host.start()
    try:
        assert host.running
        assert host.base_url == f"http://127.0.0.1:{host.port}"
        async with httpx2.AsyncClient() as http:
            response = await http.get(host.base_url + "/", timeout=TIMEOUT)
        assert response.text == "hello"
    finally:
        await host.aclose()
    assert not host.running
    with pytest.raises(httpx2.ConnectError):
        async with httpx2.AsyncClient() as http:
            await http.get(host.base_url + "/", timeout=TIMEOUT)


async def test_a_taken_port_fails_start_with_the_os_error() -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        host = HttpHost(hello_app(), port=taken.getsockname()[1])
        with pytest.raises(OSError):
            await host.start()
        await host.aclose()
    finally:
        taken.close()


async def test_an_app_whose_startup_fails_makes_start_raise_and_leaves_nothing_running() -> None:
    @contextlib.asynccontextmanager
    async def broken(app: Starlette) -> AsyncIterator[None]:
        raise RuntimeError("no database")
        yield

    host = HttpHost(hello_app(lifespan=broken), name="the test host")
    with pytest.raises(RuntimeError, match="the test host could not start"):
        await host.start()
    assert not host.running
    await host.aclose()


async def test_it_cannot_start_twice() -> None:
    async with HttpHost(hello_app(), name="the test host") as host:
        with pytest.raises(RuntimeError, match="the test host was already started"):
            await host.start()


async def test_wait_serves_until_told_to_stop() -> None:
    stop = asyncio.Event()
    async with HttpHost(hello_app()) as host:
        waiting = asyncio.create_task(host.wait(stop))
        async with httpx2.AsyncClient() as http:
            assert (await http.get(host.base_url + "/", timeout=TIMEOUT)).text == "hello"
        assert not waiting.done()
        stop.set()
        await asyncio.wait_for(waiting, TIMEOUT)
        assert host.running  # wait() returns; closing is the owner's job


async def test_a_stuck_request_is_cut_off_within_the_bound() -> None:
    stuck = asyncio.Event()
    host = HttpHost(hello_app(stuck=stuck), stop_timeout=3.0)
    await host.start()
    async with httpx2.AsyncClient() as http:
        request = asyncio.create_task(http.get(host.base_url + "/stuck", timeout=TIMEOUT))
        await asyncio.wait_for(stuck.wait(), TIMEOUT)
        await asyncio.wait_for(host.aclose(), host.close_bound + 1)
        assert not host.running
        await cut_off(request)


async def test_a_cancelled_close_still_stops_the_server_then_lets_the_cancellation_on() -> None:
    stuck = asyncio.Event()
    cleaned = asyncio.Event()

    async def after_stop() -> None:
        cleaned.set()

    host = HttpHost(hello_app(stuck=stuck), stop_timeout=3.0, after_stop=after_stop)
    await host.start()
    async with httpx2.AsyncClient() as http:
        request = asyncio.create_task(http.get(host.base_url + "/stuck", timeout=TIMEOUT))
        await asyncio.wait_for(stuck.wait(), TIMEOUT)
        # The closer is cancelled while the stuck request holds the graceful stop.
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.1):
                await host.aclose()
        assert not host.running and cleaned.is_set()
        await cut_off(request)
    await host.aclose()  # idempotent: already closed


async def cut_off(request: asyncio.Task[httpx2.Response]) -> None:
    """The stuck request ended without its answer (uvicorn answers 500 if it can)."""
    with contextlib.suppress(httpx2.HTTPError):
        assert (await request).status_code == 500


async def test_a_close_before_start_is_harmless_and_final() -> None:
    host = HttpHost(hello_app())
    await host.aclose()
    with pytest.raises(RuntimeError, match="already started"):
        await host.start()
    with pytest.raises(RuntimeError, match="is not running"):
        host.port  # noqa: B018


def test_the_stop_bound_leaves_room_for_uvicorns_own_shutdown() -> None:
    with pytest.raises(ValueError, match="stop_timeout"):
        HttpHost(hello_app(), stop_timeout=1.0)


# -- names -------------------------------------------------------------------------------------
def test_loopback_names() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "LOCALHOST", "::1", "[::1]", "127.1.2.3"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "192.168.1.2", "example.com", ""))
    assert is_ip_address("[::1]") and is_ip_address("10.0.0.1")
    assert not is_ip_address("localhost")
    assert hostname_of("Example.COM:8080") == "example.com"
    assert hostname_of("[::1]:80") == "::1"
    assert hostname_of("[bad") == ""


@pytest.mark.parametrize(
    ("header", "loopback"),
    [
        ("127.0.0.1:8000", True),
        ("localhost", True),
        ("[::1]:9", True),
        ("attacker.example:8000", False),
        ("127.0.0.1.attacker.example", False),
        ("", False),
        ("[::1", False),
    ],
)
def test_a_host_header_is_loopback_only_when_it_names_this_machine(
    header: str, loopback: bool
) -> None:
    assert host_is_loopback(header) is loopback


@pytest.mark.parametrize(
    ("origin", "loopback"),
    [
        ("http://localhost:3000", True),
        ("https://[::1]", True),
        ("http://127.0.0.1:8000", True),
        ("http://attacker.example", False),
        ("null", False),
        ("file://", False),
        ("ftp://127.0.0.1", False),
    ],
)
def test_an_origin_is_loopback_only_when_it_is_a_web_origin_on_this_machine(
    origin: str, loopback: bool
) -> None:
    assert origin_is_loopback(origin) is loopback


def test_the_names_load_no_server() -> None:
    code = (
        "import sys, backline.http_host\n"
        "print(sorted(m for m in ('uvicorn', 'starlette') if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]"
