"""PortAudio through ``sounddevice``, for ``devices.py``: the import (a one-line
``DeviceError`` without the package or the library), the devices as ``AudioDevice``
values, choosing one (a pure function), and opening a stream off the event loop
within a bound."""

from __future__ import annotations

import asyncio
import importlib
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

logger = logging.getLogger("backline.speech")

Kind = Literal["input", "output"]
T = TypeVar("T")

INSTALL_PACKAGE = "pip install 'backline[audio]' (the sounddevice package)"
INSTALL_PORTAUDIO = "apt install libportaudio2 (macOS: brew install portaudio)"
OPTION = {"input": "--input-device", "output": "--output-device"}
WHAT = {"input": "microphone", "output": "speaker"}
OPEN_TIMEOUT = 5.0  # seconds to open or close a stream


class DeviceError(RuntimeError):
    """A device cannot be used; the message is one line saying what to do."""


@dataclass(frozen=True, slots=True)
class AudioDevice:
    """A device as PortAudio lists it. ``index`` is what ``device=`` (or
    ``--input-device``) takes; the channels say whether it records, plays, or both."""

    index: int
    name: str
    input_channels: int
    output_channels: int
    default_sample_rate: int
    host_api: str = ""
    is_default_input: bool = False
    is_default_output: bool = False

    def channels(self, kind: Kind) -> int:
        return self.input_channels if kind == "input" else self.output_channels

    def __str__(self) -> str:
        defaults = [
            k
            for k, d in (("input", self.is_default_input), ("output", self.is_default_output))
            if d
        ]
        mark = f", default {' and '.join(defaults)}" if defaults else ""
        api = f", {self.host_api}" if self.host_api else ""
        return (
            f"{self.index} {self.name!r} ({self.input_channels} in, {self.output_channels} out, "
            f"{self.default_sample_rate} Hz{api}{mark})"
        )


def sounddevice() -> Any:
    """The ``sounddevice`` module, or a ``DeviceError`` saying what to install."""
    try:
        return importlib.import_module("sounddevice")
    except ImportError:
        raise DeviceError(
            f"the microphone and speaker need the sounddevice package: {INSTALL_PACKAGE}"
        ) from None
    except OSError:  # sounddevice is there, the PortAudio library is not
        raise DeviceError(
            f"the microphone and speaker need the PortAudio library: {INSTALL_PORTAUDIO}"
        ) from None


def one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def _default(sd: Any, kind: Kind) -> int:
    """The index of the default device of ``kind`` (-1: none)."""
    try:
        return int(sd.query_devices(kind=kind)["index"])
    except Exception:  # no default device of that kind
        return -1


def query(sd: Any) -> list[AudioDevice]:
    try:
        infos = list(sd.query_devices())
    except Exception as e:  # PortAudioError: the host's audio system refused
        raise DeviceError(f"PortAudio could not list the audio devices: {one_line(e)}") from None
    default_in, default_out = _default(sd, "input"), _default(sd, "output")
    apis: dict[int, str] = {}
    devices = []
    for position, info in enumerate(infos):
        index = int(info.get("index", position))
        api = int(info.get("hostapi", -1))
        if api not in apis:
            try:
                apis[api] = str(sd.query_hostapis(api)["name"])
            except Exception:
                apis[api] = ""
        devices.append(
            AudioDevice(
                index=index,
                name=str(info["name"]),
                input_channels=int(info.get("max_input_channels", 0)),
                output_channels=int(info.get("max_output_channels", 0)),
                default_sample_rate=int(info.get("default_samplerate") or 0),
                host_api=apis[api],
                is_default_input=index == default_in,
                is_default_output=index == default_out,
            )
        )
    return devices


def _listing(devices: Sequence[AudioDevice], kind: Kind) -> str:
    capable = [d for d in devices if d.channels(kind) > 0]
    if not capable:
        return f"there is no {WHAT[kind]}"
    return f"the {WHAT[kind]}s are " + "; ".join(f"{d.index} {d.name!r}" for d in capable)


def choose_device(
    devices: Sequence[AudioDevice], wanted: int | str | None, kind: Kind
) -> AudioDevice:
    """The device ``wanted`` names among ``devices`` for ``kind`` ("input": a
    microphone; "output": a speaker): an index (``3`` or ``"3"``), or part of a name,
    case-insensitive (a name matched whole wins over names that contain it); ``None``:
    the system's default, else the first device that can. A ``DeviceError`` when none
    or several match, listing the devices that could."""
    capable = [d for d in devices if d.channels(kind) > 0]
    what, option = WHAT[kind], OPTION[kind]
    if wanted is None:
        for d in capable:
            if d.is_default_input if kind == "input" else d.is_default_output:
                return d
        if capable:
            return capable[0]
        raise DeviceError(
            f"no {what} found: connect one, or choose a device with {option} "
            f"(an index or part of its name)"
        )
    text = str(wanted).strip()
    if isinstance(wanted, int) or text.isdigit():
        index = int(text)
        for d in devices:
            if d.index == index:
                if d.channels(kind) > 0:
                    return d
                raise DeviceError(
                    f"device {index} ({d.name!r}) is not a {what}: choose another with "
                    f"{option}; {_listing(devices, kind)}"
                )
        raise DeviceError(
            f"there is no device {index}: choose one with {option}; {_listing(devices, kind)}"
        )
    needle = text.lower()
    matches = [d for d in capable if needle in d.name.lower()]
    exact = [d for d in matches if d.name.lower() == needle]
    if len(matches) == 1 or len(exact) == 1:
        return exact[0] if len(exact) == 1 else matches[0]
    if not matches:
        raise DeviceError(
            f"no {what} matches {text!r}: choose one with {option}; {_listing(devices, kind)}"
        )
    names = "; ".join(f"{d.index} {d.name!r}" for d in matches)
    raise DeviceError(
        f"{len(matches)} {what}s match {text!r}: choose one with {option} (its index or "
        f"more of its name): {names}"
    )


def stream_format(sd: Any, device: AudioDevice, kind: Kind, rate: int) -> tuple[int, int]:
    """The (rate, channels) to open ``device`` with: ``rate`` mono if it takes that, else
    its own rate, else its own rate with up to two channels (converted here)."""
    check = sd.check_input_settings if kind == "input" else sd.check_output_settings
    tries = [(rate, 1), (device.default_sample_rate, 1)]
    tries.append((device.default_sample_rate, max(1, min(2, device.channels(kind)))))
    for r, c in tries:
        if r <= 0:
            continue
        try:
            check(device=device.index, channels=c, dtype="int16", samplerate=r)
        except Exception:
            continue
        return r, c
    raise DeviceError(
        f"the {WHAT[kind]} {device.name!r} takes neither {rate} Hz nor its own "
        f"{device.default_sample_rate} Hz as 16-bit audio: choose another with {OPTION[kind]}"
    )


async def off_loop(call: Callable[[], T], what: str, cleanup: Callable[[T], None]) -> T:
    """``call()`` on a daemon thread, awaited for at most ``OPEN_TIMEOUT`` (a stuck driver
    hangs neither the loop nor the interpreter's exit). A result that comes after the
    bound, or after the caller was cancelled, goes to ``cleanup`` on a thread of its own."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()
    abandoned = False  # read and written on the loop only

    def discard(result: T) -> None:
        threading.Thread(
            target=cleanup, args=(result,), name=f"backline {what}", daemon=True
        ).start()

    def settle(result: T, error: BaseException | None) -> None:
        if abandoned or done.done():
            if error is None:
                discard(result)
        elif error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)

    def run() -> None:
        result: Any = None
        error: BaseException | None = None
        try:
            result = call()
        except BaseException as e:
            error = e
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:  # the loop closed meanwhile
            if error is None:
                cleanup(result)

    threading.Thread(target=run, name=f"backline {what}", daemon=True).start()
    try:
        return await asyncio.wait_for(asyncio.shield(done), OPEN_TIMEOUT)
    except TimeoutError:
        abandoned = True
        raise DeviceError(
            f"{what} did not answer in {OPEN_TIMEOUT:g} s: is another program using the "
            "device? Choose another, or restart the audio service"
        ) from None
    except asyncio.CancelledError:
        abandoned = True
        if done.done() and not done.cancelled() and done.exception() is None:
            discard(done.result())
        raise


def close_stream(stream: Any) -> None:
    try:
        stream.abort()
    finally:
        stream.close()


@dataclass(slots=True)
class Opened:
    stream: Any
    device: AudioDevice
    rate: int
    channels: int


def open_stream(
    kind: Kind,
    wanted: int | str | None,
    rate: int,
    blocksize: int,
    callback: Callable[..., None],
    finished: Callable[[], None],
) -> Opened:
    """Runs off the loop: import, choose, open and start one stream."""
    sd = sounddevice()
    device = choose_device(query(sd), wanted, kind)
    stream_rate, channels = stream_format(sd, device, kind, rate)
    cls = sd.RawInputStream if kind == "input" else sd.RawOutputStream
    try:
        stream = cls(
            samplerate=stream_rate,
            blocksize=round(blocksize * stream_rate / rate) if blocksize else 0,
            device=device.index,
            channels=channels,
            dtype="int16",
            callback=callback,
            finished_callback=finished,
        )
    except Exception as e:  # PortAudioError: busy, unplugged, refused
        raise DeviceError(
            f"could not open the {WHAT[kind]} {device.name!r}: {one_line(e)}; choose another "
            f"with {OPTION[kind]}"
        ) from None
    try:
        stream.start()
    except Exception as e:
        close_stream(stream)
        raise DeviceError(
            f"could not start the {WHAT[kind]} {device.name!r}: {one_line(e)}; choose "
            f"another with {OPTION[kind]}"
        ) from None
    return Opened(stream, device, int(stream_rate), channels)


def close_opened(opened: Opened) -> None:
    try:
        close_stream(opened.stream)
    except Exception as e:  # pragma: no cover - a driver failing on close
        logger.debug("closing an abandoned stream: %s", e)


def noop(_: object) -> None:
    return None
