"""Serving the voice channel over MCP while a front end runs."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from ..mcp import ChannelHost
    from ..session import Session


def hosting_voice_channel(
    session: Session[Any] | None, front_end: str, *, say_when_ready: bool = False
) -> contextlib.AbstractAsyncContextManager[Any]:
    """While a front end runs (``async with``), serve its background sessions' voice
    channel over MCP (``backline.mcp.hosted_voice_channel``), announced as
    ``front_end`` for ``backline mcp serve``.

    ``session``: the front end's one session, if it has one; when it has no
    background session nothing is served. A front end with a session per visitor
    (``backline web``) passes ``None``: every session of the event loop is served.
    The endpoint starts in a task of its own; with ``say_when_ready`` a line on
    stdout says when agents can connect.
    """
    if session is not None and session.background is None:
        return contextlib.nullcontext()
    from ..mcp import hosted_voice_channel

    def ready(host: ChannelHost) -> None:
        click.echo(
            f"{front_end}: coding agents can talk to you over MCP ({host.url}/mcp/<background>); "
            "`backline mcp config --background NAME` prints their configuration"
        )

    return hosted_voice_channel(announce=front_end, on_ready=ready if say_when_ready else None)
