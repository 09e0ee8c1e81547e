"""``session.run()`` results: the events of one turn, with fluent assertions for tests."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from ..llm.chat_context import (
    AgentHandoff,
    ChatItem,
    ChatMessage,
    FunctionCall,
    FunctionCallOutput,
)
from .events import AgentHandoffEvent, ConversationItemAdded, ErrorEvent, Event, SpeechCreated

if TYPE_CHECKING:
    from ._runtime import Runtime
    from .agent import Agent
    from .speech_handle import SpeechHandle


@dataclass
class MessageEvent:
    item: ChatMessage
    type: Literal["message"] = "message"


@dataclass
class FunctionCallEvent:
    item: FunctionCall
    type: Literal["function_call"] = "function_call"


@dataclass
class FunctionCallOutputEvent:
    item: FunctionCallOutput
    type: Literal["function_call_output"] = "function_call_output"


@dataclass
class AgentHandoffRunEvent:
    item: AgentHandoff
    old_agent: Agent | None = None
    new_agent: Agent | None = None
    type: Literal["agent_handoff"] = "agent_handoff"


RunEvent: TypeAlias = (
    MessageEvent | FunctionCallEvent | FunctionCallOutputEvent | AgentHandoffRunEvent
)


class RunResult:
    """What one ``session.run(user_input=...)`` caused, in order.

    ``events`` lists messages, function calls, their outputs and handoffs;
    ``expect`` walks them with assertions; ``errors`` holds recoverable errors
    reported during the run.
    """

    def __init__(self, session: Runtime, user_input: str) -> None:
        self._session = session
        self.user_input = user_input
        self._events: list[RunEvent] = []
        self._watched: list[SpeechHandle] = []
        self._inputs: list[ChatItem] = []  # the user's messages (by identity: no id made)
        self.errors: list[BaseException] = []
        self._expect: RunAssert | None = None

    @property
    def events(self) -> list[RunEvent]:
        return sorted(self._events, key=lambda e: e.item.created_at)

    @property
    def expect(self) -> RunAssert:
        if self._expect is None:
            self._expect = RunAssert(self.events)
        return self._expect

    @property
    def final_output(self) -> str | None:
        """The text of the last assistant message, if any."""
        for ev in reversed(self.events):
            if isinstance(ev, MessageEvent) and ev.item.role == "assistant":
                return ev.item.content
        return None

    def __repr__(self) -> str:
        return f"RunResult({len(self._events)} events)"

    # -- collection -------------------------------------------------------------
    def _on_event(self, event: Event) -> None:
        if isinstance(event, ConversationItemAdded):
            self._on_item(event.item)
        elif isinstance(event, AgentHandoffEvent):
            for ev in reversed(self._events):
                if isinstance(ev, AgentHandoffRunEvent) and ev.new_agent is None:
                    ev.old_agent, ev.new_agent = event.old_agent, event.new_agent
                    break
        elif isinstance(event, SpeechCreated):
            self._watch(event.speech)
        elif isinstance(event, ErrorEvent):
            self.errors.append(event.error)

    def _on_item(self, item: ChatItem) -> None:
        """An item entered the history (the session calls this directly when nobody
        listens for ``conversation_item_added``)."""
        if self._inputs and item in self._inputs:  # (items compare by identity)
            return
        if isinstance(item, ChatMessage):
            if item.role not in ("system", "developer"):
                self._events.append(MessageEvent(item))
        elif isinstance(item, FunctionCall):
            self._events.append(FunctionCallEvent(item))
        elif isinstance(item, FunctionCallOutput):
            self._events.append(FunctionCallOutputEvent(item))
        else:
            self._events.append(AgentHandoffRunEvent(item))

    def _watch(self, speech: SpeechHandle) -> None:
        if speech not in self._watched:
            self._watched.append(speech)

    def _settled(self) -> bool:
        s = self._session
        if s._work_in_progress():
            return False
        for sp in self._watched:
            if not sp._done and not sp._blocked:
                return False
        return not s._owes_reply_for(self)

    async def _wait(self, timeout: float) -> None:
        session = self._session
        ok = await session._wait_for(self._settled, timeout=timeout, deadline=session._run_deadline)
        if not ok and not session._closing:
            raise TimeoutError(
                f"run(user_input={self.user_input!r}) did not finish within {timeout}s; "
                f"events so far: {describe_events(self.events)}"
            )


def describe_events(events: list[RunEvent]) -> str:
    return "[" + ", ".join(_describe(e) for e in events) + "]"


def _describe(e: RunEvent) -> str:
    if isinstance(e, MessageEvent):
        return f"message({e.item.role}: {e.item.content!r})"
    if isinstance(e, FunctionCallEvent):
        return f"function_call({e.item.name} {e.item.arguments})"
    if isinstance(e, FunctionCallOutputEvent):
        flag = " error" if e.item.is_error else ""
        return f"function_call_output({e.item.name}{flag}: {e.item.output!r})"
    return f"agent_handoff({e.item.old_agent} -> {e.item.new_agent})"


class RunAssert:
    """A cursor over a run's events: ``next_event()``, ``skip_next()``, ``no_more_events()``."""

    def __init__(self, events: list[RunEvent]) -> None:
        self._events = events
        self._i = 0

    def __getitem__(self, index: int) -> EventAssert:
        try:
            return EventAssert(self._events[index], self._events)
        except IndexError:
            raise AssertionError(
                f"no event at index {index}: {describe_events(self._events)}"
            ) from None

    def next_event(self) -> EventAssert:
        if self._i >= len(self._events):
            raise AssertionError(
                f"expected another event after #{self._i}: {describe_events(self._events)}"
            )
        ev = self._events[self._i]
        self._i += 1
        return EventAssert(ev, self._events)

    def skip_next(self, count: int = 1) -> RunAssert:
        for _ in range(count):
            self.next_event()
        return self

    def no_more_events(self) -> None:
        if self._i < len(self._events):
            rest = describe_events(self._events[self._i :])
            raise AssertionError(f"expected no more events, got {rest}")

    def contains_function_call(
        self, *, name: str | None = None, arguments: dict[str, Any] | None = None
    ) -> EventAssert:
        for ev in self._events:
            if isinstance(ev, FunctionCallEvent) and _call_matches(ev.item, name, arguments):
                return EventAssert(ev, self._events)
        raise AssertionError(
            f"no function_call(name={name!r}, arguments={arguments!r}) in "
            f"{describe_events(self._events)}"
        )

    def contains_message(
        self, *, role: str | None = None, content: str | None = None
    ) -> EventAssert:
        for ev in self._events:
            if (
                isinstance(ev, MessageEvent)
                and (role is None or ev.item.role == role)
                and (content is None or content in ev.item.content)
            ):
                return EventAssert(ev, self._events)
        raise AssertionError(
            f"no message(role={role!r}, content~={content!r}) in {describe_events(self._events)}"
        )


def _call_matches(item: FunctionCall, name: str | None, arguments: dict[str, Any] | None) -> bool:
    if name is not None and item.name != name:
        return False
    if arguments is not None:
        try:
            parsed = json.loads(item.arguments or "{}")
        except json.JSONDecodeError:
            return False
        return bool(parsed == arguments)
    return True


class EventAssert:
    """One event, with assertions that return ``self`` (so they chain)."""

    def __init__(self, event: RunEvent, all_events: list[RunEvent]) -> None:
        self.event = event
        self._all = all_events

    def _fail(self, expected: str) -> AssertionError:
        return AssertionError(
            f"expected {expected}, got {_describe(self.event)}; all events: "
            f"{describe_events(self._all)}"
        )

    def is_message(
        self,
        *,
        role: str | None = None,
        content: str | None = None,
        interrupted: bool | None = None,
    ) -> EventAssert:
        """A message; ``content`` must be contained in the message's text."""
        ev = self.event
        if not isinstance(ev, MessageEvent):
            raise self._fail(f"a message (role={role!r})")
        if role is not None and ev.item.role != role:
            raise self._fail(f"a message with role={role!r}")
        if content is not None and content not in ev.item.content:
            raise self._fail(f"a message containing {content!r}")
        if interrupted is not None and ev.item.interrupted != interrupted:
            raise self._fail(f"a message with interrupted={interrupted}")
        return self

    def is_function_call(
        self, *, name: str | None = None, arguments: dict[str, Any] | None = None
    ) -> EventAssert:
        """A function call; ``arguments`` must equal the parsed JSON arguments."""
        ev = self.event
        if not isinstance(ev, FunctionCallEvent) or not _call_matches(ev.item, name, arguments):
            raise self._fail(f"function_call(name={name!r}, arguments={arguments!r})")
        return self

    def is_function_call_output(
        self, *, output: str | None = None, is_error: bool | None = None
    ) -> EventAssert:
        """A call's output; ``output`` must be contained in the output text."""
        ev = self.event
        if not isinstance(ev, FunctionCallOutputEvent):
            raise self._fail("a function_call_output")
        if output is not None and output not in ev.item.output:
            raise self._fail(f"a function_call_output containing {output!r}")
        if is_error is not None and ev.item.is_error != is_error:
            raise self._fail(f"a function_call_output with is_error={is_error}")
        return self

    def is_agent_handoff(self, *, new_agent_type: type[Any] | None = None) -> EventAssert:
        ev = self.event
        if not isinstance(ev, AgentHandoffRunEvent):
            raise self._fail("an agent_handoff")
        if new_agent_type is not None and not isinstance(ev.new_agent, new_agent_type):
            raise self._fail(f"an agent_handoff to {new_agent_type.__name__}")
        return self
