"""``--stt``, ``--tts`` and ``--vad``: a LiveKit plugin or a LiveKit Inference model string.

- ``provider/model[:variant]`` (it has a ``/``): LiveKit Inference, e.g.
  ``deepgram/nova-3``, ``cartesia/sonic-3:<voice id>``. It runs through your
  LiveKit Cloud project, so it needs ``LIVEKIT_API_KEY`` and ``LIVEKIT_API_SECRET``.
- ``NAME`` or ``NAME:MODEL``: the installed plugin ``livekit-plugins-NAME``
  (``livekit.plugins.NAME``), its ``STT``/``TTS`` class, with ``model=MODEL``.
  ``--vad silero`` is LiveKit's own Silero VAD (bundled, local); ``--vad none``
  turns voice activity detection off.

Errors (``ProviderError``) say what was wrong and what to do; nothing is
imported or built before the name is understood.
"""

from __future__ import annotations

import importlib
import os
import typing
from collections.abc import Mapping
from typing import Any

DEFAULT_STT = "deepgram/nova-3"
DEFAULT_TTS = "cartesia/sonic-3"
DEFAULT_VAD = "silero"
ENV_STT = "BACKLINE_LIVEKIT_STT"
ENV_TTS = "BACKLINE_LIVEKIT_TTS"
ENV_VAD = "BACKLINE_LIVEKIT_VAD"


class ProviderError(ValueError):
    """An ``--stt``/``--tts``/``--vad`` value that cannot be used (the message says why)."""


class MissingCredentials(ProviderError):
    """A LiveKit Inference model without ``LIVEKIT_API_KEY``/``LIVEKIT_API_SECRET``."""


def _inference_providers(kind: str) -> set[str]:
    """The providers LiveKit Inference knows for ``kind`` (``stt`` or ``tts``)."""
    from livekit.agents.inference import stt as inference_stt
    from livekit.agents.inference import tts as inference_tts

    models: Any = inference_stt.STTModels if kind == "stt" else inference_tts.TTSModels
    names: set[str] = set()

    def walk(tp: Any) -> None:
        for arg in typing.get_args(tp):
            if isinstance(arg, str):
                names.add(arg.split("/", 1)[0])
            else:
                walk(arg)

    walk(models)
    return {n for n in names if n != "auto"}


def _needs_cloud(spec: str, flag: str, environ: Mapping[str, str]) -> None:
    if not (environ.get("LIVEKIT_API_KEY") and environ.get("LIVEKIT_API_SECRET")):
        raise MissingCredentials(
            f"{flag} {spec} is a LiveKit Inference model, which runs through a LiveKit Cloud "
            f"project: set LIVEKIT_API_KEY and LIVEKIT_API_SECRET, or choose a plugin you have "
            f"a key for (e.g. {flag} openai with `pip install livekit-plugins-openai` and "
            f"OPENAI_API_KEY)."
        )


def _from_plugin(spec: str, kind: str, flag: str) -> Any:
    name, _, model = spec.partition(":")
    if not name.isidentifier():
        raise ProviderError(
            f"{flag} {spec!r} is neither a LiveKit plugin name (NAME or NAME:MODEL) nor an "
            f"inference model (provider/model, e.g. {DEFAULT_STT})."
        )
    try:
        module = importlib.import_module(f"livekit.plugins.{name}")
    except ModuleNotFoundError as e:
        if e.name is not None and not f"livekit.plugins.{name}".startswith(e.name):
            raise  # the plugin itself is broken: show its own error
        raise ProviderError(
            f"unknown {kind.upper()} {name!r}: no LiveKit plugin livekit-plugins-{name} is "
            f"installed (pip install livekit-plugins-{name}), and it is not a LiveKit Inference "
            f"model (provider/model, e.g. {DEFAULT_STT if kind == 'stt' else DEFAULT_TTS})."
        ) from None
    cls = getattr(module, kind.upper(), None)
    if cls is None:
        raise ProviderError(f"livekit-plugins-{name} has no {kind.upper()}; choose another {flag}.")
    try:
        return cls(model=model) if model else cls()
    except (TypeError, ValueError) as e:
        raise ProviderError(f"{flag} {spec}: {e}") from None


def _make(spec: str, kind: str, environ: Mapping[str, str]) -> Any:
    flag = f"--{kind}"
    spec = spec.strip()
    if "/" in spec:
        provider = spec.split("/", 1)[0]
        known = _inference_providers(kind)
        if provider not in known:
            raise ProviderError(
                f"unknown {kind.upper()} {spec!r}: LiveKit Inference has no provider "
                f"{provider!r} (it has {', '.join(sorted(known))}); or name an installed "
                f"plugin (NAME or NAME:MODEL)."
            )
        _needs_cloud(spec, flag, environ)
        from livekit.agents import inference

        factory: Any = inference.STT if kind == "stt" else inference.TTS
        try:
            return factory.from_model_string(spec)
        except ValueError as e:
            raise ProviderError(f"{flag} {spec}: {e}") from None
    return _from_plugin(spec, kind, flag)


def make_stt(spec: str | None = None, *, environ: Mapping[str, str] | None = None) -> Any:
    """The STT for ``spec`` (default: ``$BACKLINE_LIVEKIT_STT``, else ``deepgram/nova-3``)."""
    env = os.environ if environ is None else environ
    return _make(spec or env.get(ENV_STT) or DEFAULT_STT, "stt", env)


def make_tts(spec: str | None = None, *, environ: Mapping[str, str] | None = None) -> Any:
    """The TTS for ``spec`` (default: ``$BACKLINE_LIVEKIT_TTS``, else ``cartesia/sonic-3``)."""
    env = os.environ if environ is None else environ
    return _make(spec or env.get(ENV_TTS) or DEFAULT_TTS, "tts", env)


def make_vad(spec: str | None = None, *, environ: Mapping[str, str] | None = None) -> Any:
    """The VAD for ``spec``: ``silero`` (default, bundled), ``none``, or a plugin NAME."""
    env = os.environ if environ is None else environ
    spec = (spec or env.get(ENV_VAD) or DEFAULT_VAD).strip()
    if spec == "none":
        return None
    if spec == "silero":
        from livekit.agents import inference

        return inference.VAD()
    module_name = spec.partition(":")[0]
    try:
        module = importlib.import_module(f"livekit.plugins.{module_name}")
    except ModuleNotFoundError:
        raise ProviderError(
            f"unknown VAD {spec!r}: use silero (bundled), none, or an installed LiveKit plugin "
            f"with a VAD (pip install livekit-plugins-{module_name})."
        ) from None
    vad = getattr(module, "VAD", None)
    if vad is None:
        raise ProviderError(f"livekit-plugins-{module_name} has no VAD; use --vad silero.")
    return vad.load() if hasattr(vad, "load") else vad()
