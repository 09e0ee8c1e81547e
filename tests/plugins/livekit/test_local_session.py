"""A LiveKit ``AgentSession`` with backline's own engines, bridged to a backline session:
the words eSpeak NG says into the microphone are heard by PocketSphinx (found by
backline's energy detector), reach backline's model as the user's turn, and the reply
LiveKit speaks through eSpeak NG is heard back by PocketSphinx. No speech cloud, no
fake engine: only the model is scripted."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from backline_livekit import BackendSTT, BackendTTS, BackendVAD, make_speech
from backline_livekit.worker import WorkerConfig, run_job
from livekit.agents import AgentServer, JobContext, JobExecutorType

from backline import Agent
from backline.testing import ScriptedLLM, text

from .conftest import WAIT, assert_nothing_left, bridged, wait_until
from .fakes import FakeAudioOutput, RecordedAudioInput
from .local_speech import HOW_ARE_YOU, WEATHER, microphone, speak, transcribe
from .test_worker import Job
from .test_worker import _wait_thread_event as wait_thread_event

pytestmark = [pytest.mark.usefixtures("loop_errors"), pytest.mark.timeout(120)]

LOCAL = {"BACKLINE_PLUGINS": "livekit,local_speech,speech"}


def local_speech(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What ``backline livekit console --stt pocketsphinx --tts espeak --vad energy``
    gives LiveKit, with the pipeline's timings shortened for a test."""
    for name, value in LOCAL.items():
        monkeypatch.setenv(name, value)
    speech = make_speech("pocketsphinx", "espeak", "energy", environ={})
    return {
        **speech,
        "turn_handling": {
            "turn_detection": "vad",
            "endpointing": {"min_delay": 0.1, "max_delay": 1.0},
        },
        "aec_warmup_duration": None,
        "session_close_transcript_timeout": 0.5,
    }


async def test_a_spoken_question_reaches_backline_and_its_spoken_answer_is_heard(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    options = local_speech(monkeypatch)
    speaker = FakeAudioOutput()
    microphone_ = RecordedAudioInput(microphone(0.5, await speak(WEATHER), 1.0))
    llm = ScriptedLLM([text("How are you?")])
    async with bridged(
        llm, Agent("Weather."), audio_input=microphone_, audio_output=speaker, **options
    ) as b:
        await wait_until(lambda: b.messages() != [], "the answer played out", timeout=30)
        await b.idle()
        assert b.messages("user") == [(WEATHER, False)]  # PocketSphinx heard eSpeak NG
        assert str(llm.requests[0].chat_ctx.items[-1].content) == WEATHER
        assert b.messages() == [("How are you?", False)]
        assert b.lk_messages() == [("How are you?", False)]
        rates = {(f.sample_rate, f.num_channels) for f in speaker.frames}
        assert rates == {(22050, 1)}  # eSpeak NG's own rate, through LiveKit's output
        assert await transcribe(speaker.frames) == HOW_ARE_YOU


async def test_a_typed_turn_is_answered_in_backlines_voice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # LiveKit's text harness (run(user_input=...)) with the adapted TTS speaking the reply.
    options = local_speech(monkeypatch)
    speaker = FakeAudioOutput()
    llm = ScriptedLLM([text("What is the weather?")])
    async with bridged(llm, Agent("Asks back."), audio_output=speaker, **options) as b:
        result = await asyncio.wait_for(b.lk.run(user_input="hello"), WAIT)
        result.expect.next_event().is_message(role="assistant")
        await b.idle()
        assert b.messages() == [("What is the weather?", False)]
        assert await transcribe(speaker.frames) == WEATHER


class LocalJob(Job):
    """A job built as ``backline livekit start --stt pocketsphinx --tts espeak --vad
    energy`` builds it: the speech from the worker's configuration."""

    async def entrypoint(self, ctx: JobContext) -> None:
        self.bridge = await run_job(ctx, build=self.build)
        self.loop = asyncio.get_running_loop()
        self.started.set()


async def test_a_worker_job_speaks_with_the_engines_its_configuration_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in LOCAL.items():
        monkeypatch.setenv(name, value)
    config = WorkerConfig(llm="scripted", stt="pocketsphinx", tts="espeak", vad="energy")
    monkeypatch.setenv("BACKLINE_LIVEKIT_CONFIG", config.to_env())
    before = set(asyncio.all_tasks())
    job = LocalJob()
    server = AgentServer(
        job_executor_type=JobExecutorType.THREAD,
        num_idle_processes=0,
        shutdown_process_timeout=10,
    )
    server.rtc_session(job.entrypoint, agent_name="backline")
    ready = asyncio.Event()
    server.on("worker_started", lambda *_: ready.set())
    running = asyncio.create_task(server.run(devmode=True, unregistered=True))
    try:
        await asyncio.wait_for(ready.wait(), WAIT)
        await server.simulate_job("a-room", fake_job=True)
        await wait_thread_event(job.started)
        bridge = job.bridge
        assert bridge is not None and bridge.lk is not None
        assert isinstance(bridge.lk.stt, BackendSTT) and bridge.lk.stt.engine.name == "pocketsphinx"
        assert isinstance(bridge.lk.tts, BackendTTS) and bridge.lk.tts.engine.name == "espeak"
        assert isinstance(bridge.lk.vad, BackendVAD) and bridge.lk.stt.vad is bridge.lk.vad

        async def turn() -> list[str]:
            result = await bridge.lk.run(user_input="hello")  # type: ignore[union-attr]
            return [e.item.text_content for e in result.events]

        assert await job.in_job(turn()) == ["Hello from the worker."]
    finally:
        await asyncio.wait_for(server.aclose(), WAIT)
        await asyncio.wait_for(running, WAIT)
    await assert_nothing_left(before)
