"""The plugin: the ``cli_agent`` background session and the ``--agent-cmd`` option of
every front end (entry point group ``backline``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from backline import hookimpl

from .background import cli_agent_background
from .config import ENV_AGENT_CMD, ENV_AGENT_ENV, ENV_REQUIRE_CLEAN, REQUIRE_CLEAN_OPTION

AGENT_CMD_HELP = (
    "The agent CLI the cli_agent background runs for each task, with backline's MCP "
    'voice channel: "claude -p", "codex exec", "gemini -p" ... (without it, cli_agent '
    "waits for an agent you start yourself: `backline mcp config --background cli_agent`)."
)
AGENT_ENV_HELP = (
    "One more environment variable the agent CLI gets (repeatable). It gets only what a "
    "CLI needs to run and its own provider's keys otherwise; never backline's."
)
REQUIRE_CLEAN_HELP = (
    "Start the agent only in a git repository without uncommitted changes (otherwise "
    "its tasks are refused, saying why)."
)


@hookimpl
def register_background_sessions(register: Callable[[Any], None]) -> None:
    # The command is read from the environment when a session starts.
    register(cli_agent_background())


@hookimpl
def register_options(register: Any) -> None:
    register(
        "--agent-cmd",
        envvar=ENV_AGENT_CMD,
        help=AGENT_CMD_HELP,
        metavar="COMMAND",
        background="cli_agent",
    )
    register(
        "--agent-env",
        envvar=ENV_AGENT_ENV,
        help=AGENT_ENV_HELP,
        metavar="NAME",
        multiple=True,
        background="cli_agent",
    )
    register(
        REQUIRE_CLEAN_OPTION,
        envvar=ENV_REQUIRE_CLEAN,
        help=REQUIRE_CLEAN_HELP,
        is_flag=True,
        background="cli_agent",
    )
