"""Loaded by the console tests' subprocesses (this folder is put on PYTHONPATH).

``BACKLINE_TEST_AUDIO=none``: PortAudio is missing, as on a machine without
libportaudio2 (importing ``sounddevice`` fails with its own OSError).
``BACKLINE_TEST_AUDIO=devices``: a stand-in ``sounddevice`` with one microphone and
one speaker, so the checks that follow the devices' are reached on any machine;
``silent``: a stand-in with no device at all.
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
