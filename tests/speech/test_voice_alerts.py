"""Alerts in ``backline voice`` (issue 30): while the agent speaks about something else, a
background finishes, fails and asks something; each alert's own short sound plays at
once, mixed over the agent's voice (not queued after it). eSpeak NG speaks; the output
is a ``ClockSink`` on the virtual clock that records every frame written and mixed."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from backline_local_speech.espeak import EspeakTTS
from backline_local_speech.sphinx import PocketsphinxSTT

from backline import Agent, BackgroundContext, Session, background
from backline.io._alerts import TONES, alert_sound
from backline.io.voice import TerminalVoice
from backline.speech import AudioFrame, ClockSink, EnergyVAD, SpeechOutput, WavInput, write_wav
from backline.testing import ScriptedLLM, text
from backline.testing.clock import VirtualClock

STORY = " ".join(
    f"This is sentence number {n} of a long story about the sea." for n in range(1, 12)
)


async def test_each_alert_plays_its_sound_while_the_agent_speaks(
    virtual_clock: VirtualClock, tmp_path: Path
) -> None:
    go = asyncio.Event()

    @background("ci", description="Runs the tests.")
    async def ci(ctx: BackgroundContext) -> None:
        await go.wait()
        async with ctx.turn():
            ctx.set_state({"task": "run the tests"})
        await asyncio.sleep(1)
        async with ctx.turn():
            ctx.set_state({"error": "3 tests fail"})
        await asyncio.sleep(1)
        ctx.set_state({"asking": "Fix them now?"})
        await asyncio.Event().wait()

    written: list[AudioFrame] = []
    mixed: list[tuple[float, AudioFrame]] = []
    loop = asyncio.get_running_loop()
    voiced = asyncio.Event()  # the first of the agent's audio was written

    def wrote(frame: AudioFrame) -> None:
        written.append(frame)
        voiced.set()

    sink = ClockSink(on_frame=wrote, on_mix=lambda f: mixed.append((loop.time(), f)))
    tts = EspeakTTS()
    output = SpeechOutput(tts, sink)
    session: Session[Any] = Session(
        ScriptedLLM([text(STORY)]), output=output, background=[ci], user_away_timeout=None
    )
    write_wav(tmp_path / "quiet.wav", [AudioFrame.silence(1.0, 16000)])
    voice = TerminalVoice(
        session,
        stt=PocketsphinxSTT(),
        tts=tts,
        vad=EnergyVAD(),
        source=WavInput(tmp_path / "quiet.wav"),
        sink=sink,
    )
    sounds = {kind: alert_sound(kind, tts.sample_rate) for kind in TONES}
    async with session:
        await session.start(Agent("Tell stories."))
        session.push_user_turn("tell me a long story")
        await asyncio.wait_for(voiced.wait(), 30)
        assert session.agent_state == "speaking"
        go.set()
        await asyncio.sleep(3)
        during = session.agent_state
        story_ends = loop.time() + sum(f.duration for f in written) - sink.played
        assert await session.wait_for_idle(timeout=120)
        await voice.aclose()
    await output.aclose()
    assert during == "speaking"  # the story went on after the three alerts
    kinds = [next(k for k, s in sounds.items() if s.data == f.data) for _, f in mixed]
    assert kinds == ["finished", "failed", "question"]
    assert all(at < story_ends - 1 for at, _ in mixed)  # over the story, well before its end
    assert not [f for f in written if any(f.data == s.data for s in sounds.values())]
    # Three sounds a user tells apart, each short.
    assert len({s.data for s in sounds.values()}) == 3
    assert all(s.duration < 0.5 for s in sounds.values())
