"""The worker's entrypoint in LiveKit's fake job (a mock room, the job in a thread), and drain."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from backline_livekit.bridge import LiveKitBridge
from backline_livekit.worker import WorkerConfig, run_job, session_load
from livekit.agents import AgentServer, JobContext, JobExecutorType

from backline import Agent, BackgroundContext, Session, background
from backline.testing import ScriptedLLM, text

from .conftest import WAIT, assert_nothing_left
from .fakes import FakeSTT, FakeTTS

pytestmark = pytest.mark.usefixtures("loop_errors")


class Job:
    """What the job thread reports to the test (thread-safe)."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.background_closed = threading.Event()
        self.bridge: LiveKitBridge | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.config: WorkerConfig | None = None

    def build(self, config: WorkerConfig) -> tuple[Session[Any], Agent]:
        closed = self.background_closed

        @background("worker", description="Works until it is closed.")
        async def worker(ctx: BackgroundContext) -> None:
            try:
                await asyncio.Event().wait()
            finally:
                closed.set()

        self.config = config
        llm = ScriptedLLM([text("Hello from the worker.")])
        return Session(llm, background=[worker], user_away_timeout=None), Agent("Worker.")

    async def entrypoint(self, ctx: JobContext) -> None:
        speech = {"stt": FakeSTT(), "tts": FakeTTS(), "vad": None}
        speech["turn_handling"] = {"turn_detection": None}
        self.bridge = await run_job(ctx, build=self.build, speech=speech)
        self.loop = asyncio.get_running_loop()
        self.started.set()

    async def in_job(self, coro: Any) -> Any:
        assert self.loop is not None
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))


async def _wait_thread_event(event: threading.Event) -> None:
    # A job runs in its own thread and loop: poll its event from this loop (bounded).
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while not event.is_set():
        assert loop.time() < deadline, "timed out waiting for the job"
        await asyncio.sleep(0.01)


async def test_a_fake_job_runs_a_bridged_session_and_drain_closes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BACKLINE_LIVEKIT_CONFIG", WorkerConfig(llm="scripted").to_env())
    before = set(asyncio.all_tasks())
    job = Job()
    server = AgentServer(
        job_executor_type=JobExecutorType.THREAD,
        num_idle_processes=0,
        drain_timeout=1,
        shutdown_process_timeout=10,
    )
    server.rtc_session(job.entrypoint, agent_name="backline")
    ready = asyncio.Event()
    server.on("worker_started", lambda *_: ready.set())
    running = asyncio.create_task(server.run(devmode=True, unregistered=True))
    try:
        await asyncio.wait_for(ready.wait(), WAIT)
        await server.simulate_job("a-room", fake_job=True)
        await _wait_thread_event(job.started)
        assert job.config is not None and job.config.llm == "scripted"  # from the environment
        bridge = job.bridge
        assert bridge is not None

        async def turn() -> list[str]:
            result = await bridge.lk.run(user_input="hello")  # type: ignore[union-attr]
            return [e.item.text_content for e in result.events]

        assert await job.in_job(turn()) == ["Hello from the worker."]
        assert len(server.active_jobs) == 1
        # SIGTERM's path: drain (the conversation goes on until the timeout), then close.
        with pytest.raises(asyncio.TimeoutError):
            await server.drain()
        assert not bridge.session.closed  # draining did not cut the conversation
        await asyncio.wait_for(server.aclose(), WAIT)
        assert job.background_closed.is_set() and bridge.session.closed and bridge.closed
        assert server.active_jobs == []
    finally:
        await asyncio.wait_for(server.aclose(), WAIT)
        await asyncio.wait_for(running, WAIT)
    await assert_nothing_left(before)


def test_load_is_cpu_or_the_share_of_max_sessions() -> None:
    assert session_load(3, None, 0.25) == 0.25
    assert session_load(3, 4, 0.25) == 0.75
    assert session_load(9, 4, 0.25) == 1.0
    assert session_load(0, 4, 0.5) == 0.5


def test_the_worker_config_round_trips_through_the_environment() -> None:
    config = WorkerConfig(backgrounds=("claude_code",), llm="openai", stt="openai", max_sessions=5)
    assert WorkerConfig.from_env({"BACKLINE_LIVEKIT_CONFIG": config.to_env()}) == config
    assert WorkerConfig.from_env({}) == WorkerConfig()
