"""Running one step's tool calls: validation, holds, handoffs, deferred replies."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..limits import truncate_text
from ..llm.chat_context import FunctionCall, FunctionCallOutput, new_id
from ..llm.tool_output import render_tool_output
from ..llm.tools import FunctionTool, StopResponse, ToolError
from ..tasks import TaskScope
from ._context import InlineHost, current_call
from .agent import Agent
from .events import ToolReply, ToolUpdated
from .parts import Pending, ReplyStatus
from .reply_scheduler import ReplyScheduler
from .run_context import RunContext

if TYPE_CHECKING:
    from ._runtime import Runtime
    from .speech_handle import SpeechHandle

logger = logging.getLogger("backline")

DEFAULT_UPDATE_TEMPLATE = (
    "The task is still running in the background. Progress so far: {message}\n"
    "Do not invent its results: they will arrive later, and you will be told."
)

STOPPED_OUTPUT = "Done; the tool asked for no reply."

CANCELLED_OUTPUT = "The call was cancelled: the user interrupted before it finished."

TOOL_REPLY_AT_TAIL = (
    "New results arrived from tools that were still running in the background "
    "(call ids: {call_ids}). Tell the user about them naturally and briefly, "
    "without repeating what was already said."
)
TOOL_REPLY_MAYBE_COVERED = (
    "New results arrived from tools that were still running in the background "
    "(call ids: {call_ids}). You may already have mentioned some of this: tell the "
    "user only what they have not heard yet. If everything was already said, reply "
    "with nothing at all."
)

_NO_CALLS: frozenset[Any] = frozenset()


class ToolOwner(InlineHost, Protocol):
    """The agent whose speech made a call (``AgentActivity``), as the runner uses it:
    who owns the call's away hold and deferred replies, the tools it knew."""

    @property
    def closed(self) -> bool: ...

    def tool_map(self) -> dict[str, FunctionTool]: ...


@dataclass(slots=True)
class ToolOutcome:
    """How a call ended, as far as the speech that made it is concerned."""

    output: FunctionCallOutput | None
    handoff: Agent | None = None
    stop_response: bool = False
    returned_none: bool = False


class CallState:
    """One tool call in flight. Lives in the session's tool scope, not the speech's.

    ``waiter``: the future the speech that made the call awaits while the call runs
    (shared by the step's calls). The call resolves it itself, as its task ends or
    as it posts its first update: the speech wakes one loop step sooner than
    through the task's done callbacks.
    """

    __slots__ = (
        "_lock",
        "_preamble",
        "activity",
        "call",
        "detached",
        "first_update",
        "run",
        "runner",
        "speech",
        "task",
        "tool",
        "updates",
        "waiter",
    )

    def __init__(
        self,
        runner: ToolRunner,
        activity: ToolOwner,
        speech: SpeechHandle,
        call: FunctionCall,
        tool: FunctionTool | None,
    ) -> None:
        self.runner = runner
        self.activity = activity
        self.speech = speech
        self.call = call
        self.tool = tool
        self.task: asyncio.Task[ToolOutcome] | None = None
        self.first_update: FunctionCallOutput | None = None  # the item it answers with
        self.detached = False
        self.updates = 0
        self.run: Any = None
        self.waiter: asyncio.Future[None] | None = None
        # Made on first use: most calls never wait for the preamble nor post updates.
        self._preamble: asyncio.Future[None] | bool = False
        self._lock: asyncio.Lock | None = None

    def __repr__(self) -> str:
        return f"CallState({self.call.name}, {self.call.call_id})"

    @property
    def lock(self) -> asyncio.Lock:
        """Orders the call's updates and its final reply (made at the first update)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    @property
    def settled(self) -> bool:
        """The call returned, or posted its first update (the reply can go on)."""
        assert self.task is not None
        return self.first_update is not None or self.task.done()

    def preamble_played(self) -> None:
        """The text spoken before this call has played (or there was none)."""
        pre = self._preamble
        if pre is False:
            self._preamble = True
        elif pre is not True and not pre.done():
            pre.set_result(None)

    async def wait_for_preamble(self) -> None:
        pre = self._preamble
        if pre is True:
            return
        if pre is False:
            pre = self._preamble = asyncio.get_running_loop().create_future()
        await asyncio.shield(pre)

    async def post_update(self, message: str) -> None:
        if not isinstance(message, str):
            raise TypeError("a tool update must be a string")
        runner = self.runner
        cid = self.call.call_id
        message = runner.capped(message, self.call.name, f"an update of tool '{self.call.name}'")
        async with self.lock:
            if not self.detached:
                self.detached = True
                item = FunctionCallOutput(
                    call_id=cid,
                    name=self.call.name,
                    output=runner.update_template.format(
                        message=message, function_name=self.call.name, call_id=cid
                    ),
                )
                runner.session.emit(ToolUpdated(call_id=cid, item_id=cid, message=message))
                if self.first_update is None:
                    self.first_update = item
                    self._wake()
                return
            self.updates += 1
            item_id = f"{cid}_update_{self.updates}"
            runner.session.emit(ToolUpdated(call_id=cid, item_id=item_id, message=message))
            await runner.enqueue_pair(self, item_id, message, is_error=False)


class ToolRunner:
    """Owns every tool task of a session (its scope), and the scheduler of deferred
    tool replies."""

    __slots__ = ("_call_ids", "_running", "scheduler", "scope", "session", "update_template")

    def __init__(self, session: Runtime, *, update_template: str = DEFAULT_UPDATE_TEMPLATE) -> None:
        self.session = session
        self.scope = TaskScope("session tools")
        self.scheduler = ReplyScheduler(session, self, name="tool replies", source="tool_reply")
        self.update_template = update_template
        self._running: set[CallState] | None = None  # made at the first call
        self._call_ids: set[str] | None = None  # every call id in the history (built lazily)

    @property
    def running(self) -> AbstractSet[CallState]:
        """The calls whose task has not finished."""
        return self._running if self._running is not None else _NO_CALLS

    def unique_call_id(self, call_id: str, name: str) -> str:
        """``call_id``, or a fresh id when it is empty or already in the session's history
        (a model or an adapter that repeats ids): each call pairs with its own output."""
        taken = self._call_ids
        if taken is None:
            items = self.session.history.items
            taken = self._call_ids = {it.call_id for it in items if isinstance(it, FunctionCall)}
        unique = call_id
        if not unique:
            unique = new_id("call_")
        elif unique in taken:
            n = 2
            while f"{call_id}_{n}" in taken:
                n += 1
            unique = f"{call_id}_{n}"
            logger.warning(
                "the model gave tool call %r (%s) an id that is already in use; it runs as %r",
                call_id,
                name,
                unique,
            )
        taken.add(unique)
        return unique

    def start(
        self,
        activity: ToolOwner,
        speech: SpeechHandle,
        call: FunctionCall,
        tools: dict[str, FunctionTool],
    ) -> CallState:
        state = CallState(self, activity, speech, call, tools.get(call.name))
        state.run = self.session._transcript.run
        hold = self.session._away.take_hold(activity)
        running = self._running
        if running is None:
            running = self._running = set()
        running.add(state)
        session = self.session

        def finished(_: asyncio.Task[ToolOutcome]) -> None:
            running.discard(state)
            hold.release()  # whoever owns it now
            state._wake()  # a task cancelled before it ran never ran its own wake
            if state.detached:
                session._refresh()  # a run() waits for the deferred tools it started

        state.task = self.scope.create_task(
            self._run(state), name=f"tool {call.name}", done=finished
        )
        return state

    async def _run(self, state: CallState) -> ToolOutcome:
        token = current_call.set(state)
        try:
            tool = state.tool
            if (
                tool is not None
                and tool._context_param is None
                and not tool._raw
                and type(tool).invoke is FunctionTool.invoke
            ):
                outcome = await self._invoke(state, None)  # it takes no RunContext
            else:
                run_ctx: RunContext[Any] = RunContext(
                    session=self.session._public,
                    speech_handle=state.speech,
                    function_call=state.call,
                    state=state,
                )
                try:
                    outcome = await self._invoke(state, run_ctx)
                finally:
                    run_ctx._detach()
            if state.detached:
                await self._finish_deferred(state, outcome)
            return outcome
        finally:
            state._wake()  # the speech goes on (its task is done by the time it runs)
            # The task's context must not keep the call alive once the tool is done:
            # the call holds the task, so that would be a reference cycle (left to the
            # garbage collector, whose passes then dominate with many sessions).
            current_call.reset(token)

    async def _invoke(self, state: CallState, run_ctx: RunContext[Any] | None) -> ToolOutcome:
        call = state.call
        tool = state.tool
        if tool is None:
            known = ", ".join(sorted(state.activity.tool_map())) or "none"
            return _error(call, f"Unknown tool '{call.name}'. Available tools: {known}.")
        try:
            value = await tool.invoke(call.arguments, run_ctx)
        except ToolError as e:
            return _error(
                call, self.capped(e.message, call.name, f"the error of tool '{call.name}'")
            )
        except StopResponse:
            # The call is in the history already: it gets an output like any other.
            return ToolOutcome(
                FunctionCallOutput(call_id=call.call_id, name=call.name, output=STOPPED_OUTPUT),
                stop_response=True,
            )
        except asyncio.CancelledError:
            raise
        except Exception as e:
            logger.exception("tool %r raised", call.name)
            return _error(call, f"Tool '{call.name}' failed with an unexpected {type(e).__name__}.")
        return self._classify(call, value)

    def _classify(self, call: FunctionCall, value: Any) -> ToolOutcome:
        if type(value) is str and len(value) <= self.session.limits.max_tool_output_chars:
            # The common return, as render_tool_output would give it back.
            return ToolOutcome(
                FunctionCallOutput(call_id=call.call_id, name=call.name, output=value)
            )
        handoff: Agent | None = None
        if isinstance(value, Agent):
            handoff, value = value, None
        elif (
            isinstance(value, tuple)
            and len(value) == 2
            and isinstance(value[1], Agent)
            and not isinstance(value[0], Agent)
        ):
            value, handoff = value[0], value[1]
        what = f"the return value of tool '{call.name}'"
        limits = self.session.limits
        try:
            text, cut = render_tool_output(
                value, limits.max_tool_output_chars, what=what, max_depth=limits.max_value_depth
            )
        except ValueError as e:
            return ToolOutcome(
                FunctionCallOutput(
                    call_id=call.call_id, name=call.name, output=str(e), is_error=True
                ),
                handoff=handoff,
            )
        if cut:
            self._warn_cut(call.name, what)
        if handoff is not None and value is None:
            text = f"Transferred the conversation to {handoff.label}."
        return ToolOutcome(
            FunctionCallOutput(call_id=call.call_id, name=call.name, output=text),
            handoff=handoff,
            returned_none=value is None,
        )

    def capped(self, text: str, name: str, what: str) -> str:
        """``text`` cut at ``Limits.max_tool_output_chars`` (with a marker; logged)."""
        out, cut = truncate_text(text, self.session.limits.max_tool_output_chars, what)
        if cut:
            self._warn_cut(name, what)
        return out

    def _warn_cut(self, name: str, what: str) -> None:
        limit = self.session.limits.max_tool_output_chars
        logger.warning(
            "%s is longer than %d characters (Limits.max_tool_output_chars): the model "
            "reads it cut, with a marker. Make tool %r return less (a summary, or one "
            "page of results), or raise the bound: Session(limits=Limits("
            "max_tool_output_chars=...)).",
            what[:1].upper() + what[1:],
            limit,
            name,
        )

    async def _finish_deferred(self, state: CallState, outcome: ToolOutcome) -> None:
        cid = state.call.call_id
        if outcome.stop_response:
            return
        out = outcome.output
        if outcome.handoff is not None:
            text, is_error = "Handing off from a deferred tool is not supported.", True
        elif out is None:
            return
        else:
            if outcome.returned_none:
                return  # a None return after updates adds nothing
            text, is_error = out.output, out.is_error
        async with state.lock:
            await self.enqueue_pair(state, f"{cid}_final", text, is_error=is_error)

    async def enqueue_pair(
        self, state: CallState, call_id: str, text: str, *, is_error: bool
    ) -> None:
        if self._call_ids is not None:
            self._call_ids.add(call_id)
        call = FunctionCall(call_id=call_id, name=state.call.name, arguments="{}")
        out = FunctionCallOutput(
            call_id=call_id, name=state.call.name, output=text, is_error=is_error
        )
        await self.scheduler.enqueue([call, out], [call_id], owner=state.activity, run=state.run)

    def render_reply(self, batch: list[Pending], at_tail: bool) -> str:
        ids = ", ".join(i for p in batch for i in p.ids)
        template = TOOL_REPLY_AT_TAIL if at_tail else TOOL_REPLY_MAYBE_COVERED
        return template.format(call_ids=ids)

    def reply_status(self, ids: list[str], status: ReplyStatus, speech_id: str | None) -> None:
        self.session.emit(ToolReply(call_ids=list(ids), status=status, speech_id=speech_id))

    def owed_by_run(self, run: Any) -> bool:
        """Whether a deferred tool started during ``run`` is still working."""
        return any(st.detached and st.run is run for st in self.running)


def error_output(call: FunctionCall, text: str) -> FunctionCallOutput:
    """The output of a call that failed (the model reads ``text``)."""
    return FunctionCallOutput(call_id=call.call_id, name=call.name, output=text, is_error=True)


def _error(call: FunctionCall, text: str) -> ToolOutcome:
    return ToolOutcome(error_output(call, text))
