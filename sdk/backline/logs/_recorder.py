"""``SessionRecorder``: turns a session's conversation into conversation-log records.

It only takes note and queues: it never changes the session, never blocks the event
loop. A turn's facts (items, the agent's states, model requests) come to it directly
(``session.add_recorder``: no event is built for it) and are noted as small tuples;
the rest comes as events (``session.on``). What was noted goes to the log as one
queued entry per turn (at the turn's end, when the agent is listening again), or at
once with any other event, and the log's writer thread makes the records from it
(``_facts``: long texts cut there, off the event loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..background.runtime import background_of
from ..limits import truncate_text
from ..llm.chat_context import (
    AgentHandoff,
    ChatItem,
)
from ..llm.llm import LLM, Usage, llm_label
from ..voice.events import AgentState, ErrorEvent
from ..voice.recorders import RequestStatus
from . import _facts, _schema
from ._facts import Facts
from ._store import ConversationLog

if TYPE_CHECKING:
    from ..voice.events import EventName
    from ..voice.session import Session

_EVENTS: tuple[EventName, ...] = (
    "user_state_changed",
    "background_message",
    "background_reply",
    "background_state",
    "background_status",
    "error",
    "close",
)


class ConversationLogError(Exception):
    """The conversation log cannot be used, or another process's lock holds it (reported
    once per session as an ``error`` event with ``source="log"``, the moment the log's
    writer finds out; the conversation goes on)."""


_FLUSH_AT = 512
"""Noted fields (``_facts``: a flat list) handed to the log even if the turn has not ended."""


class SessionRecorder:
    """Writes one session's conversation to a ``ConversationLog``.

    ``meta``: what the session row says (``front_end``, ``llm``, ``model``, ``agent``,
    ``backgrounds``, ``options``: a JSON-able dict, to which the session's own
    ``user_away_signal`` is added). A row is opened at the first fact or event (a
    session built but never started leaves none) and closed at the ``close`` event; a
    conversation in which nothing was said (no turn) is removed then. A restarted
    session gets a new row. ``session_id`` is the current row's id.

    What goes wrong with the log (``ConversationLog.trouble``) is emitted on the
    session as an ``error`` event (``source="log"``) once, as soon as the log's writer
    finds out: the front end shows it, with no need for another event to come.
    """

    def __init__(self, session: Session[Any], log: ConversationLog, **meta: Any) -> None:
        self._session = session
        self._log = log
        self._meta = meta
        self._limit = log.limits.log_text_chars
        self.session_id: str | None = None
        self._facts: list[Any] = []  # noted (``_facts``: flat), not yet handed to the log
        self._dropped = 0
        self._agent: str | None = None  # the current agent's label
        self._reported = False
        self._loop: asyncio.AbstractEventLoop | None = None
        # Each event name straight to its handler (no dispatch per event).
        self._listening: dict[EventName, Callable[[Any], None]] = {
            "user_state_changed": self._user_state,
            "background_message": self._background_message,
            "background_reply": self._background_reply,
            "background_state": self._background_state,
            "background_status": self._background_status,
            "error": self._error,
            "close": self._close,
        }
        assert tuple(self._listening) == _EVENTS
        for name, handler in self._listening.items():
            session.on(name, handler)
        session.add_recorder(self)

    def detach(self) -> None:
        """Stop recording (the current row stays open; what was noted is queued)."""
        self._session.remove_recorder(self)
        for name, handler in self._listening.items():
            self._session.off(name, handler)
        self._flush()
        self._log.remove_listener(self._on_trouble)

    # -- plumbing -----------------------------------------------------------------------
    def _ready(self) -> str | None:
        """The row to write to, opened on the first event; ``None`` when the log cannot
        be written (said once)."""
        log = self._log
        if not self._reported and log.trouble is not None:
            self._report(log.trouble)  # known before this session's first event
        if not log._usable:
            self._facts.clear()
            return None
        if self.session_id is None:
            self._open_row()
        return self.session_id

    def _report(self, message: str) -> None:
        # Said once, where the front end shows errors (a terminal UI may own stderr);
        # the conversation itself goes on.
        self._reported = True
        error = ConversationLogError(message)
        self._session.emit(ErrorEvent(error=error, recoverable=True, source="log"))

    def _on_trouble(self, message: str) -> None:
        """The log's writer thread: something went wrong; tell the session's loop now."""
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed
                loop.call_soon_threadsafe(self._trouble_now)

    def _trouble_now(self) -> None:
        message = self._log.trouble  # still true? (a lock may be gone again)
        if message is not None and not self._reported and self.session_id is not None:
            self._report(message)

    def _sid(self) -> str | None:
        """The row to write to (``None``: nothing is written)."""
        sid = self.session_id
        if sid is None or not self._log._usable:
            return self._ready()
        return sid

    def _flush(self) -> None:
        """Hand what was noted to the log, as one entry."""
        facts = self._facts
        sid = self.session_id
        if not facts or sid is None:
            return
        self._facts = []
        batch = Facts(sid, self._limit, facts)
        if not self._log.submit(batch):
            self._dropped += len(batch)

    def _put(self, statement: str, *params: Any) -> None:
        """A record made now, queued at once with what was noted before it."""
        self._facts += (_facts.made, (statement, params))
        self._flush()

    def _text(self, text: str, what: str) -> str:
        return truncate_text(text, self._limit, what)[0]

    def _open_row(self) -> None:
        from .._version import __version__

        self.session_id = sid = uuid.uuid4().hex[:12]
        self._agent = self._agent_label()  # then each handoff says who speaks
        with contextlib.suppress(RuntimeError):  # events come on the session's loop
            self._loop = asyncio.get_running_loop()
        self._log.add_listener(self._on_trouble)
        meta = self._meta
        llm_name, model = llm_label(self._session.llm)
        options = {
            **(meta.get("options") or {}),
            "user_away_signal": self._session.user_away_signal,
        }
        row = (
            sid,
            time.time(),
            meta.get("front_end"),
            meta.get("llm") or llm_name,
            model or meta.get("model"),
            meta.get("agent") or self._agent,
            os.getcwd(),
            __version__,
            json.dumps(options, sort_keys=True),
        )
        # Noted first: every later fact of the row refers to it.
        self._facts += (_facts.made, (_schema.INSERT_SESSION, row))
        manager = background_of(self._session)
        backgrounds: Sequence[str] = meta.get("backgrounds") or (
            manager.sorted_ids() if manager is not None else ()
        )
        for name in backgrounds:
            self._facts += (_facts.made, (_schema.INSERT_SESSION_BACKGROUND, (sid, name)))

    def _agent_label(self) -> str | None:
        try:
            return self._session.current_agent.label
        except RuntimeError:
            return None

    # -- a turn's facts (ConversationRecorder) -------------------------------------------
    def item_added(self, item: ChatItem) -> None:
        # (the hot path, ``_sid()`` inlined.) The item itself is noted, with its id
        # (made here if nobody read it yet: on the loop, never on the writer thread)
        # and the agent speaking now; the writer reads the rest of it (``_facts.item``:
        # an item is not changed once it is in the history).
        if (self.session_id is None or not self._log._usable) and self._ready() is None:
            return
        agent = self._agent
        if agent is None:
            agent = self._agent = self._agent_label()
        if isinstance(item, AgentHandoff):
            self._agent = item.new_agent  # (read once, then told by each handoff)
        facts = self._facts
        facts += (_facts.item, item, item.id, agent)
        if len(facts) >= _FLUSH_AT:
            self._flush()

    def agent_state_changed(self, old: AgentState, new: AgentState) -> None:
        if (self.session_id is None or not self._log._usable) and self._ready() is None:
            return
        facts = self._facts
        facts += (_facts.agent_state, time.time(), old, new)
        if new == "listening" or len(facts) >= _FLUSH_AT:
            self._flush()  # the turn ended: one entry for the log

    def llm_request(
        self,
        llm: LLM,
        speech_id: str,
        *,
        started: float,
        first: float | None,
        first_audio: float | None,
        ended: float,
        usage: Usage | None,
        status: RequestStatus,
    ) -> None:
        if (self.session_id is None or not self._log._usable) and self._ready() is None:
            return
        name, model = llm_label(llm)
        facts = self._facts
        # (a Usage is frozen: the writer reads it as it was)
        at = time.time()
        facts += (_facts.request, at, speech_id, name, model, started, first, ended, usage, status)
        if len(facts) >= _FLUSH_AT:
            self._flush()

    # -- events -------------------------------------------------------------------------
    def _user_state(self, event: Any) -> None:
        sid = self._sid()
        if sid is None:
            return
        self._put(
            _schema.INSERT_STATE,
            sid,
            time.time(),
            "user",
            None,
            event.old,
            event.new,
            None,
        )

    def _background_message(self, event: Any) -> None:
        sid = self._sid()
        if sid is None:
            return
        self._put(
            _schema.INSERT_BACKGROUND_MESSAGE,
            sid,
            time.time(),
            event.background_id,
            event.message_id,
            self._text(event.content, "a background message"),
            int(event.silent),
        )

    def _background_reply(self, event: Any) -> None:
        sid = self._sid()
        if sid is None:
            return
        now = time.time()
        for message_id in event.message_ids:
            self._put(_schema.UPDATE_BACKGROUND_STATUS, event.status, now, sid, message_id)

    def _background_state(self, event: Any) -> None:
        sid = self._sid()
        if sid is None:
            return
        state = self._text(json.dumps(event.state, sort_keys=True), "a background state")
        self._put(
            _schema.INSERT_STATE,
            sid,
            time.time(),
            "background_state",
            event.background_id,
            None,
            state,
            None,
        )

    def _background_status(self, event: Any) -> None:
        sid = self._sid()
        if sid is None:
            return
        self._put(
            _schema.INSERT_STATE,
            sid,
            time.time(),
            "background_status",
            event.background_id,
            None,
            event.status,
            event.error,
        )

    def _error(self, event: Any) -> None:
        sid = self._sid()
        if sid is None:
            return
        error = event.error
        message = self._text(f"{type(error).__name__}: {error}", "an error")
        self._put(
            _schema.INSERT_ERROR,
            sid,
            time.time(),
            event.source,
            message,
            int(event.recoverable),
        )

    def _close(self, event: Any) -> None:
        sid = self._sid()
        if sid is None:
            return
        ended = (time.time(), event.reason, self._dropped, sid)
        self._facts += (_facts.made, (_schema.END_SESSION, ended))
        # Nothing said (no turn written): not a conversation to keep.
        self._put(_schema.DELETE_SESSION_IF_SILENT, sid, sid)
        self._log.remove_listener(self._on_trouble)
        self.session_id = None  # a restart opens a new row
        self._dropped = 0
