"""Configuration: CLI options and environment variables, least privilege by default."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from backline.keys import get_key

KEY_ENV = "ANTHROPIC_API_KEY"
READ_WRITE_TOOLS: tuple[str, ...] = ("Read", "Write", "Edit", "Glob", "Grep")
SEND_TO_USER = "mcp__voice__send_to_user"
PERMISSION_MODES = ("default", "acceptEdits", "plan", "bypassPermissions")

ENV_CWD = "BACKLINE_CLAUDE_CODE_CWD"
ENV_MODEL = "BACKLINE_CLAUDE_CODE_MODEL"
ENV_PERMISSION_MODE = "BACKLINE_CLAUDE_CODE_PERMISSION_MODE"
ENV_ALLOWED_TOOLS = "BACKLINE_CLAUDE_CODE_ALLOWED_TOOLS"
ENV_ALLOW_BASH = "BACKLINE_CLAUDE_CODE_ALLOW_BASH"


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class ClaudeCodeConfig:
    """How Claude Code runs behind the voice agent.

    ``cwd`` is the only directory it is given. ``allowed_tools`` are the built-in
    tools it may use (``send_to_user`` is always added); ``Bash`` only with
    ``allow_bash``. ``model`` ``None`` lets Claude Code choose.
    """

    cwd: Path = field(default_factory=Path.cwd)
    model: str | None = None
    permission_mode: str = "acceptEdits"
    allowed_tools: tuple[str, ...] = READ_WRITE_TOOLS
    allow_bash: bool = False
    env: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.permission_mode not in PERMISSION_MODES:
            raise ValueError(
                f"permission mode {self.permission_mode!r} is not one of "
                f"{', '.join(PERMISSION_MODES)}"
            )
        cwd = Path(self.cwd).expanduser().resolve()
        if not cwd.is_dir():
            raise ValueError(f"the working directory {cwd} does not exist")
        object.__setattr__(self, "cwd", cwd)

    @property
    def tools(self) -> list[str]:
        """The built-in tools Claude Code gets (nothing else is available to it)."""
        tools = [t for t in self.allowed_tools if t != "Bash" and not t.startswith("mcp__")]
        if self.allow_bash:
            tools.append("Bash")
        return tools

    @property
    def permitted_tools(self) -> list[str]:
        """The tools that run without asking: the built-ins above and ``send_to_user``."""
        return [*self.tools, SEND_TO_USER]

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, **overrides: object
    ) -> ClaudeCodeConfig:
        """Read ``BACKLINE_CLAUDE_CODE_*`` variables; keyword overrides win (None is ignored)."""
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        if env.get(ENV_CWD):
            values["cwd"] = Path(env[ENV_CWD])
        if env.get(ENV_MODEL):
            values["model"] = env[ENV_MODEL]
        if env.get(ENV_PERMISSION_MODE):
            values["permission_mode"] = env[ENV_PERMISSION_MODE]
        if env.get(ENV_ALLOWED_TOOLS):
            values["allowed_tools"] = tuple(
                t.strip() for t in env[ENV_ALLOWED_TOOLS].split(",") if t.strip()
            )
        if env.get(ENV_ALLOW_BASH):
            values["allow_bash"] = _truthy(env[ENV_ALLOW_BASH])
        if not env.get(KEY_ENV):
            stored = get_key(KEY_ENV, env)  # a stored key reaches the CLI through its env
            if stored:
                values["env"] = {KEY_ENV: stored}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]


def missing_credentials_message(environ: Mapping[str, str] | None = None) -> str | None:
    """A clear message if Claude Code has no obvious way to authenticate, else None."""
    env = os.environ if environ is None else environ
    if get_key(KEY_ENV, env) or env.get("ANTHROPIC_AUTH_TOKEN"):
        return None
    if env.get("CLAUDE_CODE_OAUTH_TOKEN"):
        return None
    home = Path(env.get("CLAUDE_CONFIG_DIR") or Path(env.get("HOME", "~")).expanduser() / ".claude")
    if (home / ".credentials.json").exists():
        return None
    return (
        "ANTHROPIC_API_KEY is not set, so Claude Code cannot reach the model. "
        "Set it (export ANTHROPIC_API_KEY=sk-ant-...), store it with `backline keys set "
        "ANTHROPIC_API_KEY`, or log in with the `claude` CLI."
    )
