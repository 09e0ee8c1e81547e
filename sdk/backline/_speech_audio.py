"""The microphone and the speaker for ``backline speech``: PortAudio through
``sounddevice`` (the SDK's optional extra ``audio``), loaded only when a command
needs a device. Every wait is bounded: a device that stops delivering fails in one
line rather than hanging.

Raw streams (plain bytes, 16-bit mono) so NumPy is not needed. ``devices_command``
is ``backline speech devices``: what ``backline.speech.list_devices()`` sees.
"""

from __future__ import annotations

import importlib
import json
import threading
from dataclasses import asdict
from typing import Any

import click

from .speech import AudioFrame, DeviceError, list_devices

GRACE = 5.0  # seconds a device may take beyond the audio's own length

INSTALL = (
    "pip install sounddevice (or pip install 'backline[audio]'), and PortAudio "
    "(apt install libportaudio2; macOS: brew install portaudio)"
)


def sounddevice(alternative: str = "") -> Any:
    """The ``sounddevice`` module, or a one-line ``ClickException`` saying what to install
    (``alternative``: what the user can do instead, appended)."""
    instead = f", or {alternative}" if alternative else ""
    try:
        return importlib.import_module("sounddevice")
    except ImportError as e:
        raise click.ClickException(
            f"the microphone and speaker need the sounddevice package ({e}): {INSTALL}{instead}."
        ) from None
    except OSError as e:  # sounddevice is there, PortAudio is not
        raise click.ClickException(
            f"the microphone and speaker need PortAudio ({e}): apt install libportaudio2 "
            f"(macOS: brew install portaudio){instead}."
        ) from None


def device(sd: Any, wanted: str | None, kind: str, flag: str, alternative: str = "") -> Any:
    """The device info (a dict: ``index``, ``name``, ``default_samplerate``) of the
    microphone (``kind="input"``) or speaker (``"output"``) named by ``wanted`` (an ID
    or part of a name), else the system's default; one line saying what to do if none."""
    chosen: int | str | None = int(wanted) if wanted is not None and wanted.isdigit() else wanted
    try:
        return sd.query_devices(chosen, kind=kind)
    except Exception as e:  # PortAudioError, ValueError: no such device, no default one
        what = "microphone" if kind == "input" else "speaker"
        named = f" {wanted!r}" if wanted else ""
        instead = f", or {alternative}" if alternative else ""
        raise click.ClickException(
            f"no {what}{named} found ({' '.join(str(e).split())}): connect one, or choose one "
            f"with {flag} (an ID or part of its name; `backline speech devices` lists them)"
            f"{instead}."
        ) from None


def rate_of(info: Any) -> int:
    try:
        return int(info["default_samplerate"]) or 16000
    except (KeyError, TypeError, ValueError):
        return 16000


def record(sd: Any, info: Any, seconds: float) -> AudioFrame:
    """``seconds`` of mono audio from the microphone ``info`` at its own rate."""
    rate = rate_of(info)
    wanted = round(seconds * rate) * 2  # bytes of 16-bit samples
    chunks: list[bytes] = []
    got = 0
    done = threading.Event()

    def callback(indata: Any, frames: int, time: Any, status: Any) -> None:
        nonlocal got
        if not done.is_set():
            chunks.append(bytes(indata))
            got += len(indata)
            if got >= wanted:
                done.set()
        if done.is_set():
            raise sd.CallbackStop

    try:
        stream = sd.RawInputStream(
            samplerate=rate, channels=1, dtype="int16", device=info["index"], callback=callback
        )
        with stream:
            if not done.wait(seconds + GRACE):
                stream.abort()
                raise click.ClickException(
                    f"the microphone {info['name']!r} gave {got // 2 / rate:.1f} s of audio in "
                    f"{seconds + GRACE:g} s: is it in use by another program? Choose another "
                    "with --input-device."
                )
    except click.ClickException:
        raise
    except Exception as e:  # PortAudioError: the device refused the stream
        raise click.ClickException(
            f"could not record from {info['name']!r}: {' '.join(str(e).split())}; choose "
            "another with --input-device."
        ) from None
    return AudioFrame(b"".join(chunks)[:wanted], rate)


def play(sd: Any, info: Any, audio: AudioFrame) -> None:
    """Play ``audio`` on the speaker ``info`` (resampled to its rate) to the end."""
    rate = rate_of(info)
    data = audio.resample(rate).data
    position = 0
    finished = threading.Event()

    def callback(outdata: Any, frames: int, time: Any, status: Any) -> None:
        nonlocal position
        size = len(outdata)
        chunk = data[position : position + size]
        position += len(chunk)
        outdata[: len(chunk)] = chunk
        if len(chunk) < size:
            outdata[len(chunk) :] = bytes(size - len(chunk))
            raise sd.CallbackStop

    try:
        stream = sd.RawOutputStream(
            samplerate=rate,
            channels=1,
            dtype="int16",
            device=info["index"],
            callback=callback,
            finished_callback=finished.set,
        )
        with stream:
            if not finished.wait(audio.duration + GRACE):
                stream.abort()
                raise click.ClickException(
                    f"the speaker {info['name']!r} did not finish playing {audio.duration:.1f} s "
                    f"in {audio.duration + GRACE:.0f} s: is it in use by another program? "
                    "Choose another with --output-device."
                )
    except click.ClickException:
        raise
    except Exception as e:  # PortAudioError: the device refused the stream
        raise click.ClickException(
            f"could not play on {info['name']!r}: {' '.join(str(e).split())}; choose another "
            "with --output-device."
        ) from None


# -- backline speech devices -----------------------------------------------------------------------
@click.command("devices")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def devices_command(as_json: bool) -> None:
    """List the microphones and speakers PortAudio sees, the system's defaults marked:
    the index, or a part of the name, is what --input-device and --output-device take
    (`backline voice`, `backline speech check`). Needs pip install 'backline[audio]'."""
    try:
        devices = list_devices()
    except DeviceError as e:
        raise click.ClickException(str(e)) from None
    if not devices:
        raise click.ClickException(
            "PortAudio sees no microphone or speaker: connect one (is the system's sound "
            "server running?), or give `backline voice` files: --audio-in, --audio-out FILE.wav."
        )
    if as_json:
        click.echo(json.dumps([asdict(d) for d in devices], indent=2))
        return
    kinds = (("microphones", "input", "--input-device"), ("speakers", "output", "--output-device"))
    parts = []
    for title, kind, option in kinds:
        lines = [f"{title} ({option} ID|NAME):"]
        for d in devices:
            channels = d.input_channels if kind == "input" else d.output_channels
            if channels <= 0:
                continue
            default = d.is_default_input if kind == "input" else d.is_default_output
            api = f", {d.host_api}" if d.host_api else ""
            mark = "; the default" if default else ""
            way = "in" if kind == "input" else "out"
            lines.append(
                f"  {d.index} {d.name!r} ({channels} {way}, {d.default_sample_rate} Hz{api}{mark})"
            )
        if len(lines) == 1:
            lines.append("  none")
        parts.append("\n".join(lines))
    click.echo("\n\n".join(parts))
