"""backline.processes: the one place that starts and stops child processes."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

import pytest

from backline.processes import spawn, stop_process

STUBBORN = """
import os, signal, subprocess, sys, time
for s in {signals}:
    signal.signal(s, signal.SIG_IGN)
GRANDCHILD = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
child = subprocess.Popen([sys.executable, "-c", GRANDCHILD])
print(child.pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0): read its state.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


async def _start(ignored: str) -> tuple[asyncio.subprocess.Process, int]:
    proc = await spawn([sys.executable, "-c", STUBBORN.format(signals=ignored)])
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 10)
    return proc, int(line)


async def _reap(pid: int) -> None:
    # The grandchild is re-parented to init (or a subreaper); wait until it is gone.
    for _ in range(200):
        if not _alive(pid):
            return
        await asyncio.sleep(0.01)


@pytest.mark.skipif(sys.platform == "win32", reason="process groups")
async def test_stop_escalates_to_kill_and_takes_the_group_along() -> None:
    proc, grandchild = await _start("[signal.SIGINT, signal.SIGTERM]")
    code = await stop_process(proc, interrupt_first=True, step_timeout=0.2)
    assert code == -signal.SIGKILL
    await _reap(grandchild)
    assert not _alive(grandchild)


async def test_stop_returns_at_the_first_signal_that_works() -> None:
    proc, grandchild = await _start("[]")
    code = await stop_process(proc, interrupt_first=True, step_timeout=5)
    assert code == -signal.SIGINT or code == 1  # Python turns SIGINT into KeyboardInterrupt
    await _reap(grandchild)
    assert not _alive(grandchild)


async def test_a_cancelled_stop_still_stops_the_process() -> None:
    proc, grandchild = await _start("[signal.SIGINT, signal.SIGTERM]")
    stopping = asyncio.ensure_future(stop_process(proc, step_timeout=0.2))
    await asyncio.sleep(0)  # the stop is under way
    stopping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stopping
    assert proc.returncode is not None
    await _reap(grandchild)
    assert not _alive(grandchild)


async def test_stopping_an_exited_process_is_a_no_op() -> None:
    proc = await spawn([sys.executable, "-c", "pass"])
    await proc.wait()
    assert await stop_process(proc) == 0


async def test_a_missing_program_says_what_is_missing() -> None:
    with pytest.raises(FileNotFoundError, match="no-such-agent-cli"):
        await spawn(["no-such-agent-cli"])
