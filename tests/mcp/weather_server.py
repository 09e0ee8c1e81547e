"""A small MCP server written with the ``mcp`` package, for the mounting tests.

Run as ``python weather_server.py`` (stdio). ``WEATHER_PID_FILE`` (if set) receives its
pid. Tools: ``forecast(city)``; ``slow(seconds)``; ``crash()`` (the process exits);
``progress(steps)`` (reports progress, then answers); ``grow()`` (adds the tool
``humidity`` and says the list changed); ``fail()`` (a tool error).
"""

from __future__ import annotations

import asyncio
import os

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError


def build() -> MCPServer:
    server = MCPServer("weather", log_level="WARNING")

    @server.tool()
    def forecast(city: str) -> str:
        """The forecast for a city."""
        return f"Sunny in {city}, 21 degrees."

    @server.tool()
    async def slow(seconds: float) -> str:
        """Answers after ``seconds``."""
        await asyncio.sleep(seconds)
        return "finally"

    @server.tool()
    def crash() -> str:
        """The server process dies."""
        print("weather server: crashing on purpose", file=__import__("sys").stderr, flush=True)
        os._exit(3)

    @server.tool()
    async def progress(steps: int, ctx: Context) -> str:
        """Reports progress ``steps`` times, then answers."""
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step} of {steps}")
            await asyncio.sleep(0.05)
        return f"all {steps} steps done"

    @server.tool()
    async def grow(ctx: Context) -> str:
        """Adds the tool ``humidity`` and tells the client its tools changed."""

        def humidity(city: str) -> str:
            """The humidity in a city."""
            return f"60% in {city}"

        server.add_tool(humidity)
        await ctx.request_context.session.send_tool_list_changed()
        return "added humidity"

    @server.tool()
    def fail() -> str:
        """Always a tool error."""
        raise ToolError("the weather station is offline")

    return server


if __name__ == "__main__":
    if os.environ.get("WEATHER_PID_FILE"):
        with open(os.environ["WEATHER_PID_FILE"], "a") as f:
            f.write(f"{os.getpid()}\n")
    build().run()
