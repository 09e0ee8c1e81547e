"""The agent command, and how each kind of agent is given its task and backline's MCP server.

- Claude Code (``claude ...``): one process per conversation, speaking stream-json
  both ways (each task is a message on its stdin); backline's server comes in a 0600
  ``--mcp-config`` file (HTTP, with the token), with ``--strict-mcp-config`` and
  ``--allowedTools mcp__backline`` (in ``-p`` mode a tool that is not allowed is
  refused silently).
- Codex (``codex ...``): one process per task, the task on stdin (``-``); the server
  as ``-c mcp_servers.backline.url=...`` and ``bearer_token_env_var`` (the token stays
  out of the command line, in ``BACKLINE_MCP_TOKEN``).
- Gemini CLI (``gemini ...``) and any other command: one process per task, the task
  on stdin (a trailing ``-p`` of Gemini CLI is dropped: it runs headless when stdin
  is not a terminal); ``{prompt_file}`` in the command puts the task in a private file
  instead (its path there), ``{prompt}`` on the command line (where every local user
  can read it). The server comes in the environment: ``BACKLINE_MCP_URL``,
  ``BACKLINE_MCP_TOKEN``, ``BACKLINE_MCP_CONFIG`` (a ``.mcp.json`` file) and
  ``BACKLINE_BACKGROUND`` (``backline mcp serve`` reads the first two).

Nothing else is granted: the agent's own permission defaults apply.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias

from backline.mcp import ENV_TOKEN, ENV_URL, SERVER_NAME, Endpoint

from .environment import BACKLINE_PREFIX, check_names, split_names

ENV_AGENT_CMD = "BACKLINE_AGENT_CMD"
"""The agent command (``--agent-cmd``), e.g. ``claude -p``, ``codex exec``, ``gemini -p``."""
ENV_AGENT_ENV = "BACKLINE_AGENT_ENV"
"""Names of more variables the agent gets (``--agent-env``, repeatable): commas or spaces."""
ENV_REQUIRE_CLEAN = "BACKLINE_AGENT_REQUIRE_CLEAN"
"""``1``: the agent starts only in a git repository without uncommitted changes."""
ENV_MCP_CONFIG = "BACKLINE_MCP_CONFIG"
"""Given to a generic agent: a ``.mcp.json`` file naming backline's server."""
ENV_BACKGROUND = "BACKLINE_BACKGROUND"
"""Given to a generic agent: the background session it works for."""
ENV_MAX_OUTPUT_LINES = "BACKLINE_AGENT_MAX_OUTPUT_LINES"
"""``AgentConfig.max_output_lines`` from the environment."""
ENV_MAX_LINE_BYTES = "BACKLINE_AGENT_MAX_LINE_BYTES"
"""``AgentConfig.max_line_bytes`` from the environment."""
PROMPT_PLACEHOLDER = "{prompt}"
"""In the agent command: the task, as an argument (visible to every local user)."""
PROMPT_FILE_PLACEHOLDER = "{prompt_file}"
"""In the agent command: the path of a private file (0600) that holds the task."""
REQUIRE_CLEAN_OPTION = "--agent-require-clean"

AgentKind: TypeAlias = Literal["claude", "codex", "gemini", "generic"]


def agent_kind(argv: tuple[str, ...]) -> AgentKind:
    """What kind of agent a command runs (by its program's name)."""
    program = Path(argv[0]).name.lower().removesuffix(".exe")
    if program in ("claude", "codex", "gemini"):
        return program  # type: ignore[return-value]
    return "generic"


_LIMITS = {"max_output_lines": ENV_MAX_OUTPUT_LINES, "max_line_bytes": ENV_MAX_LINE_BYTES}


@dataclass(frozen=True)
class AgentConfig:
    """How ``cli_agent`` runs its agent. ``argv`` ``None``: run nothing (attached mode:
    an agent you start yourself connects over MCP)."""

    argv: tuple[str, ...] | None = None
    cwd: Path = field(default_factory=Path.cwd)
    env: Mapping[str, str] = field(default_factory=dict)
    """Variables set for the agent (in code), over those it gets from backline's
    environment; never a ``BACKLINE_*`` one."""

    pass_env: tuple[str, ...] = ()
    """Names of variables of backline's environment the agent gets besides the
    allow-list (``--agent-env NAME``, ``BACKLINE_AGENT_ENV``)."""

    require_clean: bool = False
    """Start editing only in a git repository without uncommitted changes
    (``--agent-require-clean``, ``BACKLINE_AGENT_REQUIRE_CLEAN=1``)."""

    max_output_lines: int = 200
    """Lines of the agent's output that ``cli_agent`` passes to the voice agent as
    context notes in one run (each cut at ``Limits.max_mcp_message_chars``); one last
    note counts the lines left out. ``BACKLINE_AGENT_MAX_OUTPUT_LINES`` sets it."""

    max_line_bytes: int = 8_000_000
    """One line of the agent's output as ``cli_agent`` reads it (a Claude Code
    stream-json event can be large); a longer line ends the run: the agent is stopped
    and the task reported as failed. ``BACKLINE_AGENT_MAX_LINE_BYTES`` sets it."""

    def __post_init__(self) -> None:
        if self.argv is not None and not self.argv:
            raise ValueError("the agent command is empty")
        for name in _LIMITS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"AgentConfig.{name} must be a positive number, got {value!r}")
        own = sorted(k for k in self.env if k.upper().startswith(BACKLINE_PREFIX))
        if own:
            raise ValueError(
                f"AgentConfig.env: {', '.join(own)} is one of backline's own variables, which "
                "are never passed to an agent (cli_agent gives it the voice channel itself)"
            )
        object.__setattr__(self, "pass_env", check_names(self.pass_env, what="--agent-env"))
        if self.require_clean and self.argv is None:
            raise ValueError(
                f"{REQUIRE_CLEAN_OPTION} needs an agent command (--agent-cmd): without one "
                "cli_agent starts nothing, and the agent you start yourself is yours to check"
            )
        cwd = Path(self.cwd).expanduser().resolve()
        if not cwd.is_dir():
            raise ValueError(f"the working directory {cwd} does not exist")
        object.__setattr__(self, "cwd", cwd)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> AgentConfig:
        """``BACKLINE_AGENT_CMD`` (``--agent-cmd``), parsed like a shell would,
        ``BACKLINE_AGENT_ENV`` (``--agent-env``), ``BACKLINE_AGENT_REQUIRE_CLEAN``
        (``--agent-require-clean``), and the limits ``BACKLINE_AGENT_MAX_OUTPUT_LINES``
        and ``BACKLINE_AGENT_MAX_LINE_BYTES``."""
        env = os.environ if environ is None else environ
        raw = env.get(ENV_AGENT_CMD, "").strip()
        values: dict[str, Any] = {}
        if raw:
            try:
                values["argv"] = tuple(shlex.split(raw))
            except ValueError as e:
                raise ValueError(f"{ENV_AGENT_CMD} is not a valid command ({e}): {raw!r}") from None
        names = split_names(env.get(ENV_AGENT_ENV, ""))
        if names:
            values["pass_env"] = tuple(names)
        if env.get(ENV_REQUIRE_CLEAN, "").strip().lower() in ("1", "true", "yes", "on"):
            values["require_clean"] = True
        for name, variable in _LIMITS.items():
            text = env.get(variable, "").strip()
            if text:
                values[name] = _positive_int(variable, text)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    @property
    def kind(self) -> AgentKind | None:
        return None if self.argv is None else agent_kind(self.argv)

    @property
    def name(self) -> str:
        """The agent's name for people: its program."""
        return "no agent" if self.argv is None else Path(self.argv[0]).name


def _positive_int(variable: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(f"{variable} must be a positive whole number, got {text!r}")
    return value


@dataclass(frozen=True)
class Launch:
    """One process to start: its arguments, its extra environment, and its task: on
    stdin (``stdin``), or in a private file (``prompt_file``: the path in ``argv``,
    and its text) written before it starts and removed after."""

    argv: list[str]
    env: dict[str, str]
    stdin: str | None = None
    prompt_file: tuple[Path, str] | None = None


def mcp_config(endpoint: Endpoint) -> dict[str, Any]:
    """A ``.mcp.json`` document naming backline's server over HTTP."""
    return {
        "mcpServers": {
            SERVER_NAME: {"type": "http", "url": endpoint.url, "headers": endpoint.headers}
        }
    }


def write_private(path: Path, document: dict[str, Any] | str) -> Path:
    """Write ``document`` (JSON, or text) readable by this user only (it holds a token,
    or the user's words)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        if isinstance(document, str):
            f.write(document)
        else:
            json.dump(document, f)
    return path


def claude_launch(argv: tuple[str, ...], config_file: Path | None, system_prompt: str) -> Launch:
    """Claude Code as one persistent stream-json process (tasks go to its stdin)."""
    args = list(argv)
    if "-p" not in args and "--print" not in args:
        args.append("-p")  # stream-json input needs print mode
    args += ["--input-format", "stream-json", "--output-format", "stream-json", "--verbose"]
    if config_file is not None:
        args += ["--mcp-config", str(config_file), "--strict-mcp-config"]
        args += ["--allowedTools", f"mcp__{SERVER_NAME}"]
    args += ["--append-system-prompt", system_prompt]
    return Launch(args, {})


def task_launch(
    kind: AgentKind,
    argv: tuple[str, ...],
    prompt: str,
    endpoint: Endpoint | None,
    config_file: Path | None,
    prompt_path: Path | None = None,
) -> Launch:
    """Codex or a generic agent, for one task. ``prompt_path`` is where the task's
    private file goes when the command has ``{prompt_file}``."""
    args = list(argv)
    env: dict[str, str] = {}
    if endpoint is not None:
        env[ENV_URL] = endpoint.url
        env[ENV_TOKEN] = endpoint.token
        env[ENV_BACKGROUND] = endpoint.background_id
        if config_file is not None:
            env[ENV_MCP_CONFIG] = str(config_file)
        if kind == "codex":
            table = f"mcp_servers.{SERVER_NAME}"
            args += ["-c", f"{table}.url={json.dumps(endpoint.url)}"]
            args += ["-c", f'{table}.bearer_token_env_var="{ENV_TOKEN}"']
    if PROMPT_PLACEHOLDER in args:
        return Launch([prompt if a == PROMPT_PLACEHOLDER else a for a in args], env)
    if PROMPT_FILE_PLACEHOLDER in args:
        if prompt_path is None:
            raise ValueError(f"the command has {PROMPT_FILE_PLACEHOLDER} but no file was given")
        args = [str(prompt_path) if a == PROMPT_FILE_PLACEHOLDER else a for a in args]
        return Launch(args, env, prompt_file=(prompt_path, prompt))
    if kind == "codex":
        args.append("-")  # codex exec: "-" reads the instructions from stdin
    elif kind == "gemini" and args[-1] in ("-p", "--prompt"):
        args.pop()  # it would take the next argument as the task; stdin runs it headless
    return Launch(args, env, stdin=prompt)
