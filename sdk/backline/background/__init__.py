"""Background sessions: ``@background``, the context, the generated tools."""

from .context import UNSET, BackgroundContext
from .definition import (
    BackgroundDefinition,
    HandlingOptions,
    ReplyPromptArgs,
    UpdatePromptArgs,
    background,
)
from .runtime import BackgroundManager, background_of
from .tools import RESERVED_TOOL_NAMES, SEND_TOOL, STATE_TOOL

__all__ = [
    "RESERVED_TOOL_NAMES",
    "SEND_TOOL",
    "STATE_TOOL",
    "UNSET",
    "BackgroundContext",
    "BackgroundDefinition",
    "BackgroundManager",
    "HandlingOptions",
    "ReplyPromptArgs",
    "UpdatePromptArgs",
    "background",
    "background_of",
]
