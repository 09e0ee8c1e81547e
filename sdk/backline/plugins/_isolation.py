"""Running a plugin's code at load time, isolated: bounded in time, every exception
caught, and its writes to ``sys.stdout`` kept off the real stdout.

A plugin's import (and each registration hook) runs in a daemon thread that the
loader waits on for at most ``Limits.plugin_load_timeout``. The thread catches
``BaseException``, so ``sys.exit()``, ``KeyboardInterrupt`` or a custom
``BaseException`` raised by a plugin fail that plugin only, while a real Ctrl-C
still reaches the main thread (which is only waiting). An import cannot be
cancelled: one that does not finish in time is abandoned, still running, and the
plugin is marked failed; the thread is a daemon, so it never holds up exit.

While plugins load, ``sys.stdout`` is a router: what a plugin's thread prints is
kept (up to ``Limits.max_plugin_output_chars``) and reported with the plugin; every
other thread writes through as usual. Writes that bypass ``sys.stdout`` (to file
descriptor 1 directly, from C code or a child process) are not caught.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TextIO, TypeVar

T = TypeVar("T")


class PluginTimeout(Exception):
    """A plugin's code did not finish within its time bound (it may still be running)."""


class _Capture:
    """What one plugin printed, up to ``limit`` characters (the rest is counted)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._parts: list[str] = []
        self._kept = 0
        self.total = 0
        self._lock = threading.Lock()

    def write(self, text: str) -> None:
        with self._lock:
            self.total += len(text)
            room = self._limit - self._kept
            if room > 0:
                piece = text[:room]
                self._parts.append(piece)
                self._kept += len(piece)

    def text(self) -> str:
        with self._lock:
            return "".join(self._parts)


class _StdoutRouter:
    """A ``sys.stdout`` that sends a plugin thread's writes to that plugin's capture."""

    def __init__(self, target: TextIO) -> None:
        self._target = target
        self._routes: dict[int, _Capture] = {}

    def route(self, capture: _Capture) -> None:
        self._routes[threading.get_ident()] = capture

    def unroute(self) -> None:
        self._routes.pop(threading.get_ident(), None)

    def write(self, text: str) -> int:
        capture = self._routes.get(threading.get_ident())
        if capture is None:
            return self._target.write(text)
        capture.write(text)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if threading.get_ident() not in self._routes:
            self._target.flush()

    def __getattr__(self, name: str) -> Any:  # encoding, isatty, fileno, buffer ...
        return getattr(self._target, name)


@dataclass
class Outcome(Generic[T]):
    """How a plugin's code ran: its value, or the error it raised (or a timeout), and
    what it printed (``printed``, cut at the limit; ``printed_chars`` is the full size)."""

    value: T | None = None
    error: BaseException | None = None
    printed: str = ""
    printed_chars: int = 0


class Isolation:
    """Runs plugin code bounded and isolated; ``stdout()`` routes prints while loading."""

    def __init__(self, *, seconds: float, output_chars: int) -> None:
        self.seconds = seconds
        self.output_chars = output_chars
        self._router: _StdoutRouter | None = None

    @contextlib.contextmanager
    def stdout(self) -> Iterator[None]:
        """Route plugin threads' prints (nests; restores ``sys.stdout`` if still ours)."""
        if self._router is not None:
            yield
            return
        router = _StdoutRouter(sys.stdout)
        self._router = router
        sys.stdout = router
        try:
            yield
        finally:
            self._router = None
            if sys.stdout is router:
                sys.stdout = router._target

    def run(self, fn: Callable[[], T], *, what: str) -> Outcome[T]:
        """Run ``fn()`` in a daemon thread; wait at most ``seconds``.

        ``what`` names the work in a timeout's message ("importing mod").
        """
        result: Outcome[T] = Outcome()  # filled by the thread
        capture = _Capture(self.output_chars)
        router = self._router
        done = threading.Event()
        context = contextvars.copy_context()

        def target() -> None:
            if router is not None:
                router.route(capture)
            try:
                result.value = context.run(fn)
            except BaseException as e:  # a plugin's SystemExit is its failure
                result.error = e
            finally:
                if router is not None:
                    router.unroute()
                done.set()

        thread = threading.Thread(target=target, name=f"backline plugin: {what}", daemon=True)
        thread.start()
        if done.wait(self.seconds):
            outcome: Outcome[T] = Outcome(result.value, result.error)
        else:  # still running: it keeps ``result``, the caller gets its own record
            outcome = Outcome(
                error=PluginTimeout(
                    f"{what} did not finish within {self.seconds:g} s, so the plugin was "
                    "skipped (it may hang while loading; on a slow machine, raise the bound "
                    "with BACKLINE_PLUGIN_LOAD_TIMEOUT)"
                )
            )
        outcome.printed = capture.text()
        outcome.printed_chars = capture.total
        return outcome
