"""``backline web``: the click command, a front end of ``backline.app``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias

import click

from ...app import SessionOptions, hosting_voice_channel, plugin_manager, prepare_session
from ...app import session_options as session_options_decorator

if TYPE_CHECKING:
    from ...session import Session
    from ...voice.agent import Agent

SessionBuilder: TypeAlias = Callable[[SessionOptions], "tuple[Session[Any], Agent]"]
"""Builds one unstarted session and its agent from the session options."""

WEB_HELP = """Talk to the voice agent in your browser, by voice or text.

Serves a local page (speech recognition and speech synthesis are the
browser's own; no speech keys needed) and prints its URL with a random access
token. Each browser tab is its own conversation; closing the tab ends it.
Ctrl-C stops the server. See docs/web.md, including what the browser does
with your audio.
"""


def _check_token(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    from ._access import check_token

    try:
        check_token(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None
    return value


def build_web_command(
    name: str = "web", *, build_session: SessionBuilder | None = None
) -> click.Command:
    """The ``web`` command: the session options of ``backline.app`` and the server's own.

    ``build_session(options)`` builds one unstarted session and its agent (default:
    ``backline.app.prepare_session`` with the command's plugin manager); it is
    called once at start, so bad options fail before the server starts, then once
    for every new tab.
    """

    def default_build(options: SessionOptions) -> tuple[Session[Any], Agent]:
        return prepare_session(plugin_manager(), options)

    build = build_session or default_build

    @click.command(name, help=WEB_HELP)
    @session_options_decorator
    @click.option(
        "--host",
        default="127.0.0.1",
        show_default=True,
        help="Address to listen on. Anything but loopback is reachable by others: "
        "see docs/web.md before changing it.",
    )
    @click.option(
        "--allow-host",
        "allow_hosts",
        multiple=True,
        metavar="NAME",
        help="Also answer to this host name (repeatable): the name a browser uses to reach "
        "the server through a reverse proxy or DNS. Other names are refused (DNS rebinding).",
    )
    @click.option(
        "--port",
        type=click.IntRange(0, 65535),
        default=0,
        show_default=True,
        help="Port to listen on (0: any free port).",
    )
    @click.option(
        "--open",
        "open_browser",
        is_flag=True,
        help="Open the page in the browser (with a one-time sign-in link, not the token).",
    )
    @click.option(
        "--token",
        envvar="BACKLINE_WEB_TOKEN",
        metavar="TOKEN",
        callback=_check_token,
        help="Access token, at least 16 characters (default: a new random one at every start).",
    )
    @click.option(
        "--max-tabs",
        type=click.IntRange(min=1),
        default=None,
        help="How many conversations (tabs) may run at once (default: 8).",
    )
    def web(
        session_options: SessionOptions,
        host: str,
        allow_hosts: tuple[str, ...],
        port: int,
        open_browser: bool,
        token: str | None,
        max_tabs: int | None,
    ) -> None:
        from .server import DEFAULT_MAX_TABS, serve_web

        first = [build(session_options)]  # bad options fail here, before serving

        def factory() -> tuple[Session[Any], Agent]:
            return first.pop() if first else build(session_options)

        async def main() -> None:
            # The hook that serves the voice channel to MCP agents while the server runs.
            async with hosting_voice_channel(None, "backline web", say_when_ready=True):
                await serve_web(
                    factory,
                    host=host,
                    allow_hosts=allow_hosts,
                    port=port,
                    token=token,
                    open_browser=open_browser,
                    max_tabs=max_tabs or DEFAULT_MAX_TABS,
                )

        asyncio.run(main())

    return web
