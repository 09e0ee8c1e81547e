"""Loaded by the console tests' subprocesses (this folder is put on PYTHONPATH).

``BACKLINE_TEST_AUDIO=none``: PortAudio is missing, as on a machine without
libportaudio2 (importing ``sounddevice`` fails with its own OSError).
``BACKLINE_TEST_AUDIO=devices``: a stand-in ``sounddevice`` with one microphone and
one speaker, so the checks that follow the devices' are reached on any machine;
``silent``: a stand-in with no device at all. ``files``: a stand-in whose microphone
plays the WAV file ``BACKLINE_TEST_AUDIO_IN`` (16-bit mono, at the rate the stream is
opened with), then silence, and whose speaker appends what it plays to the raw file
``BACKLINE_TEST_AUDIO_OUT`` (16-bit mono PCM at the stream's rate), each block in real
time, as a sound card's clock would.
"""

import os
import sys
import types
from typing import Any

_MODE = os.environ.get("BACKLINE_TEST_AUDIO")


class _NoPortAudio:
    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "sounddevice":
            raise OSError("PortAudio library not found")  # sounddevice's own words
        return None


if _MODE == "none":
    sys.modules.pop("sounddevice", None)
    sys.meta_path.insert(0, _NoPortAudio())
elif _MODE == "devices":
    fake = types.ModuleType("sounddevice")

    def query_devices(device: Any = None, kind: str | None = None) -> dict[str, Any]:
        return {"name": f"test {kind}", "index": 0}

    fake.query_devices = query_devices  # type: ignore[attr-defined]
    sys.modules["sounddevice"] = fake
elif _MODE == "silent":
    fake = types.ModuleType("sounddevice")

    def no_devices(device: Any = None, kind: str | None = None) -> dict[str, Any]:
        raise ValueError(f"No {kind} device matching {device!r}")

    fake.query_devices = no_devices  # type: ignore[attr-defined]
    sys.modules["sounddevice"] = fake
elif _MODE == "files":
    import threading
    import time
    import wave

    fake = types.ModuleType("sounddevice")

    def query_devices(device: Any = None, kind: str | None = None) -> dict[str, Any]:
        return {"name": f"test {kind} (files)", "index": 0}

    class _Default:
        device = (0, 0)

    class _Times:
        currentTime = inputBufferAdcTime = outputBufferDacTime = 0.0

    class _Stream:
        """Calls ``callback`` with a block every ``blocksize / samplerate`` seconds."""

        def __init__(self, *, callback: Any, samplerate: int, blocksize: int, **_: Any) -> None:
            self._callback = callback
            self.samplerate = samplerate
            self.blocksize = blocksize
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._run, daemon=True)

        def start(self) -> None:
            self._thread.start()

        def stop(self) -> None:
            self._stop.set()

        def close(self) -> None:
            self._stop.set()
            if self._thread.is_alive() and self._thread is not threading.current_thread():
                self._thread.join(timeout=2)

        def _run(self) -> None:
            period = self.blocksize / self.samplerate
            due = time.monotonic()
            while not self._stop.is_set():
                try:
                    self._block()
                except Exception as e:  # PortAudio aborts a stream whose callback raises
                    kind = type(self).__name__
                    print(f"sounddevice stand-in: {kind} callback raised {e!r}", file=sys.stderr)
                    return
                due += period
                time.sleep(max(0.0, due - time.monotonic()))

        def _block(self) -> None:
            raise NotImplementedError

    class InputStream(_Stream):
        def __init__(self, **options: Any) -> None:
            super().__init__(**options)
            with wave.open(os.environ["BACKLINE_TEST_AUDIO_IN"], "rb") as f:
                assert f.getframerate() == self.samplerate and f.getnchannels() == 1
                self._audio = f.readframes(f.getnframes())

        def _block(self) -> None:
            import numpy as np

            size = self.blocksize * 2
            chunk, self._audio = self._audio[:size], self._audio[size:]
            chunk = chunk.ljust(size, b"\0")
            data = np.frombuffer(chunk, dtype="<i2").reshape(-1, 1).copy()
            self._callback(data, self.blocksize, _Times(), None)

    class OutputStream(_Stream):
        def _block(self) -> None:
            import numpy as np

            data = np.zeros((self.blocksize, 1), dtype=np.int16)
            self._callback(data, self.blocksize, _Times(), None)
            with open(os.environ["BACKLINE_TEST_AUDIO_OUT"], "ab") as out:
                out.write(data.astype("<i2").tobytes())

    fake.query_devices = query_devices  # type: ignore[attr-defined]
    fake.default = _Default()  # type: ignore[attr-defined]
    fake.InputStream = InputStream  # type: ignore[attr-defined]
    fake.OutputStream = OutputStream  # type: ignore[attr-defined]
    sys.modules["sounddevice"] = fake
