"""The speech options of a front end that speaks with backline's own engines.

``@speech_options`` adds ``--stt``, ``--stt-model``, ``--tts``, ``--tts-model``,
``--tts-voice``, ``--vad`` and ``--language`` to a click command, in a "Speech"
section of its help; the command receives one ``SpeechOptions``. ``build_speech``
turns them into engines (``SpeechEngines``): a name the user gave must be a
registered engine that runs here, an engine left out is the best local one that is
ready (``backline speech list`` shows which). Both are checked before anything
starts, and each problem is a click error naming the option to change. A model the
user asked for (``--stt whisper``, ``--stt-model small.en``) is downloaded on first
use, with a progress bar on stderr; an engine chosen by default never downloads.

A model that hears and speaks itself (an LLM registered with ``speaks=True``, such as
``--llm openai-realtime``) needs no speech-to-text engine: ``build_speech(...,
llm=NAME)`` leaves it out unless ``--stt`` names one, and ``session_speech`` gives
each session the model's own hearing (and turns its voice on).

Engines are built once per front end: a speech-to-text engine or a voice activity
detector opens a stream per conversation, a text-to-speech engine synthesises per
call, so one set of engines serves every session of a process.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from ..plugins import OptionSection, PluginError, PluginManager, SpeechEngineEntry, UnknownNameError
from ..plugins._errors import closest
from ..speech.models import DownloadError, ModelSpec, download, is_downloaded, model_dir
from ..speech.speaking import SpeakingModel
from ..speech.stt import SpeechToText

F = TypeVar("F", bound=Callable[..., Any])

__all__ = [
    "SPEECH_SECTION",
    "SpeechEngines",
    "SpeechOptions",
    "build_speech",
    "session_speech",
    "speech_options",
]


@dataclass(frozen=True)
class SpeechOptions:
    """The user's choice of engines: a name (``None``: the best local engine that is
    ready) and its options (``None``: the engine's default)."""

    stt: str | None = None
    stt_model: str | None = None
    tts: str | None = None
    tts_model: str | None = None
    tts_voice: str | None = None
    vad: str | None = None
    language: str | None = None

    def as_dict(self) -> dict[str, str]:
        """The options given, by name (for the conversation log's session row)."""
        return {k: v for k, v in vars(self).items() if v is not None}


@dataclass(frozen=True)
class SpeechEngines:
    """Built engines (``backline.speech`` protocols) and the entries they came from.
    ``model``: the LLM that hears and speaks itself (``stt`` is ``None`` then, unless
    ``--stt`` named one: the model hears its transcripts)."""

    stt: Any
    tts: Any
    vad: Any
    entries: tuple[SpeechEngineEntry | None, SpeechEngineEntry, SpeechEngineEntry]
    options: SpeechOptions
    model: str | None = None

    def describe(self) -> str:
        """One line for a front end to say at start: which engine does what."""
        stt, tts, vad = self.entries
        o = self.options
        speaking = f"speaking with {_label(tts, o.tts_voice or tts.default_voice)}"
        if self.model is not None:
            hears = "hears you and speaks" if stt is None else "speaks"
            speaking = f"{self.model} {hears} in its own voice (other words: {tts.name})"
        listening = ""
        if stt is not None:
            listening = f"listening with {_label(stt, o.stt_model or stt.default_model)}, "
        return f"speech: {listening}{speaking}, voice activity by {vad.name}"

    def as_dict(self) -> dict[str, str]:
        """The engines chosen and their options, for the conversation log."""
        stt, tts, vad = self.entries
        listening = self.model if stt is None else stt.name
        chosen = {"stt": listening or "", "tts": tts.name, "vad": vad.name}
        return {**self.options.as_dict(), **chosen}


def session_speech(stt: SpeechToText | None, llm: object) -> SpeechToText:
    """The speech-to-text for a session whose voice agent runs on ``llm``, given the
    engines' ``stt``: a model that speaks (``SpeakingModel``) is asked for audio (its
    own voice from now on) and hears the user itself, unless ``--stt`` named an engine
    (``stt`` is not ``None``: the model hears its transcripts)."""
    if isinstance(llm, SpeakingModel):
        hearing = llm.use_audio()
        if stt is None:
            return hearing
    if stt is None:
        raise click.UsageError(
            f"{type(llm).__name__} does not hear the user itself: name a speech-to-text "
            "engine with --stt"
        )
    return stt


def _label(entry: SpeechEngineEntry, detail: str | None) -> str:
    return f"{entry.name} ({detail})" if detail else entry.name


SPEECH_SECTION = OptionSection(
    "Speech", help="backline's own speech engines (`backline speech list`)"
)
"""The help section of the speech options."""


def speech_options(command: F) -> F:
    """Add the speech options to a click command; it receives ``speech_options=``
    (a ``SpeechOptions``) instead of the separate flags."""

    @functools.wraps(command)
    def wrapper(
        *args: Any,
        stt: str | None,
        stt_model: str | None,
        tts: str | None,
        tts_model: str | None,
        tts_voice: str | None,
        vad: str | None,
        language: str | None,
        **kwargs: Any,
    ) -> Any:
        options = SpeechOptions(stt, stt_model, tts, tts_model, tts_voice, vad, language)
        return command(*args, speech_options=options, **kwargs)

    params: list[click.Parameter] = getattr(wrapper, "__click_params__", [])
    wrapper.__click_params__ = params  # type: ignore[attr-defined]
    params.extend(reversed([SPEECH_SECTION.title(), *_speech_params()]))
    return wrapper  # type: ignore[return-value]


def _speech_params() -> list[click.Option]:
    option = SPEECH_SECTION.option
    default = "default: the best local engine that is ready"
    return [
        option("--stt", metavar="NAME", envvar="BACKLINE_STT", help=f"Speech-to-text ({default})."),
        option("--stt-model", metavar="MODEL", help="Its model (e.g. base.en for whisper)."),
        option("--tts", metavar="NAME", envvar="BACKLINE_TTS", help=f"Text-to-speech ({default})."),
        option("--tts-model", metavar="MODEL", help="Its model."),
        option("--tts-voice", metavar="VOICE", help="Its voice (`backline speech list`)."),
        option("--vad", metavar="NAME", envvar="BACKLINE_VAD", help=f"Voice activity ({default})."),
        option("--language", metavar="CODE", help="The language spoken (e.g. en, fr)."),
    ]


def build_speech(
    manager: PluginManager, options: SpeechOptions, *, llm: str | None = None
) -> SpeechEngines:
    """Choose and build the engines (each raises a click error saying which option to
    change: an unknown name, an engine that cannot run here, a model or voice it
    does not take). Blocking (an engine may load its model): call it before the event
    loop starts, or in a worker thread. ``llm``: the voice agent's LLM name; one that
    hears and speaks itself needs no speech-to-text engine unless ``--stt`` names one."""
    model = llm if llm is not None and manager.llm_speaks(llm) else None
    stt = (
        None
        if model is not None and options.stt is None
        else _choose(manager, "stt", options.stt, "--stt", options.stt_model)
    )
    tts = _choose(manager, "tts", options.tts, "--tts", options.tts_model)
    vad = _choose(manager, "vad", options.vad, "--vad", None)
    _check_voice(tts, options.tts_voice)
    return SpeechEngines(
        None
        if stt is None
        else _build(stt, "--stt", model=options.stt_model, language=options.language),
        _build(
            tts,
            "--tts",
            model=options.tts_model,
            voice=options.tts_voice,
            language=options.language,
        ),
        _build(vad, "--vad"),
        entries=(stt, tts, vad),
        options=options,
        model=model,
    )


def _choose(
    manager: PluginManager, kind: str, name: str | None, flag: str, model: str | None
) -> SpeechEngineEntry:
    try:
        entry = manager.speech_engine(kind, name)
    except UnknownNameError as e:
        raise click.BadParameter(str(e), param_hint=f"'{flag}'") from None
    except PluginError as e:
        raise click.UsageError(f"{e} (or choose one with {flag})") from None
    if name is not None or model is not None:
        # A model the user asked for (naming the engine or the model) is fetched on
        # first use; an engine chosen by default is one whose model is already here.
        _fetch_model(entry, model, flag)
    if name is not None:
        why = entry.why_unavailable()
        if why is not None:
            raise click.BadParameter(f"{name} cannot run here: {why}", param_hint=f"'{flag}'")
    return entry


def _fetch_model(entry: SpeechEngineEntry, model: str | None, flag: str) -> None:
    spec = entry.model(model)
    if not isinstance(spec, ModelSpec) or is_downloaded(spec):
        return
    size = f"{spec.size / 1e6:,.0f} MB"
    click.echo(f"{entry.name}: downloading {spec.id} ({size}) into {model_dir(spec)}", err=True)
    with click.progressbar(length=spec.size, file=sys.stderr, show_eta=True) as bar:
        shown = 0

        def progress(done: int, total: int) -> None:
            nonlocal shown
            bar.update(done - shown)
            shown = done

        try:
            download(spec, progress=progress)
        except DownloadError as e:
            raise click.ClickException(f"{flag} {entry.name}: {e}") from None


def _check_voice(entry: SpeechEngineEntry, voice: str | None) -> None:
    if voice is None:
        return
    voices = entry.known_voices()
    if voices and voice not in voices:
        suggestion = closest(voice, voices)
        hint = f" Did you mean '{suggestion}'?" if suggestion else ""
        raise click.BadParameter(
            f"{entry.name} has no voice '{voice}' (`backline speech list --kind tts`).{hint}",
            param_hint="'--tts-voice'",
        )


def _build(entry: SpeechEngineEntry, flag: str, **options: Any) -> Any:
    try:
        return entry.build(**options)
    except (ValueError, TypeError, RuntimeError, OSError) as e:
        raise click.BadParameter(
            f"{entry.name} could not start: {e}", param_hint=f"'{flag}'"
        ) from None
