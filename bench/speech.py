"""Speech: each engine's real-time factor, and backline's own share of a voice turn.

Real-time factor (RTF): compute seconds per second of audio, for each engine that
runs here without a download (eSpeak NG speaking, PocketSphinx listening; engines
that need a model are measured when ``BACKLINE_MODELS_DIR`` holds it). Below 1 is
faster than real time.

A voice turn: "what is the weather" said by eSpeak NG goes into ``SpeechInput``
(energy VAD, PocketSphinx), the session answers with a zero-delay scripted model,
``SpeechOutput`` speaks the reply with eSpeak NG. Measured from the end of the
user's speech (the VAD's end, as ``SpeechInput`` sees it) to the first reply frame
handed to the sink, minus the engines' compute on that path (the final
transcription, and the synthesis of the first sentence up to its first frame):
what is left is backline's own share. Target: ≤ 5 ms p50.

Sentence streaming: with a model that streams its reply over ``--stream-seconds``,
the first audio must start before the reply's text is complete.

    python bench/speech.py                  # the default sizes (make bench)
    python bench/speech.py --turns 50
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import time
from collections.abc import Iterator
from typing import Any

from _common import Target, print_table, print_targets, run, summarize_us, write_results

from backline import Agent, Session
from backline.speech import (
    AudioFrame,
    EnergyVAD,
    SpeechInput,
    SpeechOutput,
    split_frames,
)
from backline.testing import ScriptedLLM, text

REPLY = "It is sunny in Oslo today. The wind is light and it stays dry until the evening."
SENTENCES = ["It is sunny in Oslo today.", "The wind is light and it stays dry tonight."]


class NullSink:
    """Plays instantly: only the time of the first frame of each reply matters here."""

    def __init__(self) -> None:
        self.frames = 0
        self.first_at: float | None = None
        self._played = 0.0

    def write(self, frame: AudioFrame) -> None:
        if self.first_at is None:
            self.first_at = time.perf_counter()
        self.frames += 1
        self._played += frame.duration

    def clear(self) -> None:
        pass

    @property
    def played(self) -> float:
        return self._played

    async def drained(self) -> None:
        return None


def engines() -> tuple[Any, Any]:
    from backline_local_speech.espeak import EspeakTTS
    from backline_local_speech.sphinx import PocketsphinxSTT

    class TimedSTT(PocketsphinxSTT):
        """PocketSphinx, its compute per transcription recorded."""

        computes: list[float] = []  # noqa: RUF012 - one list for the run

        def transcribe(self, frame: AudioFrame) -> str:
            start = time.perf_counter()
            try:
                return super().transcribe(frame)
            finally:
                TimedSTT.computes.append(time.perf_counter() - start)

    class TimedTTS(EspeakTTS):
        """eSpeak NG, the compute up to each synthesis's first frame recorded."""

        firsts: list[float] = []  # noqa: RUF012

        def synthesize_sync(self, text: str) -> Iterator[AudioFrame]:
            start = time.perf_counter()
            first = True
            for frame in super().synthesize_sync(text):
                if first:
                    TimedTTS.firsts.append(time.perf_counter() - start)
                    first = False
                yield frame

    return TimedSTT, TimedTTS


async def real_time_factors(stt_cls: Any, tts_cls: Any) -> list[list[Any]]:
    tts = tts_cls()
    rows = []
    audio: list[AudioFrame] = []
    start = time.perf_counter()
    for sentence in SENTENCES * 3:
        audio += [f async for f in tts.synthesize(sentence)]
    took = time.perf_counter() - start
    seconds = sum(f.duration for f in audio)
    rows.append(["espeak", "text-to-speech", f"{seconds:.1f}", f"{took / seconds:.3f}"])
    stt = stt_cls()
    clip = AudioFrame(b"".join(f.data for f in audio), audio[0].sample_rate).resample(16000)
    start = time.perf_counter()
    stt.transcribe(clip)
    took = time.perf_counter() - start
    rows.append(
        ["pocketsphinx", "speech-to-text", f"{clip.duration:.1f}", f"{took / clip.duration:.3f}"]
    )
    return rows


async def question_frames(tts_cls: Any) -> list[AudioFrame]:
    tts = tts_cls()
    said = [f async for f in tts.synthesize("what is the weather")]
    audio = AudioFrame(b"".join(f.data for f in said), said[0].sample_rate).resample(16000)
    silence = AudioFrame.silence(1.0, 16000)
    return [
        *split_frames(AudioFrame.silence(0.5, 16000), 0.02),
        *split_frames(audio, 0.02),
        *split_frames(silence, 0.02),
    ]


async def voice_turns(stt_cls: Any, tts_cls: Any, turns: int) -> dict[str, Any]:
    frames = await question_frames(tts_cls)
    sink = NullSink()
    output = SpeechOutput(tts_cls(), sink)
    llm = ScriptedLLM(lambda _: text(REPLY), record=False)
    session: Session[Any] = Session(llm, output=output, user_away_timeout=None)
    await session.start(Agent("Answer."))
    speech_input = SpeechInput(session, stt=stt_cls(), vad=EnergyVAD())
    speech_input.start()
    heard = asyncio.Event()
    session.on(
        "conversation_item_added",
        lambda ev: heard.set() if getattr(ev.item, "role", None) == "user" else None,
    )
    totals, shares, missed = [], [], 0
    try:
        for _ in range(turns):
            stt_cls.computes.clear()
            tts_cls.firsts.clear()
            sink.first_at = None
            before = speech_input.turns
            ended_at: float | None = None
            for frame in frames:
                was_speaking = speech_input.speaking
                speech_input.push(frame)
                if was_speaking and not speech_input.speaking:
                    ended_at = time.perf_counter()
                await asyncio.sleep(0)
            with contextlib.suppress(TimeoutError):  # the final comes from a worker thread
                await asyncio.wait_for(heard.wait(), 30)
            heard.clear()
            if not await session.wait_for_idle(timeout=30) or speech_input.turns == before:
                missed += 1
                continue
            if ended_at is None or sink.first_at is None or not stt_cls.computes:
                missed += 1
                continue
            total = sink.first_at - ended_at
            share = total - stt_cls.computes[-1] - (tts_cls.firsts[0] if tts_cls.firsts else 0)
            totals.append(total)
            shares.append(max(share, 0.0))
    finally:
        await speech_input.aclose()
        await session.aclose()
        await output.aclose()
    return {"turns": len(totals), "missed": missed, "total": totals, "share": shares}


async def first_audio_before_text_end(tts_cls: Any, stream_seconds: float) -> dict[str, Any]:
    words = len(REPLY.split())
    sink = NullSink()
    output = SpeechOutput(tts_cls(), sink)
    llm = ScriptedLLM([text(REPLY, chunk_delay=stream_seconds / words)], record=False)
    session: Session[Any] = Session(llm, output=output, user_away_timeout=None)
    await session.start(Agent("Answer."))
    text_done: list[float] = []
    started = time.perf_counter()
    session.push_user_turn("what is the weather")

    def on_item(ev: Any) -> None:
        if getattr(ev.item, "role", None) == "assistant":
            text_done.append(time.perf_counter())

    session.on("conversation_item_added", on_item)
    output_flushed: list[float] = []
    original = output.on_flush

    def flushed() -> None:
        output_flushed.append(time.perf_counter())
        original()

    output.on_flush = flushed  # type: ignore[method-assign]
    await session.wait_for_idle(timeout=60)
    await session.aclose()
    await output.aclose()
    first = (sink.first_at or float("nan")) - started
    text_end = (output_flushed[0] if output_flushed else float("nan")) - started
    return {"first_audio_s": first, "text_complete_s": text_end}


async def main(args: argparse.Namespace) -> None:
    if shutil.which("espeak-ng") is None:
        print("espeak-ng is not installed: the speech benchmark needs it (apt install espeak-ng)")
        return
    stt_cls, tts_cls = engines()
    rtf = await real_time_factors(stt_cls, tts_cls)
    print_table(
        "Real-time factor (compute seconds per second of audio)",
        ["engine", "kind", "audio s", "RTF"],
        rtf,
    )
    result = await voice_turns(stt_cls, tts_cls, args.turns)
    total, share = summarize_us(result["total"]), summarize_us(result["share"])
    print_table(
        f"A voice turn: the user's speech ends -> the reply's first audio ({result['turns']} "
        f"turns, {result['missed']} missed)",
        ["measure", "p50 ms", "p99 ms"],
        [
            [
                "whole path (engines included)",
                f"{total['p50_us'] / 1000:.2f}",
                f"{total['p99_us'] / 1000:.2f}",
            ],
            [
                "backline's share (engines' compute removed)",
                f"{share['p50_us'] / 1000:.2f}",
                f"{share['p99_us'] / 1000:.2f}",
            ],
        ],
    )
    streaming = await first_audio_before_text_end(tts_cls, args.stream_seconds)
    print_table(
        f"Sentence streaming (the model streams its reply over {args.stream_seconds:g} s)",
        ["first audio s", "reply text complete s"],
        [[f"{streaming['first_audio_s']:.3f}", f"{streaming['text_complete_s']:.3f}"]],
    )
    targets = [
        Target(
            "speech pipeline, backline's share of a voice turn (p50)",
            share["p50_us"] / 1000 if result["share"] else None,
            5.0,
            unit="ms",
        ),
        Target(
            "first audio before the reply's text is complete",
            streaming["first_audio_s"] / streaming["text_complete_s"],
            1.0,
            unit="x",
            note="first audio time ÷ text complete time",
        ),
    ]
    print_targets(targets)
    write_results("speech", args, {"rtf": rtf, "turn": result, "streaming": streaming}, targets)


def cli() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--turns", type=int, default=30)
    p.add_argument("--stream-seconds", type=float, default=2.0)
    p.add_argument("--profile", help="cProfile (unused)")
    args = p.parse_args()
    run(lambda: main(args))


if __name__ == "__main__":
    cli()
