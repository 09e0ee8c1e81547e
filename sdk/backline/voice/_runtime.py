"""The session as its collaborators see it: a narrow, read-only interface.

Each agent's activity (and its replies), the tool runner, the reply schedulers,
the switches between agents and the user turns are typed against ``Runtime``, not
``Session``: they read what is listed here (read-only: a write is a type error)
and change the session only by calling its methods. Only ``session.py`` writes
the session's state. The members are the session's own (underscored: not public
API); hot paths read plain attributes, so the interface costs nothing at run time.

Everything it names lies below it (the transcript, the session's tools, the away
timer, agents, speech handles): the collaborators that take a ``Runtime`` are
above it, and what the session owns that they use is handed to them when they are
made (an activity gets the tool runner; the user turns get the switches).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from ..limits import Limits
from ..llm.chat_context import ChatContext
from ..llm.llm import LLM
from ..llm.realtime import RealtimeSession
from ..tasks import LazyDeadline
from ._away import AwayTimer
from ._session_tools import SessionTools
from ._transcript import Transcript
from .agent import Agent
from .events import Event
from .io import TextOutput
from .speech_handle import SpeechHandle


class Runtime(Protocol):
    """What the session's collaborators may read of it, and call."""

    # -- configuration and I/O (read-only) -------------------------------------------------
    @property
    def limits(self) -> Limits: ...
    @property
    def max_tool_steps(self) -> int: ...
    @property
    def max_tool_steps_message(self) -> str: ...
    @property
    def llm(self) -> LLM: ...
    @property
    def realtime(self) -> RealtimeSession | None: ...
    @property
    def output(self) -> TextOutput: ...
    @property
    def _output(self) -> TextOutput:
        """``output`` (read on every turn's hot path: an attribute, not a property)."""
        ...

    @property
    def history(self) -> ChatContext: ...

    # -- state (read-only) --------------------------------------------------------------
    @property
    def _closing(self) -> bool: ...
    @property
    def _transcript(self) -> Transcript: ...
    @property
    def _away(self) -> AwayTimer: ...
    @property
    def _toolbox(self) -> SessionTools: ...
    @property
    def _public(self) -> Any:
        """The ``backline.Session`` (what tools and agents are given)."""
        ...

    # -- derived state and waits -----------------------------------------------------
    def emit(self, event: Event) -> None: ...
    def _refresh(self) -> None: ...
    async def _wait_for(
        self,
        predicate: Callable[[], bool],
        *,
        timeout: float | None = None,
        even_when_closing: bool = False,
        deadline: LazyDeadline | None = None,
    ) -> bool: ...

    @property
    def _run_deadline(self) -> LazyDeadline: ...
    def _is_idle(self) -> bool: ...
    def _work_in_progress(self) -> bool: ...
    def _owes_reply_for(self, run: object) -> bool: ...
    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> Any: ...
    def tools_changed(self) -> None: ...

    # -- agents and switches --------------------------------------------------------------
    def _target_agent(self) -> Agent:
        """The agent what is said to the session reaches now."""
        ...

    def _current_activity(self) -> Any:
        """The ``AgentActivity`` of the agent the user talks to (None before the start)."""
        ...

    def _is_current(self, activity: object) -> bool:
        """Whether ``activity`` is the agent the user talks to."""
        ...

    def _switching(self) -> bool:
        """A switch of agents is running or owed."""
        ...

    def _request_handoff(self, old: Any, agent: Agent) -> None: ...
    def _owe_handoff(self) -> None: ...
    async def _run_task(self, parent: Any, task: Any) -> Any: ...
    async def _follow_switch(self) -> None: ...
    def _start_user_turn(self, text: str) -> None: ...
    def _generate_scheduled_reply(self, *, instructions: str, source: str) -> SpeechHandle: ...
