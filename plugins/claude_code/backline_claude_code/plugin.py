"""The plugin: registers the ``claude_code`` background session and the
``backline claude-code`` command (entry point group ``backline``)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from backline import hookimpl

from .background import claude_code_background
from .config import (
    ENV_ALLOW_BASH,
    ENV_ALLOWED_TOOLS,
    ENV_CWD,
    ENV_MODEL,
    ENV_PERMISSION_MODE,
    PERMISSION_MODES,
    ClaudeCodeConfig,
    missing_credentials_message,
)


@hookimpl
def register_background_sessions(register: Callable[[Any], None]) -> None:
    # The configuration is read from the environment when a session starts.
    register(claude_code_background())


@hookimpl
def register_commands(cli: click.Group) -> None:
    from backline.cli import SessionOptions, run_console_command

    @cli.command("claude-code")
    @click.option(
        "--cwd", type=click.Path(file_okay=False, exists=True), help="Its working directory."
    )
    @click.option("--model", "coder_model", help="Claude Code's model.")
    @click.option(
        "--permission-mode", type=click.Choice(PERMISSION_MODES), help="Default: acceptEdits."
    )
    @click.option(
        "--allowed-tools",
        help="Comma-separated built-in tools (default Read,Write,Edit,Glob,Grep).",
    )
    @click.option("--allow-bash", is_flag=True, help="Let Claude Code run shell commands.")
    @click.option(
        "--llm", default=lambda: os.environ.get("BACKLINE_LLM", "anthropic"), help="The voice LLM."
    )
    @click.option("--voice-model", help="The voice LLM's model.")
    @click.option("--plain", is_flag=True, help="Plain console lines.")
    @click.pass_context
    def claude_code_command(
        ctx: click.Context,
        cwd: str | None,
        coder_model: str | None,
        permission_mode: str | None,
        allowed_tools: str | None,
        allow_bash: bool,
        llm: str,
        voice_model: str | None,
        plain: bool,
    ) -> None:
        """Talk to Claude Code working in a repository (the console, with `claude_code`)."""
        settings = {
            ENV_CWD: str(Path(cwd).resolve()) if cwd else None,
            ENV_MODEL: coder_model,
            ENV_PERMISSION_MODE: permission_mode,
            ENV_ALLOWED_TOOLS: allowed_tools,
            ENV_ALLOW_BASH: "1" if allow_bash else None,
        }
        os.environ.update({k: v for k, v in settings.items() if v is not None})
        try:
            config = ClaudeCodeConfig.from_env()
        except ValueError as e:
            raise click.ClickException(str(e)) from None
        problem = missing_credentials_message()
        if problem:
            raise click.ClickException(problem)
        click.echo(
            f"Claude Code works in {config.cwd} with {', '.join(config.tools)}"
            f"{'' if config.allow_bash else ' (no Bash: --allow-bash to allow it)'}."
        )
        options = SessionOptions(backgrounds=("claude_code",), llm=llm, model=voice_model)
        run_console_command(ctx, options, plain=plain)
