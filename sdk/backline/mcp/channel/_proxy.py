"""``backline mcp serve``: the voice channel over stdio, a thin proxy to the front end.

For agents that only start stdio servers. The proxy serves the same five tools
and forwards each call to the running front end's HTTP endpoint (found anew for
every call, so a restarted front end is picked up), passing progress back. When
no front end runs, or it goes away mid-call, the call is a tool error that says
so; the user's messages wait in the front end meanwhile, so nothing is lost. A
token the front end refuses is a tool error that says where the token came from
and where the right one is (and the proxy says it on stderr when it starts).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared._httpx_utils import create_mcp_http_client

from ._channel import ChannelError, Progress
from ._discovery import (
    ENV_TOKEN,
    ENV_URL,
    Announcement,
    announcements,
    from_environment,
    probe,
    runtime_dir,
)
from ._tools import build_channel_server

ERROR_PREFIX = "Error executing tool "


@dataclass(frozen=True)
class Located:
    """The endpoint a call goes to, and where its token came from."""

    url: str
    token: str
    announcement: Announcement | None = None  # None: the environment named it

    def token_refused(self) -> str:
        """What a refused token means, and where the right one is."""
        if self.announcement is None:
            return (
                f"The backline front end at {self.url} refused the token in {ENV_TOKEN} (401 "
                f"Unauthorized), so nothing was delivered. {ENV_URL} and {ENV_TOKEN} are set "
                "in this agent's environment and must be the running front end's: unset both "
                "(`backline mcp serve` then finds the running front end and its token by "
                "itself), or set the token `backline mcp config --http` prints (a front end "
                f"started with {ENV_TOKEN} set uses that value)."
            )
        found = self.announcement
        return (
            f"The backline front end at {self.url} refused the token announced in "
            f"{found.path} by {found.front_end} (pid {found.pid}) (401 Unauthorized), so "
            "nothing was delivered: another program may be answering on its port. Ask the "
            "person to restart the front end, then call again."
        )


class Forwarder:
    """Forwards voice-tool calls to the front end's endpoint for ``background_id``."""

    def __init__(self, background_id: str, environ: Mapping[str, str] | None = None) -> None:
        self.background_id = background_id
        self._environ = environ

    def locate(self) -> Located:
        """The endpoint, or ``ChannelError`` when no front end runs."""
        given = from_environment(self._environ)
        if given is not None:
            return Located(*given)
        running = announcements(self._environ)
        if not running:
            raise ChannelError(
                "No backline front end is running, so nobody can hear you. Ask the person to "
                f"start one (`backline console --background {self.background_id}` or "
                "`backline web`), then call again."
            )
        found = running[0]
        return Located(found.endpoint(self.background_id), found.token, found)

    async def __call__(
        self, tool: str, arguments: dict[str, Any], _ctx: Context, report: Progress | None
    ) -> str:
        located = self.locate()
        url, token = located.url, located.token

        async def forward_progress(
            progress: float, total: float | None, message: str | None
        ) -> None:
            if report is not None:
                await report(progress, total or 0.0, message or "")

        try:
            headers = {"Authorization": f"Bearer {token}"} if token else None
            async with (
                create_mcp_http_client(headers=headers) as http,
                Client(streamable_http_client(url, http_client=http)) as client,
            ):
                result = await client.call_tool(
                    tool,
                    arguments,
                    progress_callback=forward_progress if report is not None else None,
                )
        except ChannelError:
            raise
        except Exception as e:
            checked = await asyncio.to_thread(probe, url, token)
            if checked.verdict == "refused":
                raise ChannelError(located.token_refused()) from None
            raise ChannelError(
                f"The backline front end at {url} did not answer ({_reason(e)}): it may have "
                "stopped. Nothing was delivered. Ask the person to start it again, then call "
                "again; what they said meanwhile waits for you."
            ) from None
        text = "\n".join(getattr(block, "text", "") for block in result.content).strip()
        if result.is_error:
            raise ChannelError(_strip_prefix(text, tool))
        return text


def _strip_prefix(text: str, tool: str) -> str:
    prefix = f"{ERROR_PREFIX}{tool}: "
    return text[len(prefix) :] if text.startswith(prefix) else text


def _reason(error: BaseException) -> str:
    if isinstance(error, BaseExceptionGroup) and error.exceptions:
        return _reason(error.exceptions[0])
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def proxy_server(background_id: str, environ: Mapping[str, str] | None = None) -> MCPServer:
    """The stdio proxy's MCP server for ``background_id``."""
    return build_channel_server(Forwarder(background_id, environ))


async def serve_stdio(background_id: str, environ: Mapping[str, str] | None = None) -> None:
    """Run the proxy on stdin/stdout until the agent closes it (saying on stderr, first,
    when no front end runs or the one found refuses its token)."""
    env = os.environ if environ is None else environ
    forwarder = Forwarder(background_id, env)
    try:
        located = forwarder.locate()
    except ChannelError:
        _say(
            "no backline front end is running yet (none announced in "
            f"{runtime_dir(env)}, and {ENV_URL} is not set). Tool calls say so until one "
            f"starts: backline console --background {background_id}"
        )
    else:
        checked = await asyncio.to_thread(probe, located.url, located.token)
        if checked.verdict == "refused":
            _say(located.token_refused())
    await build_channel_server(forwarder).run_stdio_async()


def _say(text: str) -> None:
    print(f"backline mcp serve: {text}", file=sys.stderr, flush=True)
