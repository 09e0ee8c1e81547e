"""The repository's CLAUDE.md, read by the plugin and put in Claude Code's system prompt.

The CLI reads CLAUDE.md only when the ``project`` settings load, and those carry the
repository's hooks (shell commands). CLAUDE.md itself is plain instructions, so by
default the plugin reads it: ``CLAUDE.md`` and ``.claude/CLAUDE.md`` in the working
directory, only when the path resolves inside it (a symlink elsewhere is skipped),
each cut to ``MEMORY_MAX_CHARS``. Its ``@path`` imports are not followed (they may
name files anywhere); Claude Code can still read an imported file inside the folder.
"""

from __future__ import annotations

import logging
from pathlib import Path

logger = logging.getLogger("backline.claude_code")

MEMORY_FILES = ("CLAUDE.md", ".claude/CLAUDE.md")
"""The project memory files read, relative to the working directory."""
MEMORY_MAX_CHARS = 40_000
"""The most of each file put in the prompt (Claude Code warns past this size too)."""
CUT = "\n[... truncated: the rest of {name} is left out ({limit:,} characters at most)]"

HEADER = """
# The repository's instructions ({name})

The repository you work in has a {name} file, the project's instructions for \
Claude Code (written by its maintainers; `@path` imports in it were not expanded). \
Follow them as long as they do not conflict with the rules above.

{text}
"""


def project_memory(cwd: Path) -> str:
    """The text to append to the system prompt: each memory file found, or ""."""
    parts = []
    for name in MEMORY_FILES:
        text = _read_inside(cwd, name)
        if text:
            parts.append(HEADER.format(name=name, text=text.strip()))
    return "".join(parts)


def _read_inside(cwd: Path, name: str) -> str | None:
    path = cwd / name
    try:
        resolved = path.resolve(strict=True)
    except (OSError, RuntimeError):
        return None  # missing, or a symlink loop
    if not resolved.is_relative_to(cwd.resolve()):
        logger.warning("not reading %s: it leads outside %s, to %s", name, cwd, resolved)
        return None
    if not resolved.is_file():
        return None
    try:
        with resolved.open("rb") as f:
            raw = f.read(MEMORY_MAX_CHARS * 4 + 1)  # the cap, in any UTF-8, and one more
    except OSError as e:
        logger.warning("could not read %s: %s", path, e)
        return None
    text = raw.decode("utf-8", errors="replace")
    if len(text) > MEMORY_MAX_CHARS or len(raw) > MEMORY_MAX_CHARS * 4:
        text = text[:MEMORY_MAX_CHARS] + CUT.format(name=name, limit=MEMORY_MAX_CHARS)
    return text


__all__ = ["MEMORY_FILES", "MEMORY_MAX_CHARS", "project_memory"]
