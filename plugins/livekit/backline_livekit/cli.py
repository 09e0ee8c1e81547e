"""``backline livekit console | dev | start``.

Each takes the front-end options of ``backline console`` (``--background``,
``--agent``, ``--llm``, ``-m``, ``--instructions``, and plugins' options) plus
``--stt``, ``--tts`` and ``--vad`` (LiveKit's providers, or backline's own speech
engines, with ``--tts-voice`` and ``--language``). Everything is checked before
LiveKit starts: the LLM's key, the backgrounds and agent, the speech providers and
engines (a backline engine is built then, its model loaded), and for a worker the
LiveKit credentials and that the server answers.
"""

from __future__ import annotations

import os
import socket
import sys
from typing import Any
from urllib.parse import urlparse

import click

from backline.app import SessionOptions, build_session, plugin_manager, preflight, session_options

ENV_URL = "LIVEKIT_URL"
ENV_KEY = "LIVEKIT_API_KEY"
ENV_SECRET = "LIVEKIT_API_SECRET"
CONNECT_TIMEOUT = 5.0


def speech_options(command: Any) -> Any:
    for decorate in reversed(
        [
            click.option(
                "--stt",
                envvar="BACKLINE_LIVEKIT_STT",
                metavar="SPEC",
                help="Speech to text: a LiveKit Inference model (provider/model; default "
                "deepgram/nova-3), a LiveKit plugin (NAME or NAME:MODEL, e.g. openai), or one "
                "of backline's engines (NAME or NAME:MODEL, e.g. whisper:base.en, pocketsphinx; "
                "backline:NAME when a LiveKit plugin has the same name).",
            ),
            click.option(
                "--tts",
                envvar="BACKLINE_LIVEKIT_TTS",
                metavar="SPEC",
                help="Text to speech, the same way: a LiveKit Inference model "
                "(provider/model[:voice]; default cartesia/sonic-3), a LiveKit plugin, or one "
                "of backline's engines (e.g. kokoro, piper, espeak).",
            ),
            click.option(
                "--vad",
                envvar="BACKLINE_LIVEKIT_VAD",
                metavar="SPEC",
                help="Voice activity detection: silero (default, LiveKit's bundled model), "
                "none, a LiveKit plugin, or one of backline's detectors (energy, "
                "backline:silero).",
            ),
            click.option(
                "--tts-voice",
                envvar="BACKLINE_LIVEKIT_TTS_VOICE",
                metavar="VOICE",
                help="The voice of backline's --tts engine (`backline speech list`).",
            ),
            click.option(
                "--language",
                envvar="BACKLINE_LIVEKIT_LANGUAGE",
                metavar="CODE",
                help="The language spoken (e.g. en, fr), for backline's --stt and --tts engines.",
            ),
        ]
    ):
        command = decorate(command)
    return command


def worker_options(command: Any) -> Any:
    for decorate in reversed(
        [
            click.option("--url", envvar=ENV_URL, help="The LiveKit server (ws:// or wss://)."),
            click.option("--api-key", envvar=ENV_KEY, help="The LiveKit API key."),
            click.option("--api-secret", envvar=ENV_SECRET, help="The LiveKit API secret."),
            click.option(
                "--agent-name",
                envvar="BACKLINE_LIVEKIT_AGENT_NAME",
                default="backline",
                show_default=True,
                help="Explicit dispatch: the agent name rooms are dispatched to.",
            ),
            click.option(
                "--max-sessions",
                type=click.IntRange(min=1),
                envvar="BACKLINE_LIVEKIT_MAX_SESSIONS",
                help="Report full load at this many sessions (default: CPU load only).",
            ),
        ]
    ):
        command = decorate(command)
    return command


def check_session(ctx: click.Context, options: SessionOptions) -> None:
    """Fail now, as ``backline console`` would, on a bad LLM, background or agent."""
    preflight(options)
    build_session(plugin_manager(ctx), options)


def check_speech(
    ctx: click.Context,
    stt: str | None,
    tts: str | None,
    vad: str | None,
    tts_voice: str | None = None,
    language: str | None = None,
) -> None:
    """Build the speech providers once, so a wrong name or a missing key fails now:
    a name is a usage error naming its option, a missing key one line saying what to
    set. A backline engine is built (its model loaded) and kept for this process."""
    from .providers import MissingCredentials, ProviderError, make_speech

    try:
        make_speech(
            stt,
            tts,
            vad,
            tts_voice=tts_voice,
            language=language,
            manager=lambda: plugin_manager(ctx),
        )
    except MissingCredentials as e:
        raise click.ClickException(str(e)) from None
    except ProviderError as e:
        raise click.BadParameter(str(e), param_hint=f"'{e.flag or '--stt'}'") from None


def check_server(url: str | None, api_key: str | None, api_secret: str | None) -> str:
    """The server URL, once credentials are set and the server accepts a connection."""
    missing = [
        name
        for name, value in ((ENV_URL, url), (ENV_KEY, api_key), (ENV_SECRET, api_secret))
        if not value
    ]
    if missing:
        raise click.ClickException(
            f"no LiveKit credentials: {', '.join(missing)} not set. Set LIVEKIT_URL, "
            "LIVEKIT_API_KEY and LIVEKIT_API_SECRET (or --url, --api-key, --api-secret): "
            "a LiveKit Cloud project or `livekit-server --dev` (ws://127.0.0.1:7880, "
            "devkey / secret). `backline livekit console` needs no server."
        )
    assert url is not None
    parsed = urlparse(url)
    if parsed.scheme not in ("ws", "wss", "http", "https") or not parsed.hostname:
        raise click.BadParameter(f"{url!r} is not a ws:// or wss:// URL", param_hint="'--url'")
    port = parsed.port or (443 if parsed.scheme in ("wss", "https") else 80)
    try:
        with socket.create_connection((parsed.hostname, port), timeout=CONNECT_TIMEOUT):
            pass
    except OSError as e:
        raise click.ClickException(
            f"cannot reach the LiveKit server at {url} ({e}). Is it running, and is the URL right?"
        ) from None
    return url


def _export_config(options: SessionOptions, **extra: Any) -> Any:
    from .worker import ENV_CONFIG, WorkerConfig

    config = WorkerConfig.from_options(options, **extra)
    os.environ[ENV_CONFIG] = config.to_env()  # job processes build their sessions from it
    return config


def check_console_audio(input_device: str | None, output_device: str | None) -> None:
    """Fail in one line, before LiveKit starts, without PortAudio or without a
    microphone and a speaker (the ones chosen, else the system's defaults)."""
    try:
        import sounddevice as sd  # type: ignore[import-untyped]
    except (OSError, ImportError) as e:
        raise click.ClickException(
            f"the console needs PortAudio for the microphone and speaker ({e}): install it "
            "(apt-get install libportaudio2, or brew install portaudio), or use --text."
        ) from None
    for kind, device, flag in (
        ("input", input_device, "--input-device"),
        ("output", output_device, "--output-device"),
    ):
        try:
            sd.query_devices(_device(device), kind=kind)
        except Exception as e:  # PortAudioError, ValueError: no such device, no default
            what = "microphone" if kind == "input" else "speaker"
            named = f" {device!r}" if device else ""
            raise click.ClickException(
                f"no {what}{named} found ({' '.join(str(e).split())}): connect one, choose "
                f"one with {flag} (an ID or part of its name), or use --text."
            ) from None


def _device(device: str | None) -> int | str | None:
    return int(device) if device is not None and device.isdigit() else device


def check_text_console(ctx: click.Context) -> None:
    """Text mode uses no audio and needs a terminal (LiveKit's prompt reads keys)."""
    for name in ("stt", "tts", "vad", "tts_voice", "language", "input_device", "output_device"):
        if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE:
            flag = "--" + name.replace("_", "-")
            raise click.UsageError(
                f"{flag} has no use with --text (text mode has no audio): leave out one of them."
            )
    if not sys.stdin.isatty():
        raise click.ClickException(
            "the LiveKit console needs a terminal to type in (for piped input, use "
            "`backline console`)."
        )


@click.group("livekit")
def livekit_group() -> None:
    """Real audio through LiveKit: a local console, or a worker for a LiveKit server."""


@livekit_group.command("console")
@session_options
@speech_options
@click.option("--text", is_flag=True, help="Type instead of speaking (no audio devices).")
@click.option("--input-device", metavar="ID|NAME", help="The microphone to use.")
@click.option("--output-device", metavar="ID|NAME", help="The speaker to use.")
@click.pass_context
def console(
    ctx: click.Context,
    session_options: SessionOptions,
    stt: str | None,
    tts: str | None,
    vad: str | None,
    tts_voice: str | None,
    language: str | None,
    text: bool,
    input_device: str | None,
    output_device: str | None,
) -> None:
    """Talk through your microphone and speaker with LiveKit's console (no server).

    With --text: type instead, with no audio device, no speech provider and no
    LiveKit key."""
    if text:
        check_text_console(ctx)
    check_session(ctx, session_options)
    if text:
        config = _export_config(session_options, text=True)
        from ._console import run_text_console
        from .worker import build_server

        run_text_console(build_server(config, console=True))
        return
    check_console_audio(input_device, output_device)
    check_speech(ctx, stt, tts, vad, tts_voice, language)
    config = _export_config(
        session_options, stt=stt, tts=tts, vad=vad, tts_voice=tts_voice, language=language
    )
    from livekit.agents.cli import _legacy

    from ._console import console_owns_logging
    from .worker import build_server

    console_owns_logging()
    _legacy._run_console(
        server=build_server(config, console=True),
        input_device=input_device,
        output_device=output_device,
        mode="audio",
        record=False,
        log_level="WARN",
    )


def _run_worker(
    ctx: click.Context,
    session_options: SessionOptions,
    *,
    dev: bool,
    drain_timeout: int | None = None,
    **opts: Any,
) -> None:
    check_session(ctx, session_options)
    url = check_server(opts["url"], opts["api_key"], opts["api_secret"])
    os.environ.update({ENV_URL: url, ENV_KEY: opts["api_key"], ENV_SECRET: opts["api_secret"]})
    speech = {k: opts[k] for k in ("stt", "tts", "vad", "tts_voice", "language")}
    check_speech(ctx, **speech)
    config = _export_config(
        session_options,
        **speech,
        agent_name=opts["agent_name"],
        max_sessions=opts["max_sessions"],
    )
    from livekit.agents.cli import cli as lk_cli
    from livekit.agents.cli import proto

    from .worker import build_server

    lk_cli._run_worker(
        build_server(config, drain_timeout=drain_timeout),
        proto.CliArgs(
            log_level="DEBUG" if dev else "INFO",
            url=url,
            api_key=opts["api_key"],
            api_secret=opts["api_secret"],
            log_format="colored" if dev else "json",
            dev=dev,
        ),
    )


@livekit_group.command("dev")
@session_options
@speech_options
@worker_options
@click.pass_context
def dev(ctx: click.Context, /, session_options: SessionOptions, **opts: Any) -> None:
    """Run a worker for a LiveKit server, in development mode (readable logs)."""
    _run_worker(ctx, session_options, dev=True, **opts)


@livekit_group.command("start")
@session_options
@speech_options
@worker_options
@click.option(
    "--drain-timeout",
    type=click.IntRange(min=1),
    help="On SIGTERM, seconds running conversations may go on before they are closed "
    "(LiveKit's default: 1800).",
)
@click.pass_context
def start(
    ctx: click.Context, /, session_options: SessionOptions, drain_timeout: int | None, **opts: Any
) -> None:
    """Run a worker for a LiveKit server, in production mode (JSON logs, drain on SIGTERM)."""
    _run_worker(ctx, session_options, dev=False, drain_timeout=drain_timeout, **opts)
