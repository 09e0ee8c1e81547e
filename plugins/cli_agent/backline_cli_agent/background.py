"""The ``cli_agent`` background session definition."""

from __future__ import annotations

from pathlib import Path

from backline import BackgroundContext, BackgroundDefinition, background

from .config import AgentConfig
from .prompts import VOICE_INSTRUCTIONS
from .worker import CliAgentWorker

BACKGROUND_ID = "cli_agent"

DESCRIPTION = """\
A coding agent (an agent CLI such as Claude Code, Codex or Gemini CLI) working in the \
user's project. Send it coding tasks, answers to its questions and new directions at any \
time; a message sent while it works reaches it, or interrupts it and becomes its next \
task. It speaks its own questions and summaries through you. Ask for its state to know \
what it is doing (status, task, its own status report, the process)."""


def cli_agent_background(
    config: AgentConfig | None = None,
    *,
    cwd: str | Path | None = None,
    interrupt_grace: float = 2.0,
) -> BackgroundDefinition:
    """The ``cli_agent`` background session. ``config`` defaults to the environment
    (``AgentConfig.from_env()``: ``BACKLINE_AGENT_CMD``, read when the session starts),
    with ``cwd`` (default: the current directory) as the agent's working directory."""

    @background(
        BACKGROUND_ID,
        description=DESCRIPTION,
        interrupt_grace=interrupt_grace,
        voice_instructions=VOICE_INSTRUCTIONS,
    )
    async def cli_agent(ctx: BackgroundContext) -> None:
        cfg = config if config is not None else AgentConfig.from_env(cwd=cwd)
        await CliAgentWorker(ctx, cfg).run()

    return cli_agent
