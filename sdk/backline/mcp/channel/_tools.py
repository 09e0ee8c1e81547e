"""The voice channel's MCP tools, defined once (the ``mcp`` package's ``MCPServer``).

``build_channel_server(backend)`` makes the server: the front end's HTTP endpoint
gives it a backend that runs the tools on a ``VoiceChannel``; the stdio proxy
gives it one that forwards each call to the front end. Every tool answers plain
text (``structured_output=False``: agents read it as is), and a ``ChannelError``
becomes an MCP tool error with its text.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeAlias

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field, WithJsonSchema

from ._channel import ChannelError, Progress, VoiceChannel
from ._discovery import SERVER_NAME, TOOL_NAMES

INSTRUCTIONS = """\
You work for a person who talks to you through a voice assistant; you never talk to \
them directly. send_to_user says something aloud (questions, decisions, a short \
summary when you finish: one or two plain sentences, no code or markdown). \
add_context tells the voice assistant something without saying it. set_status \
reports your live status as a JSON object. wait_for_user returns the user's next \
instructions; ask_user asks a question aloud and returns the answer. Every answer \
also carries what the user said meanwhile ("The user said meanwhile: ..."): a \
correction there overrides what you were doing."""

DESCRIPTIONS = {
    "send_to_user": (
        "Say something to the person you are working for: the voice assistant speaks it "
        "(it may rephrase it slightly). Use it for questions, decisions, and a short summary "
        "when you finish. One or two short sentences, no code, markdown or file listings: it "
        "is read aloud. The answer carries anything the user said meanwhile."
    ),
    "add_context": (
        "Tell the voice assistant something without saying it aloud: what you are doing, "
        "what you found, which files you changed. It uses it when the user asks."
    ),
    "set_status": (
        "Report your live status as a JSON object, for example "
        '{"step": "running the tests", "progress": "3 of 10", "files_changed": ["app.py"]}. '
        "It replaces the previous status; the voice assistant reads it when the user asks "
        "how things are going."
    ),
    "wait_for_user": (
        "Wait for the user's next instructions and return them (everything they said, in "
        "order), or 'Nothing from the user yet' after timeout_seconds (at most 120). Call it "
        "when you have finished and wait for the next task, or when you need their input."
    ),
    "ask_user": (
        "Ask the user a question aloud and wait for the answer (up to timeout_seconds, at "
        "most 120). One short question, no code or markdown."
    ),
}

Backend: TypeAlias = Callable[[str, dict[str, Any], Context, Progress | None], Awaitable[str]]
"""``backend(tool, arguments, request_context, progress) -> answer``; raises ``ChannelError``."""

TimeoutArg = Annotated[
    float, Field(description="How long to wait, in seconds (at most 120).", ge=0)
]


def build_channel_server(backend: Backend, *, name: str = SERVER_NAME) -> MCPServer:
    """An ``MCPServer`` with the five voice tools, each answered by ``backend``."""

    async def call(tool: str, arguments: dict[str, Any], ctx: Context) -> str:
        try:
            return await backend(tool, arguments, ctx, _progress_of(ctx))
        except ChannelError as e:
            raise ToolError(str(e)) from None

    async def send_to_user(
        ctx: Context,
        message: Annotated[str, Field(description="What to say: one or two short sentences.")],
    ) -> str:
        return await call("send_to_user", {"message": message}, ctx)

    async def add_context(
        ctx: Context,
        note: Annotated[str, Field(description="What the voice assistant should know.")],
    ) -> str:
        return await call("add_context", {"note": note}, ctx)

    async def set_status(
        ctx: Context,
        status: Annotated[
            Any,
            WithJsonSchema({"type": "object", "description": "Your status, a JSON object."}),
        ],
    ) -> str:
        return await call("set_status", {"status": status}, ctx)

    async def wait_for_user(ctx: Context, timeout_seconds: TimeoutArg = 60.0) -> str:
        return await call("wait_for_user", {"timeout_seconds": timeout_seconds}, ctx)

    async def ask_user(
        ctx: Context,
        question: Annotated[str, Field(description="The question, short and plain.")],
        timeout_seconds: TimeoutArg = 60.0,
    ) -> str:
        arguments = {"question": question, "timeout_seconds": timeout_seconds}
        return await call("ask_user", arguments, ctx)

    server = _quiet_server(name)
    for fn in (send_to_user, add_context, set_status, wait_for_user, ask_user):
        tool = fn.__name__
        server.add_tool(fn, name=tool, description=DESCRIPTIONS[tool], structured_output=False)
    return server


async def run_on_channel(
    channel: VoiceChannel, tool: str, arguments: dict[str, Any], progress: Progress | None
) -> str:
    """Run one voice tool on ``channel`` (the front end's side of every call)."""
    if tool == "send_to_user":
        return await channel.send_to_user(arguments["message"])
    if tool == "add_context":
        return await channel.add_context(arguments["note"])
    if tool == "set_status":
        return channel.set_status(arguments["status"])
    if tool == "wait_for_user":
        return await channel.wait_for_user(arguments["timeout_seconds"], progress=progress)
    if tool == "ask_user":
        return await channel.ask_user(
            arguments["question"], arguments["timeout_seconds"], progress=progress
        )
    raise ChannelError(f"Unknown tool '{tool}'. The voice tools are: {', '.join(TOOL_NAMES)}.")


def channel_server(channel: VoiceChannel) -> MCPServer:
    """An MCP server for one channel, for in-process use (``mcp.Client(server)``)."""

    async def backend(
        tool: str, arguments: dict[str, Any], _ctx: Context, progress: Progress | None
    ) -> str:
        return await run_on_channel(channel, tool, arguments, progress)

    return build_channel_server(backend)


def _progress_of(ctx: Context) -> Progress:
    """Progress for this call (reaches the client when it sent a progress token)."""

    async def report(waited: float, total: float, message: str) -> None:
        await ctx.report_progress(waited, total, message)

    return report


def _quiet_server(name: str) -> MCPServer:
    # MCPServer() calls logging.basicConfig, which would install a handler on the root
    # logger of a program that has none: give it one to find for the duration.
    root = logging.getLogger()
    guard = None if root.handlers else logging.NullHandler()
    if guard is not None:
        root.addHandler(guard)
    try:
        return MCPServer(name, instructions=INSTRUCTIONS, log_level="WARNING")
    finally:
        if guard is not None:
            root.removeHandler(guard)
