"""Speech engines as registration kinds: ``register_stt``, ``register_tts``, ``register_vad``.

Shaped like ``register_llms``: a plugin registers a named factory,
``factory(**options) -> engine`` (options: ``model``, ``voice``, ``language``, only
those given), with what ``backline speech list`` shows (a description, the models and
voices it knows) and what choosing one needs: whether it runs on this machine
(``local``), what stops it here (``unavailable()``: a missing package, program or
model, in one sentence, or None), and a ``rank`` among local engines. The engine a
front end uses when none is named is the best local one that is ready: available, its
default model already downloaded (a default never starts a download).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeAlias

from ..speech.models import ModelSpec, is_downloaded
from ._kinds import RegistrationKind, check_name

SpeechKind: TypeAlias = Literal["stt", "tts", "vad"]
SPEECH_KINDS: tuple[SpeechKind, ...] = ("stt", "tts", "vad")
KIND_TITLES: dict[str, str] = {
    "stt": "speech-to-text",
    "tts": "text-to-speech",
    "vad": "voice activity",
}

SpeechModel: TypeAlias = str | ModelSpec
"""A model an engine knows: a name (nothing to download: bundled, or remote), or a
``ModelSpec`` (files fetched into the cache on first use or ``backline speech download``)."""
SpeechModels: TypeAlias = Sequence[SpeechModel] | Callable[[], Iterable[SpeechModel]]


class RegisterSpeech(Protocol):
    """The ``register`` argument of ``register_stt``, ``register_tts`` and ``register_vad``."""

    def __call__(
        self,
        name: str,
        factory: Callable[..., Any],
        *,
        description: str = "",
        local: bool = True,
        rank: int = 0,
        unavailable: Callable[[], str | None] | None = None,
        models: SpeechModels = (),
        default_model: str | None = None,
        voices: Sequence[str] | Callable[[], Iterable[str]] = (),
        default_voice: str | None = None,
    ) -> None: ...


@dataclass(frozen=True)
class SpeechEngineEntry:
    """A named speech engine factory (``kind``: ``stt``, ``tts`` or ``vad``) and its plugin."""

    kind: SpeechKind
    name: str
    factory: Callable[..., Any]
    description: str
    plugin: str
    local: bool = True
    rank: int = 0
    unavailable: Callable[[], str | None] | None = None
    models: SpeechModels = ()
    default_model: str | None = None
    voices: Sequence[str] | Callable[[], Iterable[str]] = ()
    default_voice: str | None = None

    def why_unavailable(self) -> str | None:
        """What stops it on this machine (one sentence), or None. Never raises."""
        if self.unavailable is None:
            return None
        try:
            return self.unavailable()
        except Exception as exc:  # a check that fails says so, it does not break a listing
            return f"its check failed: {exc}"

    def known_models(self) -> list[SpeechModel]:
        """The models it knows, the default first."""
        found = list(self.models() if callable(self.models) else self.models)
        found.sort(key=lambda m: model_name(m) != self.default_model)
        return found

    def model(self, name: str | None = None) -> SpeechModel | None:
        """The model named ``name`` (default: its default model), or None when it knows
        none by that name (a name it does not list may still be one its engine takes)."""
        wanted = name or self.default_model
        return next((m for m in self.known_models() if model_name(m) == wanted), None)

    def known_voices(self) -> list[str]:
        found = list(self.voices() if callable(self.voices) else self.voices)
        if self.default_voice and self.default_voice in found:
            found.remove(self.default_voice)
            found.insert(0, self.default_voice)
        return found

    def ready(self) -> bool:
        """Available here, and its default model (if it downloads one) is downloaded."""
        if self.why_unavailable() is not None:
            return False
        chosen = self.model()
        return not isinstance(chosen, ModelSpec) or is_downloaded(chosen)

    def build(self, **options: Any) -> Any:
        """``factory(**options)``, leaving out options given as None."""
        return self.factory(**{k: v for k, v in options.items() if v is not None})


def model_name(model: SpeechModel) -> str:
    return model.name if isinstance(model, ModelSpec) else model


def best_local(entries: Iterable[SpeechEngineEntry]) -> SpeechEngineEntry | None:
    """The engine used when none is named: the highest-ranked local engine that is
    ready (ties: by name), or None."""
    ready = [e for e in entries if e.local and e.ready()]
    ready.sort(key=lambda e: (-e.rank, e.name))
    return ready[0] if ready else None


def _maker(kind: SpeechKind) -> Callable[..., tuple[str, SpeechEngineEntry]]:
    hook = f"register_{kind}"

    def make(
        plugin: str,
        name: str,
        factory: Callable[..., Any],
        *,
        description: str = "",
        local: bool = True,
        rank: int = 0,
        unavailable: Callable[[], str | None] | None = None,
        models: SpeechModels = (),
        default_model: str | None = None,
        voices: Sequence[str] | Callable[[], Iterable[str]] = (),
        default_voice: str | None = None,
    ) -> tuple[str, SpeechEngineEntry]:
        check_name(hook, "engine name", name)
        if not callable(factory):
            raise TypeError(f"{hook}: the factory for '{name}' must be callable")
        if unavailable is not None and not callable(unavailable):
            raise TypeError(f"{hook}: unavailable for '{name}' must be a function")
        if not isinstance(rank, int) or isinstance(rank, bool):
            raise TypeError(f"{hook}: rank for '{name}' must be an int")
        if not callable(models):
            if isinstance(models, str) or not all(isinstance(m, str | ModelSpec) for m in models):
                raise TypeError(
                    f"{hook}: models for '{name}' must be names or ModelSpecs, or a function"
                )
            models = tuple(models)
        if not callable(voices):
            if isinstance(voices, str) or not all(isinstance(v, str) for v in voices):
                raise TypeError(f"{hook}: voices for '{name}' must be names, or a function")
            voices = tuple(voices)
        entry = SpeechEngineEntry(
            kind,
            name,
            factory,
            description,
            plugin,
            bool(local),
            rank,
            unavailable,
            models,
            default_model,
            voices,
            default_voice,
        )
        return name, entry

    make.__doc__ = (
        f"Register a {KIND_TITLES[kind]} engine: ``register(name, factory, "
        "description=..., local=True, rank=0, unavailable=None, models=(), "
        "default_model=None, voices=(), default_voice=None)``; "
        "``factory(**options)`` builds it (``model``, ``voice``, ``language``: those given)."
    )
    return make


STT: RegistrationKind[SpeechEngineEntry] = RegistrationKind(
    "stt", "register_stt", _maker("stt"), label="speech-to-text engine"
)
TTS: RegistrationKind[SpeechEngineEntry] = RegistrationKind(
    "tts", "register_tts", _maker("tts"), label="text-to-speech engine"
)
VAD: RegistrationKind[SpeechEngineEntry] = RegistrationKind(
    "vad", "register_vad", _maker("vad"), label="voice activity detector"
)
SPEECH_KIND_OF: dict[str, RegistrationKind[SpeechEngineEntry]] = {
    "stt": STT,
    "tts": TTS,
    "vad": VAD,
}
