"""The local engines' tests. Engines that need a model run for real when the model is
there: ``BACKLINE_TEST_MODELS_DIR`` names a folder laid out like the model cache
(``engine/name/files``, e.g. ``silero/v6.2/silero_vad.onnx``; ``backline speech
download`` with ``BACKLINE_MODELS_DIR`` pointed at it makes one). A test whose package
or model is missing is skipped saying which."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from backline_local_speech.common import installed

from backline.plugins import PluginManager, SpeechEngineEntry
from backline.speech import AudioFrame, split_frames
from backline.speech.models import ModelSpec, model_dir

TEST_MODELS_ENV = "BACKLINE_TEST_MODELS_DIR"
FRAME = 0.02  # seconds per microphone frame


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty model cache: the user's downloads never steer a test."""
    folder = tmp_path / "models"
    monkeypatch.setenv("BACKLINE_MODELS_DIR", str(folder))
    return folder


def plugins() -> PluginManager:
    return PluginManager.from_environment().load()


def entry(kind: str, name: str) -> SpeechEngineEntry:
    return plugins().speech_engine(kind, name)


def missing_models(module: str, extra: str, *specs: ModelSpec) -> str | None:
    """Why the real test of ``specs`` cannot run here (``module`` not installed, a file
    not in ``$BACKLINE_TEST_MODELS_DIR`` whole), or None."""
    if not installed(module):
        return f"{module} is not installed (pip install 'backline-local-speech[{extra}]')"
    configured = os.environ.get(TEST_MODELS_ENV, "").strip()
    if not configured:
        ids = ", ".join(s.id for s in specs)
        return f"{TEST_MODELS_ENV} is not set: the real test of {ids} needs its model"
    folder = Path(configured).expanduser()
    for spec in specs:
        for file in spec.files:
            path = folder / spec.engine / spec.name / file.name
            if not path.is_file() or path.stat().st_size != file.size:
                return f"{spec.id} is not in {folder} (missing or partial: {path})"
    return None


def use_models(monkeypatch: pytest.MonkeyPatch, module: str, extra: str, *specs: ModelSpec) -> None:
    """Skip unless the models are there (``missing_models``); then the cache is
    ``$BACKLINE_TEST_MODELS_DIR``."""
    why = missing_models(module, extra, *specs)
    if why is not None:
        pytest.skip(why)
    monkeypatch.setenv("BACKLINE_MODELS_DIR", os.environ[TEST_MODELS_ENV].strip())


def lay_out(spec: ModelSpec) -> None:
    """The model's files in the cache at their exact sizes (sparse: nothing is written).
    ``is_downloaded`` holds, which is all choosing an engine reads; building one would
    fail on these files."""
    folder = model_dir(spec)
    folder.mkdir(parents=True, exist_ok=True)
    for file in spec.files:
        with (folder / file.name).open("wb") as f:
            f.truncate(file.size)


def need_espeak() -> None:
    from backline_local_speech.espeak import find_espeak

    if find_espeak() is None:
        pytest.skip("eSpeak NG is not installed (apt install espeak-ng)")


async def speak(text: str) -> AudioFrame:
    """``text`` said by eSpeak NG, as one frame."""
    from backline_local_speech.espeak import EspeakTTS

    need_espeak()
    frames = [f async for f in EspeakTTS().synthesize(text)]
    return AudioFrame(b"".join(f.data for f in frames), frames[0].sample_rate)


def joined(frames: list[AudioFrame]) -> AudioFrame:
    assert frames, "no audio"
    assert len({(f.sample_rate, f.channels) for f in frames}) == 1
    return AudioFrame(b"".join(f.data for f in frames), frames[0].sample_rate)


def microphone(*pieces: AudioFrame | float, rate: int = 16000) -> list[AudioFrame]:
    """Frames of ``FRAME`` seconds: speech (frames) and silence (seconds), in order."""
    out: list[AudioFrame] = []
    for piece in pieces:
        audio = AudioFrame.silence(piece, rate) if isinstance(piece, float) else piece
        out.extend(split_frames(audio.resample(rate), FRAME))
    return out


async def play(push: object, frames: list[AudioFrame]) -> None:
    """Push frames as a microphone does: one every ``FRAME`` seconds (loop time)."""
    for frame in frames:
        push(frame)  # type: ignore[operator]
        await asyncio.sleep(frame.duration)
