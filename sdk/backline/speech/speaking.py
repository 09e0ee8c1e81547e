"""``SpeakingModel``: a model that hears and speaks itself (a realtime model with audio).

A front end that has a microphone and a speaker asks such a model for audio
(``use_audio()``): the model's replies then come as ``AudioDelta`` chunks (played as
they are, see ``SpeechOutput``), and the speech-to-text engine it returns sends the
user's voice to the model itself, so the model hears the audio, not only its
transcript. The voice pipeline (``SpeechInput``) still decides when an utterance ends
(backline's voice activity detection, push-to-talk, barge-in rules): each ``flush``
of a stream is one user turn the model heard, and the final transcript the model
gives is that turn's text in the session's history.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .stt import SpeechToText

__all__ = ["SpeakingModel"]


@runtime_checkable
class SpeakingModel(Protocol):
    """An LLM that can take the user's voice and answer with its own."""

    def use_audio(self) -> SpeechToText:
        """Answer with audio from now on, and give the speech-to-text engine whose
        streams carry the user's voice to the model (see the module doc)."""
        ...
