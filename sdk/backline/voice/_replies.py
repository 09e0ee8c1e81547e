"""A reply: its model requests (each streamed in the agent's loop task, under the
stream guard), their playout, and its tool steps, until the model answers without
calls (or stops, fails, is interrupted, hands off). ``generate`` queues one on an
agent; ``reply_work`` is the work its speech runs."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from ..llm.chat_context import ChatItem, ChatMessage, FunctionCall, FunctionCallOutput
from ..llm.llm import AudioDelta, LLMStream, TextDelta, ToolCallChunk, Usage
from ..llm.tools import FunctionTool, NamedToolChoice, ToolChoice
from ..tasks import CancelWhenDone, cancel_and_wait
from ._activity import AgentActivity
from ._tool_runner import CANCELLED_OUTPUT, CallState, ToolOutcome, error_output
from .agent import Agent, AgentTask
from .events import ErrorEvent, FunctionToolsExecuted
from .speech_handle import PRIORITY_NORMAL, SpeechHandle

logger = logging.getLogger("backline")

# The default loop's clock: its ``time()`` only returns ``time.monotonic()``, read directly.
_MONOTONIC_LOOP_TIME = asyncio.BaseEventLoop.time


def generate(
    activity: AgentActivity,
    *,
    user_input: str | None = None,
    instructions: str | None = None,
    tool_choice: ToolChoice | None = None,
    allow_interruptions: bool | None = None,
    source: str,
    priority: int = PRIORITY_NORMAL,
    user_turn: ChatMessage | None = None,
) -> SpeechHandle:
    """Queue a reply of ``activity``'s agent (``user_turn``: the user message it answers)."""
    if allow_interruptions is None:  # (once per turn: inline)
        allow_interruptions = activity.agent._allow_interruptions
        if allow_interruptions is None:
            allow_interruptions = True
    speech = SpeechHandle(allow_interruptions=allow_interruptions, source=source, priority=priority)
    speech._user_turn = user_turn
    if user_input is not None:
        activity.record([ChatMessage(role="user", content=user_input)], None)
    if instructions is None and tool_choice is None:
        # (a user turn's reply: the speech runs reply_work's own coroutine, no wrapper)
        activity.schedule(speech, reply_work)
        return speech

    async def work(activity: AgentActivity, sp: SpeechHandle) -> None:
        await reply_work(activity, sp, instructions=instructions, tool_choice=tool_choice)

    activity.schedule(speech, work)
    return speech


@dataclass(slots=True)
class _Step:
    """What one LLM request of a reply produced."""

    text_at: float | None = None  # when its text began (None: the step said nothing)
    calls: list[CallState] = field(default_factory=list)
    over_limit: bool = False
    usage: Usage | None = None
    settled: bool = False  # the outputs of ``calls`` are recorded
    cut: bool = False  # an interrupt stopped the model's stream before it ended


async def reply_work(
    activity: AgentActivity,
    speech: SpeechHandle,
    *,
    instructions: str | None = None,
    tool_choice: ToolChoice | None = None,
) -> None:
    """A reply: model requests, their playout and their tool steps, until the
    model answers without calls (or stops, fails, is interrupted, hands off)."""
    step: _Step | None = None
    try:
        session = activity.session
        choice = tool_choice
        step_index = 0
        interrupted = speech._interrupt_fut.done
        while not interrupted():
            speech._set_phase("thinking")
            step = _Step()
            if not await generate_step(activity, speech, instructions, choice, step_index, step):
                return  # the model failed; reported already
            if interrupted():
                await cancel_calls(activity, step.calls, speech)
                step.settled = True
                return
            if not step.calls:
                if step.over_limit:
                    await say_inline(activity, speech, session.max_tool_steps_message)
                return
            speech._set_phase("thinking")
            outcomes = await await_calls(activity, step.calls, speech)
            # One pass: the outputs, the handoff (the last wins), whether all stop.
            outputs: list[FunctionCallOutput | None] = []
            handoff: Agent | None = None
            handoffs = 0
            all_stop = True
            for o in outcomes:
                outputs.append(o.output)
                if o.handoff is not None:
                    handoff = o.handoff
                    handoffs += 1
                if not o.stop_response:
                    all_stop = False
            record_outputs(activity, step.calls, outputs, speech)
            step.settled = True
            if session._transcript.wants("function_tools_executed"):
                session.emit(
                    FunctionToolsExecuted(calls=[st.call for st in step.calls], outputs=outputs)
                )
            if handoff is not None:
                if handoffs > 1:
                    logger.warning("several tools handed off in one step; the last one wins")
                activity.handoff = handoff
                # Owed from now on: the speech ends before the loop requests the
                # handoff, and the agent must not blip to "listening" in between.
                session._owe_handoff()
                return
            if interrupted():
                return
            if isinstance(activity.agent, AgentTask) and activity.agent.done():
                return  # the task completed: its caller takes the conversation back
            if all_stop:
                # No reply follows the outputs: a realtime model takes them now (its
                # calls are not left open until the next request).
                activity.context_inserted()
                return
            if step.over_limit:
                await say_inline(activity, speech, session.max_tool_steps_message)
                return
            step_index += 1
            if choice == "required" or isinstance(choice, NamedToolChoice):
                choice = "auto"
    except asyncio.CancelledError:
        # Cancelled (close): every call in the history still gets its output.
        if step is not None and not step.settled:
            abandon_calls(activity, step.calls, speech)
        raise


async def generate_step(
    activity: AgentActivity,
    speech: SpeechHandle,
    instructions: str | None,
    choice: ToolChoice | None,
    step_index: int,
    step: _Step,
) -> bool:
    """One LLM request, its playout and its calls' start; False if it failed."""
    session = activity.session
    tools = activity.tool_map()
    ctx = activity.agent._chat_ctx
    if instructions:
        ctx = ctx.copy()
        ctx.insert(ChatMessage(role="system", content=instructions))
    if choice == "none":
        tool_list: list[FunctionTool] = []
    else:
        cached = activity._tools_cached  # the map's own list, while the map is current
        tool_list = cached[3] if cached is not None and cached[2] is tools else list(tools.values())
    error = await consume(activity, speech, ctx, tool_list, choice, tools, step, step_index)
    if step.text_at is not None:
        result = await activity._playout(speech)
        if result.text or not result.interrupted:
            msg = ChatMessage(
                role="assistant",
                content=result.text,
                # A reply the model failed to finish, or an interrupt stopped
                # before the model did, is cut off, as by a barge-in.
                interrupted=result.interrupted or error is not None or step.cut,
                created_at=step.text_at or time.time(),
            )
            activity.record([msg], speech)
    for st in step.calls:
        st.preamble_played()
    if error is not None:
        logger.error("LLM request failed: %s", error, exc_info=error)
        session.emit(ErrorEvent(error=error, recoverable=True, source="llm"))
        if step.calls:
            outcomes = await await_calls(activity, step.calls, speech)
            record_outputs(activity, step.calls, [o.output for o in outcomes], speech)
        step.settled = True
        return False
    return True


async def consume(
    activity: AgentActivity,
    speech: SpeechHandle,
    ctx: Any,
    tool_list: list[FunctionTool],
    choice: ToolChoice | None,
    tools: dict[str, FunctionTool],
    step: _Step,
    step_index: int,
) -> BaseException | None:
    """One request: the model's stream runs in this task (no task per request),
    and an interrupt cancels it where it waits. Returns the error the request
    failed with (None when it completed or was interrupted)."""
    if speech._interrupt_fut.done():
        return None
    guard = activity._guard
    if guard is None:
        assert activity._loop_task is not None
        guard = activity._guard = CancelWhenDone(speech._interrupt_fut, activity._loop_task)
    else:
        guard.arm(speech._interrupt_fut)
    try:
        session = activity.session
        output = session._output
        llm = activity.agent._llm or session.llm
        # Timed only when someone listens for the request's metrics (or records them).
        transcript = session._transcript
        timed = bool(transcript.recorders) or transcript.wants("llm_metrics")
        clock = time.monotonic
        if timed and type(loop := asyncio.get_running_loop()).time is not _MONOTONIC_LOOP_TIME:
            clock = loop.time  # (a loop with a clock of its own: a virtual one, uvloop's)
        started = clock() if timed else 0.0
        first: float | None = None
        first_audio: float | None = None
        status: Literal["completed", "cancelled", "failed"] = "failed"
        stream = llm.chat(ctx, tools=tool_list, tool_choice=choice)
        ended = False
        try:
            try:
                async for chunk in stream:
                    if isinstance(chunk, TextDelta):
                        if timed and first is None:
                            first = clock()
                        if not chunk.text:
                            continue
                        if step.text_at is None:
                            step.text_at = time.time()
                            output.begin_segment(speech.id)
                            speech._set_phase("speaking")
                        output.write(chunk.text)
                    elif isinstance(chunk, ToolCallChunk):
                        if timed and first is None:
                            first = clock()
                        if step_index >= session.max_tool_steps:
                            step.over_limit = True
                            continue
                        runner = activity.runner
                        call = FunctionCall(
                            call_id=runner.unique_call_id(chunk.call_id, chunk.name),
                            name=chunk.name,
                            arguments=chunk.arguments,
                        )
                        activity.record([call], speech)
                        step.calls.append(runner.start(activity, speech, call, tools))
                    elif isinstance(chunk, AudioDelta):
                        if timed:
                            if first is None:
                                first = clock()
                            if first_audio is None and chunk.data:
                                first_audio = clock()
                        if step.text_at is None:
                            step.text_at = time.time()
                            output.begin_segment(speech.id)
                            speech._set_phase("speaking")
                        output.write_audio(chunk)
                    elif isinstance(chunk, Usage):
                        step.usage = chunk
                    elif timed and first is None:
                        first = clock()
                ended = True
            finally:
                # Closed as ``async with`` would; a plain LLMStream that ran to its
                # end has nothing left to close (one request, several awaits fewer).
                if not ended or type(stream) is not LLMStream:
                    await stream.aclose()
            status = "completed"
        except asyncio.CancelledError:
            status = "cancelled"
            raise
        finally:
            if step.text_at is not None:
                output.flush()
            if timed:
                transcript.llm_request(
                    llm,
                    speech.id,
                    started=started,
                    first=first,
                    first_audio=first_audio,
                    ended=clock(),
                    usage=step.usage,
                    status=status,
                )
    except asyncio.CancelledError:
        if guard.end() and not guard.cancelled_from_outside():
            step.cut = True  # the interrupt stopped the stream
            return None
        raise  # close (or a cancelled future the stream awaited): the speech ends
    except Exception as e:
        interrupted = guard.end()
        if guard.cancelled_from_outside():
            # A stream that turned close's cancellation into an error: close stands.
            raise asyncio.CancelledError() from e
        if interrupted:
            # The stream failed while it was being stopped: moot, the reply is cut.
            logger.debug("the model stream failed as it was interrupted: %r", e)
            step.cut = True
            return None
        return e
    step.cut = guard.end()  # a stream that ended on the interrupt's cancellation
    if guard.cancelled_from_outside():
        raise asyncio.CancelledError()  # a stream that swallowed close's cancellation
    return None


async def say_inline(activity: AgentActivity, speech: SpeechHandle, text: str) -> None:
    await activity.say_work(speech, text, True)


async def await_calls(
    activity: AgentActivity, calls: list[CallState], speech: SpeechHandle
) -> list[ToolOutcome]:
    """Wait for each call to return or to post its first update; an interrupt
    cancels the calls still running (deferred ones keep going)."""
    interrupted = speech._interrupt_fut  # waited on directly: never cancel it
    pending = [st for st in calls if not st.settled]
    while pending and not interrupted.done():
        # One future for the step: each call resolves it itself (no done-callback
        # hop), the interrupt through a callback.
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for st in pending:
            st.waiter = waiter

        def wake(_: asyncio.Future[None], waiter: asyncio.Future[None] = waiter) -> None:
            if not waiter.done():
                waiter.set_result(None)

        interrupted.add_done_callback(wake)
        try:
            await waiter
        finally:
            interrupted.remove_done_callback(wake)
            for st in pending:
                st.waiter = None
        pending = [st for st in pending if not st.settled]
    outcomes: list[ToolOutcome] = []
    to_cancel: list[asyncio.Task[Any]] = []
    for st in calls:
        outcomes.append(outcome_of(activity, st, to_cancel))
    if to_cancel:
        await cancel_and_wait(to_cancel, owner=str(activity))
    return outcomes


def outcome_of(
    activity: AgentActivity, st: CallState, to_cancel: list[asyncio.Task[Any]]
) -> ToolOutcome:
    task = st.task
    assert task is not None
    call = st.call
    if st.first_update is not None:
        return ToolOutcome(st.first_update)
    if task.done() and not task.cancelled():
        exc = task.exception()
        if exc is None:
            return task.result()
        logger.error("tool %r failed", call.name, exc_info=exc)
        return ToolOutcome(error_output(call, f"Tool '{call.name}' failed unexpectedly."))
    if not task.done():
        to_cancel.append(task)
    return ToolOutcome(error_output(call, CANCELLED_OUTPUT))


def abandon_calls(activity: AgentActivity, calls: list[CallState], speech: SpeechHandle) -> None:
    """Record an output for each call now, without waiting: the ones still
    running are cancelled (their task's owner, the tool scope, awaits them)."""
    to_cancel: list[asyncio.Task[Any]] = []
    outputs = [outcome_of(activity, st, to_cancel).output for st in calls]
    for task in to_cancel:
        task.cancel()
    record_outputs(activity, calls, outputs, speech)


async def cancel_calls(
    activity: AgentActivity, calls: list[CallState], speech: SpeechHandle
) -> None:
    if not calls:
        return
    outcomes = await await_calls(activity, calls, speech)
    record_outputs(activity, calls, [o.output for o in outcomes], speech)


def record_outputs(
    activity: AgentActivity,
    calls: list[CallState],
    outputs: list[FunctionCallOutput | None],
    speech: SpeechHandle,
) -> None:
    """Record one step's outputs after all of its calls: a tool that finished
    before the model streamed the step's next call must not land between them
    (the history is ordered by time; one step is one assistant turn)."""
    last_call = 0.0
    for st in calls:
        if st.call.created_at > last_call:
            last_call = st.call.created_at
    kept: list[ChatItem] = []
    for out in outputs:
        if out is not None:
            if out.created_at < last_call:
                out.created_at = last_call
            kept.append(out)
    activity.record(kept, speech)
