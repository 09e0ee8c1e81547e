"""The errors of the plugin system, and how a plugin's failure is worded."""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Iterable
from typing import Any

from ._isolation import PluginTimeout


class PluginError(Exception):
    """Plugins failed to load in strict mode, or a plugin could not be registered."""


class UnknownNameError(LookupError):
    """No loaded plugin registered that name (the message lists the available ones)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def closest(name: str, names: Iterable[str]) -> str | None:
    """The one of ``names`` that ``name`` most likely meant: the same but for case,
    ``-`` and ``_`` (``claude-code`` for ``claude_code``), else the closest spelling."""
    known = list(names)
    key = _spelling(name)
    same = [n for n in known if _spelling(n) == key]
    if same:
        return same[0]
    close = difflib.get_close_matches(key, [_spelling(n) for n in known], n=1, cutoff=0.6)
    return next((n for n in known if close and _spelling(n) == close[0]), None)


def _spelling(name: str) -> str:
    return name.lower().replace("-", "_")


class HookFailed(Exception):
    """A plugin's hook raised (or did not finish in time); ``error`` is what it raised."""

    def __init__(self, hook: str, error: BaseException, *, timed_out: bool = False) -> None:
        super().__init__(str(error) if timed_out else f"{hook} raised {describe(error)}")
        self.hook = hook
        self.error = error


def describe(error: BaseException) -> str:
    """``Type: message`` (our own wrappers: just the message)."""
    if isinstance(error, (HookFailed, PluginTimeout)):
        return str(error)
    message = str(error)
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def reject_awaitables(hook: str, results: Iterable[Any]) -> None:
    """Refuse a hook implemented with ``async def`` (its coroutine is closed, never run)."""
    for result in results:
        if inspect.isawaitable(result):
            close = getattr(result, "close", None)
            if close is not None:
                close()
            raise TypeError(f"{hook} must be a plain function (def), not async def")
