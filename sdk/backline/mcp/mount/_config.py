"""MCP servers to mount as voice tools: ``MCPServerStdio``, ``MCPServerHTTP``, ``.mcp.json``.

``load_mcp_config(path)`` reads the ``.mcp.json`` format that Claude Code, Cursor and
others use::

    {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "@mcp/files", "."], "env": {"A": "b"}},
        "search": {"type": "http", "url": "https://...", "headers": {"Authorization": "..."}}
    }}

``${VAR}`` and ``${VAR:-default}`` in commands, arguments, environment values, URLs
and headers are replaced from the environment, as Claude Code does.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, TypeAlias

from ._toolset import McpToolset

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,48}$")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _check_common(name: Any, timeout: Any, kind: str) -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(
            f"{kind}: the server name {name!r} must be 1 to 48 letters, digits, '_' or '-' "
            "(its tools are named <server>__<tool>)"
        )
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        raise ValueError(f"{kind} {name!r}: timeout must be a positive number of seconds")


def _check_strings(value: Any, what: str) -> None:
    if isinstance(value, Mapping):
        bad = [k for k, v in value.items() if not isinstance(k, str) or not isinstance(v, str)]
    else:
        bad = [v for v in value if not isinstance(v, str)]
    if bad:
        raise ValueError(f"{what} must hold strings only, got {bad[0]!r}")


class _Mountable:
    """What makes a server configuration a part of a session or an agent
    (``backline.voice.parts``): the group of servers it is given becomes one part."""

    __slots__ = ()

    @classmethod
    def session_part(cls, servers: Sequence[Any], *, owner: str) -> McpToolset:
        """The part that mounts ``servers``' tools (checked: configs, unique names)."""
        return McpToolset(check_servers(servers, where=owner), owner=owner)


@dataclass(frozen=True)
class MCPServerStdio(_Mountable):
    """An MCP server started as a process (stdio). Its tools become the voice agent's
    tools ``<name>__<tool>``; the process is stopped when the session (or agent) closes.

    ``env`` is added to a safe default environment (``PATH``, ``HOME`` ...), as the
    ``mcp`` package does; ``timeout`` bounds each call without result or progress
    (default ``Limits.mcp_call_timeout``).
    """

    name: str
    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = None
    cwd: str | Path | None = None
    timeout: float | None = None

    def __post_init__(self) -> None:
        _check_common(self.name, self.timeout, "MCPServerStdio")
        if not isinstance(self.command, str) or not self.command.strip():
            raise ValueError(f"MCPServerStdio {self.name!r}: the command must not be empty")
        if isinstance(self.args, str):
            raise TypeError(f"MCPServerStdio {self.name!r}: args must be a list of strings")
        _check_strings(self.args, f"MCPServerStdio {self.name!r}: args")
        _check_strings(self.env or {}, f"MCPServerStdio {self.name!r}: env")
        object.__setattr__(self, "args", tuple(self.args))

    @property
    def where(self) -> str:
        return " ".join([self.command, *self.args])

    def transport(self, stack: contextlib.AsyncExitStack) -> tuple[Any, TextIO | None]:
        """The ``mcp`` stdio transport (the process's stderr goes to a file, kept for
        the error a failed start reports)."""
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        stderr = stack.enter_context(tempfile.TemporaryFile("w+", encoding="utf-8"))  # noqa: SIM115 - the stack closes it
        params = StdioServerParameters(
            command=self.command,
            args=list(self.args),
            env=dict(self.env) if self.env else None,
            cwd=self.cwd,
        )
        return stdio_client(params, errlog=stderr), stderr


@dataclass(frozen=True)
class MCPServerHTTP(_Mountable):
    """An MCP server reached over streamable HTTP at ``url`` (with ``headers``)."""

    name: str
    url: str
    headers: Mapping[str, str] | None = field(default=None, repr=False)
    timeout: float | None = None

    def __post_init__(self) -> None:
        _check_common(self.name, self.timeout, "MCPServerHTTP")
        if not isinstance(self.url, str) or not self.url.startswith(("http://", "https://")):
            raise ValueError(
                f"MCPServerHTTP {self.name!r}: the url must start with http:// or https://, "
                f"got {self.url!r}"
            )
        _check_strings(self.headers or {}, f"MCPServerHTTP {self.name!r}: headers")

    @property
    def where(self) -> str:
        return self.url

    def transport(self, stack: contextlib.AsyncExitStack) -> tuple[Any, TextIO | None]:
        """The ``mcp`` streamable-HTTP transport (its HTTP client closed with ``stack``)."""
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        http = create_mcp_http_client(headers=dict(self.headers or {}))
        stack.push_async_callback(http.aclose)
        return streamable_http_client(self.url, http_client=http), None


MCPServerConfig: TypeAlias = MCPServerStdio | MCPServerHTTP
"""One MCP server to mount."""


def check_servers(servers: Sequence[Any], *, where: str) -> list[MCPServerConfig]:
    """The servers as a list, each one a config, their names unique."""
    found = list(servers)
    for server in found:
        if not isinstance(server, MCPServerStdio | MCPServerHTTP):
            raise TypeError(
                f"{where}: mcp_servers takes MCPServerStdio or MCPServerHTTP "
                f"(backline.mcp), got {type(server).__name__}"
            )
    names = [s.name for s in found]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"{where}: MCP server name(s) given twice: {', '.join(twice)}")
    return found


def load_mcp_config(
    path: str | Path, environ: Mapping[str, str] | None = None
) -> list[MCPServerConfig]:
    """The servers of a ``.mcp.json`` file (``mcpServers``), in file order.

    Raises ``ValueError`` naming the file and the server for anything it cannot use.
    """
    file = Path(path)
    env = os.environ if environ is None else environ
    try:
        document = json.loads(file.read_text(encoding="utf-8"))
    except OSError as e:
        raise ValueError(f"cannot read the MCP configuration {file}: {e.strerror or e}") from None
    except ValueError as e:
        raise ValueError(f"{file} is not valid JSON: {e}") from None
    servers = document.get("mcpServers") if isinstance(document, dict) else None
    if not isinstance(servers, dict):
        raise ValueError(
            f'{file}: expected {{"mcpServers": {{"name": {{...}}}}}} (the .mcp.json format)'
        )
    return [_server(file, name, entry, env) for name, entry in servers.items()]


def _server(file: Path, name: str, entry: Any, env: Mapping[str, str]) -> MCPServerConfig:
    where = f"{file}: server {name!r}"
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: expected an object with command/args or type/url")
    kind = entry.get("type", "stdio" if "command" in entry else None)
    try:
        value = _expand(entry, env, where)
        if kind == "stdio":
            return MCPServerStdio(
                name,
                command=value.get("command", ""),
                args=value.get("args", []),
                env=value.get("env"),
                cwd=value.get("cwd"),
                timeout=_seconds(value.get("timeout")),
            )
        if kind in ("http", "streamable-http", "streamable_http"):
            return MCPServerHTTP(
                name,
                url=value.get("url", ""),
                headers=value.get("headers"),
                timeout=_seconds(value.get("timeout")),
            )
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: {e}") from None
    raise ValueError(
        f"{where}: type {kind!r} is not supported (use a command for stdio, or "
        '"type": "http" with a url)'
    )


def _seconds(value: Any) -> float | None:
    """``timeout`` in .mcp.json is in milliseconds (Claude Code's convention)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"timeout must be a number of milliseconds, got {value!r}")
    return value / 1000


def _expand(value: Any, env: Mapping[str, str], where: str) -> Any:
    if isinstance(value, str):

        def substitute(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in env:
                return env[name]
            if default is not None:
                return default
            raise ValueError(f"the environment variable {name} is not set (used as ${{{name}}})")

        return _VARIABLE.sub(substitute, value)
    if isinstance(value, list):
        return [_expand(v, env, where) for v in value]
    if isinstance(value, dict):
        return {k: _expand(v, env, where) for k, v in value.items()}
    return value
