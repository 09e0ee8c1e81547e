"""Each background agent in a voice of its own, when several run and the engine has them.

``background_voices(session, output)`` gives each of the session's backgrounds one of
the engine's ``alternate_voices`` (in the order of their ids; they repeat only when
there are more backgrounds than voices), and has ``output`` speak each background's
replies in its voice: the voice agent keeps the engine's own voice for everything
else. With one background, an engine without voices (not a ``VoicedTTS``), or no
speech output, nothing changes.
"""

from __future__ import annotations

from typing import Any

from ..speech.audio_output import SpeechOutput
from ..speech.tts import VoicedTTS
from ..voice.events import BackgroundReply
from .runtime import background_of

__all__ = ["background_voices"]


def background_voices(session: Any, output: Any) -> dict[str, str]:
    """Speak each background's replies through ``output`` (a ``SpeechOutput``) in a
    voice of its own; returns which (background id -> voice), empty when unchanged.
    Call it once, before the session starts."""
    manager = background_of(session)
    if manager is None or len(manager.definitions) < 2 or not isinstance(output, SpeechOutput):
        return {}
    tts = output.tts
    voices = list(tts.alternate_voices) if isinstance(tts, VoicedTTS) else []
    if not voices:
        return {}
    assigned = {bid: voices[i % len(voices)] for i, bid in enumerate(manager.sorted_ids())}

    def on_reply(event: BackgroundReply) -> None:
        if event.status == "scheduled" and event.speech_id is not None:
            output.set_voice(event.speech_id, assigned.get(event.background_id))

    session.on("background_reply", on_reply)
    return assigned
