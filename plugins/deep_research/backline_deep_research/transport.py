"""The fetcher's HTTP transport: an ``httpx`` transport over an ``httpcore`` connection
pool whose network backend resolves each host once, refuses the addresses
``hosts.refusal`` names, and connects to an address it checked.

``httpx.AsyncHTTPTransport`` has no way to give its pool a network backend, so this
is the same small adapter (an ``httpx`` request to an ``httpcore`` one and back, with
``httpcore``'s errors raised as ``httpx``'s) around a pool that has one. Imported
only when a fetcher's client is made (it loads ``httpx`` and ``httpcore``).
"""

from __future__ import annotations

import asyncio
import contextlib
import typing
from collections.abc import AsyncIterator, Iterable, Iterator

import httpcore
import httpx

from .errors import HostRefused
from .hosts import Network, parse_address, refusal, refused_message

_ERRORS: dict[type[Exception], type[httpx.HTTPError]] = {
    httpcore.ConnectTimeout: httpx.ConnectTimeout,
    httpcore.ReadTimeout: httpx.ReadTimeout,
    httpcore.WriteTimeout: httpx.WriteTimeout,
    httpcore.PoolTimeout: httpx.PoolTimeout,
    httpcore.TimeoutException: httpx.TimeoutException,
    httpcore.ConnectError: httpx.ConnectError,
    httpcore.ReadError: httpx.ReadError,
    httpcore.WriteError: httpx.WriteError,
    httpcore.NetworkError: httpx.NetworkError,
    httpcore.RemoteProtocolError: httpx.RemoteProtocolError,
    httpcore.LocalProtocolError: httpx.LocalProtocolError,
    httpcore.ProtocolError: httpx.ProtocolError,
    httpcore.UnsupportedProtocol: httpx.UnsupportedProtocol,
    httpcore.ProxyError: httpx.ProxyError,
}


@contextlib.contextmanager
def _as_httpx_errors() -> Iterator[None]:
    try:
        yield
    except tuple(_ERRORS) as e:
        mapped = next(_ERRORS[c] for c in type(e).__mro__ if c in _ERRORS)
        raise mapped(str(e)) from e


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """Resolves once, checks every address, connects to a checked one.

    A host that resolves to any refused address is refused as a whole (a name
    that mixes public and private addresses is not one to trust). With
    ``allow_private`` every address is allowed; names are still resolved once.
    """

    def __init__(self, network: Network, *, allow_private: bool = False) -> None:
        self.network = network
        self.allow_private = allow_private

    async def addresses(self, host: str, port: int) -> list[str]:
        """The addresses to connect to for ``host``: checked, in order."""
        if parse_address(host) is not None:
            candidates = [host]
        else:
            try:
                candidates = list(await self.network.resolve(host, port))
            except OSError as e:
                raise httpcore.ConnectError(f"{host} does not resolve: {e}") from None
            if not candidates:
                raise httpcore.ConnectError(f"{host} does not resolve to any address")
        if not self.allow_private:
            for candidate in candidates:
                address = parse_address(candidate)
                why = "unparsable" if address is None else refusal(address)
                if why is not None:
                    raise HostRefused(refused_message(host, candidate, why))
        return candidates

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[typing.Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        failure: Exception | None = None
        for address in await self.addresses(host, port):
            try:
                return await self.network.connect(address, port, timeout)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as e:
                failure = e  # the next address, if any
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[typing.Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise HostRefused("refused: the fetcher connects to TCP hosts only")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class _ResponseStream(httpx.AsyncByteStream):
    def __init__(self, stream: typing.AsyncIterable[bytes]) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _as_httpx_errors():
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        close = getattr(self._stream, "aclose", None)
        if close is not None:
            await close()


class GuardedTransport(httpx.AsyncBaseTransport):
    """An ``httpx`` transport whose every connection goes through ``GuardedBackend``."""

    def __init__(self, backend: GuardedBackend) -> None:
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            max_connections=20,
            max_keepalive_connections=10,
            keepalive_expiry=5.0,
            network_backend=backend,
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _as_httpx_errors():
            response = await self._pool.handle_async_request(core_request)
        assert isinstance(response.stream, typing.AsyncIterable)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_ResponseStream(response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()


def guarded_client(
    *,
    headers: dict[str, str],
    timeout: float,
    allow_private: bool = False,
    network: Network | None = None,
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` that reaches only allowed addresses, directly (no
    proxy from the environment: a proxy would resolve and connect out of reach of
    the check), and follows no redirect itself."""
    backend = GuardedBackend(network or Network(), allow_private=allow_private)
    return httpx.AsyncClient(
        transport=GuardedTransport(backend),
        headers=headers,
        timeout=httpx.Timeout(timeout),
        follow_redirects=False,
        trust_env=False,
    )
