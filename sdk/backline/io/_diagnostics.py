"""What a person sees when something fails in a front end, and where the details go.

A terminal front end shows one clear line per error, worded for someone using the
CLI (what happened, what to do); the traceback and the library's own wording go to
a log file whose path the line names. ``log_to_file`` routes backline's loggers
there for the front end's run; ``describe_error`` writes the line.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import re
from pathlib import Path

from ..llm.llm import LLMError, LLMTimeoutError

LOG_FILE_BYTES = 1_000_000
LOG_FILE_BACKUPS = 2

KEY_VARIABLES = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
"""The environment variable that holds each built-in provider's key (for the advice)."""


def default_log_path() -> Path:
    """``$XDG_STATE_HOME/backline/backline.log`` (default ``~/.local/state/...``)."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "backline" / "backline.log"


def log_to_file(path: str | os.PathLike[str] | None = None) -> Path | None:
    """Send backline's log records (tracebacks included) to ``path`` instead of the
    terminal; returns the file, or ``None`` (records stay on stderr) if it cannot be
    opened."""
    target = Path(path) if path is not None else default_log_path()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.handlers.RotatingFileHandler(
            target, maxBytes=LOG_FILE_BYTES, backupCount=LOG_FILE_BACKUPS, encoding="utf-8"
        )
    except OSError as e:
        logging.getLogger("backline").warning("cannot write the log file %s: %s", target, e)
        return None
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for name in ("backline", "backline_claude_code", "claude_agent_sdk", "httpx", "anthropic"):
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        logger.propagate = False  # not on the terminal: the front end says it in one line
    logging.getLogger("backline").setLevel(logging.INFO)
    return target


def describe_error(error: BaseException, *, llm: str | None = None) -> str:
    """One line for a CLI user: what failed and what to do (no traceback, no API names)."""
    if isinstance(error, LLMError):
        return _describe_llm_error(error, llm)
    text = " ".join(str(error).split()) or type(error).__name__
    return f"{type(error).__name__}: {text}" if len(text) < 200 else text[:197] + "…"


def _describe_llm_error(error: LLMError, llm: str | None) -> str:
    named = re.findall(r"\b[A-Z][A-Z0-9_]*_API_KEY\b", str(error))  # the adapter knows best
    variable = named[0] if named else KEY_VARIABLES.get(llm) if llm else None
    key_hint = f"check {variable}" if variable else "check the provider's API key"
    status = error.status
    if status == 401:
        return f"The model provider rejected the API key (401): {key_hint} and try again."
    if status == 403:
        return "The model provider refused access (403): the key may lack access to this model."
    if status in (400, 404) and "model" in str(error).lower():
        return f"The model was not found ({status}): choose another with -m MODEL."
    if status == 429:
        return (
            "The model provider is rate limiting this key (429) and retries did not help: "
            "wait a minute and try again."
        )
    if status is not None and status >= 500:
        return (
            f"The model provider is overloaded or failing ({status}) and retries did not "
            "help: try again in a moment."
        )
    if isinstance(error, LLMTimeoutError):
        return (
            "The model did not answer in time (the provider may be overloaded or the "
            "connection stalled): try again in a moment."
        )
    if status is None and error.retryable:
        return (
            "Could not reach the model provider: check the network connection "
            "(or the base URL, if you set one)."
        )
    first = " ".join(str(error).split())
    return f"The model request failed: {first[:200]}"
