"""The STATE channel: what Claude Code is doing, published after every action."""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Any, Protocol

MAX_RECENT = 8
TASK_CHARS = 150
COMMAND_CHARS = 60

EDIT_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
SEARCH_TOOLS = frozenset({"Glob", "Grep", "LS", "ToolSearch"})

IDLE = "idle, waiting for a task"
IDLE_AGAIN = "idle, waiting for the next task"
WORKING = "working"
INTERRUPTED = "interrupted, switching to the user's new instruction"
ERROR = "error"
RESTARTING = "restarting Claude Code"
RETRYING = "retrying"
NEEDS_CLEAN_TREE = "waiting for a clean git tree"


class StateSink(Protocol):
    def set_state(self, value: Any) -> None: ...


class StatusReporter:
    """Keeps ``{status, task, recent_activity, files_changed, last_task, git, error}``:
    keys of the state convention every background may use (docs/background.md), so
    front ends read Claude Code's state as any other; ``git`` is what git said about
    the folder (``GitCheck.state``: ``repository``, ``uncommitted_changes`` and a
    ``summary``), ``None`` until it is checked.

    ``recent_activity`` keeps the last 8 edits (once they succeeded), commands (when
    they start) and refused calls (reads and searches are left out);
    ``files_changed`` lists edited files in first-seen order, leaving out, at each
    publish, files that no longer exist (a file re-created shows again).
    An idle state persists until the next task starts.
    """

    def __init__(self, sink: StateSink, cwd: Path) -> None:
        self._sink = sink
        self._cwd = cwd
        self._status = IDLE
        self._task: str | None = None
        self._last_task: str | None = None
        self._error: str | None = None
        self._recent: deque[str] = deque(maxlen=MAX_RECENT)
        self._files: list[str] = []
        self._git: dict[str, Any] | None = None

    @property
    def snapshot(self) -> dict[str, Any]:
        return {
            "status": self._status,
            "task": self._task,
            "recent_activity": list(self._recent),
            "files_changed": [f for f in self._files if (self._cwd / f).exists()],
            "last_task": self._last_task,
            "git": self._git,
            "error": self._error,
        }

    def publish(self) -> None:
        self._sink.set_state(self.snapshot)

    def task_started(self, text: str) -> None:
        self._status = WORKING
        self._task = text if len(text) <= TASK_CHARS else text[: TASK_CHARS - 1] + "…"
        self._error = None
        self.publish()

    def task_finished(self) -> None:
        self._status = IDLE_AGAIN
        self._last_task, self._task = self._task, None
        self.publish()

    def git(self, check: dict[str, Any]) -> None:
        self._git = check
        self.publish()

    def needs_clean_tree(self, reason: str) -> None:
        """A clean tree is required and this one is not: no task starts."""
        self._status = NEEDS_CLEAN_TREE
        self._error = reason
        if self._task is not None:
            self._last_task, self._task = self._task, None
        self.publish()

    def interrupted(self) -> None:
        self._status = INTERRUPTED
        self.publish()

    def task_interrupted(self) -> None:
        """The interrupted turn ended; the status stays "interrupted" until the next task."""
        self._last_task, self._task = self._task, None
        self.publish()

    def working(self) -> None:
        self._status = WORKING
        self.publish()

    def restarting(self) -> None:
        self._status = RESTARTING
        self.publish()

    def retrying(self, problem: str, attempt: int, of: int | None) -> None:
        """The model request failed and Claude Code is trying again."""
        count = f"attempt {attempt} of {of}" if of else f"attempt {attempt}"
        self._status = f"{RETRYING}: {problem} ({count})"
        self.publish()

    @property
    def is_retrying(self) -> bool:
        return self._status.startswith(RETRYING)

    def failed(self, reason: str) -> None:
        self._status = ERROR
        self._error = reason
        if self._task is not None:
            self._last_task, self._task = self._task, None
        self.publish()

    def tool_used(self, name: str, tool_input: dict[str, Any]) -> None:
        """A tool call is about to run: a command is recorded now (it may run long)."""
        if name != "Bash":
            return  # edits are recorded once they land; searches are churn
        self._recent.append(f"ran `{self._command(tool_input)}`")
        self.publish()

    @staticmethod
    def _command(tool_input: dict[str, Any]) -> str:
        command = " ".join(str(tool_input.get("command", "")).split())
        if len(command) > COMMAND_CHARS:
            command = command[: COMMAND_CHARS - 1] + "…"
        return command

    def tool_finished(self, name: str, tool_input: dict[str, Any]) -> None:
        """A tool call ran: an edit is recorded now, with its file in ``files_changed``."""
        if name not in EDIT_TOOLS:
            return
        path = self._relative(tool_input.get("file_path") or tool_input.get("notebook_path"))
        if path:
            self._recent.append(f"edited {path}")
            if path not in self._files:
                self._files.append(path)
            self.publish()

    def decided(self, name: str, tool_input: dict[str, Any], outcome: str) -> None:
        """The user answered an approval question (approvals.py). A command refused
        takes the place of its "ran" line (recorded when the call was about to run)."""
        if outcome in ("allowed once", "allowed always", "already allowed"):
            return  # it runs: recorded as any call
        why = {"denied": "you said no", "no answer": "no answer"}.get(outcome, outcome)
        if name == "Bash":
            command = self._command(tool_input)
            ran = f"ran `{command}`"
            for index in range(len(self._recent) - 1, -1, -1):  # its latest "ran" line
                if self._recent[index] == ran:
                    del self._recent[index]
                    break
            self._recent.append(f"did not run `{command}` ({why})")
        else:
            self._recent.append(f"did not use {name} ({why})")
        self.publish()

    def refused(self, name: str) -> None:
        """A tool call was refused (a path outside the working directory, a tool not given)."""
        self._recent.append(f"refused a {name} call outside its folder or tools")
        self.publish()

    def _relative(self, raw: object) -> str | None:
        if not isinstance(raw, str) or not raw:
            return None
        path = Path(raw)
        if not path.is_absolute():
            path = self._cwd / path
        try:
            return str(path.resolve().relative_to(self._cwd))
        except ValueError:
            return str(path)
