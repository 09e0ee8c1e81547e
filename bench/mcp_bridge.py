"""MCP both ways: the voice channel over HTTP, and a mounted server's tool next to a local one.

(Not ``bench/mcp.py``: a script of that name would shadow the ``mcp`` package.)

  channel   An agent's ``send_to_user`` over streamable HTTP (an ``mcp.Client`` kept
            connected, as Claude Code keeps its connection) on an idle session: the
            time until the tool's answer is back, and until the voice reply's
            generation starts (the scripted model is asked for the reply).
  tool      The same trivial tool (one string argument) called through ``invoke``
            (what the tool runner does): as a local ``@function_tool``, as a mounted
            MCP server's tool over stdio, and over streamable HTTP (both servers
            written with the ``mcp`` package; argument validation included).

    python bench/mcp_bridge.py
    python bench/mcp_bridge.py --sends 500 --calls 1000
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import (
    TEXT_REPLY,
    BenchAgent,
    Target,
    print_table,
    print_targets,
    run,
    summarize_us,
    write_results,
)

from backline import BackgroundContext, Session, TextOutput, background, function_tool
from backline.mcp import MCPServerHTTP, MCPServerStdio, hosted_voice_channel
from backline.testing import ScriptedLLM
from backline.testing.scripted_llm import LLMRequest, ScriptedResponse

SERVER = '''
from mcp.server.mcpserver import MCPServer

server = MCPServer("bench", log_level="WARNING")


@server.tool()
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


if __name__ == "__main__":
    server.run()
'''


@background("agent", description="An agent attached over MCP (the benchmark).")
async def attached(ctx: BackgroundContext) -> None:
    await asyncio.Event().wait()


async def bench_channel(sends: int, warmup: int, mode: str) -> dict[str, Any]:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    gen_at: list[float] = []

    def responder(_: LLMRequest) -> ScriptedResponse:
        gen_at.append(time.perf_counter())
        return TEXT_REPLY

    llm = ScriptedLLM(responder, record=False)
    to_answer: list[float] = []
    to_gen: list[float] = []
    async with hosted_voice_channel() as hosting:
        session: Session[Any] = Session(llm, background=[attached], output=TextOutput())
        async with session:
            await session.start(BenchAgent())
            await session.wait_for_idle()
            assert session.background is not None
            endpoint = await hosting.endpoint(session.background.context("agent"))
            async with (
                create_mcp_http_client(headers=endpoint.headers) as http,
                Client(streamable_http_client(endpoint.url, http_client=http), mode=mode) as client,
            ):
                for i in range(warmup + sends):
                    if i == warmup:
                        gc.collect()
                    gen_at.clear()
                    t0 = time.perf_counter()
                    await client.call_tool("send_to_user", {"message": f"Step {i} is done."})
                    t1 = time.perf_counter()
                    await session.wait_for_idle()
                    if i >= warmup:
                        to_answer.append(t1 - t0)
                        to_gen.append(gen_at[0] - t0)
                protocol = client.protocol_version
    a, g = summarize_us(to_answer), summarize_us(to_gen)
    return {
        "sends": sends,
        "protocol": protocol,
        "answer_p50_us": a["p50_us"],
        "answer_p99_us": a["p99_us"],
        "to_generation_p50_us": g["p50_us"],
        "to_generation_p99_us": g["p99_us"],
    }


async def time_calls(tool: Any, calls: int, warmup: int) -> dict[str, float]:
    samples = []
    for i in range(warmup + calls):
        t0 = time.perf_counter()
        out = await tool.invoke({"key": f"k{i}"}, None)
        if i >= warmup:
            samples.append(time.perf_counter() - t0)
        assert out == f"value of k{i}", out
    return summarize_us(samples)


async def bench_tools(calls: int, warmup: int, server_file: Path) -> list[dict[str, Any]]:
    import uvicorn

    from backline.mcp.channel import stop_sse_watchers

    @function_tool
    def lookup(key: str) -> str:
        """Look a key up."""
        return f"value of {key}"

    rows = [{"tool": "local @function_tool", **await time_calls(lookup, calls, warmup)}]

    stdio = MCPServerStdio("bench", command=sys.executable, args=[str(server_file)])
    session: Session[Any] = Session(ScriptedLLM(), mcp_servers=[stdio], output=TextOutput())
    async with session:
        await session.start(BenchAgent())
        (tool,) = [t for t in session.tools if t.name == "bench__lookup"]
        rows.append({"tool": "mounted MCP, stdio", **await time_calls(tool, calls, warmup)})

    namespace: dict[str, Any] = {}
    exec(compile(SERVER, str(server_file), "exec"), namespace)  # the same server, in-process
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    port = sock.getsockname()[1]
    app = namespace["server"].streamable_http_app()
    web = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    serving = asyncio.ensure_future(web.serve(sockets=[sock]))
    try:
        remote = MCPServerHTTP("bench", url=f"http://127.0.0.1:{port}/mcp")
        session = Session(ScriptedLLM(), mcp_servers=[remote], output=TextOutput())
        async with session:
            await session.start(BenchAgent())
            (tool,) = [t for t in session.tools if t.name == "bench__lookup"]
            rows.append(
                {"tool": "mounted MCP, streamable HTTP", **await time_calls(tool, calls, warmup)}
            )
    finally:
        web.should_exit = True
        await serving
        await stop_sse_watchers()
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sends", type=int, default=200, help="send_to_user calls measured")
    p.add_argument("--calls", type=int, default=300, help="tool calls measured per kind")
    p.add_argument("--warmup", type=int, default=20, help="unmeasured iterations first")
    args = p.parse_args()

    async def both() -> dict[str, Any]:
        with tempfile.TemporaryDirectory() as tmp:
            server_file = Path(tmp) / "bench_server.py"
            server_file.write_text(SERVER)
            return {
                "channel": [
                    await bench_channel(args.sends, args.warmup, mode)
                    for mode in ("auto", "legacy")
                ],
                "tools": await bench_tools(args.calls, args.warmup, server_file),
            }

    results = run(both)
    print_table(
        "send_to_user over streamable HTTP, idle session",
        ["protocol", "sends", "answer p50 µs", "p99 µs", "to reply generation p50 µs", "p99 µs"],
        [
            [
                ch["protocol"],
                ch["sends"],
                ch["answer_p50_us"],
                ch["answer_p99_us"],
                ch["to_generation_p50_us"],
                ch["to_generation_p99_us"],
            ]
            for ch in results["channel"]
        ],
    )
    print_table(
        "One tool call (invoke, with argument validation)",
        ["tool", "p50 µs", "p99 µs", "mean µs"],
        [[r["tool"], r["p50_us"], r["p99_us"], r["mean_us"]] for r in results["tools"]],
    )
    modern = [ch for ch in results["channel"] if ch["protocol"] == "2026-07-28"]
    targets = [
        Target(
            "MCP send_to_user -> voice reply generation starts (p50)",
            modern[0]["to_generation_p50_us"] / 1000 if modern else None,
            2,
            unit="ms",
            note="streamable HTTP, protocol 2026-07-28 (per-request, no handshake)",
        )
    ]
    print_targets(targets)
    write_results("mcp_bridge", args, results, targets)


if __name__ == "__main__":
    main()
