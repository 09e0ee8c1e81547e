"""MCP (the ``mcp`` package) both ways, in two sides that do not import each other:

- ``backline.mcp.mount``: MCP servers' tools mounted into the voice agent
  (``Session``/``Agent(mcp_servers=...)`` with ``MCPServerStdio`` / ``MCPServerHTTP``,
  or ``load_mcp_config(".mcp.json")``): a session part;
- ``backline.mcp.channel``: the voice channel served to any coding agent (five tools,
  over streamable HTTP by the running front end and over stdio by ``backline mcp
  serve``).

Both are re-exported here. Importing this package does not import ``mcp``: the
server, the HTTP host and the proxy load on first use (see docs/mcp.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import channel
from .channel import (
    ENV_PORT,
    ENV_RUNTIME_DIR,
    ENV_TOKEN,
    ENV_URL,
    SERVER_NAME,
    TOOL_NAMES,
    ChannelError,
    Endpoint,
    Hosting,
    SessionRegistry,
    TokenRefused,
    VoiceChannel,
    hosted_voice_channel,
    limits_of,
)
from .mount import MCPServerConfig, MCPServerHTTP, MCPServerStdio, McpToolset, load_mcp_config

if TYPE_CHECKING:
    from .channel import ChannelHost, build_channel_server, channel_server

_LAZY = frozenset({"ChannelHost", "build_channel_server", "channel_server"})


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(channel, name)
    globals()[name] = value
    return value


__all__ = [
    "ENV_PORT",
    "ENV_RUNTIME_DIR",
    "ENV_TOKEN",
    "ENV_URL",
    "SERVER_NAME",
    "TOOL_NAMES",
    "ChannelError",
    "ChannelHost",
    "Endpoint",
    "Hosting",
    "MCPServerConfig",
    "MCPServerHTTP",
    "MCPServerStdio",
    "McpToolset",
    "SessionRegistry",
    "TokenRefused",
    "VoiceChannel",
    "build_channel_server",
    "channel_server",
    "hosted_voice_channel",
    "limits_of",
    "load_mcp_config",
]
