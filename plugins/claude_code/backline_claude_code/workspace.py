"""Before Claude Code edits: is its folder a git repository, and a clean one?

``check_git(folder)`` asks the real ``git`` (bounded, with no optional locks and no
fsmonitor: a folder's own git configuration runs nothing). The result reads three
ways: ``state`` for the live state, ``heads_up(agent)`` for the one sentence said
at start (nothing when the tree is clean), and ``refusal(...)`` when a clean tree is
required and this one is not.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backline.processes import spawn, stop_process

GIT_TIMEOUT = 10.0
"""How long one git command may take before the check gives up (a huge repository)."""


@dataclass(frozen=True)
class GitCheck:
    """What git says about ``folder``: ``repository`` True or False, or None when it
    could not tell (``problem`` says why); ``changes``: uncommitted changes (modified,
    staged, deleted and untracked paths) inside the folder."""

    folder: Path
    repository: bool | None
    changes: int = 0
    problem: str | None = None

    @property
    def clean(self) -> bool:
        return self.repository is True and self.changes == 0

    @property
    def summary(self) -> str:
        """For the live state: ``clean``, ``3 uncommitted changes``, ``not a git
        repository`` or ``not checked: git is not installed``."""
        if self.repository is None:
            return f"not checked: {self.problem}"
        if not self.repository:
            return "not a git repository"
        if self.changes == 0:
            return "clean"
        return f"{self.changes} uncommitted change{'' if self.changes == 1 else 's'}"

    @property
    def state(self) -> dict[str, Any]:
        """For the live state: ``{"repository": true | false | null,
        "uncommitted_changes": N, "summary": "..."}`` (an object: a front end's one-line
        view leaves it out; the heads-up sentence says what matters)."""
        return {
            "repository": self.repository,
            "uncommitted_changes": self.changes,
            "summary": self.summary,
        }

    def heads_up(self, agent: str) -> str | None:
        """The sentence said when the session starts, or None for a clean tree."""
        if self.repository is None:
            return (
                f"Heads up: git could not check {self.folder} ({self.problem}), so "
                f"{agent}'s changes may not be undoable with git."
            )
        if not self.repository:
            return (
                f"Heads up: {self.folder} is not a git repository, so changes cannot be "
                "undone with git."
            )
        if self.changes:
            return (
                f"Heads up: {self.folder} has {self.summary}, so {agent}'s edits will mix "
                "with them."
            )
        return None

    def refusal(self, agent: str, option: str) -> str | None:
        """Why ``agent`` may not start editing when a clean tree is required (``option``
        names the setting), or None when it may."""
        if self.clean:
            return None
        if self.repository is None:
            why, fix = f"git could not check it ({self.problem})", "fix that"
        elif not self.repository:
            why, fix = "it is not a git repository", "make it one (git init, then commit)"
        else:
            why, fix = f"it has {self.summary}", "commit or stash them"
        return (
            f"{agent} will not start editing {self.folder}: {why}, and a clean git tree is "
            f"required ({option}). To go on, {fix}; the next message checks again."
        )


async def check_git(folder: Path, *, timeout: float = GIT_TIMEOUT) -> GitCheck:
    """Ask git whether ``folder`` is inside a work tree, and how many paths in it have
    uncommitted changes."""
    try:
        code, out, err = await _git(folder, "rev-parse", "--is-inside-work-tree", timeout=timeout)
        if code != 0 or out.strip() != "true":
            if code == 0 or "not a git repository" in err:
                return GitCheck(folder, False)  # outside a repository, or inside .git
            return GitCheck(folder, None, problem=_last_line(err, "git rev-parse failed"))
        code, out, err = await _git(
            folder, "status", "--porcelain=v1", "-z", "--untracked-files=normal", "--", ".",
            timeout=timeout,
        )  # fmt: skip
        if code != 0:
            return GitCheck(folder, None, problem=_last_line(err, "git status failed"))
        return GitCheck(folder, True, changes=_count_entries(out))
    except FileNotFoundError:
        return GitCheck(folder, None, problem="git is not installed")
    except TimeoutError:
        return GitCheck(folder, None, problem=f"git took longer than {timeout:g} seconds")


def _count_entries(porcelain: str) -> int:
    """Entries of ``git status --porcelain -z``: a rename or copy carries its old path
    as one more field."""
    fields = porcelain.split("\0")
    count = index = 0
    while index < len(fields):
        entry = fields[index]
        index += 1
        if len(entry) < 4:
            continue
        count += 1
        if entry[0] in "RC":
            index += 1
    return count


def _last_line(text: str, default: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else default


async def _git(folder: Path, *args: str, timeout: float) -> tuple[int, str, str]:
    # No inherited GIT_DIR & co. (they would point git elsewhere), no optional locks (a
    # status never blocks the user's own git), and no fsmonitor: a repository's
    # configuration could name a program for it.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0")
    argv = ["git", "-c", "core.fsmonitor=false", "-C", str(folder), *args]
    process = await spawn(argv, env=env)
    try:
        async with asyncio.timeout(timeout):
            out, err = await process.communicate()
    finally:
        await stop_process(process)  # nothing to stop once it exited
    assert process.returncode is not None
    return process.returncode, out.decode(errors="replace"), err.decode(errors="replace")
