"""backline-claude-code: talk to Claude Code by voice, as a backline background session."""

from .background import BACKGROUND_ID, DESCRIPTION, claude_code_background
from .config import ClaudeCodeConfig, missing_credentials_message
from .prompts import SYSTEM_PROMPT_APPEND, VOICE_INSTRUCTIONS
from .state import StatusReporter
from .worker import ClaudeCodeWorker, TurnFailed

__all__ = [
    "BACKGROUND_ID",
    "DESCRIPTION",
    "SYSTEM_PROMPT_APPEND",
    "VOICE_INSTRUCTIONS",
    "ClaudeCodeConfig",
    "ClaudeCodeWorker",
    "StatusReporter",
    "TurnFailed",
    "claude_code_background",
    "missing_credentials_message",
]
