"""The session as its collaborators see it: a narrow, read-only interface.

Each agent's activity (and its replies), the tool runner, the reply schedulers,
the switches between agents and the user turns are typed against ``Runtime``, not
``Session``: they read what is listed here (read-only: a write is a type error)
and change the session only by calling its methods. Only ``session.py`` writes
the session's state. The members are the session's own (underscored: not public
API); hot paths read plain attributes, so the interface costs nothing at run time.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from ..limits import Limits
from ..llm.chat_context import ChatContext
from ..llm.llm import LLM
from ..llm.realtime import RealtimeSession
from .events import Event
from .io import TextOutput

if TYPE_CHECKING:
    import asyncio

    from ._activity import AgentActivity
    from ._away import AwayTimer
    from ._handoffs import Switches
    from ._session_tools import SessionTools
    from ._tool_runner import ToolRunner
    from ._transcript import Transcript
    from .run_result import RunResult
    from .session import Session


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
    def _tool_runner(self) -> ToolRunner: ...
    @property
    def _switches(self) -> Switches: ...

    # -- calls ------------------------------------------------------------------------
    def emit(self, event: Event) -> None: ...
    def _refresh(self) -> None: ...
    async def _wait_for(
        self,
        predicate: Callable[[], bool],
        *,
        timeout: float | None = None,
        even_when_closing: bool = False,
    ) -> bool: ...
    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]: ...
    def _is_idle(self) -> bool: ...
    def _require_activity(self) -> AgentActivity: ...
    async def _follow_switch(self) -> None: ...
    def _start_user_turn(self, text: str) -> None: ...
    def _work_in_progress(self) -> bool: ...
    def _owes_reply_for(self, run: RunResult) -> bool: ...
    def tools_changed(self) -> None: ...

    # -- what a tool or an agent is given ------------------------------------------------
    @property
    def _public(self) -> Session[Any]: ...
