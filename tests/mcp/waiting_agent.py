"""An agent that connects to the voice channel over streamable HTTP and waits for the
user, until it is killed: ``python -m tests.mcp.waiting_agent URL TOKEN TOOL MODE``
(``MODE``: the ``mcp.Client`` mode, ``legacy`` for the initialize handshake that agents'
clients speak today).

Run as a process of its own so that a test can kill it the way an agent dies (no
cancellation sent, no session ended: the connection just drops).
"""

from __future__ import annotations

import asyncio
import sys

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def main(url: str, token: str, tool: str, mode: str) -> None:
    arguments: dict[str, object] = {"timeout_seconds": 100}
    if tool == "ask_user":
        arguments["question"] = "Which database?"
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        create_mcp_http_client(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        print("connected", flush=True)
        await client.call_tool(tool, arguments)
        print("answered", flush=True)  # the test kills it before


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
