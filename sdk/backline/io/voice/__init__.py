"""``backline voice``: the terminal as a voice front end (microphone, speaker, local
speech), built on the console. ``voice_command`` is the click command;
``run_voice_front_end`` runs it from options; ``TerminalVoice`` is what it adds to
the console (listening, speaking, keys)."""

from ._command import run_voice_front_end, voice_command
from ._options import VoiceOptions, voice_options
from ._voice import TerminalVoice

__all__ = ["TerminalVoice", "VoiceOptions", "run_voice_front_end", "voice_command", "voice_options"]
