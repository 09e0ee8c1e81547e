"""The microphone and the speaker (issue 28): what is said without the sounddevice
package or without PortAudio (this machine has no PortAudio: the real import is
tried), how a device is chosen, and ``Microphone``/``Speaker`` over a stand-in for
``sounddevice`` whose streams call back from threads of their own, as PortAudio's do.
"""

from __future__ import annotations

import asyncio
import importlib
import math
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

from backline.speech import (
    AudioDevice,
    AudioFrame,
    AudioSink,
    AudioSource,
    DeviceError,
    Microphone,
    Speaker,
    choose_device,
    list_devices,
)
from backline.speech._pcm import Resampler
from backline.testing.clock import virtual_clock

NO_PACKAGE = (
    "the microphone and speaker need the sounddevice package: "
    "pip install 'backline[audio]' (the sounddevice package)"
)
NO_PORTAUDIO = (
    "the microphone and speaker need the PortAudio library: "
    "apt install libportaudio2 (macOS: brew install portaudio)"
)


# -- without the package, without PortAudio -------------------------------------------------------
async def test_without_the_sounddevice_package_each_use_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "sounddevice", None)  # an import of it fails
    with pytest.raises(DeviceError) as caught:
        list_devices()
    assert str(caught.value) == NO_PACKAGE
    with pytest.raises(DeviceError, match=r"^the microphone and speaker need the sounddevice"):
        await Microphone().start()
    with pytest.raises(DeviceError, match=r"^the microphone and speaker need the sounddevice"):
        await Speaker().start()


async def test_without_portaudio_each_use_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delitem(sys.modules, "sounddevice", raising=False)
    try:
        importlib.import_module("sounddevice")
    except ImportError:
        pytest.skip("the sounddevice package is not installed")
    except OSError:
        pass  # the package is there and PortAudio is not: the case under test
    else:
        pytest.skip("PortAudio is installed here")
    with pytest.raises(DeviceError) as caught:
        list_devices()
    assert str(caught.value) == NO_PORTAUDIO
    microphone = Microphone()
    with pytest.raises(DeviceError) as caught:
        await microphone.start()
    assert str(caught.value) == NO_PORTAUDIO
    await microphone.aclose()


def test_importing_the_speech_package_loads_no_audio_library() -> None:
    code = (
        "import sys, backline, backline.speech\n"
        "heavy = ('sounddevice', '_sounddevice', 'livekit', 'numpy')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]"


# -- choosing a device -----------------------------------------------------------------------------
DEVICES = [
    AudioDevice(0, "HDA Intel PCH: ALC257 Analog (hw:0,0)", 2, 2, 44100, "ALSA"),
    AudioDevice(1, "HDA Intel PCH: HDMI 0 (hw:0,3)", 0, 8, 44100, "ALSA"),
    AudioDevice(2, "USB Headset: Audio (hw:1,0)", 1, 2, 48000, "ALSA"),
    AudioDevice(3, "pulse", 32, 32, 44100, "ALSA"),
    AudioDevice(4, "default", 32, 32, 44100, "ALSA", True, True),
    AudioDevice(5, "Pulse Effects", 2, 0, 48000, "ALSA"),
]


@pytest.mark.parametrize(
    ("wanted", "kind", "index"),
    [
        (None, "input", 4),  # the system's default
        (None, "output", 4),
        (2, "input", 2),  # an index
        ("2", "output", 2),  # an index, as an option gives it
        ("usb", "input", 2),  # part of a name, any case
        ("HDMI", "output", 1),  # an output-only device, for output
        ("pulse", "input", 3),  # the name whole wins over "Pulse Effects"
        ("effects", "input", 5),
        ("  headset ", "output", 2),
    ],
)
def test_a_device_is_chosen_by_index_or_part_of_its_name(
    wanted: int | str | None, kind: Any, index: int
) -> None:
    assert choose_device(DEVICES, wanted, kind).index == index


def test_without_a_default_the_first_device_that_can_is_chosen() -> None:
    devices = [d for d in DEVICES if d.index != 4]
    assert choose_device(devices, None, "input").index == 0
    assert choose_device(devices[1:2], None, "output").index == 1


@pytest.mark.parametrize(
    ("wanted", "kind", "message"),
    [
        (
            "hdmi",
            "input",
            "no microphone matches 'hdmi': choose one with --input-device; the microphones "
            "are 0 'HDA Intel PCH: ALC257 Analog (hw:0,0)'; 2 'USB Headset: Audio (hw:1,0)'; "
            "3 'pulse'; 4 'default'; 5 'Pulse Effects'",
        ),
        (
            "intel",
            "output",
            "2 speakers match 'intel': choose one with --output-device (its index or more of "
            "its name): 0 'HDA Intel PCH: ALC257 Analog (hw:0,0)'; 1 'HDA Intel PCH: HDMI 0 "
            "(hw:0,3)'",
        ),
        (
            "1",
            "input",
            "device 1 ('HDA Intel PCH: HDMI 0 (hw:0,3)') is not a microphone: choose another "
            "with --input-device; the microphones are 0 'HDA Intel PCH: ALC257 Analog "
            "(hw:0,0)'; 2 'USB Headset: Audio (hw:1,0)'; 3 'pulse'; 4 'default'; 5 'Pulse "
            "Effects'",
        ),
        (
            9,
            "output",
            "there is no device 9: choose one with --output-device; the speakers are 0 'HDA "
            "Intel PCH: ALC257 Analog (hw:0,0)'; 1 'HDA Intel PCH: HDMI 0 (hw:0,3)'; 2 'USB "
            "Headset: Audio (hw:1,0)'; 3 'pulse'; 4 'default'",
        ),
    ],
)
def test_a_name_that_matches_none_or_several_lists_the_devices(
    wanted: int | str, kind: Any, message: str
) -> None:
    with pytest.raises(DeviceError) as caught:
        choose_device(DEVICES, wanted, kind)
    assert str(caught.value) == message
    assert "\n" not in message


def test_with_no_device_it_says_which_option_to_use() -> None:
    with pytest.raises(DeviceError) as caught:
        choose_device([DEVICES[1]], None, "input")
    assert str(caught.value) == (
        "no microphone found: connect one, or choose a device with --input-device "
        "(an index or part of its name)"
    )
    with pytest.raises(DeviceError, match=r"^no speaker found: .* --output-device"):
        choose_device([], None, "output")


# -- a stand-in for sounddevice --------------------------------------------------------------------
class CallbackAbort(Exception):
    pass


class StandInStream:
    """A raw stream: the test plays PortAudio's part, calling the callback from a thread."""

    latency = 0.032

    def __init__(self, kind: str, **kw: Any) -> None:
        self.kind = kind
        self.rate: int = kw["samplerate"]
        self.channels: int = kw["channels"]
        self.blocksize: int = kw["blocksize"]
        self.device: int = kw["device"]
        assert kw["dtype"] == "int16"
        self._callback: Callable[..., None] = kw["callback"]
        self._finished: Callable[[], None] = kw["finished_callback"]
        self.started = self.closed = False
        self.was_closed = threading.Event()
        self.hang = threading.Event()
        self.hang.set()  # clear it to make closing the stream hang

    def start(self) -> None:
        self.started = True

    def abort(self) -> None:
        self.started = False

    def close(self) -> None:
        self.hang.wait(30)
        self.closed = True
        self.was_closed.set()

    def record(self, data: bytes) -> None:
        """One block recorded (interleaved int16): the input callback."""
        frames = len(data) // (2 * self.channels)
        self._callback(memoryview(bytearray(data)), frames, None, 0)

    def play(self, frames: int) -> bytes:
        """One block wanted by the device: the output callback fills it."""
        buffer = bytearray(frames * 2 * self.channels)
        self._callback(buffer, frames, None, 0)
        return bytes(buffer)

    def stop_by_itself(self) -> None:
        self._finished()


class StandIn:
    """``sounddevice``'s API over a list of devices (PortAudio's dicts); the devices take
    only their own rate, with their own channel count."""

    CallbackAbort = CallbackAbort

    def __init__(self, *devices: dict[str, Any], default: tuple[int, int] = (-1, -1)) -> None:
        self.devices = [{"index": i, "hostapi": 0, **d} for i, d in enumerate(devices)]
        self.default_device = default
        self.streams: list[StandInStream] = []
        self.opening = threading.Event()
        self.opening.set()  # clear it to make opening a stream hang
        self.opened = threading.Event()

    def query_devices(self, device: int | None = None, kind: str | None = None) -> Any:
        if device is None and kind is None:
            return list(self.devices)
        index = device if device is not None else self.default_device[kind == "output"]
        if index < 0:
            raise ValueError(f"No {kind} device")  # sounddevice's PortAudioError, roughly
        return self.devices[index]

    def query_hostapis(self, index: int) -> dict[str, Any]:
        return {"name": "ALSA"}

    def _check(self, kind: str, device: int, channels: int, dtype: str, samplerate: int) -> None:
        info = self.devices[device]
        if samplerate != info["default_samplerate"] or channels != info[f"max_{kind}_channels"]:
            raise ValueError("Invalid sample rate or channel count")

    def check_input_settings(self, **kw: Any) -> None:
        self._check("input", **kw)

    def check_output_settings(self, **kw: Any) -> None:
        self._check("output", **kw)

    def _open(self, kind: str, **kw: Any) -> StandInStream:
        self.opening.wait(30)
        stream = StandInStream(kind, **kw)
        self.streams.append(stream)
        self.opened.set()
        return stream

    def RawInputStream(self, **kw: Any) -> StandInStream:  # sounddevice's names
        return self._open("input", **kw)

    def RawOutputStream(self, **kw: Any) -> StandInStream:
        return self._open("output", **kw)


MIC = {
    "name": "USB Headset",
    "max_input_channels": 2,
    "max_output_channels": 0,
    "default_samplerate": 48000,
}
SPEAKER = {
    "name": "Speakers",
    "max_input_channels": 0,
    "max_output_channels": 2,
    "default_samplerate": 48000,
}


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> StandIn:
    sd = StandIn(MIC, SPEAKER, default=(0, 1))
    monkeypatch.setitem(sys.modules, "sounddevice", sd)
    return sd


def tone(seconds: float, rate: int, freq: float = 440.0) -> AudioFrame:
    n = round(seconds * rate)
    return AudioFrame.from_samples(
        (round(8000 * math.sin(2 * math.pi * freq * i / rate)) for i in range(n)), rate
    )


def stereo(frame: AudioFrame) -> bytes:
    return b"".join(frame.data[i : i + 2] * 2 for i in range(0, len(frame.data), 2))


def left(data: bytes) -> bytes:
    return b"".join(data[i : i + 2] for i in range(0, len(data), 4))


def test_devices_are_listed_as_portaudio_gives_them(stand_in: StandIn) -> None:
    assert list_devices() == [
        AudioDevice(0, "USB Headset", 2, 0, 48000, "ALSA", is_default_input=True),
        AudioDevice(1, "Speakers", 0, 2, 48000, "ALSA", is_default_output=True),
    ]
    assert str(list_devices()[0]) == "0 'USB Headset' (2 in, 0 out, 48000 Hz, ALSA, default input)"


# -- the microphone --------------------------------------------------------------------------------
async def test_the_microphone_gives_frames_at_the_rate_asked_whatever_the_device(
    stand_in: StandIn,
) -> None:
    recorded = tone(0.5, 48000)
    async with Microphone("usb", sample_rate=16000, frame_seconds=0.02) as mic:
        assert isinstance(mic, AudioSource)
        stream = stand_in.streams[0]
        assert (stream.rate, stream.channels, stream.blocksize) == (48000, 2, 960)
        assert mic.device is not None and mic.device.name == "USB Headset"
        assert mic.latency == 0.032
        data = stereo(recorded)
        for i in range(0, len(data), 960 * 4):  # 20 ms blocks from PortAudio's thread
            await asyncio.to_thread(stream.record, data[i : i + 960 * 4])
        frames = [await anext(mic) for _ in range(25)]
    assert all((f.sample_rate, f.channels, f.duration) == (16000, 1, 0.02) for f in frames)
    assert b"".join(f.data for f in frames) == Resampler(48000, 16000).push(recorded.data)
    assert stream.closed
    assert [f async for f in mic] == []  # closed: the iteration ends


async def test_when_the_loop_falls_behind_the_oldest_frames_are_dropped_and_counted(
    stand_in: StandIn,
) -> None:
    async with Microphone(max_queued=1.0) as mic:
        stream = stand_in.streams[0]
        block = stereo(AudioFrame.silence(0.02, 48000))
        first = stereo(tone(0.02, 48000))

        def three_seconds() -> None:
            stream.record(first)
            for _ in range(149):
                stream.record(block)

        await asyncio.to_thread(three_seconds)  # nobody reads meanwhile
        assert mic.dropped == 100
        frames = [await anext(mic) for _ in range(50)]  # the last second is kept
        assert all(not f.data.strip(b"\0") for f in frames)  # the first frame was dropped


async def test_a_microphone_that_stops_or_goes_quiet_fails_in_one_line(
    stand_in: StandIn,
) -> None:
    async with Microphone() as mic:
        await asyncio.to_thread(stand_in.streams[0].stop_by_itself)  # unplugged
        with pytest.raises(DeviceError) as caught:
            await anext(mic)
    assert str(caught.value) == (
        "the microphone 'USB Headset' stopped (unplugged?): connect it again, or choose "
        "another with --input-device"
    )
    async with Microphone() as mic:
        with virtual_clock() as clock:
            with pytest.raises(DeviceError) as caught:
                await anext(mic)
            assert clock.elapsed == pytest.approx(5.0)
    assert str(caught.value) == (
        "the microphone 'USB Headset' gave no audio for 5 s: is another program using it? "
        "Choose another with --input-device"
    )


async def test_closing_the_microphone_ends_a_waiting_iteration(stand_in: StandIn) -> None:
    mic = Microphone()
    await mic.start()

    async def read() -> list[AudioFrame]:
        return [f async for f in mic]

    reader = asyncio.create_task(read())
    await asyncio.sleep(0)  # the reader waits for a frame
    await mic.aclose()
    assert await asyncio.wait_for(reader, 5) == []


async def test_a_device_that_does_not_open_fails_within_the_bound_and_is_closed_later(
    stand_in: StandIn,
) -> None:
    stand_in.opening.clear()  # the driver hangs
    mic = Microphone()
    with virtual_clock() as clock:
        with pytest.raises(DeviceError) as caught:
            await mic.start()
        assert clock.elapsed == pytest.approx(5.0)
    assert str(caught.value) == (
        "the microphone did not answer in 5 s: is another program using the device? "
        "Choose another, or restart the audio service"
    )
    stand_in.opening.set()  # it opens after all: the stream is closed, not leaked
    assert await asyncio.to_thread(stand_in.opened.wait, 10)
    assert await asyncio.to_thread(stand_in.streams[0].was_closed.wait, 10)


async def test_a_stream_that_does_not_close_is_left_behind_within_the_bound(
    stand_in: StandIn, caplog: pytest.LogCaptureFixture
) -> None:
    mic = Microphone()
    await mic.start()
    stand_in.streams[0].hang.clear()  # the driver hangs
    with virtual_clock() as clock:
        await mic.aclose()
        assert clock.elapsed == pytest.approx(5.0)
    assert "closing the microphone did not answer in 5 s" in caplog.text
    stand_in.streams[0].hang.set()
    assert await asyncio.to_thread(stand_in.streams[0].was_closed.wait, 10)


# -- the speaker -----------------------------------------------------------------------------------
async def test_the_speaker_plays_what_is_written_at_the_devices_rate(stand_in: StandIn) -> None:
    heard: list[AudioFrame] = []
    speech = tone(0.5, 24000)
    async with Speaker("speak", sample_rate=24000, on_played=heard.append) as speaker:
        assert isinstance(speaker, AudioSink)
        stream = stand_in.streams[0]
        assert (stream.rate, stream.channels) == (48000, 2)  # it takes neither 24 kHz nor mono
        speaker.write(speech)
        assert speaker.played == 0 and speaker.queued == pytest.approx(0.5, abs=1e-3)
        drained = asyncio.create_task(speaker.drained())
        blocks = [await asyncio.to_thread(stream.play, 4800) for _ in range(6)]  # 0.6 s
        await asyncio.wait_for(drained, 5)
        assert speaker.played == pytest.approx(0.5, abs=1e-3)
    played = b"".join(left(b) for b in blocks)
    expected = Resampler(24000, 48000).push(speech.data)
    assert played == expected + bytes(len(played) - len(expected))  # then silence
    assert all(b[0::4] == b[2::4] and b[1::4] == b[3::4] for b in blocks)  # both channels
    assert b"".join(f.data for f in heard) == played  # what an echo canceller is told
    assert all(f.sample_rate == 48000 for f in heard)


async def test_clearing_the_speaker_stops_at_once(stand_in: StandIn) -> None:
    async with Speaker() as speaker:
        stream = stand_in.streams[0]
        speaker.write(tone(1.0, 48000))
        await asyncio.to_thread(stream.play, 4800)  # 0.1 s plays
        speaker.clear()
        assert speaker.queued == 0 and speaker.played == pytest.approx(0.1)
        assert not (await asyncio.to_thread(stream.play, 4800)).strip(b"\0")
        await asyncio.wait_for(speaker.drained(), 1)  # nothing left to wait for
        assert speaker.played == pytest.approx(0.1)


async def test_a_speaker_that_stops_taking_audio_fails_rather_than_hangs(
    stand_in: StandIn,
) -> None:
    async with Speaker() as speaker:
        speaker.write(tone(1.0, 48000))
        with virtual_clock() as clock:
            with pytest.raises(DeviceError) as caught:
                await speaker.drained()
            assert clock.elapsed == pytest.approx(6.0)  # what was queued, and 5 s more
    assert str(caught.value) == (
        "the speaker 'Speakers' stopped playing: is another program using it? Choose "
        "another with --output-device"
    )


async def test_writing_to_a_speaker_that_is_not_started_or_closed_is_an_error(
    stand_in: StandIn,
) -> None:
    speaker = Speaker()
    with pytest.raises(RuntimeError, match=r"Speaker.start\(\) first"):
        speaker.write(tone(0.1, 24000))
    await speaker.start()
    await speaker.aclose()
    with pytest.raises(RuntimeError, match="the speaker is closed"):
        speaker.write(tone(0.1, 24000))
    await speaker.drained()  # closed: nothing to wait for
