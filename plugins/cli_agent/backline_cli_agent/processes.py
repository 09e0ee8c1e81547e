"""The agent's processes: one per task, or one persistent Claude Code (stream-json).

Both start with ``backline.processes.spawn`` (a process group of their own) and stop
with ``stop_process`` (bounded: SIGINT, SIGTERM, SIGKILL), also when the task that
runs them is cancelled: a closed conversation leaves no process behind. An output
line over the limit ends the run (``LineTooLong``): the process is stopped, never
left blocked on a pipe nobody reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backline.processes import STOP_STEP_TIMEOUT, spawn, stop_process
from backline.tasks import TaskScope

from .config import Launch, write_private

STDERR_TAIL_LINES = 20
"""How many last lines of the agent's stderr an error report quotes."""
INTERRUPT_TIMEOUT = 10.0
"""How long an interrupted Claude Code turn may take to end before its process is stopped."""
EXIT_TIMEOUT = 1.0
"""How long Claude Code may take to exit once its stdin closed, before it is stopped."""
STDERR_TIMEOUT = 1.0
"""How long the reader of a stopped process's stderr may take to end."""


LONG_STDERR_LINE = "(a stderr line longer than the limit was left out)"


class AgentExited(Exception):
    """The agent's process ended when it should not have (a crash)."""


class LineTooLong(Exception):
    """An output line of the agent was longer than ``max_line_bytes``; the message says
    so in words a person can hear."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"one line of its output was longer than {limit:,} bytes (the limit, "
            "max_line_bytes), so the run was stopped"
        )


class _Process:
    """A started agent process, its stderr tail, and how to stop it."""

    def __init__(self, process: asyncio.subprocess.Process, line_limit: int) -> None:
        self.process = process
        self.line_limit = line_limit
        self._tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self._scope = TaskScope(f"agent process {process.pid}")  # the stderr reader, until stop()
        self._stderr = self._scope.create_task(self._read_stderr(), name="agent stderr")

    @classmethod
    async def start(
        cls, launch: Launch, cwd: Path, env: Mapping[str, str], *, line_limit: int, stdin: bool
    ) -> _Process:
        """Start ``launch`` with ``env`` (the whole environment: nothing is inherited)
        and the launch's own variables over it."""
        process = await spawn(
            launch.argv,
            cwd=cwd,
            env={**env, **launch.env},
            stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
            limit=line_limit,
        )
        return cls(process, line_limit)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    async def _read_stderr(self) -> None:
        # Read to the end, whatever it holds: an agent blocked on a full stderr pipe
        # would never finish.
        stderr = self.process.stderr
        assert stderr is not None
        with contextlib.suppress(OSError):
            while True:
                try:
                    raw = await stderr.readline()
                except ValueError:  # longer than the limit: skipped (the reader drops it)
                    if not self._tail or self._tail[-1] != LONG_STDERR_LINE:
                        self._tail.append(LONG_STDERR_LINE)
                    continue
                if not raw:
                    return
                line = raw.decode(errors="replace").rstrip()
                if line:
                    self._tail.append(line)

    def stderr_tail(self) -> str:
        return "\n".join(self._tail)

    async def lines(self) -> AsyncIterator[str]:
        """The stdout lines, until it closes. Raises ``LineTooLong`` at a line over the
        limit (the caller stops the process)."""
        assert self.process.stdout is not None
        while True:
            try:
                raw = await self.process.stdout.readline()
            except ValueError:  # a line longer than the limit
                raise LineTooLong(self.line_limit) from None
            if not raw:
                return
            yield raw.decode(errors="replace").rstrip("\r\n")

    async def wait(self) -> int:
        code = await self.process.wait()
        await asyncio.wait([self._stderr], timeout=STDERR_TIMEOUT)  # its last lines
        return code

    async def stop(
        self, *, interrupt_first: bool = False, step_timeout: float = STOP_STEP_TIMEOUT
    ) -> int | None:
        """Stop it (bounded); finishes even when the caller is cancelled."""
        try:
            return await stop_process(
                self.process, interrupt_first=interrupt_first, step_timeout=step_timeout
            )
        finally:
            await self._scope.aclose(STDERR_TIMEOUT)


class _Agent:
    """What starts the agent's process: the launch, where, and the bound on a line."""

    def __init__(self, launch: Launch, cwd: Path, env: Mapping[str, str], line_limit: int) -> None:
        self._launch = launch
        self._cwd = cwd
        self._env = env
        self._line_limit = line_limit
        self._process: _Process | None = None

    async def _spawn(self, *, stdin: bool) -> _Process:
        self._process = await _Process.start(
            self._launch, self._cwd, self._env, line_limit=self._line_limit, stdin=stdin
        )
        return self._process


@dataclass(frozen=True)
class RunEnd:
    """How one run ended: its exit code, its stderr tail, and ``cut`` (why it was stopped
    early: an output line over the limit), or None."""

    code: int | None
    stderr: str
    cut: str | None = None


class TaskProcess(_Agent):
    """One run of an agent started per task: its task goes on its stdin or in a private
    file (removed after the run), then its output lines, then its exit code."""

    async def run(
        self, on_start: Callable[[int], None], on_line: Callable[[str], Awaitable[None]]
    ) -> RunEnd:
        """Run to the end (or to a line over the limit, then stop it)."""
        launch = self._launch
        if launch.prompt_file is not None:
            path, text = launch.prompt_file
            write_private(path, text)
        try:
            return await self._run(on_start, on_line)
        finally:
            if launch.prompt_file is not None:
                launch.prompt_file[0].unlink(missing_ok=True)

    async def _run(
        self, on_start: Callable[[int], None], on_line: Callable[[str], Awaitable[None]]
    ) -> RunEnd:
        task = self._launch.stdin
        process = await self._spawn(stdin=task is not None)
        # The task is written while the output is read: an agent that reads its stdin
        # late (or never) cannot block the reading.
        feeding = TaskScope(f"agent stdin {process.pid}")
        if task is not None:
            feeding.create_task(_feed(process, task), name="agent stdin")
        cut: str | None = None
        try:
            on_start(process.pid)
            try:
                async for line in process.lines():
                    await on_line(line)
            except LineTooLong as e:
                cut = str(e)
            else:
                await process.wait()
        finally:
            code = await process.stop()  # the exit code (it stops nothing that has exited)
            await feeding.aclose(STDERR_TIMEOUT)
        return RunEnd(code, process.stderr_tail(), cut)

    async def interrupt(self) -> None:
        """SIGINT first (an agent CLI's "stop this"), then SIGTERM, then SIGKILL."""
        if self._process is not None:
            await self._process.stop(interrupt_first=True)


async def _feed(process: _Process, text: str) -> None:
    """Write the task to the agent's stdin, then close it (the agent reads to its end)."""
    stdin = process.process.stdin
    assert stdin is not None
    with contextlib.suppress(OSError, RuntimeError):  # it exited without reading it all
        stdin.write(text.encode())
        await stdin.drain()
    with contextlib.suppress(OSError, RuntimeError):
        stdin.close()


Event = dict[str, Any]
INTERRUPT = {"subtype": "interrupt"}


class ClaudeProcess(_Agent):
    """Claude Code kept running for a conversation: one user message per task, read until
    its ``result``; a ``control_request`` interrupt ends a turn at once."""

    def __init__(self, launch: Launch, cwd: Path, env: Mapping[str, str], line_limit: int) -> None:
        super().__init__(launch, cwd, env, line_limit)
        self._turn_done = asyncio.Event()
        self._turn_done.set()
        self._requests = 0

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.returncode is None

    async def start(self) -> int:
        """Start the process; returns its pid."""
        return (await self._spawn(stdin=True)).pid

    async def turn(self, text: str, on_event: Callable[[Event], Awaitable[None]]) -> Event:
        """Send ``text`` and hand every event to ``on_event`` until the turn's
        ``result`` (returned). Raises ``AgentExited`` when the process ends first."""
        process = self._require()
        self._turn_done.clear()
        try:
            try:
                await self._write({"type": "user", "message": {"role": "user", "content": text}})
            except (OSError, RuntimeError):
                raise AgentExited(await self._exit_reason()) from None
            async for line in process.lines():
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # not an event (a stray line on stdout)
                if not isinstance(event, dict):
                    continue
                await on_event(event)
                if event.get("type") == "result":
                    return event
        finally:
            self._turn_done.set()
        raise AgentExited(await self._exit_reason())

    async def interrupt(self) -> None:
        """Ask Claude Code to stop the turn; stop the process if it does not in time."""
        if self._turn_done.is_set() or not self.alive:
            return
        self._requests += 1
        request_id = f"interrupt_{self._requests}"
        with contextlib.suppress(OSError, RuntimeError):
            await self._write(
                {"type": "control_request", "request_id": request_id, "request": INTERRUPT}
            )
        try:
            await asyncio.wait_for(self._turn_done.wait(), INTERRUPT_TIMEOUT)
        except TimeoutError:
            await self.close()

    async def close(self) -> None:
        """End the process (stdin closed, then stopped, bounded); it finishes even when
        the caller is cancelled (a session that closes runs this as it is cancelled)."""
        process, self._process = self._process, None
        if process is not None:
            await _finish(_close(process))

    def stderr_tail(self) -> str:
        return "" if self._process is None else self._process.stderr_tail()

    def _require(self) -> _Process:
        if self._process is None:
            raise AgentExited("Claude Code is not running")
        return self._process

    async def _write(self, message: Event) -> None:
        stdin = self._require().process.stdin
        assert stdin is not None
        stdin.write((json.dumps(message) + "\n").encode())
        await stdin.drain()

    async def _exit_reason(self) -> str:
        process = self._require()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(process.process.wait(), 2.0)
        code = process.returncode
        tail = process.stderr_tail().splitlines()
        detail = f": {tail[-1]}" if tail else ""
        return f"Claude Code exited (exit code {code}){detail}"


async def _close(process: _Process) -> None:
    stdin = process.process.stdin
    if stdin is not None:
        with contextlib.suppress(OSError, RuntimeError):
            stdin.close()
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(process.process.wait(), EXIT_TIMEOUT)  # it ends when stdin closes
    await process.stop(step_timeout=EXIT_TIMEOUT)


async def _finish(work: Coroutine[Any, Any, None]) -> None:
    """Run ``work`` to its end even if the caller is cancelled meanwhile (then re-raise)."""
    scope = TaskScope("closing the agent's process", log_failures=False)  # ``work`` raises here
    task = scope.create_task(work)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait([task])  # bounded: every step of the work is
        raise
    finally:
        await scope.aclose()  # only if cancelled again meanwhile: then it is cut (bounded)
