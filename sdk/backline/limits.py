"""The limit table: every size, count and time bound that protects a session from input.

One table, so a limit is found (and documented, and tested) in one place. Each field
is a documented default; a session takes its own ``Limits`` (``Session(limits=...)``
where wired), front ends take theirs from options. A value over a limit is cut with a
visible marker (``truncate_text``) or refused with a clear error, never passed on whole.

Add a field here for any new bound (a queue's depth, a payload's size, a deadline),
with a docstring that says what it bounds and what happens at the bound.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

TRUNCATION_MARKER = (
    "\n[... truncated: {cut} of {total} characters cut ({what} is limited to {limit})]"
)
"""Appended to text cut at a limit, so a model and a person both see that it was cut."""


@dataclass(frozen=True)
class Limits:
    """Bounds on what a session accepts. Every field is a positive number."""

    max_mcp_message_chars: int = 4_000
    """One message an agent sends through the MCP voice channel (``send_to_user``,
    ``add_context``, ``ask_user``). A longer one is refused with a tool error that
    says the bound: the agent sends a shorter one; nothing is delivered cut."""

    max_mcp_status_chars: int = 16_000
    """One ``set_status`` of the MCP voice channel, measured as its JSON text. A larger
    status is refused with a tool error (the previous status stays)."""

    max_mcp_wait: float = 120.0
    """The longest ``wait_for_user`` or ``ask_user`` waits, in seconds: a longer
    ``timeout_seconds`` is cut to this (agents' MCP clients cut silent calls after a
    few minutes; progress is reported meanwhile when the client asked for it)."""

    max_mcp_connections: int = 64
    """MCP sessions (agent connections) a front end's voice-channel endpoint keeps open at
    once; one more is refused (HTTP 503) until one ends or idles out."""

    max_agent_output_lines: int = 200
    """Lines of an agent CLI's output that ``cli_agent`` passes to the voice agent as
    context notes in one run (each cut at ``max_mcp_message_chars``); one last note
    counts the lines left out."""

    max_agent_line_bytes: int = 8_000_000
    """One line of an agent CLI's output as ``cli_agent`` reads it (a Claude Code
    stream-json event can be large); a longer line ends the run, reported as an error."""

    mcp_call_timeout: float = 30.0
    """Seconds a mounted MCP server's tool call may go without finishing or reporting
    progress (``MCPServerStdio(timeout=...)`` sets it per server). Then the call is a
    tool error the model reads, and the next call reconnects to the server."""

    mcp_start_timeout: float = 30.0
    """Seconds to start a mounted MCP server and list its tools when a session starts;
    then the start fails with an error naming the server."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"Limits.{f.name} must be a positive number, got {value!r}")

    def with_(self, **changes: Any) -> Limits:
        """A copy with ``changes`` (validated like the constructor)."""
        return replace(self, **changes)


DEFAULT_LIMITS = Limits()
"""The documented defaults (docs/limits.md lists them)."""


def truncate_text(text: str, limit: int, what: str) -> tuple[str, bool]:
    """``text`` cut to at most ``limit`` characters plus a visible marker naming ``what``.

    Returns ``(text, was_cut)``; text within the limit is returned unchanged.
    """
    if len(text) <= limit:
        return text, False
    cut = len(text) - limit
    marker = TRUNCATION_MARKER.format(cut=cut, total=len(text), what=what, limit=limit)
    return text[:limit] + marker, True
