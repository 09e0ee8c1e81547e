"""``backline mcp config``: the exact configuration each MCP client needs.

Each client's configuration is the text its file takes, alone (JSON, or TOML for
Codex), and a few hints for the person (``Snippet``): the command prints the one on
stdout and the other on stderr, so ``| jq`` or ``> .mcp.json`` works.

By default the stdio proxy (``backline mcp serve --background NAME``): it finds
whichever front end runs, so the configuration survives restarts. With an HTTP
endpoint (a running front end's URL and token), the direct form, valid while
that front end runs (its token and port change at each start unless
``BACKLINE_MCP_TOKEN`` and ``BACKLINE_MCP_PORT`` are set).
"""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._discovery import ENV_RUNTIME_DIR, ENV_TOKEN, SERVER_NAME

CLIENTS = ("claude", "codex", "cursor", "gemini")


@dataclass(frozen=True)
class Target:
    """What a snippet points at: the proxy command, or an HTTP endpoint."""

    background_id: str
    command: tuple[str, ...]
    runtime_dir: Path
    url: str | None = None
    token: str | None = None

    @property
    def args(self) -> list[str]:
        return [*self.command[1:], "mcp", "serve", "--background", self.background_id]

    @property
    def env(self) -> dict[str, str]:
        return {ENV_RUNTIME_DIR: str(self.runtime_dir)}


def backline_command() -> tuple[str, ...]:
    """How to run ``backline`` from any directory: its script next to this Python, or
    ``python -m backline``."""
    script = Path(sys.executable).parent / "backline"
    if script.is_file():
        return (str(script),)
    return (sys.executable, "-m", "backline")


@dataclass(frozen=True)
class Snippet:
    """One client's configuration: ``config``, the text its file takes (JSON, or TOML for
    Codex), alone; ``hints``, lines for the person (where it goes, how to use it)."""

    config: str
    hints: tuple[str, ...]


def snippet(client: str, target: Target) -> Snippet:
    """The configuration for ``client`` (one of ``CLIENTS``)."""
    if client not in CLIENTS:
        raise ValueError(f"unknown client {client!r}; one of {', '.join(CLIENTS)}")
    return {"claude": _claude, "codex": _codex, "cursor": _cursor, "gemini": _gemini}[client](
        target
    )


def _stdio_entry(target: Target) -> dict[str, Any]:
    return {"command": target.command[0], "args": target.args, "env": target.env}


def _json(servers: dict[str, Any]) -> str:
    return json.dumps({"mcpServers": {SERVER_NAME: servers}}, indent=2)


def _bearer(target: Target) -> dict[str, str]:
    return {"Authorization": f"Bearer {target.token}"}


def _claude(target: Target) -> Snippet:
    if target.url is not None:
        entry = {"type": "http", "url": target.url, "headers": _bearer(target)}
        add = shlex.join(
            [
                *("claude", "mcp", "add", "--transport", "http", SERVER_NAME, target.url),
                *("--header", f"Authorization: Bearer {target.token}"),
            ]
        )
    else:
        entry = _stdio_entry(target)
        env = [part for k, v in target.env.items() for part in ("-e", f"{k}={v}")]
        add = shlex.join(
            ["claude", "mcp", "add", SERVER_NAME, *env, "--", target.command[0], *target.args]
        )
    return Snippet(
        _json(entry),
        (
            "Claude Code: put this in .mcp.json at the repository root (or pass it with "
            "--mcp-config), or run once (add --scope project to share it through .mcp.json):",
            f"  {add}",
            "Headless runs (claude -p) must allow the tools; nothing prompts there:",
            '  claude -p "..." --allowedTools mcp__backline',
        ),
    )


def _codex(target: Target) -> Snippet:
    lines = [f"[mcp_servers.{SERVER_NAME}]"]
    hints = ["Codex: put this in ~/.codex/config.toml (or .codex/config.toml in a trusted project)"]
    if target.url is not None:
        lines.append(f"url = {json.dumps(target.url)}")
        lines.append(f'bearer_token_env_var = "{ENV_TOKEN}"')
        hints.append(f"and in the shell that starts codex: export {ENV_TOKEN}={target.token}")
    else:
        lines.append(f"command = {json.dumps(target.command[0])}")
        lines.append(f"args = {json.dumps(target.args)}")
        env = ", ".join(f"{k} = {json.dumps(v)}" for k, v in target.env.items())
        lines.append(f"env = {{ {env} }}")
    return Snippet("\n".join(lines), tuple(hints))


def _json_client(target: Target, hint: str, url_key: str) -> Snippet:
    if target.url is not None:
        entry: dict[str, Any] = {url_key: target.url, "headers": _bearer(target)}
    else:
        entry = _stdio_entry(target)
    return Snippet(_json(entry), (hint,))


def _cursor(target: Target) -> Snippet:
    hint = "Cursor: put this in .cursor/mcp.json of the project (or ~/.cursor/mcp.json for all)"
    return _json_client(target, hint, "url")


def _gemini(target: Target) -> Snippet:
    hint = (
        "Gemini CLI: put this in ~/.gemini/settings.json (or .gemini/settings.json of the project)"
    )
    return _json_client(target, hint, "httpUrl")
