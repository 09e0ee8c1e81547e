"""The channel side of MCP: the voice channel served to coding agents.

Every background session has an MCP endpoint with five tools for a coding agent
(``send_to_user``, ``add_context``, ``set_status``, ``wait_for_user``, ``ask_user``),
served over streamable HTTP on 127.0.0.1 by the running front end
(``hosted_voice_channel``) and over stdio by ``backline mcp serve`` (a proxy to it).
``VoiceChannel`` is what the tools do, without MCP. The server, the HTTP host and the
proxy load ``mcp`` on first use.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any

from ._channel import ChannelError, TokenRefused, VoiceChannel, limits_of
from ._discovery import ENV_PORT, ENV_RUNTIME_DIR, ENV_TOKEN, ENV_URL, SERVER_NAME, TOOL_NAMES
from ._hosting import Endpoint, Hosting, hosted_voice_channel
from ._registry import SessionRegistry

if TYPE_CHECKING:
    from ._command import mcp_command
    from ._host import ChannelHost, stop_sse_watchers
    from ._tools import build_channel_server, channel_server

_LAZY = {
    "ChannelHost": "._host",
    "stop_sse_watchers": "._host",
    "build_channel_server": "._tools",
    "channel_server": "._tools",
    "mcp_command": "._command",
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_module(module_name), name)
    globals()[name] = value
    return value


def _module(name: str) -> ModuleType:
    """A module of the channel, imported on first use (spelled out: every import is one
    a reader, and a linter, can follow)."""
    if name == "._host":
        from . import _host

        return _host
    if name == "._tools":
        from . import _tools

        return _tools
    from . import _command

    return _command


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
    "SessionRegistry",
    "TokenRefused",
    "VoiceChannel",
    "build_channel_server",
    "channel_server",
    "hosted_voice_channel",
    "limits_of",
    "mcp_command",
    "stop_sse_watchers",
]
