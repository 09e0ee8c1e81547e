"""The voice runtime: session, agents, speech handles, generation, tools, events."""

from ._user import UserAwaySignal
from .agent import Agent, AgentTask
from .events import (
    AgentHandoffEvent,
    AgentState,
    AgentStateChanged,
    AlertKind,
    BackgroundAlert,
    BackgroundMessage,
    BackgroundReply,
    BackgroundState,
    BackgroundStatus,
    CloseEvent,
    ConversationItemAdded,
    ErrorEvent,
    Event,
    EventName,
    FunctionToolsExecuted,
    LLMMetrics,
    SpeechCreated,
    ToolReply,
    ToolUpdated,
    UserInputTranscribed,
    UserState,
    UserStateChanged,
)
from .io import InMemoryTextOutput, PlayoutResult, TextOutput
from .observers import SessionObserver, add_session_observer, remove_session_observer
from .parts import ReplyStatus, SessionPart
from .recorders import ConversationRecorder
from .run_context import RunContext
from .run_result import (
    AgentHandoffRunEvent,
    EventAssert,
    FunctionCallEvent,
    FunctionCallOutputEvent,
    MessageEvent,
    RunAssert,
    RunEvent,
    RunResult,
)
from .session import Session
from .speech_handle import SpeechHandle

__all__ = [
    "Agent",
    "AgentHandoffEvent",
    "AgentHandoffRunEvent",
    "AgentState",
    "AgentStateChanged",
    "AgentTask",
    "AlertKind",
    "BackgroundAlert",
    "BackgroundMessage",
    "BackgroundReply",
    "BackgroundState",
    "BackgroundStatus",
    "CloseEvent",
    "ConversationItemAdded",
    "ConversationRecorder",
    "ErrorEvent",
    "Event",
    "EventAssert",
    "EventName",
    "FunctionCallEvent",
    "FunctionCallOutputEvent",
    "FunctionToolsExecuted",
    "InMemoryTextOutput",
    "LLMMetrics",
    "MessageEvent",
    "PlayoutResult",
    "ReplyStatus",
    "RunAssert",
    "RunContext",
    "RunEvent",
    "RunResult",
    "Session",
    "SessionObserver",
    "SessionPart",
    "SpeechCreated",
    "SpeechHandle",
    "TextOutput",
    "ToolReply",
    "ToolUpdated",
    "UserAwaySignal",
    "UserInputTranscribed",
    "UserState",
    "UserStateChanged",
    "add_session_observer",
    "remove_session_observer",
]
