"""The mount side of MCP: MCP servers' tools for the voice agent.

``MCPServerStdio`` / ``MCPServerHTTP`` (or ``load_mcp_config(".mcp.json")``) given to
``Session(mcp_servers=...)`` or ``Agent(mcp_servers=...)`` become one part of the
session or of the agent (``McpToolset``, a ``backline.voice.parts.SessionPart``):
each server's tools are function tools named ``<server>__<tool>``. ``mcp`` itself is
imported when a server is first connected.
"""

from ._config import MCPServerConfig, MCPServerHTTP, MCPServerStdio, check_servers, load_mcp_config
from ._toolset import McpToolset, ServerConfig, mounted_name

__all__ = [
    "MCPServerConfig",
    "MCPServerHTTP",
    "MCPServerStdio",
    "McpToolset",
    "ServerConfig",
    "check_servers",
    "load_mcp_config",
    "mounted_name",
]
