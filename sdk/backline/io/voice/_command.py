"""``backline voice``: talk to the voice agent with the microphone and the speaker of
the terminal, with backline's own (local) speech. The console's conversation and
live view, and the session options, are the console's; the speech options choose the
engines; the voice options say how the user talks and where the audio goes."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import click

from ...app import (
    SessionOptions,
    SpeechEngines,
    SpeechOptions,
    build_speech,
    check_options,
    hosting_voice_channel,
    plugin_manager,
    prepare_session,
    session_options,
    session_speech,
    speech_options,
)
from ...plugins import PluginManager
from ...speech.audio_output import AudioSink
from ...speech.devices import AudioSource, DeviceError, Microphone, Speaker, list_devices
from ...speech.echo import EchoCanceller, EchoGuard, echo_canceller, echo_unavailable
from ...speech.files import WavInput, WavOutput
from ..console import run_console
from ._options import VoiceOptions, voice_options
from ._voice import TerminalVoice

MIC_RATE = 16000
MODE_WORDS = {
    "always": "always-on: just talk",
    "push": "push-to-talk: hold Space on an empty line, or Ctrl-T to start and stop",
    "wake": "wake phrase: say '{phrase}', then talk",
    "mute": "muted: /unmute to talk",
}


@click.command("voice")
@session_options
@speech_options
@voice_options
def voice_command(
    session_options: SessionOptions, speech_options: SpeechOptions, voice_options: VoiceOptions
) -> None:
    """Talk to the voice agent: your microphone and speaker, in this terminal.

    Speech stays on this machine with the local engines (`backline speech list`);
    typing works too. Keys: Ctrl-T talk (push-to-talk), Ctrl-O next way of talking;
    /mode always|push|wake|mute, /quit to leave.
    """
    run_voice_front_end(session_options, speech_options, voice_options)


def run_voice_front_end(
    options: SessionOptions,
    speech: SpeechOptions,
    voice: VoiceOptions,
    *,
    manager: PluginManager | None = None,
) -> None:
    """What ``backline voice`` does: check every option, choose the engines and the
    devices (each problem one line naming the option, before anything starts), build
    the session, then run the console with a voice until the user quits."""
    from .._diagnostics import log_to_file

    manager = manager or plugin_manager()
    check_options(manager, options)
    _check_devices(voice)
    engines = build_speech(manager, speech, llm=options.llm)
    echo, echo_note = _echo(voice)
    session, agent = prepare_session(
        manager, options, front_end="voice", log_options={**engines.as_dict(), "mode": voice.mode}
    )
    log_path = log_to_file(options.log_file)
    banner = _banner(engines, voice, echo_note, session)

    async def main() -> None:
        sink = _sink(voice, echo)
        source = _source(voice)
        front = TerminalVoice(
            session,
            stt=session_speech(engines.stt, agent.llm or session.llm),
            tts=engines.tts,
            vad=engines.vad,
            source=source,
            sink=sink,
            echo=echo,
            mode=voice.mode,
            wake_phrase=voice.wake_phrase,
            wake_window=voice.wake_window,
            ends=voice.audio_in is not None,
        )
        if isinstance(echo, EchoGuard):
            echo.apply(front.input)
        try:
            started = sink.start()  # type: ignore[attr-defined]
            if inspect.isawaitable(started):
                await started
            async with hosting_voice_channel(session, "backline voice"):
                await run_console(
                    session,
                    agent,
                    rich=False if voice.plain else None,
                    banner=banner,
                    log_path=log_path,
                    llm=options.llm,
                    voice=front,
                )
        except DeviceError as e:
            raise click.ClickException(str(e)) from None
        finally:
            await sink.aclose()  # type: ignore[attr-defined]

    try:
        asyncio.run(main())
    except KeyboardInterrupt:  # pragma: no cover - a second Ctrl-C during close
        pass


def _check_devices(voice: VoiceOptions) -> None:
    """The devices the options need exist (a ``click`` error naming the fix)."""
    needs = []
    if voice.audio_in is None:
        needs.append(("input", voice.input_device, "--input-device", "--audio-in FILE.wav"))
    if voice.audio_out is None:
        needs.append(("output", voice.output_device, "--output-device", "--audio-out FILE.wav"))
    if not needs:
        return
    from ...speech.devices import choose_device

    try:
        devices = list_devices()
        for kind, wanted, _, _ in needs:
            choose_device(devices, wanted, kind)  # type: ignore[arg-type]
    except DeviceError as e:
        instead = " or ".join(alt for *_, alt in needs)
        raise click.ClickException(
            f"{e} (or use {instead}, or type with `backline console`)"
        ) from None


def _echo(voice: VoiceOptions) -> tuple[EchoCanceller | None, str]:
    """The echo canceller (None when there is no speaker to echo: files), and what the
    banner says about it."""
    if voice.audio_in is not None or voice.audio_out is not None:
        return None, ""
    if not voice.echo_cancellation:
        return None, "echo cancellation off: use headphones, or the agent may hear itself"
    canceller = echo_canceller(sample_rate=MIC_RATE)
    if canceller is not None:
        return canceller, "echo cancellation on"
    why = echo_unavailable() or "no echo canceller"
    return EchoGuard(), (
        f"no echo cancellation ({why}): use headphones, or pip install 'backline[echo]'; "
        "meanwhile talking over the agent needs longer, louder speech"
    )


def _source(voice: VoiceOptions) -> AudioSource:
    if voice.audio_in is not None:
        return WavInput(voice.audio_in, sample_rate=MIC_RATE)
    return Microphone(voice.input_device, sample_rate=MIC_RATE)


def _sink(voice: VoiceOptions, echo: EchoCanceller | None) -> AudioSink:
    played = echo.far_end if echo is not None else None
    if voice.audio_out is not None:
        return WavOutput(voice.audio_out, on_played=played)
    return Speaker(voice.output_device, on_played=played)


def _banner(engines: SpeechEngines, voice: VoiceOptions, echo_note: str, session: Any) -> str:
    mode = MODE_WORDS[voice.mode].format(phrase=voice.wake_phrase)
    lines = [f"backline voice: {mode}. {engines.describe()}."]
    if voice.audio_in is not None:
        lines.append(f"microphone: the recording {voice.audio_in}")
    if voice.audio_out is not None:
        lines.append(f"speaker: recorded to {voice.audio_out}")
    if echo_note:
        lines.append(echo_note)
    if session.background:
        lines.append(f"background sessions: {', '.join(session.background.sorted_ids())}")
    lines.append("Ctrl-T talk, Ctrl-O way of talking, /voice help, /quit or Ctrl-D to leave.")
    return "\n".join(lines)
