"""Owned tasks: every task has a scope that cancels and awaits it, within a bound.

The ground every layer of backline builds on, and public: a plugin that starts
tasks of its own starts them in a ``TaskScope`` (``scope.create_task(...)``) and
closes the scope on its one close path (``await scope.aclose()``), so nothing it
starts outlives it and a close never hangs. ``Signal`` wakes waiters that re-check
a condition; ``cancel_and_wait``, ``wait_cancelled``, ``when_empty``,
``done_within`` and ``first_completed`` are the bounded waits the runtime uses.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

logger = logging.getLogger("backline")

T = TypeVar("T")

__all__ = [
    "CLOSE_TIMEOUT",
    "CancelWhenDone",
    "Signal",
    "TaskScope",
    "cancel_and_wait",
    "done_within",
    "emptied",
    "first_completed",
    "forget_cancellation",
    "wait_cancelled",
    "when_empty",
]

CLOSE_TIMEOUT = 5.0


class TaskScope:
    """Owns tasks. ``aclose()`` cancels them all and waits, never longer than ``timeout``.

    Unlike ``asyncio.TaskGroup``, one failing task does not cancel its siblings
    (speeches and tools are independent), and a task that ignores cancellation
    cannot make close hang: it is logged and abandoned after the bound.

    A task that fails is logged as an error: nobody else would hear of it. A scope
    whose owner awaits its tasks and reads how they ended (a call raced against a
    timeout, a close shared by its callers) is made with ``log_failures=False``:
    a failure there is the owner's result, not news (it is logged at debug level).
    """

    __slots__ = ("_closed", "_log_failures", "_name", "_one", "_tasks", "_when_empty")

    def __init__(self, name: str, *, log_failures: bool = True) -> None:
        self._name = name
        self._log_failures = log_failures
        # Most scopes of an idle session hold one task or none: one task is kept in a
        # slot of its own, and the set (about 200 bytes) is made at a second one.
        self._one: asyncio.Task[Any] | None = None
        self._tasks: set[asyncio.Task[Any]] | None = None
        self._closed = False
        self._when_empty: _WhenEmpty | None = None  # a close waiting for its last task

    @property
    def closed(self) -> bool:
        return self._closed

    def __len__(self) -> int:
        return (self._one is not None) + (len(self._tasks) if self._tasks is not None else 0)

    def _all(self) -> list[asyncio.Task[Any]]:
        """Its tasks that have not ended (a new list)."""
        tasks = list(self._tasks) if self._tasks else []
        if self._one is not None:
            tasks.append(self._one)
        return tasks

    def create_task(
        self,
        coro: Coroutine[Any, Any, T],
        *,
        name: str | None = None,
        done: Callable[[asyncio.Task[T]], None] | None = None,
    ) -> asyncio.Task[T]:
        """A task of this scope; ``done(task)`` runs when it ends, in the scope's own
        done callback (one loop callback per task, not two)."""
        if self._closed:
            coro.close()
            raise RuntimeError(f"{self._name} is closed")
        # One copy of the caller's context, for the task and its done callback
        # (add_done_callback would make another: one object per task, kept as long
        # as the task runs).
        context = contextvars.copy_context()
        task = asyncio.get_running_loop().create_task(coro, name=name, context=context)
        if self._one is None:
            self._one = task
        else:
            if self._tasks is None:
                self._tasks = set()
            self._tasks.add(task)
        if done is None:
            task.add_done_callback(self._discard, context=context)
        else:

            def ended(t: asyncio.Task[T]) -> None:
                self._discard(t)
                done(t)

            task.add_done_callback(ended)
        return task

    def _discard(self, task: asyncio.Task[Any]) -> None:
        tasks = self._tasks
        if self._one is task:
            self._one = None
        elif tasks is not None:
            tasks.discard(task)
        if task.cancelled():
            forget_cancellation(task)
        elif task.exception() is not None:
            exc = task.exception()
            level = logging.ERROR if self._log_failures else logging.DEBUG
            logger.log(level, "task %s of %s failed", task.get_name(), self._name, exc_info=exc)
        if self._when_empty is not None and self._one is None and not tasks:
            self._when_empty(self)

    def live(self) -> bool:
        """Whether one of its tasks has not finished."""
        return any(not t.done() for t in self._all())

    def cancel(self, spare: tuple[asyncio.Task[Any] | None, ...] = ()) -> None:
        """Close the scope and cancel its tasks (the calling task too) but ``spare``
        (tasks already told to stop), without waiting: ``when_empty`` waits."""
        self._closed = True
        for t in self._all():
            if not t.done() and t not in spare:
                t.cancel()

    async def aclose(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Cancel every task and wait for them, at most ``timeout`` seconds."""
        self._closed = True
        if self._one is not None or self._tasks:
            await cancel_and_wait(self._all(), timeout=timeout, owner=self._name)


def forget_cancellation(task: asyncio.Task[Any]) -> None:
    """Drop the ``CancelledError`` a cancelled task keeps, with its traceback and the
    frames of every coroutine it went through (a dozen objects per task, kept as long
    as the task is: an agent's speech loop lives as long as its session). Asking a
    cancelled future for its exception hands that error over (CPython's C and Python
    futures alike); a later ``result()`` raises a fresh one."""
    try:
        task.exception()
    except asyncio.CancelledError:
        pass


async def cancel_and_wait(
    tasks: set[asyncio.Task[Any]] | list[asyncio.Task[Any]],
    *,
    timeout: float = CLOSE_TIMEOUT,
    owner: str = "backline",
) -> None:
    """Cancel ``tasks`` (except the caller) and wait for them, bounded by ``timeout``."""
    me = asyncio.current_task()
    pending = [t for t in tasks if t is not me and not t.done()]
    if not pending:
        return
    for t in pending:
        t.cancel()
    _, still = await _shielded_wait(pending, timeout)
    for t in still:
        logger.warning(
            "%s: task %s ignored cancellation; abandoned after %.1fs", owner, t.get_name(), timeout
        )


async def wait_cancelled(
    tasks: list[asyncio.Task[Any]], *, timeout: float = CLOSE_TIMEOUT, owner: str = "backline"
) -> None:
    """Wait for tasks cancelled earlier, bounded by ``timeout``, without cancelling them
    again (one may be running its cleanup); like ``cancel_and_wait`` otherwise."""
    pending = [t for t in tasks if not t.done()]
    if not pending:
        return
    _, still = await _shielded_wait(pending, timeout)
    for t in still:
        logger.warning(
            "%s: task %s ignored cancellation; abandoned after %.1fs", owner, t.get_name(), timeout
        )


class _AllDone:
    """Resolves ``waiter`` once every task is done, or at the timer (one object, not
    closures and their cells: thousands of sessions may close at once)."""

    __slots__ = ("left", "waiter")

    def __init__(self, tasks: list[asyncio.Task[Any]], waiter: asyncio.Future[None]) -> None:
        self.left = len(tasks)  # each registration of the callback is called once
        self.waiter = waiter

    def __call__(self, task: asyncio.Task[Any] | None = None) -> None:
        if task is not None:
            self.left -= 1
            if self.left > 0:
                return
        if not self.waiter.done():
            self.waiter.set_result(None)


# The context the bound's timer runs in (``call_later`` would copy the caller's: one
# object per close); what it calls reads no context variable.
_BOUND_CONTEXT = contextvars.Context()


class _WhenEmpty:
    """``when_empty``'s state: one object, called by each scope as it empties (its
    last task's done callback) and by the timer of the bound."""

    __slots__ = ("left", "owner", "scopes", "then", "timeout", "timer")

    def __init__(
        self, scopes: list[TaskScope], then: Callable[[], None], timeout: float, owner: str
    ) -> None:
        self.scopes = scopes
        self.then: Callable[[], None] | None = then
        self.timeout = timeout
        self.owner = owner
        self.left = len(scopes)
        for scope in scopes:
            scope._when_empty = self
        loop = asyncio.get_running_loop()
        self.timer = loop.call_later(timeout, self, context=_BOUND_CONTEXT)

    def __call__(self, scope: TaskScope | None = None) -> None:
        if scope is not None:
            scope._when_empty = None
            self.left -= 1
            if self.left > 0:
                return
        then = self.then
        if then is None:
            return
        self.then = None
        self.timer.cancel()
        for s in self.scopes:
            if s._when_empty is self:  # the bound: what is still running is abandoned
                s._when_empty = None
                for t in s._all():
                    if not t.done():
                        logger.warning(
                            "%s: task %s ignored cancellation; abandoned after %.1fs",
                            self.owner,
                            t.get_name(),
                            self.timeout,
                        )
        self.scopes = []
        then()


def when_empty(
    scopes: list[TaskScope],
    then: Callable[[], None],
    *,
    timeout: float = CLOSE_TIMEOUT,
    owner: str = "backline",
) -> None:
    """Call ``then()`` once every one of ``scopes`` (closed and cancelled: ``cancel()``)
    has no task left, or after ``timeout`` seconds (the tasks still running are logged
    and abandoned, as ``cancel_and_wait`` does); at once, from here, if they are empty.

    A wait without a task: no coroutine waits, and no callback is added to any task
    (each scope's own done callback counts its last task down), one timer bounds it:
    thousands of sessions may close at once. ``then`` runs from the event loop, from
    the done callback of the last task to end (that task's later callbacks run after
    it); it must not raise."""
    waiting = [s for s in scopes if s._one is not None or s._tasks]
    if waiting:
        _WhenEmpty(waiting, then, timeout, owner)
    else:
        then()


async def emptied(
    scopes: list[TaskScope], *, timeout: float = CLOSE_TIMEOUT, owner: str = "backline"
) -> None:
    """Wait until every one of ``scopes`` (cancelled: ``cancel()``) has no task left,
    or ``timeout`` seconds (then what still runs is logged and abandoned): ``when_empty``
    as an awaitable. A caller that is cancelled stops waiting; the scopes' tasks were
    told to stop already."""
    if not any(s._one is not None or s._tasks for s in scopes):
        return
    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def done() -> None:
        if not waiter.done():
            waiter.set_result(None)

    when_empty(scopes, done, timeout=timeout, owner=owner)
    await waiter


async def _shielded_wait(
    tasks: list[asyncio.Task[Any]], timeout: float
) -> tuple[set[asyncio.Task[Any]], set[asyncio.Task[Any]]]:
    # A future woken by the tasks' done callbacks, and a timer for the bound (no task
    # and no asyncio.wait of its own). If the closer itself is cancelled, keep waiting
    # for the (already cancelled) tasks within the bound, then re-raise: close must
    # not leave tasks behind.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    waiter: asyncio.Future[None] = loop.create_future()
    wake = _AllDone(tasks, waiter)
    for t in tasks:
        t.add_done_callback(wake)
    timer = loop.call_at(deadline, wake)
    try:
        await waiter
    except asyncio.CancelledError:
        still = [t for t in tasks if not t.done()]
        if still:
            await asyncio.wait(still, timeout=max(0.0, deadline - loop.time()))
        raise
    finally:
        timer.cancel()
        for t in tasks:
            t.remove_done_callback(wake)
    done = {t for t in tasks if t.done()}
    return done, set(tasks) - done


async def done_within(fut: asyncio.Future[Any], timeout: float) -> bool:
    """Wait until ``fut`` is done, at most ``timeout`` seconds; never cancels it. True if
    it is done. A cancellation of the caller always propagates (3.11's
    ``asyncio.wait_for`` returns the result instead when both land together)."""
    if fut.done():
        return True
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()

    def wake(_: object = None) -> None:
        if not waiter.done():
            waiter.set_result(None)

    fut.add_done_callback(wake)
    timer = loop.call_later(timeout, wake)
    try:
        await waiter
    finally:
        timer.cancel()
        fut.remove_done_callback(wake)
    return fut.done()


class CancelWhenDone:
    """Cancels the current task when ``fut`` completes, until ``end()``; ``end()``
    takes that cancellation back (``Task.uncancel``) and says whether it happened.
    Another cancellation of the task (``cancelled_from_outside()``) stands.

    The callback runs from the loop, so the task is suspended at an await inside the
    guarded section when it fires: the cancellation lands there. ``fut`` itself is
    never cancelled (a speech's interrupt future, waited on by others too).
    """

    __slots__ = ("_fired", "_fut", "_live", "_task")

    def __init__(self, fut: asyncio.Future[Any], task: asyncio.Task[Any] | None = None) -> None:
        """``task``: the current task, when the caller knows it (saves looking it up)."""
        if task is None:
            task = asyncio.current_task()
            assert task is not None
        self._task = task
        self._fut: asyncio.Future[Any] | None = None
        self._live = False
        self._fired = False
        self.arm(fut)

    def arm(self, fut: asyncio.Future[Any]) -> None:
        """Guard again, on ``fut`` (a task that guards one section after another, as a
        speech loop does its model streams, keeps one guard)."""
        if self._live:
            self.end()
        self._fut = fut
        self._live = True
        self._fired = False
        fut.add_done_callback(self._done)  # (not kept: that would be a cycle)

    def _done(self, fut: asyncio.Future[Any]) -> None:
        # A callback the loop scheduled before an end() and runs after a re-arm is
        # for a future no longer guarded: it does nothing.
        if self._live and fut is self._fut:
            self._fired = True
            self._task.cancel()

    def end(self) -> bool:
        """Leave the guarded section; True if ``fut`` cancelled the task (that
        cancellation is taken back)."""
        if self._live:
            self._live = False
            fut, self._fut = self._fut, None
            assert fut is not None
            fut.remove_done_callback(self._done)  # (an equal bound method)
            if self._fired:
                self._task.uncancel()
        return self._fired

    def cancelled_from_outside(self) -> bool:
        """Whether a cancellation of the task that is not this guard's is pending."""
        return self._task.cancelling() > 0


async def first_completed(*futures: asyncio.Future[Any]) -> None:
    """Wait until one of ``futures`` is done; never cancels them.

    ``asyncio.wait(..., return_when=FIRST_COMPLETED)`` without its per-call set
    building and coroutine checks (it runs several times per turn).
    """
    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def wake(_: asyncio.Future[Any]) -> None:
        if not waiter.done():
            waiter.set_result(None)

    for f in futures:
        f.add_done_callback(wake)
    try:
        await waiter
    finally:
        for f in futures:
            f.remove_done_callback(wake)


class LazyDeadline:
    """One loop timer for a series of bounded waits that never overlap (a session's
    ``run()`` calls): each wait sets its deadline (``start``) and clears it (``end``);
    the timer is made once and, when it comes due before the current deadline (the
    wait it was made for ended, another began), re-armed for that one. A wait that
    ends in time costs no timer of its own. ``cancel()`` drops the timer (at close).
    """

    __slots__ = ("_deadline", "_expire", "_timer")

    def __init__(self) -> None:
        self._deadline: float | None = None
        self._expire: Callable[[], None] | None = None
        self._timer: asyncio.TimerHandle | None = None

    def start(self, timeout: float, expire: Callable[[], None]) -> None:
        loop = asyncio.get_running_loop()
        deadline = self._deadline = loop.time() + timeout
        self._expire = expire
        timer = self._timer
        if timer is None or timer.when() > deadline:
            if timer is not None:
                timer.cancel()
            self._timer = loop.call_at(deadline, self._due)

    def end(self, expire: Callable[[], None]) -> None:
        if self._expire is expire:  # (the wait's own: a later one may have begun)
            self._deadline = self._expire = None

    def cancel(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        self._deadline = self._expire = None

    def _due(self) -> None:
        self._timer = None
        deadline = self._deadline
        if deadline is None:
            return  # the wait ended in time
        loop = asyncio.get_running_loop()
        if loop.time() < deadline:
            self._timer = loop.call_at(deadline, self._due)  # a later wait's deadline
            return
        expire, self._deadline, self._expire = self._expire, None, None
        if expire is not None:
            expire()


class Signal:
    """Wakes waiters whenever something they depend on changes; they re-check."""

    __slots__ = ("_waiters",)

    def __init__(self) -> None:
        self._waiters: list[asyncio.Future[None]] = []

    def notify(self) -> None:
        waiters = self._waiters
        if not waiters:
            return  # the common case: nobody waits (no list churn on every refresh)
        if len(waiters) == 1:  # the next common one: no new list either
            w = waiters.pop()
            if not w.done():
                w.set_result(None)
            return
        self._waiters = []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    @property
    def waited(self) -> bool:
        """Whether a waiter is registered and not yet woken."""
        return bool(self._waiters)

    def waiter(self) -> asyncio.Future[None]:
        """A future resolved at the next ``notify()`` (registered at once, so a
        notification between a check and the await is never lost)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        return fut

    def discard(self, fut: asyncio.Future[None]) -> None:
        """Forget a waiter that is no longer awaited (its awaiting task was cancelled)."""
        if not fut.done():
            fut.cancel()
            try:
                self._waiters.remove(fut)
            except ValueError:
                pass

    async def wait(self) -> None:
        fut = self.waiter()
        try:
            await fut
        finally:
            self.discard(fut)

    async def wait_until(
        self,
        predicate: Callable[[], bool],
        *,
        timeout: float | None = None,
        stop: Callable[[], bool] | None = None,
        deadline: LazyDeadline | None = None,
    ) -> bool:
        """Wait until ``predicate()`` holds, re-checked at every ``notify()``: True then;
        False once ``stop()`` holds, or after ``timeout`` seconds.

        One timer bounds the whole wait (not one per wake-up: a conversation's turn
        wakes its waiters several times); with ``deadline`` (waits that never overlap,
        one after the other), the same loop timer serves every wait."""
        if predicate():
            return True
        if timeout is not None and timeout <= 0:
            return False
        waiter: asyncio.Future[None] | None = None
        expired = False

        def expire() -> None:
            nonlocal expired
            expired = True
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

        timer = None
        if timeout is not None:
            if deadline is not None:
                deadline.start(timeout, expire)
            else:
                timer = asyncio.get_running_loop().call_later(timeout, expire)
        try:
            while True:
                if predicate():
                    return True
                if (stop is not None and stop()) or expired:
                    return False
                waiter = self.waiter()
                try:
                    await waiter
                except asyncio.CancelledError:
                    self.discard(waiter)
                    raise
        finally:
            if timer is not None:
                timer.cancel()
            elif deadline is not None:
                deadline.end(expire)
