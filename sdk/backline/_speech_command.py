"""``backline speech``: the speech engines plugins registered (``list``), their models
(``download``), and trying them: ``say`` (text to a WAV file or the speaker),
``transcribe`` (a WAV file to text), ``check`` (the microphone and the speaker)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
import wave
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import click

from . import _speech_audio as audio_devices
from . import app
from .plugins import PluginError, PluginManager, SpeechEngineEntry, UnknownNameError
from .plugins._errors import closest
from .plugins._speech_kinds import KIND_TITLES, SPEECH_KINDS, SpeechModel, model_name
from .speech import AudioFrame, SentenceSplitter, read_wav, split_frames, write_wav
from .speech.models import DownloadError, ModelSpec, download, is_downloaded, model_dir

VOICES_SHOWN = 8  # the first voices a listing shows (--json lists them all)
CLOSE_TIMEOUT = 10.0
CHECK_SENTENCE = "This is backline speaking. If you can hear this sentence, your speaker works."
T = TypeVar("T")
FLAGS = {"stt": "--stt", "tts": "--tts", "vad": "--vad"}


@click.group("speech")
def speech_group() -> None:
    """Speech engines: list them, download their models, try them.

    `backline speech list` shows every engine and which one is used when none is named;
    `say`, `transcribe` and `check` try them on this machine; `devices` lists the
    microphones and speakers.
    """


speech_group.add_command(audio_devices.devices_command)


# -- list ------------------------------------------------------------------------------------
@speech_group.command("list")
@click.option("--kind", type=click.Choice(SPEECH_KINDS), help="Only engines of this kind.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def list_command(ctx: click.Context, kind: str | None, as_json: bool) -> None:
    """List the speech engines by kind: plugin, local or remote, ready or why not, the
    default (the best local engine ready here), models and voices."""
    manager = app.plugin_manager(ctx, strict_errors=False)
    kinds = [kind] if kind else list(SPEECH_KINDS)
    listed = {k: _listing(manager, k) for k in kinds}
    if as_json:
        click.echo(json.dumps(listed, indent=2))
    else:
        click.echo("\n\n".join(_describe_kind(k, items) for k, items in listed.items()))
        click.echo(
            "\n`backline speech download ENGINE/MODEL` fetches a model; --json lists every "
            "model and voice."
        )
    app.plugin_manager(ctx)  # strict mode: exit non-zero after the listing


def _listing(manager: PluginManager, kind: str) -> list[dict[str, Any]]:
    entries = manager.speech_engines(kind)
    try:
        default: str | None = manager.speech_engine(kind).name
    except Exception:  # none is ready, or a plugin's listing raised (shown on its entry)
        default = None
    builtin = {i.name for i in manager.plugins() if i.builtin}
    return [_engine(entry, entry.name == default, entry.plugin in builtin) for entry in entries]


def _engine(entry: SpeechEngineEntry, default: bool, builtin: bool) -> dict[str, Any]:
    why = entry.why_unavailable()
    item: dict[str, Any] = {
        "kind": entry.kind,
        "name": entry.name,
        "plugin": entry.plugin,
        "builtin": builtin,
        "description": entry.description,
        "local": entry.local,
        "rank": entry.rank,
        "ready": False,
        "why_not_ready": why,
        "default": default,
        "default_model": entry.default_model,
        "models": [],
        "default_voice": entry.default_voice,
        "voices": [],
    }
    try:
        models = entry.known_models()
        item["voices"] = entry.known_voices()
    except Exception as e:  # a plugin's listing failed: say so, list the others
        item["error"] = f"{type(e).__name__}: {e}"
        item["why_not_ready"] = why or f"its models or voices could not be listed: {e}"
        return item
    item["models"] = [_model(entry, m) for m in models]
    chosen = next((m for m in models if model_name(m) == entry.default_model), None)
    if why is None and isinstance(chosen, ModelSpec) and not is_downloaded(chosen):
        item["why_not_ready"] = (
            f"its default model is not downloaded: backline speech download {chosen.id}"
        )
    item["ready"] = item["why_not_ready"] is None
    return item


def _model(entry: SpeechEngineEntry, model: SpeechModel) -> dict[str, Any]:
    if isinstance(model, ModelSpec):
        return {
            "name": model.name,
            "id": model.id,
            "description": model.description,
            "size": model.size,
            "downloaded": is_downloaded(model),
            "folder": str(model_dir(model)),
        }
    # A name: nothing to download (bundled with the engine, or remote).
    return {"name": model, "id": f"{entry.name}/{model}", "description": "", "size": None}


def _describe_kind(kind: str, items: list[dict[str, Any]]) -> str:
    lines = [f"{KIND_TITLES[kind]} ({FLAGS[kind]} NAME):"]
    if not items:
        lines.append("  none installed: pip install backline-local-speech")
    lines.extend(_describe_engine(item) for item in items)
    if items and not any(item["default"] for item in items):
        lines.append(f"  no default: no local engine is ready here; name one with {FLAGS[kind]}")
    return "\n".join(lines)


def _describe_engine(item: dict[str, Any]) -> str:
    facts = [
        "built-in" if item["builtin"] else f"plugin {item['plugin']}",
        "local" if item["local"] else "remote",
        "ready" if item["ready"] else f"not ready: {item['why_not_ready']}",
    ]
    if item["default"]:
        facts.append("the default")
    lines = [f"  {item['name']} ({'; '.join(facts)})"]
    if item["description"]:
        lines.append(f"    {item['description']}")
    if "error" in item:
        lines.append(f"    (its models and voices could not be listed: {item['error']})")
    if item["models"]:
        lines.append("    models:")
        for model in item["models"]:
            notes = ["default"] if model["name"] == item["default_model"] else []
            if model["size"] is not None:
                notes.append(_size(model["size"]))
                notes.append("downloaded" if model["downloaded"] else "not downloaded")
            shown = f"{model['name']} ({', '.join(notes)})" if notes else model["name"]
            lines.append(f"      {shown}")
    voices: list[str] = item["voices"]
    if voices:
        shown_voices = [
            f"{v} (default)" if v == item["default_voice"] else v for v in voices[:VOICES_SHOWN]
        ]
        more = f", ... ({len(voices)} in all)" if len(voices) > VOICES_SHOWN else ""
        lines.append(f"    voices: {', '.join(shown_voices)}{more}")
    return "\n".join(lines)


def _size(size: int) -> str:
    if size >= 1_000_000_000:
        return f"{size / 1e9:.1f} GB"
    if size >= 1_000_000:
        return f"{size / 1e6:.0f} MB" if size >= 10_000_000 else f"{size / 1e6:.1f} MB"
    return f"{max(1, round(size / 1e3))} KB"


# -- download --------------------------------------------------------------------------------
@speech_group.command("download")
@click.argument("name", metavar="ENGINE[/MODEL]")
@click.pass_context
def download_command(ctx: click.Context, name: str) -> None:
    """Download a model: ENGINE/MODEL (whisper/base.en), or ENGINE for its default model.
    Prints the model's folder. A download that stopped goes on where it stopped."""
    manager = app.plugin_manager(ctx)
    entry, model = _find_model(manager, name)
    if model is None:
        click.echo(f"{entry.name} needs no download: it has no model to fetch.", err=True)
        return
    if not isinstance(model, ModelSpec):
        why = "the engine brings its model itself" if entry.local else "it runs on a server"
        click.echo(f"{entry.name}/{model} needs no download: {why}.", err=True)
        return
    if is_downloaded(model):
        click.echo(f"{model.id} is already downloaded.", err=True)
    else:
        _download(model)
    click.echo(str(model_dir(model)))


def _find_model(manager: PluginManager, name: str) -> tuple[SpeechEngineEntry, SpeechModel | None]:
    """The engine and model ``name`` means (``engine/model`` or ``engine``: its default
    model, None when it has none); a usage error with "did you mean" if it means none."""
    engine, _, wanted = name.partition("/")
    every = [e for kind in SPEECH_KINDS for e in manager.speech_engines(kind)]
    entries = [e for e in every if e.name == engine]
    if not entries:
        names = sorted({e.name for e in every})
        text = f"unknown speech engine '{engine}'; available: {', '.join(names) or 'none'}"
        suggestion = closest(engine, names)
        hint = (
            f". Did you mean '{suggestion}{'/' + wanted if wanted else ''}'?"
            if suggestion
            else ". `backline speech list` shows them; pip install backline-local-speech "
            "adds local ones"
        )
        raise click.BadParameter(text + hint, param_hint="'ENGINE[/MODEL]'")
    models: list[tuple[SpeechEngineEntry, SpeechModel]] = []
    for entry in entries:
        try:
            found = entry.model(wanted or None)
            models += [(entry, m) for m in entry.known_models()]
        except Exception as e:
            raise click.ClickException(
                f"{entry.name}: its models could not be listed ({type(e).__name__}: {e})"
            ) from None
        if found is not None:
            return entry, found
    known = [model_name(m) for _, m in models]
    if not wanted:
        if not any(isinstance(m, ModelSpec) for _, m in models):
            return entries[0], None  # nothing to fetch
        named = ", ".join(f"{engine}/{m}" for m in known)
        raise click.BadParameter(
            f"{engine} has no default model: name one ({named})", param_hint="'ENGINE[/MODEL]'"
        )
    text = f"{engine} has no model '{wanted}'; its models: {', '.join(known) or 'none listed'}"
    suggestion = closest(wanted, known)
    if suggestion is not None:
        text += f". Did you mean '{engine}/{suggestion}'?"
    raise click.BadParameter(text, param_hint="'ENGINE[/MODEL]'")


class _Bar:
    """A download's progress on stderr: a bar redrawn in place on a terminal, a line
    every 10% otherwise (a log, a pipe)."""

    WIDTH = 30

    def __init__(self, label: str) -> None:
        self.label = label
        self.terminal = sys.stderr.isatty()
        self.shown = -1  # the last tenth printed (not a terminal)
        self.drawn = 0.0  # when the bar was last drawn (a terminal)

    def __call__(self, done: int, total: int) -> None:
        fraction = done / total if total else 1.0
        amount = f"{_size(done)} of {_size(total)}"
        if self.terminal:
            now = time.monotonic()
            if now - self.drawn < 0.1 and done < total:
                return
            self.drawn = now
            filled = round(fraction * self.WIDTH)
            bar = "#" * filled + "-" * (self.WIDTH - filled)
            click.echo(f"\r{self.label} [{bar}] {fraction:4.0%} {amount}", nl=False, err=True)
        elif int(fraction * 10) > self.shown:
            self.shown = int(fraction * 10)
            click.echo(f"{self.label}: {fraction:.0%} ({amount})", err=True)

    def end(self) -> None:
        if self.terminal and self.drawn:
            click.echo("", err=True)


def _download(spec: ModelSpec) -> None:
    click.echo(f"Downloading {spec.id} ({_size(spec.size)}) into {model_dir(spec)}", err=True)
    bar = _Bar(spec.id)
    try:
        download(spec, progress=bar)
    except DownloadError as e:
        bar.end()
        raise click.ClickException(" ".join(str(e).split())) from None
    bar.end()


# -- choosing and building an engine ----------------------------------------------------------
def _choose(manager: PluginManager, kind: str, name: str | None) -> SpeechEngineEntry:
    flag = FLAGS[kind]
    try:
        entry = manager.speech_engine(kind, name)
    except UnknownNameError as e:
        raise click.BadParameter(str(e), param_hint=f"'{flag}'") from None
    except PluginError as e:
        raise click.ClickException(f"{e} with {flag} NAME") from None
    except Exception as e:  # a plugin's check or listing raised
        raise click.ClickException(f"choosing a {KIND_TITLES[kind]} engine failed: {e}") from None
    if name is None:
        click.echo(
            f"backline: {KIND_TITLES[kind]}: {entry.name} (the best local engine ready here; "
            f"{flag} NAME chooses another)",
            err=True,
        )
    elif (why := entry.why_unavailable()) is not None:
        raise click.ClickException(f"{entry.name} cannot run here: {why}")
    return entry


def _build(entry: SpeechEngineEntry, **options: str | None) -> Any:
    """``entry.build(**options)``; a model that is not downloaded, or an engine that
    raises, is a one-line error naming the fix."""
    listing = f"`backline speech list --kind {entry.kind}`"
    given = {k: v for k, v in options.items() if v is not None}
    model: SpeechModel | None = None
    # The model it will load: the one named, or with no option at all its default (a
    # voice or a language may choose another model: the engine knows, and says so).
    if "model" in given or not given:
        try:
            model = entry.model(given.get("model"))
        except Exception as e:
            raise click.ClickException(
                f"{entry.name}: its models could not be listed: {e}"
            ) from None
    if isinstance(model, ModelSpec) and not is_downloaded(model):
        raise click.ClickException(
            f"{entry.name}: the model {model.name} is not downloaded ({_size(model.size)}): "
            f"run `backline speech download {model.id}` first"
        )
    try:
        return entry.build(**given)
    except DownloadError as e:
        raise click.ClickException(" ".join(str(e).split())) from None
    except Exception as e:
        message = " ".join(str(e).split()) or type(e).__name__
        if not message.startswith(entry.name):
            message = f"{entry.name}: {message}"
        if isinstance(e, FileNotFoundError):
            fix = f"{listing} shows which of its models are downloaded"
        elif isinstance(e, ImportError):
            fix = entry.why_unavailable() or f"reinstall the plugin {entry.plugin}"
        elif isinstance(e, ValueError | TypeError | LookupError):
            flags = " or ".join(f"--{k}" for k in given) or "its options"
            fix = f"check {flags}: {listing} shows what {entry.name} takes"
        else:
            fix = ""
        raise click.ClickException(f"{message}; {fix}" if fix else message) from None


def _within(seconds: float, work: Coroutine[Any, Any, T]) -> T:
    """Run the coroutine ``work`` on a new loop, at most ``seconds``."""

    async def bounded() -> T:
        async with asyncio.timeout(seconds):
            return await work

    return asyncio.run(bounded())


def _work_timeout(amount: float) -> float:
    """How long synthesis or transcription may take: generous (a big model on a slow
    CPU), but bounded."""
    return 60.0 + 10.0 * amount


# -- say ---------------------------------------------------------------------------------------
@speech_group.command("say")
@click.argument("text")
@click.option("--tts", "engine_name", metavar="NAME", help="The engine (default: the best ready).")
@click.option(
    "--voice",
    metavar="VOICE",
    help="One of the engine's voices (`backline speech list --kind tts`).",
)
@click.option("--model", metavar="MODEL", help="One of the engine's models.")
@click.option("--language", metavar="CODE", help="A language code, for engines that take one.")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="Write a WAV file (default: play on the speaker).",
)
@click.option("--output-device", metavar="ID|NAME", help="The speaker to play on (without -o).")
@click.pass_context
def say_command(
    ctx: click.Context,
    text: str,
    engine_name: str | None,
    voice: str | None,
    model: str | None,
    language: str | None,
    output: Path | None,
    output_device: str | None,
) -> None:
    """Say TEXT (`-`: read it from stdin) into a WAV file (-o FILE.wav) or on the speaker."""
    if text == "-":
        text = sys.stdin.read()
    if not text.strip():
        raise click.UsageError("nothing to say: TEXT is empty")
    speaker = None
    if output is None:  # the speaker must be there before the synthesis starts
        instead = "write a WAV file with -o FILE.wav"
        sd = audio_devices.sounddevice(instead)
        speaker = (
            sd,
            audio_devices.device(sd, output_device, "output", "--output-device", instead),
        )
    entry = _choose(app.plugin_manager(ctx), "tts", engine_name)
    engine = _build(entry, model=model, voice=voice, language=language)
    spoken = _speak(entry, engine, text)
    if speaker is not None:
        audio_devices.play(*speaker, spoken)
        return
    assert output is not None
    write_wav(output, [spoken])
    click.echo(f"{output}: {spoken.duration:.1f} s at {spoken.sample_rate} Hz", err=True)


def _speak(entry: SpeechEngineEntry, engine: Any, text: str) -> AudioFrame:
    """All of ``text`` said by ``engine``, sentence by sentence, as one mono frame."""
    splitter = SentenceSplitter()
    sentences = splitter.push(text) + splitter.flush()

    async def synthesize() -> list[AudioFrame]:
        frames: list[AudioFrame] = []
        for sentence in sentences:
            async with contextlib.aclosing(engine.synthesize(sentence)) as stream:
                frames.extend([frame async for frame in stream])
        return frames

    try:
        frames: list[AudioFrame] = _within(_work_timeout(len(text) / 10), synthesize())
    except TimeoutError:
        raise click.ClickException(f"{entry.name} did not finish speaking in time") from None
    except Exception as e:
        message = " ".join(str(e).split()) or type(e).__name__
        raise click.ClickException(f"{entry.name} failed: {message}") from None
    if not frames:
        raise click.ClickException(f"{entry.name} gave no audio for this text")
    rate = frames[0].sample_rate
    return AudioFrame(b"".join(f.resample(rate).data for f in frames), rate)


# -- transcribe ----------------------------------------------------------------------------------
@speech_group.command("transcribe")
@click.argument("wav", metavar="FILE.wav", type=click.Path(exists=True, dir_okay=False))
@click.option("--stt", "engine_name", metavar="NAME", help="The engine (default: the best ready).")
@click.option("--model", metavar="MODEL", help="One of the engine's models.")
@click.option("--language", metavar="CODE", help="The language spoken, for engines that take one.")
@click.pass_context
def transcribe_command(
    ctx: click.Context,
    wav: str,
    engine_name: str | None,
    model: str | None,
    language: str | None,
) -> None:
    """Print what is said in a WAV file (16-bit PCM, any rate)."""
    try:
        recording = read_wav(wav)
    except (wave.Error, ValueError, EOFError) as e:
        raise click.BadParameter(
            f"{wav} is not a 16-bit PCM WAV file ({e})", param_hint="'FILE.wav'"
        ) from None
    entry = _choose(app.plugin_manager(ctx), "stt", engine_name)
    engine = _build(entry, model=model, language=language)
    text = _transcribe(entry, engine, recording)
    if not text:
        click.echo(f"backline: {entry.name} heard no words.", err=True)
    click.echo(text)


def _transcribe(entry: SpeechEngineEntry, engine: Any, recording: AudioFrame) -> str:
    """The final transcripts of ``recording`` through the engine's stream: the audio
    resampled to the engine's rate, pushed in 20 ms frames, then flushed."""
    rate = getattr(engine, "sample_rate", None)
    mono = recording.resample(rate) if isinstance(rate, int) and rate > 0 else recording.to_mono()

    async def listen() -> str:
        stream = engine.stream()
        finals: list[str] = []
        try:
            for frame in split_frames(mono, 0.02):
                stream.push(frame)
            stream.flush()
            async for transcript in stream:
                if not transcript.final:
                    continue
                if transcript.error is not None:
                    raise click.ClickException(transcript.error)
                if transcript.text.strip():
                    finals.append(transcript.text.strip())
                # The flush's final covers the end of the audio (an engine with no
                # timings gives one final: the flush's).
                if transcript.end <= 0 or transcript.end >= mono.duration - 0.25:
                    break
        finally:
            async with asyncio.timeout(CLOSE_TIMEOUT):
                await stream.aclose()
        return " ".join(finals)

    try:
        text: str = _within(_work_timeout(recording.duration), listen())
    except TimeoutError:
        raise click.ClickException(f"{entry.name} gave no transcript in time") from None
    except Exception as e:
        message = " ".join(str(e).split()) or type(e).__name__
        raise click.ClickException(f"{entry.name} failed: {message}") from None
    return text


# -- check -----------------------------------------------------------------------------------------
@speech_group.command("check")
@click.option("--input-device", metavar="ID|NAME", help="The microphone (default: the system's).")
@click.option("--output-device", metavar="ID|NAME", help="The speaker (default: the system's).")
@click.option(
    "--seconds",
    metavar="SECONDS",
    type=click.FloatRange(1, 30),
    default=3.0,
    show_default=True,
    help="How long to record.",
)
@click.option("--tts", "engine_name", metavar="NAME", help="The engine that says the sentence.")
@click.pass_context
def check_command(
    ctx: click.Context,
    input_device: str | None,
    output_device: str | None,
    seconds: float,
    engine_name: str | None,
) -> None:
    """Check the microphone and the speaker: record a few seconds and play them back, then
    say a sentence. Needs PortAudio: pip install 'backline[audio]'."""
    sd = audio_devices.sounddevice()
    microphone = audio_devices.device(sd, input_device, "input", "--input-device")
    speaker = audio_devices.device(sd, output_device, "output", "--output-device")
    manager = app.plugin_manager(ctx)
    click.echo(f"microphone: {microphone['name']}\nspeaker: {speaker['name']}")
    click.echo(f"Recording {seconds:g} s: say something...", err=True)
    recorded = audio_devices.record(sd, microphone, seconds)
    click.echo(f"recorded {recorded.duration:.1f} s, {_loudness(recorded)}")
    click.echo("Playing it back...", err=True)
    audio_devices.play(sd, speaker, recorded)
    _heard(manager, recorded)
    entry = _choose(manager, "tts", engine_name)
    spoken = _speak(entry, _build(entry), CHECK_SENTENCE)
    click.echo(f"Saying: {CHECK_SENTENCE}", err=True)
    audio_devices.play(sd, speaker, spoken)
    click.echo(f"said a sentence with {entry.name}: if you heard it, the speaker works")


def _loudness(recorded: AudioFrame) -> str:
    peak = max((abs(s) for s in recorded.samples()), default=0)
    if peak < 200:
        return (
            "silence: is the microphone muted, or the wrong one? (--input-device chooses "
            "another; `backline speech devices` lists them)"
        )
    if peak >= 32000:
        return "loud enough to clip: turn the input level down"
    return f"peak level {peak / 32768:.0%}"


def _heard(manager: PluginManager, recorded: AudioFrame) -> None:
    """What the default speech-to-text engine made of the recording, if one is ready."""
    try:
        entry = manager.speech_engine("stt")
    except Exception:
        click.echo("(no speech-to-text engine is ready here to transcribe it)", err=True)
        return
    try:
        text = _transcribe(entry, _build(entry), recorded)
    except click.ClickException as e:  # the microphone is what is checked: go on
        click.echo(f"({entry.name} could not transcribe it: {e.message})", err=True)
        return
    click.echo(f"{entry.name} heard: {text or '(no words)'}")
