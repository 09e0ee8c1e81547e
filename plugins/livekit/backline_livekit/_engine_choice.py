"""Which ``--stt``/``--tts``/``--vad`` values name one of backline's speech engines, and
building them (once per process).

A value names a backline engine (one a plugin registers: ``backline speech list``) when
it is ``backline:NAME[:MODEL]``, or a plain ``NAME[:MODEL]`` that LiveKit does not
claim: a LiveKit Inference model has a ``/``, ``--vad silero`` and ``--vad none`` are
LiveKit's, and so is any ``NAME`` with an installed ``livekit-plugins-NAME``. So every
value that meant something to LiveKit still does, and ``backline:`` reaches a backline
engine whose name LiveKit also uses (``backline:silero``, ``backline:openai``).

Engines are built once per process and shared by its conversations (a speech-to-text
engine opens a stream per conversation, a text-to-speech engine synthesises per call),
except voice activity detectors, which keep what they heard: ``BackendVAD`` builds one
per stream.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from backline.plugins import PluginManager, SpeechEngineEntry

PREFIX = "backline:"
TITLES = {"stt": "STT", "tts": "TTS", "vad": "VAD"}


class ProviderError(ValueError):
    """An ``--stt``/``--tts``/``--vad`` value (or an option of it) that cannot be used;
    ``flag``: the option to change, when it is not the value's own."""

    def __init__(self, message: str, *, flag: str | None = None) -> None:
        super().__init__(message)
        self.flag = flag


@dataclass(frozen=True)
class EngineChoice:
    """A registered backline engine, and the model the value named (``NAME:MODEL``)."""

    entry: SpeechEngineEntry
    model: str | None
    spec: str

    @property
    def flag(self) -> str:
        return f"--{self.entry.kind}"


def livekit_plugin_installed(name: str) -> bool:
    """``livekit-plugins-NAME`` is installed (``livekit.plugins.NAME``), without importing it."""
    if not name.isidentifier():
        return False
    try:
        return importlib.util.find_spec(f"livekit.plugins.{name}") is not None
    except (ImportError, ValueError):  # no livekit.plugins package at all
        return False


def claimed_by_livekit(kind: str, spec: str) -> bool:
    """LiveKit gives ``spec`` a meaning (an Inference model, its bundled VAD, a plugin)."""
    if spec.startswith(PREFIX):
        return False
    if "/" in spec or (kind == "vad" and spec in ("silero", "none")):
        return True
    return livekit_plugin_installed(spec.partition(":")[0])


def engine_names(kind: str, manager: PluginManager) -> list[str]:
    return [e.name for e in manager.speech_engines(kind)]


def choose(kind: str, spec: str, manager: Callable[[], PluginManager]) -> EngineChoice | None:
    """The backline engine ``spec`` names, None when it is LiveKit's (or names nothing
    backline has: LiveKit's error then says what exists). ``ProviderError`` for a
    ``backline:`` name that is not registered, and for an engine that cannot run here."""
    if claimed_by_livekit(kind, spec):
        return None
    forced = spec.startswith(PREFIX)
    name, _, model = spec.removeprefix(PREFIX).partition(":")
    plugins = manager()
    names = engine_names(kind, plugins)
    if name not in names:
        if not forced:
            return None
        raise ProviderError(
            f"unknown {TITLES[kind]} {spec!r}: backline has no {kind} engine {name!r} "
            f"(it has {', '.join(names) or 'none'}: `backline speech list`)."
        )
    entry = plugins.speech_engine(kind, name)
    why = entry.why_unavailable()
    if why is not None:
        raise ProviderError(f"--{kind} {spec}: backline's {name} cannot run here: {why}")
    return EngineChoice(entry, model or None, spec)


def check_voice(choice: EngineChoice, voice: str | None) -> None:
    if voice is None:
        return
    voices = choice.entry.known_voices()
    if voices and voice not in voices:
        raise ProviderError(
            f"{choice.entry.name} has no voice {voice!r} (`backline speech list --kind tts`).",
            flag="--tts-voice",
        )


_lock = threading.Lock()
_built: dict[tuple[Any, ...], Any] = {}


def build(choice: EngineChoice, *, voice: str | None = None, language: str | None = None) -> Any:
    """The engine, built once per process for these options (blocking: it may load a
    model). ``ProviderError`` saying why it could not start."""
    entry = choice.entry
    key = (entry.kind, entry.plugin, entry.name, choice.model, voice, language)
    with _lock:
        found = _built.get(key)
    if found is not None:
        return found
    engine = build_new(choice, voice=voice, language=language)
    with _lock:
        return _built.setdefault(key, engine)


def build_new(
    choice: EngineChoice, *, voice: str | None = None, language: str | None = None
) -> Any:
    """A new engine (``build`` shares one per process)."""
    options = {"model": choice.model, "voice": voice, "language": language}
    try:
        return choice.entry.build(**options)
    except (ValueError, TypeError, RuntimeError, OSError, ImportError) as e:
        raise ProviderError(
            f"{choice.flag} {choice.spec}: backline's {choice.entry.name} could not start: {e}"
        ) from None
