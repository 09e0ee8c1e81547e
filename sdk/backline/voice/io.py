"""Output: where the agent's words go (``backline.speech.output``, re-exported here)."""

from ..speech.output import InMemoryTextOutput, PlayoutResult, TextOutput

__all__ = ["InMemoryTextOutput", "PlayoutResult", "TextOutput"]
