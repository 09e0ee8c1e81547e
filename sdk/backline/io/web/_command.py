"""``backline web``: the click command, a front end of ``backline.app``."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias

import click

from ...app import (
    SPEECH_SECTION,
    SessionOptions,
    SpeechOptions,
    attach_conversation_log,
    hosting_voice_channel,
    plugin_manager,
    prepare_session,
    speech_options,
)
from ...app import session_options as session_options_decorator
from ._speech import SPEECH_MODES, SpeechMode, WebSpeech, choose_web_speech

if TYPE_CHECKING:
    from ...session import Session
    from ...voice.agent import Agent

SessionBuilder: TypeAlias = Callable[[SessionOptions], "tuple[Session[Any], Agent]"]
"""Builds one unstarted session and its agent from the session options."""

WEB_HELP = """Talk to the voice agent in your browser, by voice or text.

Serves a local page and prints its URL with a random access token. Speech is
the browser's own where it recognises speech (Chrome, Edge, Safari) and
backline's own engines (--stt, --tts: local ones by default) elsewhere
(--speech auto); --speech server uses backline's engines in every browser,
--speech browser never. Each browser tab is its own conversation; closing the
tab ends it. Ctrl-C stops the server. See docs/web.md, including where your
audio goes.
"""


def _check_token(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    from ._access import check_token

    try:
        check_token(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None
    return value


def _speech_mode_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--speech``, in the help's Speech section (after the engines' options)."""
    option = SPEECH_SECTION.option(
        "--speech",
        "speech_mode",
        type=click.Choice(SPEECH_MODES),
        default="auto",
        show_default=True,
        help="Who listens and speaks: the browser where it recognises speech, else the "
        "server's engines (auto); the server's engines in every browser (server); the "
        "browser only (browser).",
    )
    params: list[click.Parameter] = getattr(command, "__click_params__", [])
    command.__click_params__ = params  # type: ignore[attr-defined]
    params.append(option)
    return command


def build_web_command(
    name: str = "web", *, build_session: SessionBuilder | None = None
) -> click.Command:
    """The ``web`` command: the session options of ``backline.app`` and the server's own.

    ``build_session(options)`` builds one unstarted session and its agent (default:
    ``backline.app.prepare_session`` with the command's plugin manager, the log
    recording the speech engines too); it is called once at start, so bad options
    fail before the server starts, then once for every new tab. The speech engines
    (``--speech``, ``--stt``, ``--tts``, ...) are built once, before that.
    """
    chosen: list[WebSpeech] = []

    def default_build(options: SessionOptions) -> tuple[Session[Any], Agent]:
        session, agent = prepare_session(plugin_manager(), dataclasses.replace(options, log=False))
        if options.log:
            extra = chosen[0].log_options() if chosen else None
            attach_conversation_log(session, options, agent, extra_options=extra)
        return session, agent

    build = build_session or default_build

    @click.command(name, help=WEB_HELP)
    @session_options_decorator
    @speech_options
    @_speech_mode_option
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
        speech_options: SpeechOptions,
        speech_mode: SpeechMode,
        host: str,
        allow_hosts: tuple[str, ...],
        port: int,
        open_browser: bool,
        token: str | None,
        max_tabs: int | None,
    ) -> None:
        from .server import DEFAULT_MAX_TABS, serve_web

        # Bad options fail here, before serving: the speech engines (built once, shared
        # by every tab; an engine may load its model), then the session.
        speech = choose_web_speech(
            plugin_manager(), speech_mode, speech_options, llm=session_options.llm
        )
        chosen[:] = [speech]
        first = [build(session_options)]

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
                    speech=speech,
                )

        asyncio.run(main())

    return web
