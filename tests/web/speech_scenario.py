"""The server's speech for the web tests: the real engines (eSpeak NG speaks, PocketSphinx
listens, the energy detector finds the turns), phrases they agree on, a microphone
recording, and a voice model that answers a question with a long reply."""

from __future__ import annotations

import functools
import shutil
from pathlib import Path
from typing import Any

import pytest

from backline import Agent, Session
from backline.io.web import WebSpeech
from backline.speech import AudioFrame, write_wav
from backline.testing import LLMRequest, ScriptedLLM, ScriptedResponse, text

from .scenario import STORY

QUESTION = "one two three four five"
"""Said by eSpeak NG and heard back word for word by PocketSphinx through Chromium's
microphone (whose quiet is never all zeros: after digital silence PocketSphinx hears
"well two three four five")."""
ASKED = "what is the weather"
TALKED_OVER = "how are you"
"""Phrases PocketSphinx hears word for word after digital silence (tests/speech)."""
RATE = 16_000


def require_engines() -> None:
    """Skip, saying why, where the zero-download engines cannot run."""
    pytest.importorskip("pocketsphinx", reason="backline-local-speech's pocketsphinx is missing")
    if shutil.which("espeak-ng") is None:
        pytest.skip("eSpeak NG is not installed (apt install espeak-ng)")


@functools.cache
def web_speech(mode: str = "server") -> WebSpeech:
    """The engines as ``backline web`` builds them (``build_speech``), once per process."""
    from backline.app import SpeechOptions, build_speech
    from backline.plugins import PluginManager

    manager = PluginManager.from_environment().load()
    engines = build_speech(manager, SpeechOptions(stt="pocketsphinx", tts="espeak", vad="energy"))
    return WebSpeech.from_engines(mode, engines)  # type: ignore[arg-type]


def said(words: str) -> AudioFrame:
    """``words`` said by eSpeak NG, at 16 kHz."""
    from backline_local_speech.espeak import EspeakTTS

    frames = list(EspeakTTS().synthesize_sync(words))
    return AudioFrame(b"".join(f.data for f in frames), frames[0].sample_rate).resample(RATE)


def recording(*pieces: AudioFrame | float) -> AudioFrame:
    """Speech (frames) and silence (seconds), one after the other, at 16 kHz."""
    parts = [
        AudioFrame.silence(p, RATE) if isinstance(p, float) else p.resample(RATE) for p in pieces
    ]
    return AudioFrame(b"".join(p.data for p in parts), RATE)


def microphone_file(folder: Path, *pieces: AudioFrame | float) -> str:
    """A WAV file for Chromium's fake microphone (it plays it in a loop)."""
    path = folder / "microphone.wav"
    write_wav(path, [recording(*pieces)])
    return str(path)


def voice_model(request: LLMRequest) -> ScriptedResponse:
    """The first turn gets the long story (to be talked over); later ones a short answer."""
    last = request.last_message.content if request.last_message else ""
    earlier = [m for m in request.chat_ctx.items if getattr(m, "role", None) == "assistant"]
    if not earlier:
        return text(STORY)
    return text(f"You said {last}.")


def speaking_session(sessions: list[Session[Any]]) -> Any:
    """A tab factory: a session with the voice model (kept in ``sessions``)."""

    def factory() -> tuple[Session[Any], Agent]:
        session: Session[Any] = Session(ScriptedLLM(voice_model), user_away_timeout=None)
        sessions.append(session)
        return session, Agent("Count with the user.")

    return factory
