"""``pocketsphinx``: CMU PocketSphinx speech-to-text; its wheel ships an English
model, so it works with no download (less accurate than whisper)."""

from __future__ import annotations

import threading
from typing import Any

from backline.speech import AudioFrame, BatchSTT


class PocketsphinxSTT(BatchSTT):
    """PocketSphinx, one decoder per engine (utterances are decoded one at a time)."""

    name = "pocketsphinx"
    sample_rate = 16000

    def __init__(self, **config: Any) -> None:
        self._config = config
        self._decoder: Any = None
        self._lock = threading.Lock()

    def _get_decoder(self) -> Any:
        if self._decoder is None:
            from pocketsphinx import Decoder  # type: ignore[import-untyped]

            self._decoder = Decoder(samprate=self.sample_rate, loglevel="FATAL", **self._config)
        return self._decoder

    def transcribe(self, frame: AudioFrame) -> str:
        with self._lock:
            decoder = self._get_decoder()
            decoder.start_utt()
            decoder.process_raw(frame.data, full_utt=True)
            decoder.end_utt()
            hyp = decoder.hyp()
            return str(hyp.hypstr) if hyp is not None else ""
