"""The ``claude_code`` background session definition."""

from __future__ import annotations

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


def claude_code_background(
    config: ClaudeCodeConfig | None = None,
    *,
    interrupt_grace: float = 2.0,
    client_factory: ClientFactory | None = None,
) -> BackgroundDefinition:
    """The ``claude_code`` background session. ``config`` defaults to the environment
    (``ClaudeCodeConfig.from_env()``), read when the session starts.
    ``client_factory(options)`` replaces ``ClaudeSDKClient(options)`` (for tests)."""

    @background(
        BACKGROUND_ID,
        description=DESCRIPTION,
        interrupt_grace=interrupt_grace,
        voice_instructions=VOICE_INSTRUCTIONS,
    )
    async def claude_code(ctx: BackgroundContext) -> None:
        cfg = config if config is not None else ClaudeCodeConfig.from_env()
        await ClaudeCodeWorker(ctx, cfg, client_factory=client_factory).run()

    return claude_code
