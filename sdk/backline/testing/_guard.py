"""The leak guard: a test fails when a task it created is still running after it, or
when anything reached an event loop's exception handler while it ran.

Used by the pytest plugin (``backline_guard`` fixture, marker and ini option); see
docs/testing.md. One ``LoopGuard`` per test:

- ``start()`` wraps the event-loop policy's ``new_event_loop`` for the test's
  duration, so every loop created meanwhile (``asyncio.run``, a runner, a thread's
  loop, ``looptime.new_event_loop``) gets the recording exception handler;
- ``watch(loop)`` installs the handler on a loop that already exists (the test's
  own) and remembers the tasks alive in it;
- ``leftover_tasks()`` (inside that loop, after every other fixture is torn down)
  lists the tasks created since ``watch`` that are still running;
- ``finish()`` collects garbage (so a task destroyed while pending, or an
  exception nobody retrieved, is reported now and to this test), stops recording
  and returns what went wrong, in words.
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Callable
from typing import Any

Handler = Callable[[asyncio.AbstractEventLoop, dict[str, Any]], object]

SETTLE_STEPS = 10
"""Loop steps a test's tasks get to finish after its teardown (no time passes)."""


class LoopGuard:
    def __init__(self) -> None:
        self.reports: list[dict[str, Any]] = []
        self._active = False
        self._installed: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()
        self._policy: asyncio.AbstractEventLoopPolicy | None = None
        self._own_attr: Any = None
        self._created: list[weakref.ref[asyncio.AbstractEventLoop]] = []
        self._watched: asyncio.AbstractEventLoop | None = None
        self._before: set[asyncio.Task[Any]] = set()

    # -- exception handlers ---------------------------------------------------------
    def start(self) -> None:
        self._active = True
        policy = asyncio.get_event_loop_policy()
        original = policy.new_event_loop
        self._own_attr = vars(policy).get("new_event_loop")

        def new_event_loop() -> asyncio.AbstractEventLoop:
            loop = original()
            self.install(loop)
            self._created.append(weakref.ref(loop))
            return loop

        policy.new_event_loop = new_event_loop  # type: ignore[method-assign]
        self._policy = policy

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        """Record what reaches ``loop``'s exception handler (then pass it on)."""
        if loop in self._installed:
            return
        self._installed.add(loop)
        previous = loop.get_exception_handler()

        def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
            if self._active:
                self.reports.append(context)
            if previous is not None:
                previous(loop, context)
            else:
                loop.default_exception_handler(context)

        loop.set_exception_handler(handler)

    def watch(self, loop: asyncio.AbstractEventLoop) -> None:
        """The test's own loop: record its exceptions, remember its tasks."""
        self.install(loop)
        self._watched = loop
        self._before = set(asyncio.all_tasks(loop))

    async def leftover_tasks(self) -> list[asyncio.Task[Any]]:
        """Tasks created since ``watch`` that are still running (a few loop steps
        later: a task cancelled at teardown gets to finish)."""
        me = asyncio.current_task()
        for _ in range(SETTLE_STEPS):
            left = [
                t
                for t in asyncio.all_tasks()
                if t is not me and t not in self._before and not t.done()
            ]
            if not left:
                return []
            await asyncio.sleep(0)
        return left

    def finish(self) -> list[str]:
        """Stop recording; what reached an exception handler, in words."""
        policy, self._policy = self._policy, None
        if policy is not None:
            if self._own_attr is not None:
                policy.new_event_loop = self._own_attr  # type: ignore[method-assign]
            else:
                vars(policy).pop("new_event_loop", None)
        # Tasks destroyed while pending and exceptions never retrieved are reported
        # when their task is freed. A young-generation pass is cheap and finds this
        # test's garbage; a full one (~0.1 s on a big heap) only when the test made
        # loops of its own, whose pending tasks die with them.
        own = any(ref() is not self._watched for ref in self._created)
        gc.collect() if own else gc.collect(1)
        self._active = False
        return [describe_report(r) for r in self.reports]


def describe_task(task: asyncio.Task[Any]) -> str:
    coro = task.get_coro()
    name = getattr(coro, "__qualname__", repr(coro))
    frames = task.get_stack(limit=1)
    where = f" at {frames[0].f_code.co_filename}:{frames[0].f_lineno}" if frames else ""
    return f"{task.get_name()} ({name}{where})"


def describe_report(context: dict[str, Any]) -> str:
    message = str(context.get("message", "unhandled exception"))
    exc = context.get("exception")
    if exc is not None:
        message += f": {type(exc).__name__}: {exc}"
    task = context.get("task") or context.get("future")
    if isinstance(task, asyncio.Task):
        message += f" (task {task.get_name()})"
    return message


def failure(tasks: list[asyncio.Task[Any]], reports: list[str]) -> str | None:
    """The guard's verdict for one test, or None when it is clean."""
    parts: list[str] = []
    if tasks:
        listed = "\n  ".join(describe_task(t) for t in tasks)
        parts.append(
            f"{len(tasks)} task(s) the test started still run after it "
            f"(give each an owner that awaits or cancels it):\n  {listed}"
        )
    if reports:
        listed = "\n  ".join(reports)
        parts.append(
            f"{len(reports)} report(s) reached the event loop's exception handler:\n  {listed}"
        )
    return "backline guard: " + "\n".join(parts) if parts else None
