"""A fake agent CLI for the cli_agent tests: each line of its request is a command.

- ``print: X`` prints X; ``say: X`` calls send_to_user; ``status: {...}`` set_status;
- ``wait`` calls wait_for_user and prints ``heard: <answer>``;
- ``prompt`` prints every line of its prompt, each prefixed with ``prompt| ``;
- ``sleep`` prints ``sleeping`` and blocks until interrupted (SIGINT: prints
  ``interrupted``, exits 130);
- ``crash: N`` writes ``boom`` to stderr and exits with N.

The voice channel is reached as any generic agent reaches it: ``BACKLINE_MCP_URL`` and
``BACKLINE_MCP_TOKEN``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from typing import Any


async def call(tool: str, arguments: dict[str, Any]) -> str:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {"Authorization": f"Bearer {os.environ['BACKLINE_MCP_TOKEN']}"}
    async with (
        create_mcp_http_client(headers=headers) as http,
        Client(streamable_http_client(os.environ["BACKLINE_MCP_URL"], http_client=http)) as client,
    ):
        result = await client.call_tool(tool, arguments)
    return "".join(getattr(block, "text", "") for block in result.content)


def main() -> int:
    prompt = sys.argv[-1]
    request = prompt.rsplit("The person's request:\n", 1)[-1]
    for line in request.splitlines():
        command, _, rest = line.partition(":")
        rest = rest.strip()
        if command == "print":
            print(rest, flush=True)
        elif command == "say":
            asyncio.run(call("send_to_user", {"message": rest}))
        elif command == "status":
            asyncio.run(call("set_status", {"status": json.loads(rest)}))
        elif command == "wait":
            answer = asyncio.run(call("wait_for_user", {"timeout_seconds": 30}))
            print("heard: " + " / ".join(answer.splitlines()), flush=True)
        elif command == "prompt":
            for text in prompt.splitlines():
                print("prompt| " + text, flush=True)
        elif command == "sleep":
            try:  # from before the line that says it sleeps: SIGINT may follow it at once
                print("sleeping", flush=True)
                threading.Event().wait()
            except KeyboardInterrupt:
                print("interrupted", flush=True)
                return 130
        elif command == "crash":
            print("boom", file=sys.stderr, flush=True)
            return int(rest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
