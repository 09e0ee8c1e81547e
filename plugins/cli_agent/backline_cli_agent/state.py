"""The live state of ``cli_agent``: the process, the task, and the agent's own status."""

from __future__ import annotations

from collections import deque
from typing import Any, Protocol

TASK_CHARS = 150
RECENT = 8

ATTACHED = "waiting for an agent to connect (`backline mcp config --background cli_agent`)"
IDLE = "idle, waiting for a task"
IDLE_AGAIN = "idle, waiting for the next task"
STARTING = "starting the agent"
WORKING = "working"
LISTENING = "waiting for your instructions"
INTERRUPTED = "interrupted, switching to your new instruction"
CRASHED = "stopped after an error; the next message starts it again"
FAILED = "the last task ended with an error"
CANNOT_START = "cannot start: its program was not found"
NEEDS_CLEAN_TREE = "waiting for a clean git tree"


class StateSink(Protocol):
    def set_state(self, value: Any) -> None: ...


class StateReporter:
    """Keeps and publishes ``{agent, status, task, last_task, process, agent_status,
    recent_activity, voice_channel, program, program_path, git, error}``.

    ``process`` is ``{"state": "not started" | "running" | "exited", "pid", "exit_code"}``;
    ``agent_status`` is the agent's last ``set_status`` (a JSON object, or ``None``);
    ``voice_channel`` says whether the agent reaches backline's MCP server;
    ``program`` where its program was found (``from PATH``, ``bundled with
    claude-agent-sdk``, ``as given``, ``not found``) and ``program_path`` the file;
    ``git`` what git says about the folder (``GitCheck.state``: ``repository``,
    ``uncommitted_changes`` and a ``summary``), ``None`` until it is checked.
    """

    def __init__(self, sink: StateSink, agent: str) -> None:
        self._sink = sink
        self._agent = agent
        self._status = IDLE
        self._task: str | None = None
        self._last_task: str | None = None
        self._process: dict[str, Any] = {"state": "not started", "pid": None, "exit_code": None}
        self._agent_status: dict[str, Any] | None = None
        self._recent: deque[str] = deque(maxlen=RECENT)
        self._voice_channel = "not connected yet"
        self._program: str | None = None
        self._program_path: str | None = None
        self._git: dict[str, Any] | None = None
        self._error: str | None = None
        self._listening = False

    @property
    def snapshot(self) -> dict[str, Any]:
        return {
            "agent": self._agent,
            "status": LISTENING if self._listening and self._task else self._status,
            "task": self._task,
            "last_task": self._last_task,
            "process": dict(self._process),
            "agent_status": self._agent_status,
            "recent_activity": list(self._recent),
            "voice_channel": self._voice_channel,
            "program": self._program,
            "program_path": self._program_path,
            "git": self._git,
            "error": self._error,
        }

    def publish(self) -> None:
        self._sink.set_state(self.snapshot)

    def set_status(self, status: str, *, error: str | None = None) -> None:
        self._status = status
        if error is not None:
            self._error = error
        self.publish()

    def task_started(self, text: str) -> None:
        self._task = text if len(text) <= TASK_CHARS else text[: TASK_CHARS - 1] + "…"
        self._status = WORKING
        self._error = None
        self._agent_status = None
        self.publish()

    def task_ended(self, status: str, *, error: str | None = None) -> None:
        self._last_task, self._task = self._task, None
        self._status = status
        self._error = error
        self.publish()

    def process_started(self, pid: int) -> None:
        self._process = {"state": "running", "pid": pid, "exit_code": None}
        self.publish()

    def process_exited(self, exit_code: int | None) -> None:
        self._process = {**self._process, "state": "exited", "exit_code": exit_code}
        self.publish()

    def agent_status(self, status: dict[str, Any]) -> None:
        """The agent's ``set_status`` (the voice channel's ``on_status``)."""
        self._agent_status = status
        self.publish()

    def listening(self, listening: bool) -> None:
        """The agent waits for the user, or stopped waiting (``on_listening``)."""
        self._listening = listening
        self.publish()

    def program(self, path: str | None, source: str) -> None:
        self._program, self._program_path = source, path
        self.publish()

    def git(self, check: dict[str, Any]) -> None:
        self._git = check
        self.publish()

    def voice_channel(self, text: str) -> None:
        self._voice_channel = text
        self.publish()

    def activity(self, entry: str) -> None:
        self._recent.append(entry)
        self.publish()
