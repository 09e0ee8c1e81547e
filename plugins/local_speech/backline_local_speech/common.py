"""What the model-based engines share: is a package installed, is a model on disk, and
float audio as frames. Imports nothing heavy (numpy is imported where audio is made)."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from backline.speech import AudioFrame
from backline.speech.models import ModelSpec, is_downloaded, model_dir

FRAME_SECONDS = 0.1  # the frames a text-to-speech engine hands over


def installed(module: str) -> bool:
    """The module can be imported here (without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, a broken entry
        return False


def missing_package(module: str, package: str, extra: str) -> str | None:
    """One sentence saying that ``package`` (which provides ``module``) is missing, and
    how to install it; None when it is there."""
    if installed(module):
        return None
    return f"the {package} package is not installed: pip install 'backline-local-speech[{extra}]'"


def download_hint(spec: ModelSpec) -> str:
    return f"backline speech download {spec.id} ({spec.size / 1e6:,.0f} MB)"


def first_downloaded(specs: Iterable[ModelSpec]) -> ModelSpec | None:
    return next((s for s in specs if is_downloaded(s)), None)


def model_folder(spec: ModelSpec) -> Path:
    """The folder of a downloaded model; ``RuntimeError`` saying how to get it when it is
    not on disk (an engine never downloads by itself)."""
    if not is_downloaded(spec):
        raise RuntimeError(f"{spec.id} is not downloaded: run `{download_hint(spec)}`")
    return model_dir(spec)


def to_pcm16(audio: Any) -> bytes:
    """Float samples in [-1, 1] (a numpy array) as 16-bit little-endian PCM."""
    import numpy as np  # type: ignore[import-not-found, import-untyped, unused-ignore]

    clipped = np.clip(np.asarray(audio, dtype=np.float32).reshape(-1), -1.0, 1.0)
    data: bytes = (clipped * 32767.0).astype("<i2").tobytes()
    return data


def pcm16_frames(data: bytes, sample_rate: int) -> Iterator[AudioFrame]:
    """Mono 16-bit PCM as frames of ``FRAME_SECONDS``."""
    step = max(1, round(sample_rate * FRAME_SECONDS)) * 2
    for i in range(0, len(data), step):
        yield AudioFrame(data[i : i + step], sample_rate)


def to_float(frame: AudioFrame) -> Any:
    """A mono 16-bit frame as float32 samples in [-1, 1] (a numpy array)."""
    import numpy as np  # type: ignore[import-not-found, import-untyped, unused-ignore]

    return np.frombuffer(frame.data, dtype="<i2").astype(np.float32) / 32768.0
