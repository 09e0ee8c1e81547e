"""Confinement: every tool call Claude Code makes stays inside its working directory.

``FolderGuard.check(tool, input)`` is the one rule. It runs twice per call, from the
two places the CLI consults (see ``ClaudeCodeWorker._options``):

- a ``PreToolUse`` hook, which the CLI calls before *every* tool use, whatever its
  permission mode and allow rules (a deny here cannot be overridden);
- the ``can_use_tool`` permission callback, for the calls the CLI would otherwise
  ask a person about (there is none behind a voice agent).

A path is checked after it is resolved the way the operating system will use it:
relative to the folder, ``~`` expanded to the CLI's home, ``..`` collapsed and every
symlink followed. A refusal is a sentence the model reads (it names the folder).
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

#: The file arguments of Claude Code's built-in tools.
PATH_FIELDS: dict[str, tuple[str, ...]] = {
    "Read": ("file_path",),
    "Write": ("file_path",),
    "Edit": ("file_path",),
    "MultiEdit": ("file_path",),
    "NotebookEdit": ("notebook_path",),
    "NotebookRead": ("notebook_path",),
    "Glob": ("path",),
    "Grep": ("path",),
    "LS": ("path",),
}
#: Keys checked as paths on any other tool (a tool added to ``allowed_tools``).
_GENERIC_PATH_KEYS = frozenset({"path", "file", "directory", "dir", "cwd"})
_GLOB_MAGIC = re.compile(r"[*?\[{]")
_PARENT_IN_PATTERN = re.compile(r"(^|[/{,])\.\.($|[/},])")


class FolderGuard:
    """Allows a tool call only when it names a permitted tool and every path it
    touches resolves inside ``root``.

    ``home`` is what ``~`` means to the CLI (its ``HOME``). ``permitted`` are the
    tool names Claude Code may call at all.
    """

    def __init__(self, root: Path, home: Path, permitted: Collection[str]) -> None:
        self.root = Path(os.path.realpath(root))
        self.home = Path(home)
        self.permitted = frozenset(permitted)

    def check(self, tool: str, tool_input: Mapping[str, Any]) -> str | None:
        """``None`` when the call may run, else why not (for the model to read)."""
        if tool not in self.permitted:
            return (
                f"{tool} is not available here. Use only these tools: "
                f"{', '.join(sorted(self.permitted))}."
            )
        for key in self._path_keys(tool, tool_input):
            value = tool_input.get(key)
            if value is None or value == "":
                continue
            if not isinstance(value, str):
                return f"Refused: {tool} argument {key} must be a path (text)."
            problem = self._outside(value)
            if problem is not None:
                return problem
        if tool == "Glob":
            return self._check_pattern(str(tool_input.get("pattern") or ""))
        return None

    # -- paths -------------------------------------------------------------------
    def resolve(self, raw: str) -> Path | None:
        """Where ``raw`` leads (symlinks followed), or None if it cannot be told."""
        if "\x00" in raw:
            return None
        if raw.startswith("~"):
            head, sep, rest = raw.partition("/")
            if head != "~":
                return None  # ~user: another user's home, never inside the folder
            path = self.home / rest if sep else self.home
        else:
            path = Path(raw)
        if not path.is_absolute():
            path = self.root / path
        return Path(os.path.realpath(path))

    def contains(self, path: Path) -> bool:
        return path == self.root or self.root in path.parents

    def _outside(self, raw: str) -> str | None:
        resolved = self.resolve(raw)
        if resolved is not None and self.contains(resolved):
            return None
        where = "" if resolved is None or str(resolved) == raw else f" (it leads to {resolved})"
        return (
            f"Refused: {raw} is outside the working directory {self.root}{where}. "
            f"You may only read, search and change files inside {self.root}; "
            "do not try other paths to reach it."
        )

    def _path_keys(self, tool: str, tool_input: Mapping[str, Any]) -> tuple[str, ...]:
        known = PATH_FIELDS.get(tool)
        if known is not None:
            return known
        return tuple(k for k in tool_input if k in _GENERIC_PATH_KEYS or k.endswith("_path"))

    def _check_pattern(self, pattern: str) -> str | None:
        """A Glob pattern searches from its own root when absolute (or ``~``)."""
        if _PARENT_IN_PATTERN.search(pattern):
            return (
                f"Refused: the pattern {pattern!r} uses '..' to reach outside the working "
                f"directory {self.root}. Search only inside it."
            )
        if pattern.startswith(("/", "~")):
            parts: list[str] = []
            for part in pattern.split("/"):
                if _GLOB_MAGIC.search(part):
                    break
                parts.append(part)
            return self._outside("/".join(parts) or "/")
        return None


def deny_output(reason: str) -> dict[str, Any]:
    """A ``PreToolUse`` hook answer that refuses the call; the model reads ``reason``."""
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }


__all__ = ["PATH_FIELDS", "FolderGuard", "deny_output"]
