"""Approvals by voice (``--approve ask``): a tool call that Claude Code's options do not
already allow is put to the user through ``ctx.ask``.

The CLI calls ``can_use_tool`` for exactly those calls (after the ``PreToolUse`` hook,
which confines every call to the folder first). The question names what will run: the
command of a Bash call, the file and the kind of edit of Write, Edit, MultiEdit and
NotebookEdit, the name and key inputs of any other tool. The answer is one of
``once``, ``always`` (an allow rule for the same tool and the same command, file or
inputs, kept for this conversation only: the worker's lifetime, never a settings
file) or ``no``; a plain "yes" counts as ``once``. Anything else, or no answer within
the bound, denies the call, and Claude Code reads why (with the user's own words).
Questions are asked one at a time, so a second identical call waits for the first
answer and an "always" spares it.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .confine import PATH_FIELDS

if TYPE_CHECKING:
    from backline import BackgroundContext

CHOICES = ("once", "always", "no")
COMMAND_CHARS = 200
"""A longer command is cut in the question (with an ellipsis); the rule keeps it whole."""
INPUT_CHARS = 60
"""Each input of another tool is cut to this in the question."""
YES = frozenset(
    {"yes", "yeah", "yep", "yup", "sure", "ok", "okay", "allow", "approve", "approved", "go"}
)
"""A plain yes (no choice named, none of ``REFUSALS``) allows the call once."""
REFUSALS = frozenset(
    {"no", "nope", "not", "don't", "dont", "never", "stop", "wait", "deny", "cancel"}
)
_WORD = re.compile(r"\w+(?:'\w+)?")


@dataclass(frozen=True)
class Request:
    """What a tool call would do, in words: ``what`` ("run `npm test`"), ``scope`` of
    an "always" ("this command"), and ``rule``, what an "always" remembers."""

    what: str
    scope: str
    rule: tuple[str, str]

    @property
    def question(self) -> str:
        return f"Claude Code wants to {self.what}. Allow once, always for {self.scope}, or no?"


@dataclass(frozen=True)
class Decision:
    """``allowed``, and for a refusal the ``message`` Claude Code reads; ``outcome`` is
    what the live state records: ``allowed once``, ``allowed always``, ``already
    allowed``, ``denied``, ``no answer`` or ``session ended``."""

    allowed: bool
    outcome: str
    message: str = ""


def describe(name: str, tool_input: Mapping[str, Any], root: Path) -> Request:
    """What the call does, for the question and the rule."""
    if name == "Bash":
        command = str(tool_input.get("command", ""))
        shown = _cut(" ".join(command.split()), COMMAND_CHARS)
        return Request(f"run `{shown}`", "this command", (name, command.strip()))
    fields = PATH_FIELDS.get(name)
    raw = tool_input.get(fields[0]) if fields else None
    if name in _EDITS and isinstance(raw, str) and raw:
        path = _resolve(raw, root)
        shown = _relative(path, root)
        return Request(_edit(name, tool_input, path, shown), "this file", (name, str(path)))
    inputs = ", ".join(
        f"{key} {_cut(' '.join(str(value).split()), INPUT_CHARS)}"
        for key, value in list(tool_input.items())[:3]
    )
    key = json.dumps(dict(tool_input), sort_keys=True, default=str)
    return Request(f"use {name}" + (f" ({inputs})" if inputs else ""), "these inputs", (name, key))


_EDITS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})


def _edit(name: str, tool_input: Mapping[str, Any], path: Path, shown: str) -> str:
    if name == "Write":
        return f"{'overwrite' if path.exists() else 'create'} {shown} (the whole file)"
    if name == "Edit":
        every = " everywhere in it" if tool_input.get("replace_all") else ""
        return f"edit {shown} (replace a passage{every})"
    if name == "MultiEdit":
        count = len(tool_input.get("edits") or [])
        return f"edit {shown} ({count} change{'' if count == 1 else 's'})"
    mode = str(tool_input.get("edit_mode") or "replace")
    verb = {"insert": "insert a cell into", "delete": "delete a cell of"}.get(
        mode, "change a cell of"
    )
    return f"{verb} the notebook {shown}"


def _resolve(raw: str, root: Path) -> Path:
    path = Path(raw).expanduser()
    return Path(path if path.is_absolute() else root / path).resolve()


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.casefold().replace("\u2019", "'")))


def plain_yes(text: str) -> bool:
    """A yes that names no choice ("yes", "sure, go ahead"), with no refusal in it."""
    said = _words(text)
    return bool(said & YES) and not said & REFUSALS


class Approvals:
    """The approvals of one conversation: its "always" rules, and one question at a time."""

    def __init__(self, ctx: BackgroundContext, root: Path, timeout: float) -> None:
        self.ctx = ctx
        self.root = root
        self.timeout = timeout
        self.rules: set[tuple[str, str]] = set()
        self._line = asyncio.Lock()  # a second identical call waits for the first answer

    async def decide(self, name: str, tool_input: Mapping[str, Any]) -> Decision:
        """Ask the user about one call (unless an "always" covers it)."""
        request = describe(name, tool_input, self.root)
        async with self._line:
            if request.rule in self.rules:
                return Decision(True, "already allowed")
            try:
                answer = await self.ctx.ask(request.question, choices=CHOICES, timeout=self.timeout)
            except RuntimeError:
                return Decision(False, "session ended", "The voice session has ended: not run.")
            if answer.choice == "always":
                self.rules.add(request.rule)  # before the next call in line looks
                return Decision(True, "allowed always")
        said = answer.text.strip()
        if answer.timed_out:
            return Decision(
                False,
                "no answer",
                f"The user did not answer within {self.timeout:g} seconds, so this was not "
                "run. Go on without it, or ask them with send_to_user if you need it.",
            )
        if answer.choice == "once" or (answer.choice is None and plain_yes(said)):
            return Decision(True, "allowed once")
        if answer.choice == "no":
            return Decision(
                False,
                "denied",
                f'The user said no ("{said}"): this was not run. Do not try it again '
                "unless they ask for it; go on without it.",
            )
        return Decision(
            False,
            "denied",
            f'The user did not allow this; they said: "{said}". It was not run: follow '
            "what they said.",
        )


__all__ = ["CHOICES", "Approvals", "Decision", "Request", "describe", "plain_yes"]
