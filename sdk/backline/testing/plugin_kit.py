"""The test kit for plugin authors: sessions, plugin managers, driving a background.

- ``SessionFactory``: started sessions with given backgrounds and a scripted LLM,
  closed together (the ``make_session`` fixture).
- ``BackgroundDriver``: runs background definitions in a real ``Session`` whose
  voice agent is scripted: a user turn makes it call ``backline_send`` with the
  user's words; a spoken background update makes it read the update out. It
  records what the background said (spoken and silent), its states and statuses.
- ``drive_background(definition, *messages)``: one call that sends each message
  as the voice agent would, waits until the background has handled it, and
  returns a ``BackgroundRun``.

Timeouts are on the event loop's clock, so under the ``virtual_clock`` fixture a
background that sleeps runs instantly, and one that hangs fails at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..background.context import UNSET
from ..background.definition import BackgroundDefinition
from ..background.tools import SEND_TOOL
from ..llm.chat_context import ChatMessage, FunctionCallOutput
from ..session import Session
from ..voice.agent import Agent
from ..voice.events import BackgroundMessage, BackgroundState, BackgroundStatus
from ..voice.io import InMemoryTextOutput
from .scripted_llm import LLMRequest, ScriptedLLM, ScriptedResponse, text, tool_calls

if TYPE_CHECKING:
    from ..background.runtime import BackgroundRuntime
    from ..llm.llm import LLM
    from ..llm.tools import FunctionTool
    from ..voice.run_result import RunResult

DEFAULT_TIMEOUT = 10.0
TEST_INSTRUCTIONS = (
    "You are a voice assistant. Send the user's requests to the background session with "
    "backline_send and relay its updates briefly."
)
ACK = "Okay, I've passed that on."

_EVENTS = (
    "agent_state_changed",
    "background_message",
    "background_reply",
    "background_state",
    "background_status",
    "speech_created",
    "error",
    "close",
)


class SessionFactory:
    """Builds started sessions (``await factory(*backgrounds, llm=...)``) and closes
    them all in ``aclose()``. The ``make_session`` fixture is one of these."""

    def __init__(self) -> None:
        self.sessions: list[Session[Any]] = []

    async def __call__(
        self,
        *backgrounds: BackgroundDefinition,
        llm: LLM | None = None,
        tools: Sequence[FunctionTool] = (),
        agent: Agent | None = None,
        **session_options: Any,
    ) -> Session[Any]:
        """A started ``Session`` with ``backgrounds``; ``llm`` defaults to an empty
        ``ScriptedLLM`` (``session.llm.push(...)`` to script it) and ``agent`` to an
        ``Agent`` with short test instructions."""
        session: Session[Any] = Session(
            llm if llm is not None else ScriptedLLM(),
            tools=tools,
            background=list(backgrounds),
            **session_options,
        )
        self.sessions.append(session)
        await session.start(agent if agent is not None else Agent(TEST_INSTRUCTIONS))
        return session

    async def aclose(self) -> None:
        sessions, self.sessions = self.sessions, []
        for session in reversed(sessions):
            await session.aclose()


@dataclass
class BackgroundRun:
    """What one background did while it was driven.

    ``spoken`` and ``silent`` are the texts it sent on each channel, ``states``
    every value it reported (``state`` is the last, or ``UNSET``), ``statuses``
    its status changes, and ``transcript`` what the voice agent said.
    """

    background_id: str
    spoken: list[str] = field(default_factory=list)
    silent: list[str] = field(default_factory=list)
    states: list[Any] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    transcript: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def state(self) -> Any:
        """The last reported state, or ``UNSET``."""
        return self.states[-1] if self.states else UNSET


class ScriptedVoiceAgent:
    """An LLM responder that plays the voice agent for ``BackgroundDriver``.

    A user turn: call ``backline_send`` with the user's words (to ``target``).
    After the tool's output: say ``ack``. A scheduled reply (tools off): read
    out, verbatim, the spoken background updates it has not relayed yet.
    """

    def __init__(self, target: str, *, ack: str = ACK) -> None:
        self.target = target
        self.ack = ack
        self.contents: dict[str, str] = {}
        self._relayed: set[str] = set()

    def __call__(self, request: LLMRequest) -> ScriptedResponse:
        if request.tool_choice == "none":
            return text(self._relay(request))
        items = request.chat_ctx.items
        if items and isinstance(items[-1], FunctionCallOutput):
            return text(self.ack)
        last = request.last_message
        if last is None or last.role != "user" or "background_id" in last.extra:
            return text(self.ack)
        return tool_calls(
            (SEND_TOOL, {"background_session_id": self.target, "content": last.content})
        )

    def _relay(self, request: LLMRequest) -> str:
        parts: list[str] = []
        for item in request.chat_ctx.items:
            if not isinstance(item, ChatMessage) or item.extra.get("silent", True):
                continue
            message_id = item.extra.get("background_message_id")
            if message_id is None or message_id in self._relayed:
                continue
            self._relayed.add(message_id)
            parts.append(self.contents.get(message_id, item.content))
        return " ".join(parts)


class BackgroundDriver:
    """Drive background sessions in a real ``Session`` against a scripted voice agent.

    ``async with BackgroundDriver(definition) as driver:`` then ``await
    driver.say("...")`` (the user speaks; the voice agent forwards it with
    ``backline_send``), or ``await driver.send("...")`` (the ``backline_send``
    call alone), then wait with ``wait_until_done()``, ``wait_for_spoken()``,
    ``wait_for_state(...)`` or ``wait_for(...)`` and read ``result()``.

    ``target`` is the background that user turns go to (default: the first);
    ``llm`` replaces the scripted voice agent; ``output`` defaults to an instant
    ``InMemoryTextOutput``; other keyword arguments go to ``Session``.
    """

    def __init__(
        self,
        *definitions: BackgroundDefinition,
        target: str | None = None,
        llm: LLM | None = None,
        tools: Sequence[FunctionTool] = (),
        timeout: float = DEFAULT_TIMEOUT,
        output: InMemoryTextOutput | None = None,
        **session_options: Any,
    ) -> None:
        if not definitions:
            raise ValueError("BackgroundDriver needs at least one BackgroundDefinition")
        ids = [d.id for d in definitions]
        if target is not None and target not in ids:
            raise ValueError(f"target {target!r} is not one of {', '.join(ids)}")
        self.target = target or ids[0]
        self.timeout = timeout
        self.voice_agent = ScriptedVoiceAgent(self.target)
        self.output = output if output is not None else InMemoryTextOutput()
        self.session: Session[Any] = Session(
            llm if llm is not None else ScriptedLLM(self.voice_agent),
            tools=tools,
            background=definitions,
            output=self.output,
            **session_options,
        )
        self.messages: list[BackgroundMessage] = []
        self.states: list[BackgroundState] = []
        self.statuses: list[BackgroundStatus] = []
        self._waiters: list[asyncio.Future[None]] = []

    async def __aenter__(self) -> BackgroundDriver:
        for name in _EVENTS:
            self.session.on(name, self._on_event)  # type: ignore[arg-type]
        await self.session.start(Agent(TEST_INSTRUCTIONS))
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.session.aclose()

    # -- events ------------------------------------------------------------------------
    def _on_event(self, event: Any) -> None:
        if isinstance(event, BackgroundMessage):
            self.messages.append(event)
            self.voice_agent.contents[event.message_id] = event.content
        elif isinstance(event, BackgroundState):
            self.states.append(event)
        elif isinstance(event, BackgroundStatus):
            self.statuses.append(event)
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    # -- acting as the voice agent -------------------------------------------------------
    async def say(self, text: str, *, timeout: float | None = None) -> RunResult:
        """The user says ``text``; the scripted voice agent forwards it with
        ``backline_send`` (to ``target``) and acknowledges. Returns the run."""
        return await self.session.run(user_input=text, timeout=timeout or self.timeout)

    async def send(self, text: str, *, background: str | None = None) -> str:
        """Call ``backline_send`` as the voice LLM would (no model turn); returns
        the tool's output."""
        tool = next(t for t in self.session.tools if t.name == SEND_TOOL)
        args = {"background_session_id": background or self.target, "content": text}
        return str(await tool.invoke(args))

    # -- waiting -----------------------------------------------------------------------------
    async def wait_for(
        self, predicate: Callable[[], bool], *, timeout: float | None = None, what: str = ""
    ) -> None:
        """Wait until ``predicate()`` holds, re-checked after every session event."""
        limit = self.timeout if timeout is None else timeout
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        while not predicate():
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(
                    f"timed out after {limit}s waiting for {what or 'the condition'}; "
                    f"{self._describe()}"
                )
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            try:
                await asyncio.wait_for(waiter, remaining)
            except TimeoutError:
                pass

    async def wait_for_spoken(self, count: int = 1, *, timeout: float | None = None) -> list[str]:
        """Wait until the target has sent ``count`` spoken messages in all; returns them."""
        await self.wait_for(
            lambda: len(self._of(spoken=True)) >= count,
            timeout=timeout,
            what=f"{count} spoken message(s)",
        )
        return self._of(spoken=True)

    async def wait_for_state(
        self, predicate: Callable[[Any], bool], *, timeout: float | None = None
    ) -> Any:
        """Wait until the target reports a state for which ``predicate(state)`` holds."""
        seen = 0

        def matched() -> bool:
            nonlocal seen
            states = [s.state for s in self.states if s.background_id == self.target]
            for state in states[seen:]:
                seen += 1
                if predicate(state):
                    return True
            return False

        await self.wait_for(matched, timeout=timeout, what="a matching state")
        return [s.state for s in self.states if s.background_id == self.target][seen - 1]

    async def wait_until_done(self, *, timeout: float | None = None) -> None:
        """Wait until every background has taken its messages and is not inside
        ``ctx.turn()``, and the voice agent is idle (updates relayed).

        A background that handles messages outside ``ctx.turn()`` looks done as
        soon as it takes them: wait with ``wait_for(...)`` instead.
        """
        limit = self.timeout if timeout is None else timeout
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        while True:
            remaining = deadline - loop.time()
            await self.wait_for(self._settled, timeout=max(remaining, 0.0), what="the backgrounds")
            if not await self.session.wait_for_idle(timeout=max(deadline - loop.time(), 0.0)):
                raise TimeoutError(
                    f"timed out after {limit}s waiting for the voice agent to become idle; "
                    f"{self._describe()}"
                )
            if self._settled():
                return

    def _runtimes(self) -> list[BackgroundRuntime]:
        manager = self.session.background
        if manager is None:
            return []
        return [rt for rt in manager.runtimes.values()]

    def _settled(self) -> bool:
        # The inbox length has no public accessor; ``ctx.pending()`` would consume it.
        return all(
            rt.status in ("ended", "crashed", "closed") or (rt.status != "busy" and not rt.waiting)
            for rt in self._runtimes()
        )

    # -- results -------------------------------------------------------------------------------
    def _of(self, *, spoken: bool, background: str | None = None) -> list[str]:
        target = background or self.target
        return [
            m.content for m in self.messages if m.background_id == target and m.silent is not spoken
        ]

    def result(self, background: str | None = None) -> BackgroundRun:
        """What ``background`` (default: the target) did so far."""
        target = background or self.target
        errors = [s.error for s in self.statuses if s.background_id == target and s.error]
        return BackgroundRun(
            background_id=target,
            spoken=self._of(spoken=True, background=target),
            silent=self._of(spoken=False, background=target),
            states=[s.state for s in self.states if s.background_id == target],
            statuses=[s.status for s in self.statuses if s.background_id == target],
            transcript=[t for t in self.output.transcript if t],
            error=errors[-1] if errors else None,
        )

    def _describe(self) -> str:
        run = self.result()
        parts = [f"{rt.definition.id}: status {rt.status}" for rt in self._runtimes()]
        return (
            f"{'; '.join(parts)}; agent {self.session.agent_state}; spoken {run.spoken!r}; "
            f"silent {run.silent!r}; last state {run.state!r}"
        )


async def drive_background(
    definition: BackgroundDefinition,
    *messages: str,
    others: Iterable[BackgroundDefinition] = (),
    timeout: float = DEFAULT_TIMEOUT,
    via_voice_agent: bool = True,
) -> BackgroundRun:
    """Run ``definition`` against a scripted voice agent and return what it did.

    Each message is sent as the voice agent would (a user turn that the scripted
    agent forwards with ``backline_send``; with ``via_voice_agent=False``, the
    ``backline_send`` call alone), and the next one waits until the background
    has handled it (``BackgroundDriver.wait_until_done``). With no messages it
    waits until the background settles after starting. Raises ``RuntimeError``
    if the background crashes, ``TimeoutError`` after ``timeout`` seconds of
    loop time.
    """
    async with BackgroundDriver(
        definition, *others, target=definition.id, timeout=timeout
    ) as driver:
        await driver.wait_until_done()
        for message in messages:
            if via_voice_agent:
                await driver.say(message)
            else:
                await driver.send(message)
            await driver.wait_until_done()
        run = driver.result()
    if "crashed" in run.statuses:
        raise RuntimeError(f"background session '{definition.id}' crashed: {run.error}")
    return run
