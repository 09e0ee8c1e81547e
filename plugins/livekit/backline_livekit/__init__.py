"""backline-livekit: LiveKit Agents as the body of a backline session.

LiveKit does the audio (VAD, STT, TTS, turn detection, barge-in), rooms and
workers; backline stays the brain. ``LiveKitBridge`` links one backline
``Session`` to one LiveKit ``AgentSession``; ``backline livekit console|dev|start``
run it from the command line. ``BackendSTT``, ``BackendTTS`` and ``BackendVAD`` put
backline's own speech engines behind LiveKit's interfaces (no speech cloud).

Importing this package is cheap: LiveKit loads on first use of a name below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .bridge import LiveKitBridge
    from .engines import BackendSTT, BackendTTS, BackendVAD
    from .providers import ProviderError, make_speech, make_stt, make_tts, make_vad

__all__ = [
    "BackendSTT",
    "BackendTTS",
    "BackendVAD",
    "LiveKitBridge",
    "ProviderError",
    "make_speech",
    "make_stt",
    "make_tts",
    "make_vad",
]

_PROVIDERS = ("ProviderError", "make_speech", "make_stt", "make_tts", "make_vad")
_ENGINES = ("BackendSTT", "BackendTTS", "BackendVAD")


def __getattr__(name: str) -> Any:
    if name == "LiveKitBridge":
        from .bridge import LiveKitBridge

        return LiveKitBridge
    if name in _PROVIDERS:
        from . import providers

        return getattr(providers, name)
    if name in _ENGINES:
        from . import engines

        return getattr(engines, name)
    raise AttributeError(f"module 'backline_livekit' has no attribute {name!r}")
