"""The limit table: every size, count and time bound that protects a session from input.

One table, so a limit is found (and documented, and tested) in one place. Each field
is a documented default; a session takes its own ``Limits`` (``Session(limits=...)``
where wired), front ends take theirs from options. A value over a limit is cut with a
visible marker (``truncate_text``) or refused with a clear error, never passed on whole.

Add a field here for any new bound of backline itself (a queue's depth, a payload's
size, a deadline), with a docstring that says what it bounds and what happens at the
bound. A bound only a plugin reads belongs to that plugin's own configuration.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

TRUNCATION_MARKER = (
    "\n[... truncated: {cut} of {total} characters cut ({what} is limited to {limit})]"
)
"""Appended to text cut at a limit, so a model and a person both see that it was cut."""

CUT_MARKER = "[... truncated: {cut} more {unit} cut ({what} is limited to {limit} characters)]"
"""Put where part of a structured value was cut: the rest of a long string inside it, a
list's last item, a dict's ``"[truncated]"`` entry."""


@dataclass(frozen=True)
class Limits:
    """Bounds on what a session accepts. Every field is a positive number."""

    # -- tools, sends, state, model requests (docs/limits.md) -------------------------------
    max_tool_output_chars: int = 32_000
    """A tool's result as the model reads it (a return value's text or JSON, an update,
    a ``ToolError`` message). Longer output is cut with a visible marker and a warning
    naming the tool is logged."""

    max_send_chars: int = 8_000
    """One background ``ctx.send(text)``. Longer text is cut with a visible marker (the
    voice agent, the history and front ends get the cut text) and a warning is logged."""

    max_state_chars: int = 32_000
    """A background's ``ctx.set_state(value)``, measured as its JSON text. A larger value
    is stored cut: long strings shortened, lists and dicts ended early with a marker item.
    What is cut is not examined, so a huge state costs no more than this. A warning is
    logged the first time a background's state is cut."""

    max_page_state_chars: int = 8_000
    """The copy of a background's state a front end shows (the web page): cut like
    ``max_state_chars`` (``preview_state`` in ``backline.io._view``)."""

    max_value_depth: int = 64
    """How deeply a tool output or a state value may nest (lists and dicts inside each
    other). Deeper is an error that names where."""

    llm_first_token_timeout: float = 30.0
    """Seconds from a model request to its first output (text or a tool call), retries
    included; then the request fails with ``LLMError``. ``AnthropicLLM``'s default."""

    llm_response_timeout: float = 180.0
    """Seconds from a model request to the end of its response; then the request fails
    with ``LLMError`` (a partial reply is kept, marked interrupted). ``AnthropicLLM``'s
    default."""

    # -- plugin loading (docs/plugins.md) ---------------------------------------------------
    plugin_load_timeout: float = 30.0
    """How long importing one plugin (and each of its registration hooks) may take.
    A plugin that takes longer is skipped and marked failed, naming what hung; the
    import goes on in a daemon thread (it cannot be cancelled). The environment
    variable ``BACKLINE_PLUGIN_LOAD_TIMEOUT`` sets it for the CLI."""

    max_plugin_output_chars: int = 2_000
    """How much of what a plugin printed to stdout while loading is kept and reported
    (``backline plugins``, a warning on stderr); the rest is counted, not kept."""

    # -- front ends (console, web) ----------------------------------------------------------
    max_user_turn_chars: int = 10_000
    """The longest typed or transcribed user turn a front end accepts (a console line,
    a web ``user_turn``). A longer one is refused with a message; nothing is sent."""

    max_web_message_bytes: int = 256 * 1024
    """The largest WebSocket message the web server reads from a page; a larger
    frame closes the connection (code 1009)."""

    max_web_queue_messages: int = 1_000
    """Messages waiting to be sent to one web tab. A tab whose page stops reading
    falls behind; past this many (state updates coalesced, the latest per background
    kept) the tab is dropped with close code 4008."""

    max_web_queue_bytes: int = 8 * 1024 * 1024
    """The JSON text waiting to be sent to one web tab (its length in characters, about
    its size in bytes); past this the tab is dropped (close code 4008), as for
    ``max_web_queue_messages``."""

    min_web_token_chars: int = 16
    """The shortest access token ``backline web`` accepts (``--token``); the default
    token is 32 random characters."""

    web_sign_in_timeout: float = 60.0
    """How long the one-time sign-in link that ``backline web --open`` gives the
    browser stays valid (it works once)."""

    # -- the conversation log (docs/logs.md) ------------------------------------------------
    log_queue_size: int = 10_000
    """Records waiting for the conversation log's writer thread. Past it a record is
    dropped (counted in the session's ``dropped`` column, warned about once): the event
    loop never waits for the disk."""

    log_batch_size: int = 500
    """Records the conversation log's writer commits in one transaction, at most."""

    log_batch_interval: float = 0.05
    """Seconds the conversation log's writer gathers records before a commit (a flush or
    a close cuts it short): few wake-ups, few transactions. A killed process loses at
    most this much."""

    log_busy_timeout: float = 2.0
    """Seconds a conversation-log write waits for another process's lock before the
    batch is dropped (with a warning; later batches are tried again)."""

    log_close_timeout: float = 2.0
    """Seconds closing the conversation log (at exit) waits for its writer to finish."""

    log_text_chars: int = 20_000
    """Characters of one text (a turn, a tool's arguments or output, a background
    message) kept in the conversation log; the rest is cut with a visible marker."""
    # -- MCP: the voice channel, mounted servers (docs/mcp.md) --------------------------------
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
    once. A new agent's session is admitted by ending the one idle the longest; only when
    every open session is busy (a call or an event stream open) is it refused (HTTP 503)."""

    mcp_session_idle_timeout: float = 300.0
    """Seconds an MCP session of the voice-channel endpoint may stay idle (no call in
    flight, no event stream open: its agent was killed, or never ended it) before it is
    ended; the agent's client then gets 404 and opens a new session if it comes back."""

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


def cut_marker(cut: int, unit: str, what: str, limit: int) -> str:
    """The marker for ``cut`` more ``unit`` (characters, items, keys) left out of ``what``."""
    return CUT_MARKER.format(cut=cut, unit=unit, what=what, limit=limit)
