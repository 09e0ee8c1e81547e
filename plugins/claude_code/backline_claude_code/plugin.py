"""The plugin: registers the ``claude_code`` background session, its options on every
front end (``--claude-*``), and the ``backline claude-code`` command (entry point
group ``backline``)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from backline import hookimpl

from .background import claude_code_background
from .config import (
    APPROVE_MODES,
    ENV_ALLOW_BASH,
    ENV_ALLOWED_TOOLS,
    ENV_APPROVE,
    ENV_APPROVE_TIMEOUT,
    ENV_CWD,
    ENV_MODEL,
    ENV_NO_CLAUDE_MD,
    ENV_PERMISSION_MODE,
    ENV_REQUIRE_CLEAN,
    ENV_RETRY_TIMEOUT,
    ENV_SETTING_SOURCES,
    ENV_TURN_TIMEOUT,
    PERMISSION_MODES,
    ClaudeCodeConfig,
    missing_credentials_message,
)

#: ``(name, environment variable, help, click keywords)`` of each option; ``backline
#: claude-code`` takes them as ``--NAME``, every other front end as ``--claude-NAME``.
OPTIONS: tuple[tuple[str, str, str, dict[str, Any]], ...] = (
    (
        "cwd",
        ENV_CWD,
        "Claude Code's working directory, the only one it may use (default: the current one).",
        {"metavar": "DIR", "type": click.Path(file_okay=False, exists=True)},
    ),
    ("model", ENV_MODEL, "Claude Code's model (default: its own choice).", {"metavar": "MODEL"}),
    (
        "permission-mode",
        ENV_PERMISSION_MODE,
        "Claude Code's permission mode (default acceptEdits).",
        {"type": click.Choice(PERMISSION_MODES)},
    ),
    (
        "allowed-tools",
        ENV_ALLOWED_TOOLS,
        "Comma-separated built-in tools (default Read,Write,Edit,Glob,Grep).",
        {"metavar": "A,B"},
    ),
    (
        "allow-bash",
        ENV_ALLOW_BASH,
        "Let Claude Code run shell commands (they are not confined to the folder).",
        {"is_flag": True},
    ),
    (
        "setting-sources",
        ENV_SETTING_SOURCES,
        "Claude Code settings files to load: user,project,local (default none; the "
        "repository's project/local settings can run hooks).",
        {"metavar": "LIST"},
    ),
    (
        "no-claude-md",
        ENV_NO_CLAUDE_MD,
        "Do not put the repository's CLAUDE.md in Claude Code's prompt (read by default).",
        {"is_flag": True},
    ),
    (
        "require-clean",
        ENV_REQUIRE_CLEAN,
        "Start editing only in a git repository without uncommitted changes (otherwise "
        "each task is refused, saying why).",
        {"is_flag": True},
    ),
    (
        "approve",
        ENV_APPROVE,
        "auto: a permitted tool call inside the folder runs without asking (default); "
        "ask: a call the permission mode does not already allow is put to you "
        "(once, always for it, or no).",
        {"type": click.Choice(APPROVE_MODES)},
    ),
    (
        "approve-timeout",
        ENV_APPROVE_TIMEOUT,
        "With --approve ask: deny a call the user has not answered within this many "
        "seconds (default 60).",
        {"metavar": "SECONDS", "type": click.FloatRange(min=0, min_open=True)},
    ),
    (
        "turn-timeout",
        ENV_TURN_TIMEOUT,
        "Deadline of one Claude Code task in seconds (default 1800).",
        {"metavar": "SECONDS", "type": click.FloatRange(min=0, min_open=True)},
    ),
    (
        "retry-timeout",
        ENV_RETRY_TIMEOUT,
        "Give a task up when the model keeps failing this long, in seconds (default 60).",
        {"metavar": "SECONDS", "type": click.FloatRange(min=0, min_open=True)},
    ),
)


@hookimpl
def register_background_sessions(register: Callable[[Any], None]) -> None:
    # The configuration is read from the environment when a session starts.
    register(claude_code_background())


@hookimpl
def register_options(register: Callable[..., None]) -> None:
    for name, envvar, help_text, kwargs in OPTIONS:
        register(
            f"--claude-{name}", envvar=envvar, help=help_text, background="claude_code", **kwargs
        )


def load_config() -> ClaudeCodeConfig:
    """The configuration from the environment, or a ``ClickException`` saying what is wrong."""
    try:
        return ClaudeCodeConfig.from_env()
    except ValueError as e:
        raise click.ClickException(str(e)) from None


@hookimpl
def register_commands(cli: click.Group) -> None:
    from backline.app import SessionOptions
    from backline.io.console import run_console_front_end

    def claude_option(name: str, envvar: str, help_text: str, kwargs: dict[str, Any]) -> Any:
        """``--NAME`` (``--claude-model`` for the model), exported to ``envvar`` when given."""

        def export(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
            if value is not None and value is not False:
                os.environ[envvar] = "1" if value is True else str(value)
            return value

        flag = "--claude-model" if name == "model" else f"--{name}"
        return click.Option([flag], help=help_text, expose_value=False, callback=export, **kwargs)

    @cli.command("claude-code")
    @click.option(
        "--llm", default=lambda: os.environ.get("BACKLINE_LLM", "anthropic"), help="The voice LLM."
    )
    @click.option("--model", "-m", "voice_model", metavar="MODEL", help="The voice LLM's model.")
    @click.option("--plain", is_flag=True, help="Plain console lines.")
    @click.pass_context
    def claude_code_command(
        ctx: click.Context, llm: str, voice_model: str | None, plain: bool
    ) -> None:
        """Talk to Claude Code working in a repository (the console, with `claude_code`)."""
        if os.environ.get(ENV_CWD):
            os.environ[ENV_CWD] = str(Path(os.environ[ENV_CWD]).resolve())
        config = load_config()
        problem = missing_credentials_message()
        if problem:
            raise click.ClickException(problem)
        click.echo(
            f"Claude Code works in {config.cwd} with {', '.join(config.tools)}"
            f"{'' if config.allow_bash else ' (no Bash: --allow-bash to allow it)'}."
        )
        if config.approve == "ask":
            click.echo(
                "It asks you before a tool call its permission mode does not allow "
                f"(--approve ask; no answer in {config.approve_timeout:g} s: denied)."
            )
        for warning in config.warnings:
            click.secho(f"Warning: {warning}.", err=True, fg="yellow")
        options = SessionOptions(backgrounds=("claude_code",), llm=llm, model=voice_model)
        run_console_front_end(options, plain=plain)

    for spec in reversed(OPTIONS):
        claude_code_command.params.insert(0, claude_option(*spec))
