"""MCP (the ``mcp`` package) both ways: the voice channel served to any agent, and MCP
servers' tools mounted into the voice agent (``Session``/``Agent(mcp_servers=...)`` with
``MCPServerStdio`` / ``MCPServerHTTP``, or ``load_mcp_config(".mcp.json")``).

The voice channel: every background session has an MCP endpoint with five tools
for a coding agent (``send_to_user``, ``add_context``, ``set_status``,
``wait_for_user``, ``ask_user``), served over streamable HTTP on 127.0.0.1 by
the running front end (``hosted_voice_channel``) and over stdio by ``backline
mcp serve`` (a proxy to it). ``VoiceChannel`` is what the tools do, without MCP.

Importing this package does not import ``mcp``: the server, the HTTP host and
the proxy load on first use (see docs/mcp.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._channel import ChannelError, VoiceChannel, limits_of
from ._config import MCPServerConfig, MCPServerHTTP, MCPServerStdio, load_mcp_config
from ._discovery import ENV_PORT, ENV_RUNTIME_DIR, ENV_TOKEN, ENV_URL
from ._hosting import Endpoint, Hosting, hosted_voice_channel
from ._mount import McpToolset
from ._registry import SessionRegistry

if TYPE_CHECKING:
    from ._host import ChannelHost
    from ._tools import build_channel_server, channel_server

TOOL_NAMES = ("send_to_user", "add_context", "set_status", "wait_for_user", "ask_user")
"""The voice channel's MCP tools (an agent sees them as ``mcp__backline__<tool>`` in Claude
Code)."""

SERVER_NAME = "backline"
"""The name the voice channel's MCP server has in agents' configurations."""

_LAZY = {
    "ChannelHost": "._host",
    "build_channel_server": "._tools",
    "channel_server": "._tools",
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name, __name__), name)
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
    "VoiceChannel",
    "build_channel_server",
    "channel_server",
    "hosted_voice_channel",
    "limits_of",
    "load_mcp_config",
]
