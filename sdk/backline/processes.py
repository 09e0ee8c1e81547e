"""The one place that starts and stops child processes (public: plugins that run
agents use it too).

Every process backline starts (an agent CLI, an MCP server, a helper) goes through
``spawn``, and every one it stops goes through ``stop_process``: its own process
group (so the children it starts die with it), and a stop that escalates
SIGINT → SIGTERM → SIGKILL with a bound on each step. ``stop_process`` also
takes processes started by libraries (anyio's or asyncio's), and finishes its
work even when the task calling it is being cancelled: a close never leaves a
process running.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from .tasks import TaskScope

__all__ = ["STOP_STEP_TIMEOUT", "StoppableProcess", "spawn", "stop_process"]

STOP_STEP_TIMEOUT = 2.0
"""How long each step of ``stop_process`` waits for the process to exit."""


class StoppableProcess(Protocol):
    """What ``stop_process`` needs: asyncio's and anyio's processes both fit."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    def send_signal(self, sig: int, /) -> None: ...

    def kill(self) -> None: ...

    async def wait(self) -> int: ...


async def spawn(
    argv: Sequence[str],
    *,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    stdin: int | None = asyncio.subprocess.DEVNULL,
    stdout: int | None = asyncio.subprocess.PIPE,
    stderr: int | None = asyncio.subprocess.PIPE,
    **kwargs: Any,
) -> asyncio.subprocess.Process:
    """Start ``argv`` in a process group of its own (``stop_process`` signals the group).

    ``env`` replaces the environment when given. Raises ``FileNotFoundError`` with
    the program's name when it is not installed.
    """
    if not argv:
        raise ValueError("spawn() needs a program to run")
    try:
        return await asyncio.create_subprocess_exec(
            *argv,
            cwd=None if cwd is None else str(cwd),
            env=None if env is None else dict(env),
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            start_new_session=sys.platform != "win32",
            **kwargs,
        )
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{argv[0]!r} was not found: is it installed and on PATH?"
        ) from None


async def stop_process(
    process: StoppableProcess,
    *,
    interrupt_first: bool = False,
    step_timeout: float = STOP_STEP_TIMEOUT,
    group: bool = True,
) -> int | None:
    """Stop ``process`` within about ``3 * step_timeout`` seconds; return its exit code.

    Sends SIGINT first when ``interrupt_first`` (an agent CLI's "stop this turn"),
    then SIGTERM, then SIGKILL, waiting up to ``step_timeout`` after each. With
    ``group`` the signals go to the process group when the process leads one (as
    ``spawn`` makes it). Cancellation of the caller is held off until the process
    is gone, then re-raised: a close that is itself cancelled still stops it.
    """
    # The stop runs in a task of its own (a scope of this call: awaited below in every
    # case), so a cancellation of the caller cannot cut it short.
    scope = TaskScope("stop process")
    task = scope.create_task(_stop(process, interrupt_first, step_timeout, group), name="stop")
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        # Finish the stop (bounded) before letting the cancellation through.
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(asyncio.shield(task), timeout=3 * step_timeout + 1)
        raise


async def _stop(
    process: StoppableProcess, interrupt_first: bool, step_timeout: float, group: bool
) -> int | None:
    # Decided once, while the process is alive: signal its group only if it leads one.
    own_group = group and sys.platform != "win32" and _leads_group(process.pid)
    steps = [signal.SIGINT] if interrupt_first else []
    steps += [signal.SIGTERM, signal.SIGKILL]
    for sig in steps:
        if process.returncode is not None:
            break
        _signal(process, sig, own_group)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(process.wait(), timeout=step_timeout)
    if own_group:
        # Children the process left behind in its group go too.
        with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
            os.killpg(process.pid, signal.SIGKILL)
    return process.returncode


def _signal(process: StoppableProcess, sig: int, own_group: bool) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        if own_group:
            os.killpg(process.pid, sig)
        elif sig == signal.SIGKILL:
            process.kill()
        else:
            process.send_signal(sig)


def _leads_group(pid: int) -> bool:
    try:
        return os.getpgid(pid) == pid
    except OSError:
        return False
