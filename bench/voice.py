"""Voice (``backline voice``): what each way of talking adds to a turn, and what
listening costs while nobody speaks.

Latency per way of talking. eSpeak NG says each question; its frames go through a
``Listener`` (the way of talking) into ``SpeechInput`` (energy VAD, PocketSphinx), as
``backline voice`` wires them, to a session a zero-delay scripted model answers.
Measured from the VAD's end of the user's speech (the frame after which
``SpeechInput`` no longer hears speech: ``min_silence``, 0.5 s, after the last word)
to the turn reaching the session (its ``push_user_turn``), and that minus
PocketSphinx's compute on the utterance (the final transcription, timed in its
thread): what is left is what the way of talking and backline add. Frames before
the VAD's end are pushed as fast as they are taken; from the VAD's end on, one every
20 ms, as a microphone gives them, until the turn arrives.

- always-on: quiet, the question, quiet;
- push-to-talk: the key pressed before the question and released as it ends (what
  follows is silence);
- wake phrase, in one breath: the phrase, then the question after eSpeak NG's own
  pause (0.3 s: shorter than the VAD's 0.5 s, so one utterance);
- wake phrase, then the question: the phrase, quiet until the window opens (the
  chime), the question.

The wake phrase is "how are you": PocketSphinx hears eSpeak NG say it word for word
(it hears nothing like "hey backline", the default). The questions, "what is the
weather" and "what is the status", it hears word for word here too (the table counts
the turns that were). The phrase's detection delay: from the end of its audio to
the Listener's "woke" moment (when the chime plays).

Idle listening: ``TerminalVoice`` with the default local engines, as ``backline
voice`` builds them, always-on, hearing quiet room noise (a WAV file played in real
time as the microphone, ``--audio-in``'s path) with nobody speaking. Process CPU time
(every thread) over ``--idle-seconds`` of listening, as a percentage of one core,
with the echo canceller (WebRTC AEC3, ``backline[echo]``) on and off. Target: under
5 % of one core.

    python bench/voice.py                      # the default sizes (make bench)
    python bench/voice.py --utterances 50 --idle-seconds 30
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import Target, percentile, print_table, print_targets, run, write_results

from backline import Agent, Session, TextOutput
from backline.speech import (
    AudioFrame,
    EnergyVAD,
    SpeechInput,
    SpeechOutput,
    WavInput,
    WavOutput,
    echo_canceller,
    echo_unavailable,
    split_frames,
    write_wav,
)
from backline.speech.listening import Listener, ListenerState, ListeningMode
from backline.testing import ScriptedLLM, text

RATE = 16000
FRAME = 0.02  # seconds per microphone frame
WAKE = "how are you"
QUESTIONS = ("what is the weather", "what is the status")  # heard word for word here
BREATH = 0.0  # seconds of pause added between the wake phrase and the question (one breath)
GIVE_UP = 10.0  # seconds after the VAD's end without the awaited moment: a miss
NOISE_RMS = 150.0  # quiet room noise (the energy VAD's gate is 300)
MODES: dict[str, ListeningMode] = {
    "always-on": "always",
    "push-to-talk": "push",
    "wake, one breath": "wake",
    "wake, then the question": "wake",
}


# -- the engines ----------------------------------------------------------------------------
def timed_stt() -> Any:
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

    return TimedSTT()


class Said:
    """Words said by eSpeak NG at 16 kHz, as microphone frames; ``tail``: seconds of
    quiet after the last word, in the frames (the speech ends that much earlier)."""

    def __init__(self, words: str, frames: list[AudioFrame], tail: float) -> None:
        self.words = words
        self.frames = frames
        self.tail = tail


async def said(words: str) -> Said:
    from backline_local_speech.espeak import EspeakTTS

    frames = [f async for f in EspeakTTS().synthesize(words)]
    audio = AudioFrame(b"".join(f.data for f in frames), frames[0].sample_rate).resample(RATE)
    samples = audio.samples()
    last = max(i for i, v in enumerate(samples) if abs(v) >= 200)
    tail = (len(samples) - last - 1) / RATE
    return Said(words, list(split_frames(audio, FRAME)), tail)


def quiet(seconds: float) -> list[AudioFrame]:
    return list(split_frames(AudioFrame.silence(seconds, RATE), FRAME))


class Engine:
    """One PocketSphinx engine for every rig (its decoder loads once), and its computes."""

    def __init__(self) -> None:
        self.stt = timed_stt()
        self.computes: list[float] = type(self.stt).computes


# -- the rig: a session behind a Listener behind SpeechInput --------------------------------
class Door:
    """The session as the Listener drives it; each turn's arrival is stamped."""

    def __init__(self, session: Session[Any]) -> None:
        self.session = session
        self.turns: list[tuple[float, str]] = []

    @property
    def agent_state(self) -> str:
        return str(self.session.agent_state)

    def user_started_speaking(self, *, interrupt: bool = True) -> None:
        self.session.user_started_speaking(interrupt=interrupt)

    def user_stopped_speaking(self) -> None:
        self.session.user_stopped_speaking()

    def push_interim_transcript(self, text: str) -> None:
        self.session.push_interim_transcript(text)

    def push_user_turn(self, text: str) -> None:
        self.turns.append((time.perf_counter(), text))
        self.session.push_user_turn(text)

    def interrupt(self, *, force: bool = False) -> None:
        self.session.interrupt(force=force)


class Rig:
    """A session, a ``Listener`` in ``mode``, ``SpeechInput``, and a microphone that
    pushes frames fast until the VAD's end, then in real time (``paced``)."""

    def __init__(self, engine: Engine, mode: ListeningMode) -> None:
        llm = ScriptedLLM(lambda _: text("Okay."), record=False)
        self.session: Session[Any] = Session(llm, output=TextOutput(), user_away_timeout=None)
        self.door = Door(self.session)
        self.woke: list[float] = []
        self.listener = Listener(
            self.door, mode=mode, wake_phrase=WAKE, on_change=self._changed, wake_window=60.0
        )
        self.input = SpeechInput(self.listener, stt=engine.stt, vad=EnergyVAD())
        self.computes = engine.computes
        self.position = 0.0  # seconds of audio pushed
        self.vad_end: tuple[float, float] | None = None  # (perf_counter, position)
        self.paced = False

    def _changed(self, state: ListenerState) -> None:
        if state.moment == "woke":
            self.woke.append(time.perf_counter())

    async def __aenter__(self) -> Rig:
        await self.session.start(Agent("Answer briefly."))
        self.input.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.listener.close()
        await self.input.aclose()
        await self.session.aclose()

    def push(self, frame: AudioFrame) -> None:
        was = self.input.speaking
        at = time.perf_counter()
        self.input.push(self.listener.gate(frame))
        self.position += frame.duration
        if was and not self.input.speaking:
            self.vad_end = (at, self.position)
            self.paced = True

    async def play(self, frames: list[AudioFrame]) -> None:
        for frame in frames:
            self.push(frame)
            await asyncio.sleep(frame.duration if self.paced else 0)

    async def quiet_until(self, done: Callable[[], bool]) -> bool:
        """Silence, frame by frame, until ``done()`` or a final transcript that did not
        do it (misheard); False if it did not come (or ``GIVE_UP`` s after the VAD's end)."""
        self.vad_end, self.paced = None, False
        turns = self.input.turns
        frame = AudioFrame.silence(FRAME, RATE)
        while not done():
            if self.input.turns > turns:  # a final transcript came and went elsewhere
                break
            if self.vad_end is not None and time.perf_counter() - self.vad_end[0] > GIVE_UP:
                break
            self.push(frame)
            await asyncio.sleep(frame.duration if self.paced else 0)
        self.paced = False
        return done()


async def utterance(
    rig: Rig, scenario: str, question: Said, phrase: Said
) -> dict[str, float] | None:
    """One utterance of ``scenario``; its figures, or None if it was missed (``right``:
    1 when the turn is the question word for word)."""
    rig.door.turns.clear()
    rig.woke.clear()
    if scenario.startswith("wake"):  # the window closed: the phrase must open it again
        rig.listener.set_mode("always")
        rig.listener.set_mode("wake")
    await rig.play(quiet(0.3))
    figures: dict[str, float] = {}
    if scenario.startswith("wake"):
        await rig.play(phrase.frames)
        phrase_end = rig.position - phrase.tail
        if scenario == "wake, then the question":
            if not await rig.quiet_until(lambda: bool(rig.woke)):
                return None
            assert rig.vad_end is not None
            vad_at, vad_position = rig.vad_end
            figures["phrase_end_to_woke"] = (vad_position - phrase_end) + (rig.woke[0] - vad_at)
            figures["woke_share"] = rig.woke[0] - vad_at - rig.computes[-1]
            await rig.play(quiet(0.3))  # the chime, then the user speaks
        else:
            await rig.play(quiet(BREATH))
    elif scenario == "push-to-talk":
        rig.listener.press()
    await rig.play(question.frames)
    speech_end = rig.position - question.tail
    if scenario == "push-to-talk":
        rig.listener.release()
    if not await rig.quiet_until(lambda: bool(rig.door.turns)):
        return None
    assert rig.vad_end is not None
    vad_at, vad_position = rig.vad_end
    turn_at = rig.door.turns[0][0]
    compute = rig.computes[-1]
    figures |= {
        "right": float(rig.door.turns[0][1] == question.words),
        "hangover": vad_position - speech_end,
        "total": turn_at - vad_at,
        "compute": compute,
        "share": turn_at - vad_at - compute,
        "speech_end_to_turn": vad_position - speech_end + turn_at - vad_at,
    }
    if scenario == "wake, one breath":
        if not rig.woke:
            return None
        figures["phrase_end_to_woke"] = (vad_position - phrase_end) + (rig.woke[0] - vad_at)
        figures["woke_share"] = rig.woke[0] - vad_at - compute
    if not await rig.session.wait_for_idle(timeout=30):
        return None
    return figures


async def latencies(utterances: int) -> dict[str, Any]:
    engine = Engine()
    phrase = await said(WAKE)
    questions = [await said(q) for q in QUESTIONS]
    joined = AudioFrame(b"".join(f.data for f in questions[0].frames), RATE)
    await asyncio.to_thread(engine.stt.transcribe, joined)  # load the decoder
    out: dict[str, Any] = {}
    for scenario, mode in MODES.items():
        rows: list[dict[str, float]] = []
        missed = 0
        async with Rig(engine, mode) as rig:
            for i in range(utterances):
                figures = await utterance(rig, scenario, questions[i % len(questions)], phrase)
                if figures is None:
                    missed += 1
                else:
                    rows.append(figures)
        right = sum(int(r["right"]) for r in rows)
        out[scenario] = {"utterances": len(rows), "missed": missed, "right": right, "samples": rows}
    return out


# -- idle listening -------------------------------------------------------------------------
def room_noise(path: Path, seconds: float) -> None:
    rng = random.Random(28)
    samples = [round(rng.gauss(0.0, NOISE_RMS)) for _ in range(round(seconds * RATE))]
    write_wav(path, [AudioFrame.from_samples(samples, RATE)])


def default_engines() -> Any:
    from backline.app import SpeechOptions, build_speech, plugin_manager

    return build_speech(plugin_manager(), SpeechOptions())


async def idle(engines: Any, noise: Path, folder: Path, echo_on: bool) -> dict[str, Any]:
    """CPU of ``TerminalVoice`` hearing ``noise`` in real time, always-on, nobody speaking."""
    from backline.io.voice import TerminalVoice

    echo = echo_canceller(sample_rate=RATE) if echo_on else None
    sink = WavOutput(folder / f"out-{echo_on}.wav", on_played=echo.far_end if echo else None)
    output = SpeechOutput(engines.tts, sink)
    llm = ScriptedLLM(lambda _: text("Okay."), record=False)
    session: Session[Any] = Session(llm, output=output)
    source = WavInput(noise, sample_rate=RATE, then_silence=0.0)
    front = TerminalVoice(
        session,
        stt=engines.stt,
        tts=engines.tts,
        vad=engines.vad,
        source=source,
        sink=sink,
        echo=echo,
        mode="always",
        ends=True,
    )
    lines: list[str] = []
    await session.start(Agent("Answer briefly."))
    sink.start()
    try:
        await front.start(lines.append)
        cpu, wall = time.process_time(), time.perf_counter()
        await front.finished(source.duration + 30)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    finally:
        await front.aclose()
        await session.aclose()
        await output.aclose()
        await sink.aclose()
    return {
        "echo": echo.name if echo is not None else "off",
        "seconds": round(wall, 2),
        "cpu_seconds": round(cpu, 3),
        "percent_of_a_core": round(cpu / wall * 100, 2),
        "frames": front.frames,
        "turns": front.input.turns,
    }


def cost_per_audio_second(engines: Any, noise_seconds: float = 20.0) -> list[list[Any]]:
    """CPU ms per second of room noise, each stage on its own (no clock: as fast as it goes)."""
    rng = random.Random(7)
    audio = AudioFrame.from_samples(
        [round(rng.gauss(0.0, NOISE_RMS)) for _ in range(round(noise_seconds * RATE))], RATE
    )
    frames = list(split_frames(audio, FRAME))
    rows: list[list[Any]] = []

    def timed(name: str, work: Callable[[AudioFrame], object]) -> None:
        start = time.process_time()
        for frame in frames:
            work(frame)
        ms = (time.process_time() - start) / noise_seconds * 1000
        rows.append([name, f"{ms:.2f}", f"{ms / 10:.2f}"])

    timed(f"voice activity ({engines.vad.name})", engines.vad.stream().push)
    canceller = echo_canceller(sample_rate=RATE)
    if canceller is not None:
        timed(f"echo canceller ({canceller.name})", canceller.process)
    return rows


# -- the report -----------------------------------------------------------------------------
def ms(values: list[float], q: float) -> float:
    return round(percentile(sorted(values), q) * 1000, 2) if values else float("nan")


def summary(samples: list[dict[str, float]], key: str) -> dict[str, float]:
    values = [s[key] for s in samples if key in s]
    return {"p50_ms": ms(values, 50), "p99_ms": ms(values, 99)}


async def main(args: argparse.Namespace) -> None:
    if shutil.which("espeak-ng") is None or importlib.util.find_spec("pocketsphinx") is None:
        print(
            "the voice benchmark needs eSpeak NG (apt install espeak-ng) and PocketSphinx "
            "(pip install backline-local-speech)"
        )
        return
    started = time.perf_counter()
    measured = await latencies(args.utterances)
    rows = []
    for scenario, r in measured.items():
        s = r["samples"]
        rows.append(
            [
                f"{scenario} ({r['utterances']}, {r['right']} right, {r['missed']} missed)",
                f"{summary(s, 'hangover')['p50_ms']:.0f}",
                f"{summary(s, 'total')['p50_ms']:.1f}",
                f"{summary(s, 'total')['p99_ms']:.1f}",
                f"{summary(s, 'compute')['p50_ms']:.1f}",
                f"{summary(s, 'share')['p50_ms']:.2f}",
                f"{summary(s, 'share')['p99_ms']:.2f}",
                f"{summary(s, 'speech_end_to_turn')['p50_ms']:.0f}",
            ]
        )
    print_table(
        "The user's speech ends -> the turn reaches the session, ms (N utterances each)",
        [
            "way of talking",
            "speech end->VAD end",
            "VAD end->turn p50",
            "p99",
            "STT compute p50",
            "backline p50",
            "p99",
            "speech end->turn p50",
        ],
        rows,
    )
    wake_rows = []
    for scenario in ("wake, one breath", "wake, then the question"):
        s = measured[scenario]["samples"]
        wake_rows.append(
            [
                scenario,
                f"{summary(s, 'phrase_end_to_woke')['p50_ms']:.0f}",
                f"{summary(s, 'phrase_end_to_woke')['p99_ms']:.0f}",
                f"{summary(s, 'woke_share')['p50_ms']:.2f}",
                f"{summary(s, 'woke_share')['p99_ms']:.2f}",
            ]
        )
    print_table(
        f"The wake phrase ({WAKE!r}): its end -> the listener wakes (the chime), ms",
        ["said", "phrase end->woke p50", "p99", "backline p50", "p99"],
        wake_rows,
    )

    engines = await asyncio.to_thread(default_engines)
    print(f"\n{engines.describe()}")
    breakdown = cost_per_audio_second(engines)
    print_table(
        "Each stage on its own, per second of room noise, frames back to back (in real "
        "time a call costs more: the idle figures below)",
        ["stage", "CPU ms per s", "% of a core"],
        breakdown,
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        noise = folder / "room.wav"
        room_noise(noise, args.idle_seconds)
        idles = [await idle(engines, noise, folder, echo_on=False)]
        if echo_unavailable() is None:
            idles.append(await idle(engines, noise, folder, echo_on=True))
        else:
            print(f"\nno echo canceller here ({echo_unavailable()}): measured without only")
    print_table(
        f"Idle listening: TerminalVoice, always-on, {args.idle_seconds:g} s of room noise "
        "in real time, nobody speaking",
        ["echo canceller", "seconds", "CPU s", "% of one core", "frames", "turns"],
        [
            [
                i["echo"],
                f"{i['seconds']:.1f}",
                f"{i['cpu_seconds']:.3f}",
                f"{i['percent_of_a_core']:.2f}",
                i["frames"],
                i["turns"],
            ]
            for i in idles
        ],
    )
    targets = [
        Target(
            f"{scenario}: backline's share, VAD end -> turn (p50)",
            summary(r["samples"], "share")["p50_ms"] if r["samples"] else None,
            5.0,
            unit="ms",
            note="minus PocketSphinx's compute",
        )
        for scenario, r in measured.items()
    ]
    wake_shares = [
        s["woke_share"]
        for scenario in ("wake, one breath", "wake, then the question")
        for s in measured[scenario]["samples"]
    ]
    targets.append(
        Target(
            "wake phrase: backline's share, VAD end -> woke (p50)",
            ms(wake_shares, 50) if wake_shares else None,
            5.0,
            unit="ms",
            note="minus PocketSphinx's compute",
        )
    )
    by_echo = {i["echo"]: i for i in idles}
    for name, key in (("off", "off"), ("on", "webrtc")):
        figure = by_echo.get(key)
        targets.append(
            Target(
                f"idle always-on listening, echo canceller {name}",
                figure["percent_of_a_core"] if figure else None,
                5.0,
                unit="%",
                note="process CPU ÷ wall time",
            )
        )
    print_targets(targets)
    print(f"\n(the run took {time.perf_counter() - started:.0f} s)")
    write_results(
        "voice",
        args,
        {
            "wake_phrase": WAKE,
            "latency": {
                scenario: {
                    "utterances": r["utterances"],
                    "missed": r["missed"],
                    "heard_word_for_word": r["right"],
                    **{
                        key: summary(r["samples"], key)
                        for key in (
                            "hangover",
                            "total",
                            "compute",
                            "share",
                            "speech_end_to_turn",
                            "phrase_end_to_woke",
                            "woke_share",
                        )
                        if any(key in s for s in r["samples"])
                    },
                }
                for scenario, r in measured.items()
            },
            "engines": engines.as_dict(),
            "stages_ms_per_audio_second": breakdown,
            "idle": idles,
            "mean_share_ms": {
                scenario: round(statistics.fmean(s["share"] for s in r["samples"]) * 1000, 3)
                for scenario, r in measured.items()
                if r["samples"]
            },
        },
        targets,
    )


def cli() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--utterances", type=int, default=10, help="per way of talking")
    p.add_argument("--idle-seconds", type=float, default=10.0, help="of idle listening, each")
    p.add_argument("--profile", help="cProfile (unused)")
    args = p.parse_args()
    run(lambda: main(args))


if __name__ == "__main__":
    cli()
