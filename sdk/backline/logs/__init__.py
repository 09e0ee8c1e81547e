"""The conversation log: every conversation a front end runs, in SQLite.

``backline.app.build_session`` attaches it to every session a front end builds
(``backline console``, ``backline web``, front ends from plugins), unless
``--no-log`` or ``BACKLINE_LOG=0``. Read it with ``backline logs`` or any SQLite
tool; docs/logs.md has the schema and example queries. Imported on demand only
(``import backline`` does not load ``sqlite3``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._recorder import ConversationLogError, SessionRecorder
from ._schema import SCHEMA_VERSION
from ._store import (
    DEFAULT_RETENTION_DAYS,
    LOG_ENV,
    RETENTION_ENV,
    ConversationLog,
    data_dir,
    default_path,
    logging_enabled,
    retention_days,
    shared_log,
)

if TYPE_CHECKING:
    from ..voice.session import Session

__all__ = [
    "DEFAULT_RETENTION_DAYS",
    "LOG_ENV",
    "RETENTION_ENV",
    "SCHEMA_VERSION",
    "ConversationLog",
    "ConversationLogError",
    "SessionRecorder",
    "attach_log",
    "data_dir",
    "default_path",
    "logging_enabled",
    "retention_days",
    "shared_log",
]


def attach_log(
    session: Session[Any], log: ConversationLog | None = None, **meta: Any
) -> SessionRecorder:
    """Record ``session`` in ``log`` (default: the process's shared log at
    ``default_path()``). ``meta``: ``front_end``, ``llm``, ``model``, ``agent``,
    ``backgrounds`` for the session row. Returns the recorder (``detach()`` stops it)."""
    return SessionRecorder(session, log if log is not None else shared_log(), **meta)
