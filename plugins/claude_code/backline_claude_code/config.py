"""Configuration: CLI options and environment variables, least privilege by default."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from backline.keys import get_key

KEY_ENV = "ANTHROPIC_API_KEY"
READ_WRITE_TOOLS: tuple[str, ...] = ("Read", "Write", "Edit", "Glob", "Grep")
SEND_TO_USER = "mcp__voice__send_to_user"
PERMISSION_MODES = ("default", "acceptEdits", "plan")
APPROVE_MODES = ("auto", "ask")
"""``auto``: a permitted call inside the folder runs without asking (the default);
``ask``: a call the options do not already allow is put to the user (approvals.py)."""
SETTING_SOURCES = ("user", "project", "local")

ENV_CWD = "BACKLINE_CLAUDE_CODE_CWD"
ENV_MODEL = "BACKLINE_CLAUDE_CODE_MODEL"
ENV_PERMISSION_MODE = "BACKLINE_CLAUDE_CODE_PERMISSION_MODE"
ENV_ALLOWED_TOOLS = "BACKLINE_CLAUDE_CODE_ALLOWED_TOOLS"
ENV_ALLOW_BASH = "BACKLINE_CLAUDE_CODE_ALLOW_BASH"
ENV_SETTING_SOURCES = "BACKLINE_CLAUDE_CODE_SETTING_SOURCES"
ENV_TURN_TIMEOUT = "BACKLINE_CLAUDE_CODE_TURN_TIMEOUT"
ENV_RETRY_TIMEOUT = "BACKLINE_CLAUDE_CODE_RETRY_TIMEOUT"
ENV_NO_CLAUDE_MD = "BACKLINE_CLAUDE_CODE_NO_CLAUDE_MD"
ENV_REQUIRE_CLEAN = "BACKLINE_CLAUDE_CODE_REQUIRE_CLEAN"
ENV_APPROVE = "BACKLINE_CLAUDE_CODE_APPROVE"
ENV_APPROVE_TIMEOUT = "BACKLINE_CLAUDE_CODE_APPROVE_TIMEOUT"
REQUIRE_CLEAN_OPTION = "--claude-require-clean"

TURN_TIMEOUT = 1800.0
"""Default deadline of one task (a turn), in seconds: 30 minutes."""
RETRY_TIMEOUT = 60.0
"""Default time Claude Code may keep retrying a failing model request, in seconds."""
APPROVE_TIMEOUT = 60.0
"""Default time the user has to answer an approval question (then the call is denied)."""


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _names(value: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in value.split(",") if t.strip())


def _seconds(name: str, value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"{name} must be a number of seconds, got {value!r}") from None


@dataclass(frozen=True)
class ClaudeCodeConfig:
    """How Claude Code runs behind the voice agent.

    ``cwd`` is the only directory it may read, search or change: every file
    argument of its tools must resolve inside it (symlinks followed). It may not
    be ``/``, your home directory or a folder that contains it. ``allowed_tools``
    are the built-in tools it may use (``send_to_user`` is always added);
    ``Bash`` only with ``allow_bash``. ``model`` ``None`` lets Claude Code
    choose. ``setting_sources``: which Claude Code settings files load (``user``,
    ``project``, ``local``); none by default, so a repository's
    ``.claude/settings.json`` (and its hooks) never runs unless you opt in.
    ``read_claude_md``: put the repository's ``CLAUDE.md`` (and ``.claude/CLAUDE.md``)
    in Claude Code's system prompt, read by the plugin (memory.py); with the
    ``project`` source the CLI reads it itself.
    ``turn_timeout``: the deadline of one task, from when Claude Code receives it;
    ``retry_timeout``: how long a failing model request may be retried before the
    task is given up.
    ``require_clean``: start editing only in a git repository without uncommitted
    changes (a task is refused, saying why, until the tree is clean).
    ``approve``: ``auto`` (a permitted call inside the folder runs without asking) or
    ``ask`` (a call that the permission mode does not already allow is put to the
    user, who answers once, always or no; no answer within ``approve_timeout``
    seconds denies it). The folder rule applies first, whatever the answer.
    """

    cwd: Path = field(default_factory=Path.cwd)
    model: str | None = None
    permission_mode: str = "acceptEdits"
    allowed_tools: tuple[str, ...] = READ_WRITE_TOOLS
    allow_bash: bool = False
    setting_sources: tuple[str, ...] = ()
    read_claude_md: bool = True
    turn_timeout: float = TURN_TIMEOUT
    retry_timeout: float = RETRY_TIMEOUT
    require_clean: bool = False
    approve: str = "auto"
    approve_timeout: float = APPROVE_TIMEOUT
    env: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.permission_mode == "bypassPermissions":
            raise ValueError(
                "permission mode bypassPermissions is refused: it would skip every "
                "permission check. The allowed tools already run without asking "
                "(inside the working directory); use --allow-bash to let Claude Code "
                "run shell commands"
            )
        if self.permission_mode not in PERMISSION_MODES:
            raise ValueError(
                f"permission mode {self.permission_mode!r} is not one of "
                f"{', '.join(PERMISSION_MODES)}"
            )
        if self.approve not in APPROVE_MODES:
            raise ValueError(f"approve {self.approve!r} is not one of {', '.join(APPROVE_MODES)}")
        unknown = [s for s in self.setting_sources if s not in SETTING_SOURCES]
        if unknown:
            raise ValueError(
                f"setting source {unknown[0]!r} is not one of {', '.join(SETTING_SOURCES)}"
            )
        for name in ("turn_timeout", "retry_timeout", "approve_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{name} must be a number of seconds, got {value!r}")
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        cwd = Path(self.cwd).expanduser().resolve()
        if not cwd.is_dir():
            raise ValueError(f"the working directory {cwd} does not exist")
        home = Path.home().resolve()
        if cwd == home or cwd in home.parents:
            raise ValueError(
                f"Claude Code would work in {cwd}, which "
                f"{'is' if cwd == home else 'contains'} your home directory (keys, "
                "credentials, every other project). Point it at the repository: "
                f"--cwd DIR or {ENV_CWD}=DIR"
            )
        object.__setattr__(self, "cwd", cwd)
        object.__setattr__(self, "setting_sources", tuple(dict.fromkeys(self.setting_sources)))

    @property
    def tools(self) -> list[str]:
        """The built-in tools Claude Code gets (nothing else is available to it)."""
        tools = [t for t in self.allowed_tools if t != "Bash" and not t.startswith("mcp__")]
        if self.allow_bash:
            tools.append("Bash")
        return tools

    @property
    def permitted_tools(self) -> list[str]:
        """Every tool Claude Code may call: the built-ins above and ``send_to_user``."""
        return [*self.tools, SEND_TO_USER]

    @property
    def reads_claude_md(self) -> bool:
        """Whether the plugin puts CLAUDE.md in the prompt (not when the CLI loads it)."""
        return self.read_claude_md and "project" not in self.setting_sources

    @property
    def home(self) -> Path:
        """The CLI's home directory (what ``~`` means to it)."""
        return Path(self.env.get("HOME") or Path.home())

    @property
    def warnings(self) -> list[str]:
        """What this configuration lets through that the defaults do not."""
        notes = []
        if self.allow_bash:
            notes.append(
                "Bash is allowed: Claude Code can run any shell command as you; commands "
                "start in the working directory but are not confined to it"
            )
        trusted = [s for s in self.setting_sources if s in ("project", "local")]
        if trusted:
            notes.append(
                f"the repository's own Claude Code settings load ({', '.join(trusted)}): "
                "their hooks run shell commands, even without Bash"
            )
        return notes

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
            values["allowed_tools"] = _names(env[ENV_ALLOWED_TOOLS])
        if env.get(ENV_ALLOW_BASH):
            values["allow_bash"] = _truthy(env[ENV_ALLOW_BASH])
        if env.get(ENV_SETTING_SOURCES):
            values["setting_sources"] = _names(env[ENV_SETTING_SOURCES])
        if env.get(ENV_NO_CLAUDE_MD):
            values["read_claude_md"] = not _truthy(env[ENV_NO_CLAUDE_MD])
        if env.get(ENV_REQUIRE_CLEAN):
            values["require_clean"] = _truthy(env[ENV_REQUIRE_CLEAN])
        if env.get(ENV_APPROVE):
            values["approve"] = env[ENV_APPROVE].strip()
        for name, key in (
            ("turn_timeout", ENV_TURN_TIMEOUT),
            ("retry_timeout", ENV_RETRY_TIMEOUT),
            ("approve_timeout", ENV_APPROVE_TIMEOUT),
        ):
            if env.get(key):
                values[name] = _seconds(key, env[key])
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
