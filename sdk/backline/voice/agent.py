"""Agent and AgentTask: instructions, tools, a chat context, and lifecycle hooks."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator, Sequence
from typing import Any, Generic, Protocol, TypeVar

from ..llm.chat_context import ChatContext, ChatMessage
from ..llm.llm import LLM
from ..llm.realtime import RealtimeSession
from ..llm.tools import FunctionTool, find_function_tools
from ._context import current_call, current_on_enter
from .parts import SessionPart, part_of

T = TypeVar("T")

INSTRUCTIONS_ID = "backline_instructions"


class _Running(Protocol):
    """The agent's run in a session (its ``AgentActivity``), as the agent sees it."""

    @property
    def public_session(self) -> Any: ...

    def check_tools(self, agent_tools: list[FunctionTool]) -> None: ...

    def changed(self) -> None: ...


def check_tool_names(tools: Sequence[FunctionTool], *, where: str) -> None:
    """Raise ``ValueError`` if two tools share a name."""
    seen: set[str] = set()
    dupes: set[str] = set()
    for t in tools:
        if not isinstance(t, FunctionTool):
            raise TypeError(f"{where}: expected a FunctionTool (use @function_tool), got {t!r}")
        (dupes if t.name in seen else seen).add(t.name)
    if dupes:
        raise ValueError(f"{where}: duplicate tool name(s): {', '.join(sorted(dupes))}")


class Agent:
    """An agent: instructions, tools and its own chat context.

    Methods decorated with ``@function_tool`` are its tools, with any passed in
    ``tools``. A tool that returns another ``Agent`` (or ``(result, agent)``)
    hands the conversation off to it. The new agent starts from its own context;
    to carry history over, pass ``chat_ctx=session.history.copy(...)`` or the old
    agent's ``chat_ctx`` when you build it. ``mcp_servers`` are started while the
    agent runs; their tools (``<server>__<tool>``) are its tools meanwhile.
    """

    def __init__(
        self,
        instructions: str = "",
        *,
        tools: Sequence[FunctionTool] = (),
        llm: LLM | None = None,
        chat_ctx: ChatContext | None = None,
        realtime: RealtimeSession | None = None,
        allow_interruptions: bool | None = None,
        mcp_servers: Sequence[Any] = (),
    ) -> None:
        all_tools = [*find_function_tools(self), *tools]
        check_tool_names(all_tools, where=f"{type(self).__name__} tools")
        self._tools: list[FunctionTool] = all_tools
        # Its own parts: what ``mcp_servers`` describe (backline.mcp builds it); their
        # tools are mounted while this agent runs.
        part = part_of(mcp_servers, owner=type(self).__name__)
        self._parts: tuple[SessionPart, ...] = () if part is None else (part,)
        self._instructions = instructions
        self._llm = llm
        self._realtime = realtime
        self._allow_interruptions = allow_interruptions
        self._activity: _Running | None = None
        ctx = ChatContext()
        if chat_ctx is not None:
            ctx.insert(it for it in chat_ctx.items if it.id != INSTRUCTIONS_ID)
        self._chat_ctx = ctx
        self._set_instructions_item()

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    @property
    def label(self) -> str:
        """A readable name for transcripts: the class name."""
        return type(self).__name__

    @property
    def instructions(self) -> str:
        return self._instructions

    @property
    def tools(self) -> list[FunctionTool]:
        """Its tools: its own, and while it runs its MCP servers' (``mcp_servers``)."""
        if not self._parts:
            return list(self._tools)
        return [*self._tools, *(t for part in self._parts for t in part.tools)]

    @property
    def llm(self) -> LLM | None:
        return self._llm

    @property
    def realtime(self) -> RealtimeSession | None:
        return self._realtime

    @property
    def allow_interruptions(self) -> bool | None:
        return self._allow_interruptions

    @property
    def chat_ctx(self) -> ChatContext:
        """This agent's context (read-only: change it with ``update_chat_ctx``)."""
        return self._chat_ctx

    @property
    def session(self) -> Any:
        """The ``backline.Session`` this agent runs in (while it runs)."""
        if self._activity is None:
            raise RuntimeError(f"{self.label} is not running in a session")
        return self._activity.public_session

    def _set_instructions_item(self) -> None:
        self._chat_ctx.remove([INSTRUCTIONS_ID])
        if self._instructions:
            self._chat_ctx.insert(
                ChatMessage(
                    role="system", content=self._instructions, id=INSTRUCTIONS_ID, created_at=0.0
                )
            )

    async def update_instructions(self, instructions: str) -> None:
        self._instructions = instructions
        self._set_instructions_item()

    async def update_tools(self, tools: Sequence[FunctionTool]) -> None:
        """Replace this agent's tools. Checked first (duplicates, reserved names):
        on error nothing changes."""
        new = list(tools)
        check_tool_names(new, where=f"{self.label}.update_tools")
        if self._activity is not None:
            self._activity.check_tools(new)
        self._tools = new

    async def update_chat_ctx(self, chat_ctx: ChatContext) -> None:
        """Replace this agent's context (its instructions item is kept)."""
        if type(chat_ctx) is ChatContext:
            # Ids are unique in a context: drop the one instructions item by identity
            # (C-speed list operations; the scheduler calls this on every insert).
            items = list(chat_ctx.items)
            old = chat_ctx.get(INSTRUCTIONS_ID)
            if old is not None:
                items.remove(old)
            ctx = ChatContext(items)
        else:
            ctx = ChatContext(it for it in chat_ctx.items if it.id != INSTRUCTIONS_ID)
        self._chat_ctx = ctx
        self._set_instructions_item()

    async def on_enter(self) -> None:
        """Called when this agent becomes active (a greeting goes here)."""

    async def on_exit(self) -> None:
        """Called before this agent hands the conversation off."""

    async def on_user_turn_completed(self, turn_ctx: ChatContext, new_message: ChatMessage) -> None:
        """Called with each user turn before the reply; raise ``StopResponse`` to skip it.

        ``new_message`` may be edited in place (its ``content``) before it is stored.
        """


class AgentTask(Agent, Generic[T]):
    """An agent that a tool can ``await`` inline; it runs until ``complete()``.

    ``result = await MyTask(...)`` inside a tool (or ``on_enter``) pauses the
    calling agent, hands the conversation to the task, and returns the value the
    task passes to ``complete(value)`` (or raises the exception passed to
    ``complete(exc)``). The inline tasks of one turn's parallel tool calls take
    turns; each caller gets its own task's result.
    """

    # Set per instance when used (class defaults spare a copy of Agent.__init__).
    _result: asyncio.Future[Any] | None = None
    _awaited: bool = False
    _completion_hook: Callable[[], None] | None = None

    def _future(self) -> asyncio.Future[Any]:
        if self._result is None:
            self._result = asyncio.get_running_loop().create_future()
        return self._result

    def complete(self, result: T | BaseException) -> None:
        """Finish the task with a value, or with an exception the awaiting tool receives."""
        fut = self._future()
        if fut.done():
            raise RuntimeError(f"{self.label} is already complete")
        if isinstance(result, BaseException):
            fut.set_exception(result)
        else:
            fut.set_result(result)
        if self._completion_hook is not None:
            self._completion_hook()
        if self._activity is not None:
            self._activity.changed()

    def done(self) -> bool:
        return self._result is not None and self._result.done()

    def __await__(self) -> Generator[Any, None, T]:
        # Inside a tool: pause the agent whose speech called it; inside on_enter: that
        # agent (the context variables say which; see AgentActivity.run_inline).
        if self._awaited:
            raise RuntimeError(f"{self.label} was already awaited; an AgentTask runs once")
        call = current_call.get()
        host = call.activity if call is not None else current_on_enter.get()
        if host is None:
            raise RuntimeError("await an AgentTask inside a tool or inside on_enter")
        speech = call.speech if call is not None else None
        result: Generator[Any, None, T] = host.run_inline(self, speech).__await__()
        return result
