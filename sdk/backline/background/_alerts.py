"""Alerts: a background finished, failed or asks the user something.

``BackgroundAlerts`` is a session part with no tools: it watches the background
events of its session and emits a ``background_alert`` (``BackgroundAlert``: the
background's id, a ``kind`` and a short ``text``) for each moment the user should
hear about at once. Front ends play a short sound for it, whatever the agent is
saying and even while the user is away (``backline console`` rings the terminal's
bell, ``backline voice`` plays a chime, the page a tone and a notification).

The rules, in one place (per background):

- **finished**: its entrypoint returned (``ended``); or a turn ended (``busy`` then
  ``idle``) with no error, and no message waits in its inbox (a message that waits
  interrupted the turn: the next turn follows at once, nothing has finished);
- **failed**: its entrypoint raised (``crashed``); or a turn raised (its ``idle``
  carries the error); or it reported an error: the state convention's ``error``
  key (docs/background.md) became a new non-empty text. Reported during a turn, it
  is told when the turn ends; outside one, at once. One failure is one alert: the
  error a background reports right after a failed turn is that failure's.
- **question**: it asks the user something (``ctx.ask``): its state's ``asking`` key,
  shown while it waits for the answer, became a new non-empty text.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..llm.tools import FunctionTool
from ..tasks import TaskScope
from ..voice.events import AlertKind, BackgroundAlert
from ..voice.parts import PartHost
from ._asking import ASKING

__all__ = ["ALERT_TEXT_CHARS", "ERROR_KEY", "BackgroundAlerts", "alert_text"]

ALERT_TEXT_CHARS = 160
"""An alert's text is cut to this many characters (it is one line)."""
ERROR_KEY = "error"
"""The state convention's key for what went wrong (text, or null)."""


class _Running(Protocol):
    @property
    def waiting(self) -> int: ...


class _Manager(Protocol):
    """The session's backgrounds (``BackgroundManager``), as the alerts read them."""

    def runtime(self, background_id: str) -> _Running | None: ...


@dataclass(slots=True)
class _Watch:
    """What the alerts remember of one background."""

    in_turn: bool = False
    error: str | None = None  # the error its state reports now
    error_in_turn: str | None = None  # a new error reported during the current turn
    absorb_error: bool = False  # the next new error is the failure already told
    asking: str | None = None
    task: str | None = None  # the work of the turn (its state's task, else last_task)


def _text(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return " ".join(value.split())
    return None


def alert_text(background_id: str, kind: AlertKind, detail: str | None) -> str:
    """The one line an alert says: ``"ci finished: watch main"``."""
    head = {"finished": "finished", "failed": "failed", "question": "asks"}[kind]
    line = f"{background_id} {head}: {detail}" if detail else f"{background_id} {head}"
    line = " ".join(line.split())
    return line if len(line) <= ALERT_TEXT_CHARS else line[: ALERT_TEXT_CHARS - 1] + "…"


class BackgroundAlerts:
    """The ``background_alert`` events of one session's backgrounds (a session part with
    no tools; see the module doc). ``manager``: the backgrounds, to read their inboxes."""

    tools: Sequence[FunctionTool] = ()

    def __init__(self, manager: _Manager) -> None:
        self._manager = manager
        self._session: PartHost | None = None
        self._watches: dict[str, _Watch] = {}

    def reserved_names(self) -> Mapping[str, str]:
        return {}

    async def start(self, session: PartHost, taken: Collection[str] = ()) -> None:
        self._session = session
        self._watches = {}
        session.on("background_status", self._on_status)
        session.on("background_state", self._on_state)

    def stop(self) -> Sequence[TaskScope]:
        session, self._session = self._session, None
        if session is not None:
            session.off("background_status", self._on_status)
            session.off("background_state", self._on_state)
        return ()

    def finish(self) -> None:
        return None

    # -- the rules ----------------------------------------------------------------------------
    def _watch(self, background_id: str) -> _Watch:
        watch = self._watches.get(background_id)
        if watch is None:
            watch = self._watches[background_id] = _Watch()
        return watch

    def _alert(self, background_id: str, kind: AlertKind, detail: str | None) -> None:
        if self._session is None:
            return
        text = alert_text(background_id, kind, detail)
        self._session.emit(BackgroundAlert(background_id=background_id, kind=kind, text=text))

    def _on_status(self, ev: Any) -> None:
        bid: str = ev.background_id
        watch = self._watch(bid)
        status = ev.status
        if status == "busy":
            watch.in_turn = True
            watch.error_in_turn = None
            watch.absorb_error = False
            watch.task = None
        elif status == "idle" and watch.in_turn:
            watch.in_turn = False
            raised = _text(ev.error)
            failure = raised or watch.error_in_turn
            # A turn that raised may report its error next: that is this failure.
            watch.absorb_error = raised is not None
            if failure is not None:
                self._alert(bid, "failed", failure)
            elif not self._waiting(bid):
                self._alert(bid, "finished", watch.task)
        elif status == "ended":
            watch.in_turn = False
            self._alert(bid, "finished", None)
        elif status == "crashed":
            watch.in_turn = False
            if not watch.absorb_error:  # (a turn that raised has told it already)
                self._alert(bid, "failed", _text(ev.error))
            watch.absorb_error = True

    def _on_state(self, ev: Any) -> None:
        bid: str = ev.background_id
        watch = self._watch(bid)
        state = ev.state if isinstance(ev.state, dict) else {}
        error = _text(state.get(ERROR_KEY))
        if error is None:
            watch.absorb_error = False
        elif error != watch.error:
            if watch.in_turn:
                watch.error_in_turn = error  # told when the turn ends
            elif watch.absorb_error:
                watch.absorb_error = False  # the failure already told, now reported
            else:
                self._alert(bid, "failed", error)
        watch.error = error
        if watch.in_turn:
            task = _text(state.get("task")) or _text(state.get("last_task"))
            if task is not None:
                watch.task = task
        asking = _text(state.get(ASKING))
        if asking is not None and asking != watch.asking:
            self._alert(bid, "question", asking)
        watch.asking = asking

    def _waiting(self, background_id: str) -> bool:
        running = self._manager.runtime(background_id)
        return running is not None and running.waiting > 0
