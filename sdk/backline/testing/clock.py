"""A virtual clock: timers run instantly and deterministically (built on ``looptime``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator


class VirtualClock:
    """The running loop's virtual time. ``now()`` is the loop time in seconds."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.start = loop.time()

    def now(self) -> float:
        return self._loop.time()

    @property
    def elapsed(self) -> float:
        """Virtual seconds since the clock was entered."""
        return self._loop.time() - self.start


@contextlib.contextmanager
def virtual_clock() -> Iterator[VirtualClock]:
    """Run the current event loop on virtual time inside the ``with`` block.

    Whenever every task is waiting on a timer, time jumps to the next timer, so
    ``await asyncio.sleep(15)`` returns at once and a 15 s timeout fires in
    order with everything else. Use it with in-memory I/O only: real sockets
    and subprocesses keep real time and will see timeouts expire early.
    """
    try:
        import looptime  # test-only: installed with backline[test]
    except ImportError:  # pragma: no cover - the test extra is missing
        raise ImportError(
            "virtual_clock needs the 'looptime' package: pip install 'backline[test]'"
        ) from None
    loop = asyncio.get_running_loop()
    if not isinstance(loop, asyncio.BaseEventLoop):  # pragma: no cover - uvloop etc.
        raise RuntimeError("virtual_clock needs a standard asyncio event loop")
    if isinstance(loop, looptime.LoopTimeEventLoop) and loop.looptime_on:
        yield VirtualClock(loop)
        return
    now = loop.time()
    if isinstance(loop, looptime.LoopTimeEventLoop):
        loop.setup_looptime(start=now)
        patched = loop
    else:
        patched = looptime.patch_event_loop(loop, start=now, _enabled=False)
    with patched.looptime_enabled():
        yield VirtualClock(patched)
