"""A fake agent CLI for the cli_agent tests: each line of its request is a command.

It reads its prompt from stdin, as cli_agent gives it by default, or from the file
after ``--file`` (``{prompt_file}``), or takes it as its last argument with ``--arg``.

- ``print: X`` prints X; ``say: X`` calls send_to_user; ``status: {...}`` set_status;
- ``wait`` calls wait_for_user and prints ``heard: <answer>``;
- ``prompt`` prints every line of its prompt, each prefixed with ``prompt| ``;
- ``env`` prints every variable of its environment, ``env| NAME=VALUE``;
- ``envcheck: A B`` prints one line: ``has A; lacks B`` (which of the names it has);
- ``argv`` prints its arguments, ``argv| ARG``;
- ``filemode`` prints the modes of its ``--file`` and of its folder, ``0o600 0o700``;
- ``sleep`` prints ``sleeping`` and blocks until interrupted (SIGINT: prints
  ``interrupted``, exits 130);
- ``huge: N`` starts a child (printing ``child: PID``), prints one line of N bytes and
  blocks (SIGINT ignored: only SIGTERM or SIGKILL end it);
- ``errhuge: N`` writes one line of N bytes to stderr;
- ``crash: N`` writes ``boom`` to stderr and exits with N.

The voice channel is reached as any generic agent reaches it: ``BACKLINE_MCP_URL`` and
``BACKLINE_MCP_TOKEN``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
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


def read_prompt() -> str:
    if "--file" in sys.argv:
        with open(sys.argv[sys.argv.index("--file") + 1], encoding="utf-8") as f:
            return f.read()
    if "--arg" in sys.argv:
        return sys.argv[-1]
    return sys.stdin.read()


def main() -> int:
    prompt = read_prompt()
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
        elif command == "env":
            for name, value in sorted(os.environ.items()):
                print(f"env| {name}={value}", flush=True)
        elif command == "envcheck":
            names = rest.split()
            has = [n for n in names if n in os.environ]
            lacks = [n for n in names if n not in os.environ]
            print(f"has {' '.join(has)}; lacks {' '.join(lacks)}", flush=True)
        elif command == "filemode":
            path = sys.argv[sys.argv.index("--file") + 1]
            modes = [os.stat(p).st_mode & 0o777 for p in (path, os.path.dirname(path))]
            print(" ".join(oct(m) for m in modes), flush=True)
        elif command == "argv":
            for arg in sys.argv:
                print(f"argv| {arg}", flush=True)
        elif command == "sleep":
            try:  # from before the line that says it sleeps: SIGINT may follow it at once
                print("sleeping", flush=True)
                threading.Event().wait()
            except KeyboardInterrupt:
                print("interrupted", flush=True)
                return 130
        elif command == "huge":
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            print(f"child: {child.pid}", flush=True)
            print("x" * int(rest), flush=True)
            threading.Event().wait()
        elif command == "errhuge":
            print("e" * int(rest), file=sys.stderr, flush=True)
        elif command == "crash":
            print("boom", file=sys.stderr, flush=True)
            return int(rest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
