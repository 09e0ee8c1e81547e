"""What a voice front end adds to the console (``backline voice``): the console runs
the conversation and shows it; a ``ConsoleVoice`` speaks the replies, listens, adds
to the status line, and takes its own keys and typed commands."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ..speech.audio_output import AudioSink
from ..speech.tts import TextToSpeech

Emit = Callable[[str], None]


class ConsoleVoice(Protocol):
    @property
    def speech(self) -> tuple[TextToSpeech, AudioSink]:
        """The engine the replies are spoken with, and where they play."""
        ...

    def status_items(self) -> list[str]:
        """Items for the status line (how the user is heard now)."""
        ...

    def key_bindings(self, redraw: Callable[[], None]) -> Any:
        """prompt_toolkit key bindings for a terminal (``redraw()`` after a change)."""
        ...

    async def start(self, emit: Emit) -> None:
        """The session has started: listen (``emit`` prints a line)."""
        ...

    def command(self, line: str, emit: Emit) -> bool:
        """A typed line: True if it was one of the voice's commands (it is handled)."""
        ...

    async def finished(self, timeout: float) -> None:
        """Wait (at most ``timeout``) until the audio input has ended: a recording
        played as the microphone; a microphone never ends, so this returns at once."""
        ...

    async def aclose(self) -> None:
        """Stop listening and speaking (bounded)."""
        ...
