"""Session events: typed dataclasses, delivered synchronously to ``session.on`` callbacks."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar

from ..llm.chat_context import ChatItem, FunctionCall, FunctionCallOutput
from .parts import ReplyStatus

if TYPE_CHECKING:
    from .agent import Agent
    from .speech_handle import SpeechHandle

logger = logging.getLogger("backline")

AgentState: TypeAlias = Literal["initializing", "listening", "thinking", "speaking"]
UserState: TypeAlias = Literal["listening", "speaking", "away"]


@dataclass(frozen=True)
class AgentStateChanged:
    old: AgentState
    new: AgentState
    type: Literal["agent_state_changed"] = "agent_state_changed"


@dataclass(frozen=True)
class UserStateChanged:
    old: UserState
    new: UserState
    type: Literal["user_state_changed"] = "user_state_changed"


@dataclass(frozen=True)
class UserInputTranscribed:
    """An interim transcript of what the user is saying (``push_interim_transcript``);
    the final one arrives as a user turn (``conversation_item_added``)."""

    text: str
    final: bool = False
    type: Literal["user_input_transcribed"] = "user_input_transcribed"


@dataclass(frozen=True)
class ConversationItemAdded:
    """An item entered the session history."""

    item: ChatItem
    type: Literal["conversation_item_added"] = "conversation_item_added"


@dataclass(frozen=True)
class FunctionToolsExecuted:
    """One step's tool calls finished (their outputs are in the same order)."""

    calls: list[FunctionCall]
    outputs: list[FunctionCallOutput | None]
    type: Literal["function_tools_executed"] = "function_tools_executed"


@dataclass(frozen=True)
class SpeechCreated:
    speech: SpeechHandle
    source: Literal["say", "generate_reply", "user_turn", "tool_reply", "background_reply"]
    type: Literal["speech_created"] = "speech_created"


@dataclass(frozen=True)
class AgentHandoffEvent:
    old_agent: Agent | None
    new_agent: Agent
    type: Literal["agent_handoff"] = "agent_handoff"


@dataclass(frozen=True)
class ToolUpdated:
    """A deferred tool posted an update (``item_id`` is ``<call_id>_update_<n>``)."""

    call_id: str
    item_id: str
    message: str
    type: Literal["tool_updated"] = "tool_updated"


@dataclass(frozen=True)
class ToolReply:
    """A deferred tool reply changed status (``call_ids`` of the outputs it covers)."""

    call_ids: list[str]
    status: ReplyStatus
    speech_id: str | None
    type: Literal["tool_reply"] = "tool_reply"


@dataclass(frozen=True)
class ErrorEvent:
    error: BaseException
    recoverable: bool
    source: str = "runtime"
    type: Literal["error"] = "error"


@dataclass(frozen=True)
class CloseEvent:
    reason: Literal["user", "error", "closed"]
    error: BaseException | None = None
    type: Literal["close"] = "close"


@dataclass(frozen=True)
class BackgroundMessage:
    """A background session sent a message (``content`` is the raw text)."""

    background_id: str
    message_id: str
    content: str
    silent: bool
    type: Literal["background_message"] = "background_message"


@dataclass(frozen=True)
class BackgroundReply:
    """A spoken background reply changed status."""

    background_id: str
    message_ids: list[str]
    status: ReplyStatus
    speech_id: str | None
    type: Literal["background_reply"] = "background_reply"


@dataclass(frozen=True)
class BackgroundState:
    """A background session reported state (a JSON-compatible value, already copied)."""

    background_id: str
    state: Any
    type: Literal["background_state"] = "background_state"


@dataclass(frozen=True)
class BackgroundStatus:
    """A background session's entrypoint started, ended or crashed, or a turn began or ended."""

    background_id: str
    status: Literal["running", "busy", "idle", "ended", "crashed", "closed"]
    error: str | None = None
    type: Literal["background_status"] = "background_status"


AlertKind: TypeAlias = Literal["finished", "failed", "question"]


@dataclass(frozen=True)
class BackgroundAlert:
    """A background finished, failed or asks the user something: what a front end
    makes heard at once with a short sound (whatever the agent is saying, even while
    the user is away). ``text`` says it in one short line."""

    background_id: str
    kind: AlertKind
    text: str
    type: Literal["background_alert"] = "background_alert"


@dataclass(frozen=True)
class LLMMetrics:
    """One LLM request of a reply ended: its latency and speed, measured by the runtime.

    Emitted for every LLM (whatever its adapter reports). Times are seconds on the
    event loop's clock from the ``chat()`` call. ``ttft``: to the first text or tool
    call (``None`` if none came); ``duration``: to the end of the stream;
    ``tokens_per_second``: output tokens over the time after the first token
    (``None`` when the LLM reported no usage). ``status`` is ``completed``,
    ``cancelled`` (interrupted) or ``failed`` (the model raised). ``ttfa``: to the first
    audio of a model that speaks (``AudioDelta``; ``None`` for others).
    """

    speech_id: str
    llm: str
    model: str | None
    ttft: float | None
    duration: float
    input_tokens: int | None
    output_tokens: int | None
    tokens_per_second: float | None
    status: Literal["completed", "cancelled", "failed"]
    ttfa: float | None = None
    type: Literal["llm_metrics"] = "llm_metrics"


Event: TypeAlias = (
    AgentStateChanged
    | UserStateChanged
    | UserInputTranscribed
    | ConversationItemAdded
    | FunctionToolsExecuted
    | SpeechCreated
    | AgentHandoffEvent
    | ToolUpdated
    | ToolReply
    | ErrorEvent
    | CloseEvent
    | BackgroundMessage
    | BackgroundReply
    | BackgroundState
    | BackgroundStatus
    | BackgroundAlert
    | LLMMetrics
)

EventName: TypeAlias = Literal[
    "agent_state_changed",
    "user_state_changed",
    "user_input_transcribed",
    "conversation_item_added",
    "function_tools_executed",
    "speech_created",
    "agent_handoff",
    "tool_updated",
    "tool_reply",
    "error",
    "close",
    "background_message",
    "background_reply",
    "background_state",
    "background_status",
    "background_alert",
    "llm_metrics",
]

EVENT_NAMES: frozenset[str] = frozenset(EventName.__args__)  # type: ignore[attr-defined]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(slots=True)
class EventEmitter:
    """``on(name, callback)`` / ``off(name, callback)`` / ``emit(event)``.

    Callbacks run synchronously, in registration order; one that raises is
    logged and the others still run.
    """

    # Per name, the one callback, or a tuple of several (a session's parts listen to
    # a name each, mostly: a tuple of one is 64 bytes per listener and session),
    # replaced (not changed) by on/off: emit calls what it read, and a callback that
    # registers or removes one mid-emit affects the next emit.
    _listeners: dict[str, Callable[[Any], Any] | tuple[Callable[[Any], Any], ...]] = field(
        default_factory=dict
    )

    def on(self, name: EventName, callback: F | None = None) -> Any:
        """Register ``callback`` for ``name``; usable as a decorator."""
        if name not in EVENT_NAMES:
            raise ValueError(
                f"unknown event {name!r}; known events: {', '.join(sorted(EVENT_NAMES))}"
            )

        def register(cb: F) -> F:
            self._listeners[name] = (*self._callbacks(name), cb) if name in self._listeners else cb
            return cb

        return register(callback) if callback is not None else register

    def _callbacks(self, name: str) -> tuple[Callable[[Any], Any], ...]:
        listeners = self._listeners.get(name, ())
        return listeners if isinstance(listeners, tuple) else (listeners,)

    def off(self, name: EventName, callback: Callable[[Any], Any]) -> None:
        listeners = self._listeners.get(name)
        if listeners is None:
            return
        if not isinstance(listeners, tuple):  # the one callback (a part's, usually)
            if listeners == callback:
                del self._listeners[name]
            return
        if callback in listeners:
            i = listeners.index(callback)
            rest = listeners[:i] + listeners[i + 1 :]
            if len(rest) > 1:
                self._listeners[name] = rest
            elif rest:
                self._listeners[name] = rest[0]
            else:
                del self._listeners[name]  # a name is a key only while someone listens

    def has_listeners(self, name: str) -> bool:
        return name in self._listeners

    def emit(self, event: Event) -> None:
        listeners = self._listeners.get(event.type)
        if listeners is None:
            return
        if not isinstance(listeners, tuple):
            try:
                listeners(event)
            except Exception:
                logger.exception("a %r event listener raised", event.type)
            return
        for cb in listeners:
            try:
                cb(event)
            except Exception:
                logger.exception("a %r event listener raised", event.type)
