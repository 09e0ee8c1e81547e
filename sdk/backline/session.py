"""``backline.Session``: the voice runtime's session, assembled from its parts.

The runtime (``backline.voice.Session``) knows its parts only through the
``SessionPart`` protocol. This thin assembler keeps the signature users know:
``background=`` (with ``handling=``) becomes the background sessions' part, and
``mcp_servers=`` the part that mounts those servers' tools; any other
``parts=`` join them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from .background._alerts import BackgroundAlerts
from .background._missed import MissedUpdates
from .background.definition import BackgroundDefinition, HandlingOptions
from .background.runtime import BackgroundManager
from .limits import Limits
from .llm.llm import LLM
from .llm.realtime import RealtimeSession
from .llm.tools import FunctionTool
from .voice import UserAwaySignal
from .voice.io import TextOutput
from .voice.parts import SessionPart, part_of
from .voice.session import MAX_TOOL_STEPS_MESSAGE
from .voice.session import Session as _RuntimeSession

__all__ = ["Session"]

UserdataT = TypeVar("UserdataT")


class Session(_RuntimeSession[UserdataT]):
    """One conversation between a user and a voice agent, and its background sessions.

    ``async with Session(llm) as session: await session.start(MyAgent())``. Front
    ends push user turns (``push_user_turn``) and speech signals
    (``user_started_speaking`` / ``user_stopped_speaking``) and receive the
    agent's words through ``output``; tests use ``run(user_input=...)``.
    ``aclose()`` is bounded and never hangs. ``limits`` bounds what the session
    accepts (tool outputs, background sends and state; see ``backline.Limits``).
    ``background`` (``@backline.background`` definitions) run with the session;
    ``mcp_servers`` (``backline.mcp.MCPServerStdio`` / ``MCPServerHTTP``) are started
    with the session; their tools (``<server>__<tool>``) are every agent's.
    """

    def __init__(
        self,
        llm: LLM,
        *,
        tools: Sequence[FunctionTool] = (),
        background: Iterable[BackgroundDefinition] | None = None,
        handling: HandlingOptions | None = None,
        user_away_timeout: float | None = 15.0,
        user_away_signal: UserAwaySignal = "audio",
        max_tool_steps: int = 5,
        userdata: UserdataT | None = None,
        output: TextOutput | None = None,
        realtime: RealtimeSession | None = None,
        max_tool_steps_message: str = MAX_TOOL_STEPS_MESSAGE,
        limits: Limits | None = None,
        mcp_servers: Sequence[Any] = (),
        parts: Iterable[SessionPart] = (),
    ) -> None:
        definitions = list(background or ())
        manager = BackgroundManager(definitions, handling=handling) if definitions else None
        mounted = part_of(list(mcp_servers), owner="Session")
        # Started in this order, closed in the reverse: the MCP servers' tools are
        # there before any background runs, and they stop last; the parts that watch
        # the backgrounds (alerts, what the user missed) listen before any runs; the
        # backgrounds' tools come first (backline_missed after them).
        watching: list[SessionPart] = []
        answering: list[SessionPart] = []
        if manager is not None:
            missed = MissedUpdates()
            watching, answering = [BackgroundAlerts(manager), missed], [missed.tool]
        built = [p for p in (mounted, *watching, manager, *answering) if p is not None]
        super().__init__(
            llm,
            tools=tools,
            parts=[*built, *parts],
            user_away_timeout=user_away_timeout,
            user_away_signal=user_away_signal,
            max_tool_steps=max_tool_steps,
            userdata=userdata,
            output=output,
            realtime=realtime,
            max_tool_steps_message=max_tool_steps_message,
            limits=limits,
        )
        self._background = manager

    @property
    def background(self) -> BackgroundManager | None:
        """The background sessions of this session, if any were configured."""
        return self._background
