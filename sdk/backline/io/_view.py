"""View rules shared by the front ends (console, web): how state and speakers read."""

from __future__ import annotations

import re
from typing import Any

from ..background import ASKING
from ..limits import DEFAULT_LIMITS
from ..llm.tool_output import json_snapshot

UPDATE_SOURCES = frozenset({"background_reply", "tool_reply"})
"""Speech sources that relay work done in the background (shown as updates)."""

NOTE_WIDTH = 160
FIELD_CHARS = 40
"""A text field of a state up to this long is shown in a state's line; a longer one
(a task, a question, a path) only on the web card and through ``backline_state``."""

# -- the state convention (docs/background.md): keys any background may report ------------
HEADLINE = "status"
"""Text: what the background is doing, in a few words. Heads the line."""
PHASE = "phase"
"""Text: the stage of a longer job; read after the headline."""
ACTIVITY = "recent_activity"
"""A list of short lines, newest last: the newest reads after the headline, in place
of ``phase``."""
CHANGED = "files_changed"
"""A list of paths (files the background changed): read as a count."""
LINKS = "links"
"""Label -> URL or file path: shown in full, never cut."""
# ASKING ("asking"): the question a background waits on (``ctx.ask`` adds it while it
# waits): leads the line, never cut.
CONVENTION_KEYS = frozenset({HEADLINE, PHASE, ACTIVITY, CHANGED, LINKS, ASKING})
"""Keys read by their meaning; any other key reads as a count (a whole number) or a
short field (a short text or a fraction)."""


def summarize_state(state: Any, width: int = 70) -> str:
    """One readable line for a background's state, following the state convention
    (docs/background.md), whichever background reports it: a dict's ``status`` is the
    headline, then the newest ``recent_activity`` entry (or else ``phase``), then
    ``files_changed`` as a count; whole numbers are counts (``sources_read: 6`` reads
    "sources read 6"); other keys with a short text (up to ``FIELD_CHARS``) or a
    fractional number read as ``key value`` (``{"status": "checking", "city": "Oslo"}``
    reads "checking · city Oslo"). The line is cut to ``width``, never inside a
    command in backticks (an instruction such as "(`backline mcp config -b x`)" is kept
    whole); ``links`` (label -> URL or file path) are shown in full after the cut, and
    the question a background waits on (``asking``) in full before the line.
    """
    links = asking = ""
    if isinstance(state, dict):
        if isinstance(state.get(ASKING), str):
            asking = f"asking: {' '.join(state[ASKING].split())} · "
        parts: list[str] = []
        if state.get(HEADLINE):
            parts.append(str(state[HEADLINE]))
        activity = state.get(ACTIVITY)
        if isinstance(activity, list) and activity:
            parts.append(str(activity[-1]))
        elif state.get(PHASE):
            parts.append(str(state[PHASE]))
        changed = state.get(CHANGED)
        if isinstance(changed, list) and changed:
            parts.append(f"{len(changed)} file{'s' if len(changed) != 1 else ''} changed")
        parts += [
            f"{key.replace('_', ' ')} {value}"
            for key, value in state.items()
            if type(value) is int and key not in (HEADLINE, PHASE)
        ]
        parts += [
            f"{key.replace('_', ' ')} {_field(value)}"
            for key, value in state.items()
            if key not in CONVENTION_KEYS and _field(value)
        ]
        found = state.get(LINKS)
        if isinstance(found, dict):
            links = "".join(f" · {label}: {target}" for label, target in found.items())
        rest = {k: v for k, v in state.items() if not (asking and k == ASKING)}
        text = " · ".join(parts) if parts else ", ".join(f"{k}={v}" for k, v in rest.items())
    elif state is None:
        text = "null"
    else:
        text = str(state)
    line = shorten(text, _keeping_commands(" ".join(text.split()), width)) + links
    return (asking + line) if line else asking.removesuffix(" · ")


def _keeping_commands(text: str, width: int) -> int:
    """``width``, or more so that no command in backticks (and what closes it) is cut."""
    ends = [m.end() for m in re.finditer(r"`[^`]+`[)\].,;:!?]*", text)]
    needed = max((end for end in ends if end > width - 1), default=0)
    return max(width, needed + 1 if needed < len(text) else needed)


def _field(value: Any) -> str:
    """How another key's value reads in the line: a short text, or a number that is not
    a count; "" for anything else (longer text, lists, objects, booleans, null)."""
    if isinstance(value, str):
        text = " ".join(value.split())
        return text if len(text) <= FIELD_CHARS else ""
    if type(value) is float:
        return f"{value:g}"
    return ""


def preview_state(state: Any, max_chars: int = DEFAULT_LIMITS.max_page_state_chars) -> Any:
    """A copy of a background's (reported) state cut to about ``max_chars`` characters of
    JSON, with markers where it was cut: what a front end shows. Cheap: it stops
    walking at ``max_chars``, so call it when a state is about to be shown (the latest
    one), not for every report. Raises ``ValueError`` for a value no state can be."""
    return json_snapshot(state, what="the state shown", root="state", max_chars=max_chars).value


def shorten(text: str, width: int) -> str:
    """Collapse whitespace and cut to ``width`` characters (with an ellipsis)."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def is_update(source: str | None) -> bool:
    """Whether a speech with this source relays background work (an update)."""
    return source in UPDATE_SOURCES


def speaker_label(source: str | None) -> str:
    """How the agent is labelled for a speech of this source."""
    return "agent (update)" if is_update(source) else "agent"
