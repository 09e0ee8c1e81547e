"""The LiveKit worker: one backline session per LiveKit job (a room the server dispatched).

``build_server`` makes a LiveKit ``AgentServer`` whose entrypoint builds a
backline session from ``WorkerConfig`` (the same choices as ``backline console``:
backgrounds, LLM, agent), bridges it into the room, and closes it (backgrounds
included) when the job shuts down. The configuration travels to job processes
through one environment variable, ``BACKLINE_LIVEKIT_CONFIG`` (JSON), as every
backline plugin reads its configuration from the environment.

Scale-out is LiveKit's: workers register with the server, which dispatches rooms
to them by ``agent_name`` and load; ``drain`` (SIGTERM) stops taking jobs and
lets running conversations finish, then closes what is left.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from livekit.agents import AgentServer, JobContext, JobProcess

    from backline import Agent, Session
    from backline.app import SessionOptions

    from .bridge import LiveKitBridge

logger = logging.getLogger("backline.livekit")

ENV_CONFIG = "BACKLINE_LIVEKIT_CONFIG"
DEFAULT_AGENT_NAME = "backline"
PREWARM_TIMEOUT = 120.0
"""Seconds a new job process gets to load backline's speech models (``prewarm``)."""
SHUTDOWN_TIMEOUT = 30.0
"""Seconds a job process gets to close its session (backgrounds included) before LiveKit
kills it. backline's close is bounded well below this."""


@dataclass(frozen=True)
class WorkerConfig:
    """What each job's session is built from (JSON in ``BACKLINE_LIVEKIT_CONFIG``)."""

    backgrounds: tuple[str, ...] = ()
    llm: str = "anthropic"
    model: str | None = None
    instructions: str | None = None
    agent: str | None = None
    stt: str | None = None
    tts: str | None = None
    vad: str | None = None
    tts_voice: str | None = None
    language: str | None = None
    agent_name: str = DEFAULT_AGENT_NAME
    max_sessions: int | None = None
    extra: dict[str, str] = field(default_factory=dict)
    mcp_config: str | None = None
    text: bool = False
    """Text only (``backline livekit console --text``): no STT, TTS or VAD is built."""

    @classmethod
    def from_options(cls, options: SessionOptions, **speech: Any) -> WorkerConfig:
        return cls(
            backgrounds=options.backgrounds,
            llm=options.llm,
            model=options.model,
            instructions=options.instructions,
            agent=options.agent,
            mcp_config=options.mcp_config,
            **speech,
        )

    def session_options(self) -> SessionOptions:
        from backline.app import SessionOptions

        return SessionOptions(
            backgrounds=self.backgrounds,
            llm=self.llm,
            model=self.model,
            instructions=self.instructions,
            agent=self.agent,
            mcp_config=self.mcp_config,
        )

    def speech_choices(self) -> dict[str, Any]:
        """``make_speech``'s arguments."""
        return {
            "stt": self.stt,
            "tts": self.tts,
            "vad": self.vad,
            "tts_voice": self.tts_voice,
            "language": self.language,
        }

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls, environ: Any = None) -> WorkerConfig:
        raw = (os.environ if environ is None else environ).get(ENV_CONFIG)
        if not raw:
            return cls()
        data = json.loads(raw)
        if data.get("backgrounds"):
            data["backgrounds"] = tuple(data["backgrounds"])
        return cls(**data)


def build_backline_session(config: WorkerConfig) -> tuple[Session[Any], Agent]:
    """A fresh backline session for one job: plugins' tools, the chosen backgrounds and LLM."""
    from backline.app import build_session, plugin_manager

    return build_session(plugin_manager(), config.session_options())


SessionFactory = Callable[[WorkerConfig], "tuple[Session[Any], Agent]"]


async def run_job(
    ctx: JobContext,
    config: WorkerConfig | None = None,
    *,
    build: SessionFactory = build_backline_session,
    speech: dict[str, Any] | None = None,
    on_bridge: Callable[[LiveKitBridge], None] | None = None,
) -> LiveKitBridge:
    """The entrypoint's work: bridge a new backline session into the job's room.

    ``speech`` overrides the STT/TTS/VAD built from ``config`` (tests pass fakes).
    backline's own engines are built in a worker thread (a model may load) unless the
    process has them already (``prewarm``). The session closes (bounded, backgrounds
    included) when the job shuts down.
    """
    from .bridge import LiveKitBridge
    from .providers import make_speech, prepare_engines

    config = config or WorkerConfig.from_env()
    session, agent = build(config)
    bridge = LiveKitBridge(session)
    if speech is None and config.text:
        # Text only: no provider, no key, no model to load, no turn detector.
        speech = {"vad": None, "turn_handling": {"turn_detection": None}}
    if speech is None:
        choices = config.speech_choices()
        await asyncio.to_thread(prepare_engines, **choices)
        speech = make_speech(**choices)
    lk_session = bridge.agent_session(**speech)
    ctx.add_shutdown_callback(bridge.aclose)
    if on_bridge is not None:
        on_bridge(bridge)
    await bridge.start(lk_session, agent, room=ctx.room)
    return bridge


def prewarm(proc: JobProcess) -> None:
    """A job process's setup, before its first conversation: backline's speech engines
    (``--stt whisper`` ...) are built and their models loaded now, not while a caller
    waits. A failure is logged; the job then says it again."""
    config = WorkerConfig.from_env()
    if config.text:
        return
    from .providers import ProviderError, prepare_engines

    try:
        prepare_engines(**config.speech_choices())
    except ProviderError as e:
        logger.error("livekit: backline's speech engines could not be prepared: %s", e)


async def entrypoint(ctx: JobContext) -> None:
    """The worker's entrypoint (importable, for job processes)."""
    bridge = await run_job(ctx)
    if _console_active():
        _print_background_updates(bridge)


def _console_active() -> bool:
    from livekit.agents.cli.cli import AgentsConsole

    instance = AgentsConsole._instance
    return bool(instance is not None and instance.enabled)


def _print_background_updates(bridge: LiveKitBridge) -> None:
    """In ``backline livekit console``: live background state next to LiveKit's transcript."""
    from livekit.agents.cli.cli import AgentsConsole

    console: Any = AgentsConsole.get_instance()

    def show(text: str) -> None:
        try:
            console.print(text, tag="Background")
        except Exception:  # the console is going away
            logger.debug("could not print to the console", exc_info=True)

    session = bridge.session
    session.on("background_status", lambda ev: show(f"{ev.background_id}: {ev.status}"))
    session.on("background_state", lambda ev: show(f"{ev.background_id}: {ev.state}"))
    session.on(
        "background_message",
        lambda ev: show(f"{ev.background_id}{' (note)' if ev.silent else ''}: {ev.content}"),
    )


def session_load(active: int, max_sessions: int | None, cpu: float) -> float:
    """The load a worker reports: its CPU, or its share of ``max_sessions`` if higher."""
    if not max_sessions:
        return cpu
    return max(cpu, min(1.0, active / max_sessions))


def build_server(
    config: WorkerConfig, *, drain_timeout: int | None = None, console: bool = False
) -> AgentServer:
    """A LiveKit ``AgentServer`` running backline sessions, with explicit dispatch by
    ``config.agent_name`` and load reported from CPU and ``config.max_sessions``.
    ``console``: for LiveKit's console, whose one job finds its executor ready."""
    from livekit.agents import AgentServer
    from livekit.agents.worker import _DefaultLoadCalc

    def load(server: AgentServer) -> float:
        cpu = _DefaultLoadCalc.get_load(server)
        return session_load(len(server.active_jobs), config.max_sessions, cpu)

    options: dict[str, Any] = {
        "load_fnc": load,
        "setup_fnc": prewarm,
        "initialize_process_timeout": PREWARM_TIMEOUT,
        "shutdown_process_timeout": SHUTDOWN_TIMEOUT,
    }
    if drain_timeout is not None:
        options["drain_timeout"] = drain_timeout
    if console:
        options["num_idle_processes"] = 1
    server = AgentServer(**options)
    server.rtc_session(entrypoint, agent_name=config.agent_name)
    return server
