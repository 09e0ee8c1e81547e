"""``silero``: the Silero VAD model through ONNX Runtime (no torch).

The model scores windows of 512 samples at 16 kHz (32 ms); ``VADStream`` resamples
and cuts the microphone's frames into them. The model is recurrent: its state, and
the last 64 samples it heard (its context), carry from one window to the next, and
are reset for each new stream. Unlike a loudness gate it tells speech from noise: a
fan, typing or music do not start a turn.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from backline.speech import AudioFrame, FrameVAD

from .common import to_float

WINDOW = 512  # samples at 16 kHz, what the model is exported for
CONTEXT = 64  # samples of the previous window the model sees before each window


class SileroVAD(FrameVAD):
    """Silero VAD on one ``.onnx`` file. ``threshold``: the speech probability above
    which a window counts as speech (0.5, Silero's own default)."""

    name = "silero"
    sample_rate = 16000
    window = WINDOW

    def __init__(self, model_path: Path, *, threshold: float = 0.5) -> None:
        if not 0.0 < threshold < 1.0:
            raise ValueError(f"silero: threshold is between 0 and 1, got {threshold}")
        import numpy as np  # type: ignore[import-not-found, import-untyped, unused-ignore]
        import onnxruntime  # type: ignore[import-not-found, import-untyped, unused-ignore]

        options = onnxruntime.SessionOptions()
        options.inter_op_num_threads = 1  # a 32 ms window: threads cost more than they give
        options.intra_op_num_threads = 1
        self._session = onnxruntime.InferenceSession(
            str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._rate = np.array(self.sample_rate, dtype=np.int64)
        self.threshold = threshold
        self._state: Any = None
        self._context: Any = None
        self.reset()

    def reset(self) -> None:
        import numpy as np  # type: ignore[import-not-found, import-untyped, unused-ignore]

        self._state = np.zeros((2, 1, 128), dtype=np.float32)
        self._context = np.zeros((1, CONTEXT), dtype=np.float32)

    def probability(self, frame: AudioFrame) -> float:
        import numpy as np  # type: ignore[import-not-found, import-untyped, unused-ignore]

        samples = to_float(frame)[:WINDOW]
        if samples.size < WINDOW:
            samples = np.pad(samples, (0, WINDOW - samples.size))
        window = np.concatenate([self._context, samples[np.newaxis, :]], axis=1)
        out, self._state = self._session.run(
            None, {"input": window, "state": self._state, "sr": self._rate}
        )
        self._context = window[:, -CONTEXT:]
        return float(out[0][0])
