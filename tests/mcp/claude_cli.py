"""The real Claude Code CLI (bundled in claude-agent-sdk) against the fake Anthropic server."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from backline.mcp import Endpoint
from backline.processes import spawn, stop_process
from backline.testing.fake_anthropic import CLAUDE_CODE_CLEARED_ENV, FakeAnthropicServer

claude_agent_sdk = pytest.importorskip("claude_agent_sdk")
CLI = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"

requires_cli = pytest.mark.skipif(
    not CLI.is_file(),
    reason=f"the Claude Code CLI bundled with claude-agent-sdk is missing ({CLI})",
)

RUN_TIMEOUT = 90.0  # a whole CLI run takes a few seconds; the stdio proxy adds its start


def cli_env(server: FakeAnthropicServer, home: Path, **extra: str) -> dict[str, str]:
    """The environment of a CLI that talks only to ``server`` (config in ``home``)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in (*CLAUDE_CODE_CLEARED_ENV, "CLAUDECODE", "CLAUDE_CONFIG_DIR")
    }
    env.update(server.claude_code_env(home))
    env["MCP_TIMEOUT"] = "60000"  # the stdio proxy imports mcp first: slow on a busy machine
    env.update(extra)
    return env


def http_config(endpoint: Endpoint) -> dict[str, Any]:
    return {
        "mcpServers": {
            "backline": {"type": "http", "url": endpoint.url, "headers": endpoint.headers}
        }
    }


def stdio_config(background: str, runtime_dir: Path) -> dict[str, Any]:
    return {
        "mcpServers": {
            "backline": {
                "command": sys.executable,
                "args": ["-m", "backline", "mcp", "serve", "--background", background],
                "env": {"BACKLINE_RUNTIME_DIR": str(runtime_dir)},
            }
        }
    }


async def run_print_mode(
    prompt: str, config: dict[str, Any], *, cwd: Path, env: dict[str, str]
) -> list[dict[str, Any]]:
    """``claude -p PROMPT`` with backline's MCP server; returns its stream-json events."""
    config_file = cwd / "mcp.json"
    config_file.write_text(json.dumps(config))
    argv = [
        str(CLI),
        "-p",
        prompt,
        "--output-format",
        "stream-json",
        "--verbose",
        "--mcp-config",
        str(config_file),
        "--strict-mcp-config",
        "--allowedTools",
        "mcp__backline",
    ]
    process = await spawn(argv, cwd=cwd, env=env)
    try:
        async with asyncio.timeout(RUN_TIMEOUT):
            out, err = await process.communicate()
    finally:
        await stop_process(process)
    assert process.returncode == 0, err.decode(errors="replace")[-2000:]
    return [json.loads(line) for line in out.decode().splitlines() if line.strip()]


def init_event(events: list[dict[str, Any]]) -> dict[str, Any]:
    return next(e for e in events if e.get("type") == "system" and e.get("subtype") == "init")
