"""A transcribing engine that fails on one utterance: the stream says so and goes on."""

from __future__ import annotations

import asyncio

import pytest

from backline.speech import AudioFrame, BatchSTT, Transcript


class Flaky(BatchSTT):
    name = "flaky"

    def __init__(self) -> None:
        self.calls = 0

    def transcribe(self, frame: AudioFrame) -> str:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("the model ran out of memory")
        return "second try"


async def test_a_failed_utterance_is_a_final_with_its_error_and_the_next_one_works(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stream = Flaky().stream()
    got: list[Transcript] = []
    try:
        for _ in range(2):
            stream.push(AudioFrame.silence(0.5, 16000))
            stream.flush()
        async with asyncio.timeout(10):
            async for transcript in stream:
                got.append(transcript)
                if len(got) == 2:
                    break
    finally:
        await stream.aclose()
    assert [(t.text, t.final, t.error) for t in got] == [
        ("", True, "the model ran out of memory"),
        ("second try", True, None),
    ]
    assert "flaky could not transcribe: the model ran out of memory" in caplog.text
