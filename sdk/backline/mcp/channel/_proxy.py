"""``backline mcp serve``: the voice channel over stdio, a thin proxy to the front end.

For agents that only start stdio servers. The proxy serves the same five tools
and forwards each call to the running front end's HTTP endpoint (found anew for
every call, so a restarted front end is picked up), passing progress back. When
no front end runs, or it goes away mid-call, the call is a tool error that says
so; the user's messages wait in the front end meanwhile, so nothing is lost.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared._httpx_utils import create_mcp_http_client

from ._channel import ChannelError, Progress
from ._discovery import ENV_URL, announcements, from_environment, runtime_dir
from ._tools import build_channel_server

ERROR_PREFIX = "Error executing tool "


class Forwarder:
    """Forwards voice-tool calls to the front end's endpoint for ``background_id``."""

    def __init__(self, background_id: str, environ: Mapping[str, str] | None = None) -> None:
        self.background_id = background_id
        self._environ = environ

    def locate(self) -> tuple[str, str]:
        """``(url, token)`` of the endpoint, or ``ChannelError`` when no front end runs."""
        given = from_environment(self._environ)
        if given is not None:
            return given
        running = announcements(self._environ)
        if not running:
            raise ChannelError(
                "No backline front end is running, so nobody can hear you. Ask the person to "
                f"start one (`backline console --background {self.background_id}` or "
                "`backline web`), then call again."
            )
        found = running[0]
        return found.endpoint(self.background_id), found.token

    async def __call__(
        self, tool: str, arguments: dict[str, Any], _ctx: Context, report: Progress | None
    ) -> str:
        url, token = self.locate()

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
    """Run the proxy on stdin/stdout until the agent closes it."""
    env = os.environ if environ is None else environ
    if from_environment(env) is None and not announcements(env):
        print(
            "backline mcp serve: no backline front end is running yet (none announced in "
            f"{runtime_dir(env)}, and {ENV_URL} is not set). Tool calls say so until one "
            f"starts: backline console --background {background_id}",
            file=sys.stderr,
            flush=True,
        )
    await proxy_server(background_id, environ).run_stdio_async()
