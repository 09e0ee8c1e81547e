"""The ``claude_code`` background session definition, and its instances (``--background
claude_code:api=./services/api``: Claude Code in that folder, named ``api``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from backline import BackgroundContext, BackgroundDefinition, background

from .config import ClaudeCodeConfig
from .prompts import VOICE_INSTRUCTIONS
from .worker import ClaudeCodeWorker, ClientFactory

BACKGROUND_ID = "claude_code"

DESCRIPTION = """\
Claude Code, a coding agent working in the user's repository. Send it coding tasks, \
answers to its questions, or new directions at any time; a message sent while it \
works interrupts its current work and becomes its next instruction. It speaks its \
own questions and short summaries through you. Ask for its state to know what it \
is doing right now (status, task, recent activity, files changed)."""


INSTANCE_VALUE = "DIR: the folder it works in, instead of --claude-cwd"
"""What VALUE sets in ``--background claude_code:NAME=VALUE``."""


def claude_code_background(
    config: ClaudeCodeConfig | None = None,
    *,
    interrupt_grace: float = 2.0,
    client_factory: ClientFactory | None = None,
) -> BackgroundDefinition:
    """The ``claude_code`` background session. ``config`` defaults to the environment
    (``ClaudeCodeConfig.from_env()``), read when the session starts.
    ``client_factory(options)`` replaces ``ClaudeSDKClient(options)`` (for tests).

    ``definition.instance(name, folder)`` is Claude Code in ``folder`` (checked at
    once), named ``name``: its own background, with the rest of the configuration
    shared (``--background claude_code:api=./services/api``)."""
    return _definition(BACKGROUND_ID, None, config, interrupt_grace, client_factory)


def _definition(
    name: str,
    folder: str | None,
    config: ClaudeCodeConfig | None,
    interrupt_grace: float,
    client_factory: ClientFactory | None,
) -> BackgroundDefinition:
    cwd = None if folder is None else _folder(folder)
    if cwd is not None and config is not None:
        config = dataclasses.replace(config, cwd=cwd)

    def instance(instance_name: str, value: str | None) -> BackgroundDefinition:
        return _definition(instance_name, value, config, interrupt_grace, client_factory)

    description = DESCRIPTION
    if folder is not None:  # "Claude Code in ./services/api, a coding agent working there."
        rest = DESCRIPTION.split(". ", 1)[1]
        description = f"Claude Code in {folder}, a coding agent working in that folder. {rest}"
    guidance = VOICE_INSTRUCTIONS.replace(f"`{BACKGROUND_ID}`", f"`{name}`")

    @background(
        name,
        description=description,
        interrupt_grace=interrupt_grace,
        voice_instructions=guidance,
        instance_value=INSTANCE_VALUE,
        instances=instance,
    )
    async def claude_code(ctx: BackgroundContext) -> None:
        # Without a config: read when the session starts (an instance's folder wins).
        cfg = config if config is not None else ClaudeCodeConfig.from_env(cwd=cwd)
        await ClaudeCodeWorker(ctx, cfg, client_factory=client_factory).run()

    return claude_code


def _folder(value: str) -> Path:
    """An instance's folder, checked now (before anything starts) by the rules of
    ``ClaudeCodeConfig``: it exists, and is not your home directory nor contains it."""
    return ClaudeCodeConfig(cwd=Path(value)).cwd
