"""The web front end: talk to the voice agent in a browser page (speech in and out).

``serve_web(factory)`` serves the page and one WebSocket per tab on loopback,
behind a random access token; each tab gets its own session from ``factory()``.
``WebServer`` is the same server as an async context manager, and
``build_web_command`` makes the ``backline web`` click command. ``WebSpeech`` says who
listens and speaks: the browser, or the server's own engines (``--speech``;
``choose_web_speech`` builds it from the command's options). The WebSocket
protocol is in ``backline.io.web.protocol`` and ``docs/web.md``.

The server (Starlette, uvicorn) is imported on first use, so the CLI can
register the command without paying for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...http_host import is_loopback
from ._command import build_web_command
from ._speech import SPEECH_MODES, WebSpeech, choose_web_speech
from .protocol import PROTOCOL_VERSION, SUBPROTOCOL

if TYPE_CHECKING:
    from .server import TabFactory, WebServer, serve_web

__all__ = [
    "PROTOCOL_VERSION",
    "SPEECH_MODES",
    "SUBPROTOCOL",
    "TabFactory",
    "WebServer",
    "WebSpeech",
    "build_web_command",
    "choose_web_speech",
    "is_loopback",
    "serve_web",
]

_SERVER_NAMES = frozenset({"TabFactory", "WebServer", "serve_web"})


def __getattr__(name: str) -> Any:
    if name in _SERVER_NAMES:
        from . import server

        return getattr(server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
