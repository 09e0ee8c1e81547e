"""The record of one conversation: the history (one writer), the events, the
``session.run()`` in progress, which collects both, and the recorders, told a turn's
facts directly (``recorders.ConversationRecorder``).

Hot paths ask ``wants(name)`` before building an event: most events reach nobody
(no listener, no run collecting them), and then nothing is built.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from ..llm.chat_context import ChatContext, ChatItem
from ..llm.llm import LLM, Usage
from ._metrics import llm_metrics
from .events import (
    AgentState,
    AgentStateChanged,
    ConversationItemAdded,
    Event,
    EventEmitter,
    EventName,
    SpeechCreated,
)
from .recorders import ConversationRecorder, RequestStatus
from .speech_handle import SpeechHandle

logger = logging.getLogger("backline")

# The events a run() collects (RunResult._on_event): the others are built for it only
# when someone listens.
RUN_EVENTS = frozenset({"conversation_item_added", "agent_handoff", "speech_created", "error"})


class RunCollector(Protocol):
    """A ``session.run()`` in progress (``RunResult``): what it collects."""

    def _on_event(self, event: Event) -> None: ...

    def _on_item(self, item: ChatItem) -> None: ...

    def _watch(self, speech: SpeechHandle) -> None: ...


class Transcript:
    """The history, the event listeners, and the run collecting them (see the module
    doc). The session keeps one for its whole life (a restart keeps both)."""

    __slots__ = ("emitter", "history", "recorders", "run")

    def __init__(self) -> None:
        self.history = ChatContext()
        self.emitter = EventEmitter()
        self.run: RunCollector | None = None
        self.recorders: tuple[ConversationRecorder, ...] = ()

    def add_recorder(self, recorder: ConversationRecorder) -> None:
        if recorder not in self.recorders:
            self.recorders += (recorder,)

    def remove_recorder(self, recorder: ConversationRecorder) -> None:
        self.recorders = tuple(r for r in self.recorders if r is not recorder)

    def on(self, event: EventName, callback: Callable[[Any], Any] | None = None) -> Any:
        return self.emitter.on(event, callback)

    def emit(self, event: Event) -> None:
        if self.run is not None:
            self.run._on_event(event)
        self.emitter.emit(event)

    def wants(self, name: EventName) -> bool:
        """Whether an event would reach anyone (a listener, or a run() that collects
        it): hot paths skip building it otherwise."""
        return name in self.emitter._listeners or (self.run is not None and name in RUN_EVENTS)

    def add(self, items: Iterable[ChatItem]) -> None:
        """The one writer of the history."""
        history = self.history
        if type(items) is list and len(items) == 1:
            item = items[0]  # the usual case: one item, no list built for it
            added: Sequence[ChatItem] = (item,) if history._add(item) else ()
        else:
            added = history.insert(items)
        if "conversation_item_added" in self.emitter._listeners:
            for item in added:
                self.emit(item_added(item))  # (a run gets it from emit)
        elif self.run is not None:
            for item in added:
                self.run._on_item(item)  # only the run collects it: no event to build
        for recorder in self.recorders:
            for item in added:
                try:
                    recorder.item_added(item)
                except Exception:
                    logger.exception("a conversation recorder raised")

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
        """One model request ended: ``llm_metrics`` to whoever wants it, and the
        recorders."""
        if self.wants("llm_metrics"):
            self.emit(
                llm_metrics(
                    llm,
                    speech_id,
                    started=started,
                    first=first,
                    first_audio=first_audio,
                    ended=ended,
                    usage=usage,
                    status=status,
                )
            )
        for recorder in self.recorders:
            try:
                recorder.llm_request(
                    llm,
                    speech_id,
                    started=started,
                    first=first,
                    first_audio=first_audio,
                    ended=ended,
                    usage=usage,
                    status=status,
                )
            except Exception:
                logger.exception("a conversation recorder raised")

    def speech_created(self, speech: SpeechHandle) -> None:
        """Emit ``speech_created`` (the caller checked ``wants`` first)."""
        if "speech_created" in self.emitter._listeners:
            self.emit(SpeechCreated(speech=speech, source=speech.source))  # type: ignore[arg-type]
        elif self.run is not None:
            self.run._watch(speech)  # only the run collects it: no event to build

    def watch(self, speech: SpeechHandle) -> None:
        """The run in progress, if any, waits for ``speech`` too."""
        if self.run is not None:
            self.run._watch(speech)


_new = object.__new__


def item_added(item: ChatItem) -> ConversationItemAdded:
    """``ConversationItemAdded(item=item)``, built through its ``__dict__`` (a frozen
    dataclass's __init__ sets each field through object.__setattr__)."""
    event = _new(ConversationItemAdded)
    event.__dict__.update({"item": item, "type": "conversation_item_added"})
    return event


_STATE_EVENTS: dict[tuple[AgentState, AgentState], AgentStateChanged] = {}


def state_changed(old: AgentState, new: AgentState) -> AgentStateChanged:
    """The event of one state change: events are frozen, so one of each is shared
    (three per turn, at no cost but a lookup)."""
    event = _STATE_EVENTS.get((old, new))
    if event is None:
        event = _STATE_EVENTS[old, new] = AgentStateChanged(old=old, new=new)
    return event
