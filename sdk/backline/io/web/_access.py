"""Who may talk to the web server: one gate in front of every HTTP request and WebSocket.

Three checks, in order:

1. **Host** (DNS rebinding): the ``Host`` header must name this server as the user
   meant to reach it: a loopback name (``localhost``, ``127.0.0.1``, ``[::1]``), the
   address it was bound to, any IP address when bound to every interface
   (``0.0.0.0``, ``::``; a rebinding attack always uses a domain name), or a name
   given with ``allow_hosts`` (``--allow-host``, for a reverse proxy).
2. **Origin** (cross-site WebSocket hijacking, cross-site requests): when a browser
   sends ``Origin``, it must be this server itself (same host and port as ``Host``)
   or a host in ``allow_hosts``. Programs that send no ``Origin`` pass this check.
3. **Credentials**: the access token (``?token=``), or the cookie the server set when
   the page was opened with the token or with a one-time sign-in code (``?code=``,
   what ``--open`` gives the browser, so the token never appears on a command line).
   The cookie is ``HttpOnly`` and ``SameSite=Strict`` and names the port (cookies
   are per host, not per port).

A sign-in code works once, within ``Limits.web_sign_in_timeout``. If a used code is
presented again, someone else may have read it (a browser's command line is visible
to other local users): the session it signed in is revoked (``on_revoke``) and a
warning is logged.
"""

from __future__ import annotations

import itertools
import logging
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs, urlsplit

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ...http_host import WILDCARD_HOSTS, hostname_of, is_ip_address, is_loopback
from ...limits import DEFAULT_LIMITS, Limits

logger = logging.getLogger("backline")

GRANT_SCOPE_KEY = "backline.grant"
"""Where the gate leaves the grant a request came in with (``scope[GRANT_SCOPE_KEY]``)."""
TOKEN_GRANT = "token"
SIGN_IN_PATH = "/"
HEADERS = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}


def check_token(token: str | None, limits: Limits = DEFAULT_LIMITS) -> None:
    """Refuse a chosen access token too short to be a password (``ValueError``)."""
    if token is not None and len(token) < limits.min_web_token_chars:
        raise ValueError(
            f"the access token must have at least {limits.min_web_token_chars} characters "
            f"(got {len(token)}): it is the page's only password. Leave it out for a random "
            "one, or make one with `python -c 'import secrets; print(secrets.token_urlsafe(24))'`"
        )


@dataclass(frozen=True)
class Refusal:
    """Why a request was refused (HTTP 403 with ``message``)."""

    message: str


@dataclass
class _Code:
    expires: float
    grant: str | None = None  # set once redeemed
    revoked: bool = False


class Access:
    """The server's access rules: hosts, origins, the token, sign-in codes, cookies."""

    def __init__(
        self,
        token: str,
        *,
        bind_host: str,
        allow_hosts: Iterable[str] = (),
        limits: Limits = DEFAULT_LIMITS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.token = token
        self.bind_host = bind_host
        self.allow_hosts = frozenset(h.strip().lower().strip("[]") for h in allow_hosts if h)
        self.limits = limits
        self.port: int | None = None
        self.on_revoke: Callable[[str], None] = lambda grant: None
        self._clock = clock
        self._token_cookie = secrets.token_urlsafe(32)
        self._grants: dict[str, str] = {self._token_cookie: TOKEN_GRANT}  # cookie -> grant
        self._codes: dict[str, _Code] = {}
        self._code_numbers = itertools.count(1)

    # -- the rules ----------------------------------------------------------------------------
    def host_allowed(self, host: str) -> bool:
        """Whether a request's ``Host`` (name only) names this server as intended."""
        if not host:
            return False
        if is_loopback(host) or host in self.allow_hosts:
            return True
        if self.bind_host in WILDCARD_HOSTS:
            return is_ip_address(host)
        return host == self.bind_host.lower().strip("[]")

    def origin_allowed(self, origin: str | None, host_header: str) -> bool:
        """Whether a browser's ``Origin`` is this server (or an allowed proxy name)."""
        if origin is None:
            return True  # not a browser: browsers send Origin on every WebSocket
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False  # "null" (a file, a sandboxed frame) or garbage
        if parts.netloc.lower() == host_header.lower():
            return True
        return hostname_of(parts.netloc) in self.allow_hosts

    def cookie_name(self) -> str:
        return f"backline_{self.port or 0}"

    def grant_of_cookie(self, value: str | None) -> str | None:
        return self._grants.get(value) if value else None

    # -- sign-in codes ------------------------------------------------------------------------
    def new_code(self) -> str:
        """A one-time sign-in code, valid for ``limits.web_sign_in_timeout``."""
        code = secrets.token_urlsafe(16)
        self._codes[code] = _Code(expires=self._clock() + self.limits.web_sign_in_timeout)
        return code

    def redeem(self, code: str) -> str | Refusal:
        """The cookie value a valid code signs in with, or why it cannot."""
        entry = self._codes.get(code)
        if entry is None:
            return Refusal("this sign-in link is not valid for this server.")
        if entry.grant is not None:
            if not entry.revoked:
                entry.revoked = True
                self._revoke(entry.grant)
            return Refusal(
                "this sign-in link was already used. If that was not you, someone else on "
                "this machine may have used it: backline signed that session out."
            )
        if self._clock() > entry.expires:
            return Refusal(
                f"this sign-in link expired (it works for {self.limits.web_sign_in_timeout:g} s)."
            )
        entry.grant = f"code-{next(self._code_numbers)}"
        value = secrets.token_urlsafe(32)
        self._grants[value] = entry.grant
        return value

    def _revoke(self, grant: str) -> None:
        for value in [v for v, g in self._grants.items() if g == grant]:
            del self._grants[value]
        logger.warning(
            "backline web: a sign-in link was used twice; the session it opened is signed "
            "out. If you did not open it twice, another user of this machine may have read "
            "it: restart the server to be safe."
        )
        self.on_revoke(grant)

    # -- one request ---------------------------------------------------------------------------
    def admit(self, scope: Scope) -> tuple[str, str | None] | Refusal:
        """``(grant, cookie to set or None)`` for an admitted request, or a ``Refusal``."""
        headers = Headers(scope=scope)
        host_header = headers.get("host", "")
        host = hostname_of(host_header)
        if not self.host_allowed(host):
            return Refusal(
                f"this backline web server does not answer to the host name {host or '(none)'!r}"
                " (a protection against DNS rebinding). Open it as http://127.0.0.1:PORT or "
                "http://localhost:PORT, or start it with --allow-host NAME."
            )
        if not self.origin_allowed(headers.get("origin"), host_header):
            return Refusal(
                "requests from another site are refused (the page's Origin is "
                f"{headers.get('origin')!r}). Behind a proxy, start backline web with "
                "--allow-host and the name the browser uses."
            )
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        token = query.get("token", [""])[0]
        if token and secrets.compare_digest(token.encode(), self.token.encode()):
            return TOKEN_GRANT, self._sign_in_cookie(scope)
        code = query.get("code", [""])[0]
        if code and scope["type"] == "http" and scope.get("path") == SIGN_IN_PATH:
            redeemed = self.redeem(code)
            if isinstance(redeemed, Refusal):
                return Refusal(f"{redeemed.message} Open the URL backline web printed.")
            return self._grants[redeemed], redeemed
        cookies = SimpleCookie()
        try:
            cookies.load(headers.get("cookie", ""))
        except Exception:  # a malformed Cookie header is no cookie
            cookies = SimpleCookie()
        morsel = cookies.get(self.cookie_name())
        grant = self.grant_of_cookie(morsel.value if morsel is not None else None)
        if grant is not None:
            return grant, None
        return Refusal(
            "this backline web server needs its access token. Open the URL it printed at "
            "start (…/?token=…)."
        )

    def _sign_in_cookie(self, scope: Scope) -> str | None:
        """The cookie to set when the page itself is opened with the token."""
        if scope["type"] == "http" and scope.get("path") == SIGN_IN_PATH:
            return self._token_cookie
        return None

    def set_cookie_header(self, value: str) -> tuple[bytes, bytes]:
        cookie = f"{self.cookie_name()}={value}; Path=/; HttpOnly; SameSite=Strict"
        return b"set-cookie", cookie.encode("latin-1")


class AccessGate:
    """ASGI middleware: every HTTP request and WebSocket passes ``Access.admit`` or is
    refused with 403 (a WebSocket before its handshake)."""

    def __init__(self, app: ASGIApp, access: Access, headers: dict[str, str]) -> None:
        self._app = app
        self._access = access
        self._headers = {**HEADERS, **headers}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self._app(scope, receive, send)
            return
        admitted = self._access.admit(scope)
        if isinstance(admitted, Refusal):
            if scope["type"] == "http":
                text = f"403 Forbidden: {admitted.message}\n"
                await PlainTextResponse(text, 403, headers=self._headers)(scope, receive, send)
            else:  # closing before the handshake answers 403
                await send({"type": "websocket.close", "code": 1008})
            return
        grant, cookie = admitted
        scope[GRANT_SCOPE_KEY] = grant
        if cookie is None:
            await self._app(scope, receive, send)
            return
        header = self._access.set_cookie_header(cookie)

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), header]}
            await send(message)

        await self._app(scope, receive, send_with_cookie)


def grant_of(scope: Mapping[str, Any]) -> str | None:
    """The grant the gate admitted a request with."""
    grant = scope.get(GRANT_SCOPE_KEY)
    return grant if isinstance(grant, str) else None
