"""Background sessions: ``@background``, the context, the generated tools."""

from ._asking import ASKING
from ._kinds import UpdateKind
from ._voices import background_voices
from .context import UNSET, Answer, BackgroundContext
from .definition import (
    BackgroundDefinition,
    HandlingOptions,
    ReplyPromptArgs,
    UpdatePromptArgs,
    background,
)
from .runtime import BackgroundManager, background_of
from .tools import MISSED_TOOL, RESERVED_TOOL_NAMES, SEND_TOOL, STATE_TOOL, STOP_TOOL

__all__ = [
    "ASKING",
    "MISSED_TOOL",
    "RESERVED_TOOL_NAMES",
    "SEND_TOOL",
    "STATE_TOOL",
    "STOP_TOOL",
    "UNSET",
    "Answer",
    "BackgroundContext",
    "BackgroundDefinition",
    "BackgroundManager",
    "HandlingOptions",
    "ReplyPromptArgs",
    "UpdateKind",
    "UpdatePromptArgs",
    "background",
    "background_of",
    "background_voices",
]
