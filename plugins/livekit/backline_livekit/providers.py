"""``--stt``, ``--tts`` and ``--vad``: a LiveKit plugin, a LiveKit Inference model string,
or one of backline's own speech engines.

- ``provider/model[:variant]`` (it has a ``/``): LiveKit Inference, e.g.
  ``deepgram/nova-3``, ``cartesia/sonic-3:<voice id>``. It runs through your
  LiveKit Cloud project, so it needs ``LIVEKIT_API_KEY`` and ``LIVEKIT_API_SECRET``.
- ``NAME`` or ``NAME:MODEL``: the installed plugin ``livekit-plugins-NAME``
  (``livekit.plugins.NAME``), its ``STT``/``TTS`` class, with ``model=MODEL``.
  ``--vad silero`` is LiveKit's own Silero VAD (bundled, local); ``--vad none``
  turns voice activity detection off.
- ``NAME[:MODEL]`` that LiveKit does not claim (no ``livekit-plugins-NAME`` is
  installed), or ``backline:NAME[:MODEL]``: a speech engine a backline plugin
  registers (``backline speech list``: pocketsphinx, whisper, espeak, kokoro, piper,
  energy, silero ...), behind LiveKit's interfaces (``engines.py``), so a LiveKit
  session runs with no speech cloud. ``--tts-voice`` and ``--language`` go to these
  engines (see ``_engine_choice.py``).

Errors (``ProviderError``) say what was wrong and what to do; nothing is
imported or built before the name is understood.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pkgutil
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ._engine_choice import ProviderError, check_voice, choose, engine_names
from ._engine_choice import build as build_engine

if TYPE_CHECKING:
    from backline.plugins import PluginManager

__all__ = [
    "MissingCredentials",
    "ProviderError",
    "make_speech",
    "make_stt",
    "make_tts",
    "make_vad",
    "prepare_engines",
]

DEFAULT_STT = "deepgram/nova-3"
DEFAULT_TTS = "cartesia/sonic-3"
DEFAULT_VAD = "silero"
ENV_STT = "BACKLINE_LIVEKIT_STT"
ENV_TTS = "BACKLINE_LIVEKIT_TTS"
ENV_VAD = "BACKLINE_LIVEKIT_VAD"


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


def _manager_getter(manager: PluginManager | Callable[[], PluginManager] | None) -> Any:
    """A getter loading backline's plugins at most once, and only if a name needs them."""
    if manager is not None and not callable(manager):
        return lambda: manager
    source = manager
    loaded: list[PluginManager] = []

    def get() -> PluginManager:
        if not loaded:
            if source is not None:
                loaded.append(source())
            else:
                from backline.app import plugin_manager

                loaded.append(plugin_manager())
        return loaded[0]

    return get


def _backline_hint(kind: str, manager: Callable[[], PluginManager], lead: str = ", nor") -> str:
    """ ", nor one of backline's speech engines (...)" for an unknown name's message."""
    try:
        names = engine_names(kind, manager())
    except Exception:  # plugins that fail to load: the message stays LiveKit's
        return ""
    listed = ", ".join(names) or "none installed"
    return f"{lead} one of backline's speech engines ({listed}: `backline speech list`)"


def _installed_plugins() -> str:
    """ "; installed: NAME, ..." for the LiveKit plugins installed here, or ""."""
    try:
        namespace = importlib.import_module("livekit.plugins")
    except ImportError:
        return ""
    names = sorted(m.name for m in pkgutil.iter_modules(namespace.__path__))
    return f"; installed: {', '.join(names)}" if names else ""


def _from_plugin(spec: str, kind: str, flag: str, hint: Callable[[], str]) -> Any:
    name, _, model = spec.partition(":")
    if not name.isidentifier():
        raise ProviderError(
            f"{flag} {spec!r} is neither a LiveKit plugin name (NAME or NAME:MODEL) nor an "
            f"inference model (provider/model, e.g. {DEFAULT_STT}){hint()}."
        )
    try:
        module = importlib.import_module(f"livekit.plugins.{name}")
    except ModuleNotFoundError as e:
        if e.name is not None and not f"livekit.plugins.{name}".startswith(e.name):
            raise  # the plugin itself is broken: show its own error
        example = DEFAULT_STT if kind == "stt" else DEFAULT_TTS
        providers = ", ".join(sorted(_inference_providers(kind)))
        raise ProviderError(
            f"unknown {kind.upper()} {name!r}: no LiveKit plugin livekit-plugins-{name} is "
            f"installed (pip install livekit-plugins-{name}{_installed_plugins()}), it is not "
            f"a LiveKit Inference model (provider/model, e.g. {example}; providers: "
            f"{providers}){hint()}."
        ) from None
    cls = getattr(module, kind.upper(), None)
    if cls is None:
        raise ProviderError(f"livekit-plugins-{name} has no {kind.upper()}; choose another {flag}.")
    try:
        return cls(model=model) if model else cls()
    except (TypeError, ValueError) as e:
        raise ProviderError(f"{flag} {spec}: {e}") from None


def _make(spec: str, kind: str, environ: Mapping[str, str], hint: Callable[[], str]) -> Any:
    flag = f"--{kind}"
    if "/" in spec:
        provider = spec.split("/", 1)[0]
        known = _inference_providers(kind)
        if provider not in known:
            raise ProviderError(
                f"unknown {kind.upper()} {spec!r}: LiveKit Inference has no provider "
                f"{provider!r} (it has {', '.join(sorted(known))}); or name an installed "
                f"plugin (NAME or NAME:MODEL) or one of backline's engines."
            )
        _needs_cloud(spec, flag, environ)
        from livekit.agents import inference

        factory: Any = inference.STT if kind == "stt" else inference.TTS
        try:
            return factory.from_model_string(spec)
        except ValueError as e:
            raise ProviderError(f"{flag} {spec}: {e}") from None
    return _from_plugin(spec, kind, flag, hint)


def _spec(spec: str | None, env: Mapping[str, str], name: str, default: str) -> str:
    return (spec or env.get(name) or default).strip()


def make_stt(
    spec: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    vad: Any = None,
    language: str | None = None,
    manager: PluginManager | Callable[[], PluginManager] | None = None,
) -> Any:
    """The STT for ``spec`` (default: ``$BACKLINE_LIVEKIT_STT``, else ``deepgram/nova-3``).

    A backline engine becomes a ``BackendSTT`` that streams with ``vad`` (a LiveKit VAD;
    without one LiveKit's agent wraps it in ``stt.StreamAdapter`` with the session's VAD),
    built for ``language``. ``manager``: backline's plugins (or a function giving them;
    default: loaded from the environment, only if a name needs them)."""
    env = os.environ if environ is None else environ
    spec = _spec(spec, env, ENV_STT, DEFAULT_STT)
    plugins = _manager_getter(manager)
    choice = choose("stt", spec, plugins)
    if choice is None:
        return _make(spec, "stt", env, lambda: _backline_hint("stt", plugins))
    from .engines import BackendSTT

    engine = build_engine(choice, language=language)
    return BackendSTT(engine, vad=vad, model=choice.model, language=language)


def make_tts(
    spec: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    voice: str | None = None,
    language: str | None = None,
    manager: PluginManager | Callable[[], PluginManager] | None = None,
) -> Any:
    """The TTS for ``spec`` (default: ``$BACKLINE_LIVEKIT_TTS``, else ``cartesia/sonic-3``).

    A backline engine becomes a ``BackendTTS`` speaking with ``voice`` and ``language``;
    ``voice`` with a LiveKit name is an error (LiveKit Inference takes it in the name:
    ``provider/model:voice``)."""
    env = os.environ if environ is None else environ
    spec = _spec(spec, env, ENV_TTS, DEFAULT_TTS)
    plugins = _manager_getter(manager)
    choice = choose("tts", spec, plugins)
    if choice is None:
        if voice is not None:
            raise ProviderError(
                f"--tts-voice is for backline's speech engines, and --tts {spec} is LiveKit's: "
                "give a LiveKit Inference voice in the name (provider/model:voice), or a "
                "plugin's its own way.",
                flag="--tts-voice",
            )
        return _make(spec, "tts", env, lambda: _backline_hint("tts", plugins))
    from .engines import BackendTTS

    check_voice(choice, voice)
    engine = build_engine(choice, voice=voice, language=language)
    return BackendTTS(engine, model=choice.model)


def make_vad(
    spec: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    manager: PluginManager | Callable[[], PluginManager] | None = None,
) -> Any:
    """The VAD for ``spec``: ``silero`` (default, LiveKit's bundled model), ``none``, a
    LiveKit plugin NAME, or a backline detector (a ``BackendVAD``: ``energy``,
    ``backline:silero`` ...)."""
    env = os.environ if environ is None else environ
    spec = _spec(spec, env, ENV_VAD, DEFAULT_VAD)
    if spec == "none":
        return None
    if spec == "silero":
        from livekit.agents import inference

        return inference.VAD()
    plugins = _manager_getter(manager)
    choice = choose("vad", spec, plugins)
    if choice is not None:
        from ._engine_choice import build_new
        from .engines import BackendVAD

        return BackendVAD(lambda: build_new(choice))
    module_name = spec.partition(":")[0]
    try:
        module = importlib.import_module(f"livekit.plugins.{module_name}")
    except ModuleNotFoundError:
        raise ProviderError(
            f"unknown VAD {spec!r}: use silero (bundled), none, an installed LiveKit plugin "
            f"with a VAD (pip install livekit-plugins-{module_name})"
            f"{_backline_hint('vad', plugins, ', or')}."
        ) from None
    vad = getattr(module, "VAD", None)
    if vad is None:
        raise ProviderError(f"livekit-plugins-{module_name} has no VAD; use --vad silero.")
    return vad.load() if hasattr(vad, "load") else vad()


def make_speech(
    stt: str | None = None,
    tts: str | None = None,
    vad: str | None = None,
    *,
    tts_voice: str | None = None,
    language: str | None = None,
    environ: Mapping[str, str] | None = None,
    manager: PluginManager | Callable[[], PluginManager] | None = None,
) -> dict[str, Any]:
    """``AgentSession`` keyword arguments (``stt``, ``tts``, ``vad``) for these choices,
    checked together: a backline STT needs a VAD to find utterances, and ``language``
    must reach at least one backline engine."""
    env = os.environ if environ is None else environ
    plugins = _manager_getter(manager)
    with _about("--vad"):
        lk_vad = make_vad(vad, environ=env, manager=plugins)
    stt_spec = _spec(stt, env, ENV_STT, DEFAULT_STT)
    tts_spec = _spec(tts, env, ENV_TTS, DEFAULT_TTS)
    with _about("--stt"):
        local_stt = choose("stt", stt_spec, plugins) is not None
    with _about("--tts"):
        local_tts = choose("tts", tts_spec, plugins) is not None
    if local_stt and lk_vad is None:
        raise ProviderError(
            f"--stt {stt_spec} is backline's engine, which needs voice activity detection to "
            "find where each utterance ends: leave out --vad none, or choose a VAD.",
            flag="--vad",
        )
    if language is not None and not (local_stt or local_tts):
        raise ProviderError(
            "--language is for backline's speech engines, and neither --stt nor --tts names "
            "one (a LiveKit provider takes its language its own way).",
            flag="--language",
        )
    with _about("--stt"):
        lk_stt = make_stt(stt_spec, environ=env, vad=lk_vad, language=language, manager=plugins)
    with _about("--tts"):
        lk_tts = make_tts(
            tts_spec, environ=env, voice=tts_voice, language=language, manager=plugins
        )
    return {"stt": lk_stt, "tts": lk_tts, "vad": lk_vad}


@contextlib.contextmanager
def _about(flag: str) -> Iterator[None]:
    """A ``ProviderError`` raised inside is about ``flag`` (unless it names another)."""
    try:
        yield
    except ProviderError as e:
        if e.flag is None:
            e.flag = flag
        raise


def prepare_engines(
    stt: str | None = None,
    tts: str | None = None,
    vad: str | None = None,
    *,
    tts_voice: str | None = None,
    language: str | None = None,
    environ: Mapping[str, str] | None = None,
    manager: PluginManager | Callable[[], PluginManager] | None = None,
) -> None:
    """Build the backline engines these choices name (blocking: models load), so that
    ``make_speech`` finds them ready: a worker's job processes do it before their first
    conversation. LiveKit's own providers are left alone."""
    env = os.environ if environ is None else environ
    plugins = _manager_getter(manager)
    stt_choice = choose("stt", _spec(stt, env, ENV_STT, DEFAULT_STT), plugins)
    if stt_choice is not None:
        build_engine(stt_choice, language=language)
    tts_choice = choose("tts", _spec(tts, env, ENV_TTS, DEFAULT_TTS), plugins)
    if tts_choice is not None:
        check_voice(tts_choice, tts_voice)
        build_engine(tts_choice, voice=tts_voice, language=language)
