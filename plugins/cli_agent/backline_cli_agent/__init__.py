"""backline-cli-agent: talk by voice to any agent CLI, over backline's MCP voice channel."""

from .background import BACKGROUND_ID, DESCRIPTION, cli_agent_background
from .config import (
    ENV_AGENT_CMD,
    ENV_AGENT_ENV,
    ENV_MAX_LINE_BYTES,
    ENV_MAX_OUTPUT_LINES,
    ENV_REQUIRE_CLEAN,
    AgentConfig,
    agent_kind,
)
from .prompts import AGENT_GUIDANCE, VOICE_INSTRUCTIONS
from .state import StateReporter
from .worker import CliAgentWorker

__all__ = [
    "AGENT_GUIDANCE",
    "BACKGROUND_ID",
    "DESCRIPTION",
    "ENV_AGENT_CMD",
    "ENV_AGENT_ENV",
    "ENV_MAX_LINE_BYTES",
    "ENV_MAX_OUTPUT_LINES",
    "ENV_REQUIRE_CLEAN",
    "VOICE_INSTRUCTIONS",
    "AgentConfig",
    "CliAgentWorker",
    "StateReporter",
    "agent_kind",
    "cli_agent_background",
]
