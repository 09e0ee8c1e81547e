"""What the agent's process gets from backline's environment, and which program runs.

The environment is an allow-list, never the parent's whole environment:

- what any CLI needs to run (``BASE_NAMES``, ``BASE_PREFIXES``): the search path, the
  home folder and the user, the locale, the terminal, temporary folders, proxies and
  TLS certificates;
- the variables the agent itself documents (``RECIPE_ENV``): Claude Code's
  ``ANTHROPIC_*`` and ``CLAUDE_CODE_*``, Codex's ``OPENAI_*``, Gemini CLI's ``GEMINI_*``
  and Google keys;
- the names the user adds (``--agent-env NAME``, ``AgentConfig.pass_env``);
- then what cli_agent itself gives (the voice channel's URL and token).

Never a ``BACKLINE_*`` variable of backline's own (its web token, its keys' folder ...):
the only ones an agent gets are those cli_agent sets for its voice channel.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import re
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

BACKLINE_PREFIX = "BACKLINE_"

BASE_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TERM",
        "COLORTERM",
        "NO_COLOR",
        "TMPDIR",
        "TMP",
        "TEMP",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_CACHE_HOME",
        "XDG_STATE_HOME",
        "XDG_RUNTIME_DIR",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "no_proxy",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        # Windows: what a process needs to start and find its folders.
        "SYSTEMROOT",
        "WINDIR",
        "COMSPEC",
        "PATHEXT",
        "USERPROFILE",
        "APPDATA",
        "LOCALAPPDATA",
    }
)
"""What any CLI needs to run (exact names)."""
BASE_PREFIXES = ("LC_",)
"""The locale's categories."""


@dataclass(frozen=True)
class RecipeEnv:
    """The variables one agent documents: exact names and name prefixes."""

    names: frozenset[str] = frozenset()
    prefixes: tuple[str, ...] = ()

    def allows(self, name: str) -> bool:
        return name in self.names or name.startswith(self.prefixes)


RECIPE_ENV: dict[str, RecipeEnv] = {
    # Claude Code's settings and credentials (its documented environment variables).
    "claude": RecipeEnv(
        frozenset(
            {
                "CLAUDE_CONFIG_DIR",
                "MCP_TIMEOUT",
                "MCP_TOOL_TIMEOUT",
                "MAX_THINKING_TOKENS",
                "MAX_MCP_OUTPUT_TOKENS",
                "BASH_DEFAULT_TIMEOUT_MS",
                "BASH_MAX_TIMEOUT_MS",
                "BASH_MAX_OUTPUT_LENGTH",
                "ENABLE_TOOL_SEARCH",
                "USE_BUILTIN_RIPGREP",
                "CLOUD_ML_REGION",
            }
        ),
        ("ANTHROPIC_", "CLAUDE_CODE_", "DISABLE_"),
    ),
    # Codex: its OpenAI key and endpoint, and its home.
    "codex": RecipeEnv(prefixes=("OPENAI_", "CODEX_")),
    # Gemini CLI: a Gemini or Google key, or Vertex AI's project and credentials.
    "gemini": RecipeEnv(
        frozenset(
            {
                "GOOGLE_API_KEY",
                "GOOGLE_CLOUD_PROJECT",
                "GOOGLE_CLOUD_LOCATION",
                "GOOGLE_GENAI_USE_VERTEXAI",
                "GOOGLE_APPLICATION_CREDENTIALS",
            }
        ),
        ("GEMINI_",),
    ),
}
"""Per agent kind (``agent_kind``): the variables that agent documents."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def check_names(names: Iterable[str], *, what: str) -> tuple[str, ...]:
    """Validate variable names the user adds; returns them without duplicates."""
    checked: list[str] = []
    for name in names:
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(
                f"{what}: {name!r} is not an environment variable name (letters, digits "
                "and _, not starting with a digit)"
            )
        if name.upper().startswith(BACKLINE_PREFIX):
            raise ValueError(
                f"{what}: {name} is one of backline's own variables, which are never passed "
                "to an agent (cli_agent gives it the voice channel's URL and token itself)"
            )
        if name not in checked:
            checked.append(name)
    return tuple(checked)


def split_names(text: str) -> list[str]:
    """``A,B C`` -> ``["A", "B", "C"]`` (commas or spaces)."""
    return [n for n in re.split(r"[,\s]+", text) if n]


def agent_environment(
    kind: str,
    parent: Mapping[str, str],
    *,
    pass_env: Iterable[str] = (),
    explicit: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of the agent's process, before cli_agent adds its voice channel:
    the allowed names of ``parent``, the ``pass_env`` names, then ``explicit`` (given in
    code, ``AgentConfig.env``) over them. ``BACKLINE_*`` never passes."""
    recipe = RECIPE_ENV.get(kind, RecipeEnv())
    added = set(pass_env)
    env = {
        name: value
        for name, value in parent.items()
        if not name.upper().startswith(BACKLINE_PREFIX)
        and (
            name in BASE_NAMES
            or name.startswith(BASE_PREFIXES)
            or recipe.allows(name)
            or name in added
        )
    }
    env.update(explicit or {})  # AgentConfig refuses BACKLINE_* names in it
    return env


# -- which program runs ------------------------------------------------------------------
BUNDLED = "bundled with claude-agent-sdk"
ON_PATH = "from PATH"
AS_GIVEN = "as given"


class ProgramNotFound(Exception):
    """The agent's program cannot be found; the message says what to do."""


@dataclass(frozen=True)
class Program:
    """The program that runs: its path, and where it was found (``ON_PATH``,
    ``BUNDLED`` or ``AS_GIVEN`` for a path)."""

    path: str
    source: str


def bundled_claude() -> Path | None:
    """The Claude Code CLI bundled in ``claude-agent-sdk``, where the SDK itself finds it
    (``claude_agent_sdk/_bundled/claude``, ``claude.exe`` on Windows), or None. The SDK
    is located without being imported."""
    try:
        spec = importlib.util.find_spec("claude_agent_sdk")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    name = "claude.exe" if platform.system() == "Windows" else "claude"
    for location in spec.submodule_search_locations:
        path = Path(location) / "_bundled" / name
        if path.is_file():
            return path
    return None


def find_program(program: str, kind: str, env: Mapping[str, str]) -> Program:
    """Where ``program`` is, on the agent's own ``PATH`` (as its process will look), or
    for Claude Code, the CLI bundled in ``claude-agent-sdk`` when ``claude`` is not on
    ``PATH``. Raises ``ProgramNotFound`` saying what to install or set."""
    if os.sep in program or (os.altsep is not None and os.altsep in program):
        path = Path(program).expanduser()
        if path.is_file() and os.access(path, os.X_OK):
            return Program(str(path), AS_GIVEN)
        problem = "is not executable" if path.is_file() else "does not exist"
        raise ProgramNotFound(f"the agent command's program {program} {problem}")
    search = env.get("PATH", os.defpath)
    found = shutil.which(program, path=search)
    if found is not None:
        return Program(found, ON_PATH)
    if kind == "claude":
        bundled = bundled_claude()
        if bundled is not None:
            return Program(str(bundled), BUNDLED)
        raise ProgramNotFound(
            f"{program!r} was not found on PATH, and claude-agent-sdk (which bundles the "
            "Claude Code CLI) is not installed: pip install 'backline-cli-agent[claude]', "
            "or install Claude Code (npm install -g @anthropic-ai/claude-code)"
        )
    raise ProgramNotFound(
        f"{program!r} was not found on PATH: install it, or give its full path in the "
        "agent command (--agent-cmd)"
    )
