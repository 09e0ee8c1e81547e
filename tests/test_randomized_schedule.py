"""Random schedules against the runtime's invariants (issues 4 and 12).

A schedule mixes user turns (chat, deferred tools, plain tools, handoffs, inline
``AgentTask``s and their completion), interrupts, barge-ins, ``say``, background
messages (which start, and may interrupt, background turns), silent and spoken
background sends, waits, and close at a random point. Agents' ``on_enter`` and
``on_exit`` await, greet, and send from ``on_exit``; deferred tools outlive
handoffs and task completions. After every step a checker verifies:

- the agent state is what the derivation says, and never ``listening`` while a
  follow-up is owed; the away timer runs only when it may;
- every away-timer hold has a live owner and belongs to running work;
- every tool call in the history has at most one output (exactly one after close),
  and every output has its call;
- a silent send made during a switch reached the agent the switch made current;
- a background interrupt lands only on a turn that a message interrupted;

and after close: close returned within its bound, nothing runs, no hold is left,
the state is ``listening``, every deferred result is in the history exactly once.

CI runs a bounded number of examples (the ``default`` profile). For a long run:

    BACKLINE_HYPOTHESIS_EXAMPLES=5000 .venv/bin/pytest tests/test_randomized_schedule.py \\
        --hypothesis-profile=long

(the ``long`` profile also turns pytest-timeout's per-test limit off).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import looptime
from hypothesis import event, given
from hypothesis import strategies as st

from backline import (
    Agent,
    AgentTask,
    BackgroundContext,
    InMemoryTextOutput,
    RunContext,
    Session,
    background,
    function_tool,
)
from backline.testing import LLMRequest, ScriptedLLM, ScriptedResponse, text, tool_calls

TURNS = ["handoff", "task", "defer", "finish", "chat", "both", "plain"]

TURN = st.tuples(st.just("turn"), st.sampled_from(TURNS))
ACTIONS = st.one_of(
    TURN,
    TURN,  # twice as likely as any other step
    st.tuples(st.just("interrupt"), st.booleans()),
    st.tuples(st.just("speak"), st.booleans()),
    st.tuples(st.just("say"), st.booleans()),
    st.tuples(st.just("wait"), st.floats(min_value=0.0, max_value=6.0)),
    st.tuples(st.just("bg_message"), st.sampled_from(["work", "more"])),
    st.tuples(st.just("bg_send"), st.booleans()),
)


@dataclass(frozen=True)
class Config:
    """How the agents and the background behave in one example."""

    enter_delay: float = 0.0  # on_enter awaits this long ...
    greet: bool = False  # ... then asks for a greeting
    exit_delay: float = 0.0  # on_exit awaits this long ...
    exit_send: str | None = None  # ... and sends to the background's voice channel
    bg_turn: float = 2.0  # a background turn's length, unless interrupted
    bg_silent: bool = True  # how the background reports the end of a turn


CONFIGS = st.builds(
    Config,
    enter_delay=st.sampled_from([0.0, 0.5, 3.0]),
    greet=st.booleans(),
    exit_delay=st.sampled_from([0.0, 0.5, 3.0]),
    exit_send=st.sampled_from([None, "silent", "spoken"]),
    bg_turn=st.sampled_from([0.5, 2.0, 5.0]),
    bg_silent=st.booleans(),
)


@dataclass
class World:
    config: Config = field(default_factory=Config)
    accepted_finals: set[str] = field(default_factory=set)
    violations: list[str] = field(default_factory=list)
    bg_ctx: BackgroundContext | None = None
    bg_turns: int = 0
    bg_turn: int | None = None  # the background turn running now
    bg_cut: asyncio.Event | None = None
    bg_mid_turn: Counter[int] = field(default_factory=Counter)  # messages that arrived mid-turn
    bg_interrupts: int = 0
    tasks_done: int = 0
    notes: int = 0
    handoffs: int = 0
    # Silent notes sent while agents were switching: (text, switches ended at the time).
    # A switch ends with the session's _follow_switch; the note must be in the agent that
    # is current then (the one the switch in progress when it was sent made current).
    following: list[tuple[str, int]] = field(default_factory=list)
    switch_ends: int = 0


# -- the model ------------------------------------------------------------------------


def respond(request: LLMRequest) -> ScriptedResponse:
    items = request.chat_ctx.items
    last = items[-1] if items else None
    if request.tool_choice == "none" or (last is not None and last.type != "message"):
        return text("Noted, " + "here it is " * 3)
    if any("greet" in i for i in request.instructions):
        return text("Hello, how can I help?")
    names = set(request.tool_names)
    said = [  # what the user said last (background notes are not the user)
        it.content
        for it in items
        if it.type == "message" and it.role == "user" and "Background session" not in it.content
    ]
    content = said[-1] if said else ""
    wanted: dict[str, ScriptedResponse] = {
        "defer": tool_calls(("job", {"seconds": 3.5}), text="Starting."),
        "plain": tool_calls(("quick", {})),
        "handoff": tool_calls(("transfer", {})),
        "both": tool_calls(("job", {"seconds": 1.0}), ("quick", {})),
        "task": tool_calls(("ask", {})),
        "finish": tool_calls(("finish", {})),
    }
    for word, response in wanted.items():
        if content.startswith(word) and all(c.name in names for c in response.tool_calls):
            return response
    return text("A reply of a few words " * 2)


# -- the agents and the background ----------------------------------------------------


async def send_note(world: World, session: Session[Any], how: str) -> None:
    """A send through the background's voice channel (silent notes are tracked)."""
    ctx = world.bg_ctx
    if ctx is None or ctx.closed:
        return
    world.notes += 1
    note = f"NOTE-{world.notes}"
    with contextlib.suppress(RuntimeError):  # closed meanwhile
        await ctx.send(note, silent=how == "silent")
        if how == "silent" and (session._switches.switching or session._switches.owed):
            world.following.append((note, world.switch_ends))


def deferred_job(world: World) -> Any:
    @function_tool
    async def job(ctx: RunContext[Any], seconds: float) -> str:
        """A deferred job."""
        await ctx.update("started")
        await asyncio.sleep(seconds / 2)
        await ctx.update("halfway")
        await asyncio.sleep(seconds / 2)
        world.accepted_finals.add(ctx.function_call.call_id + "_final")
        return "job result"

    return job


class Hooks:
    """on_enter and on_exit as the example's config says."""

    world: World

    async def on_enter(self) -> None:
        cfg = self.world.config
        await asyncio.sleep(cfg.enter_delay)
        if cfg.greet:
            with contextlib.suppress(RuntimeError):  # the session closed meanwhile
                self.session.generate_reply(instructions="greet the user")  # type: ignore[attr-defined]

    async def on_exit(self) -> None:
        cfg = self.world.config
        await asyncio.sleep(cfg.exit_delay)
        if cfg.exit_send is not None:
            await send_note(self.world, self.session, cfg.exit_send)  # type: ignore[attr-defined]


class Quiz(Hooks, AgentTask[str]):
    def __init__(self, world: World) -> None:
        self.world = world
        super().__init__("Quiz the user.", tools=[deferred_job(world)])

    @function_tool
    async def finish(self) -> str:
        """Finish the quiz."""
        self.world.tasks_done += 1
        self.complete("quiz done")
        return "finished"


class Worker(Hooks, Agent):
    def __init__(self, world: World, name: str) -> None:
        self.world = world
        self.name = name

        @function_tool
        async def quick() -> str:
            """A quick tool."""
            await asyncio.sleep(0.2)
            return "quick result"

        @function_tool
        async def transfer() -> Agent:
            """Hand off."""
            return Worker(world, "B" if name == "A" else "A")

        @function_tool
        async def ask() -> str:
            """Run a quiz inline."""
            return await Quiz(world)

        super().__init__(f"Agent {name}.", tools=[deferred_job(world), quick, transfer, ask])


def make_background(world: World) -> Any:
    @background("bg", description="A background worker.", interrupt_grace=1.0)
    async def bg(ctx: BackgroundContext) -> None:
        world.bg_ctx = ctx

        async def on_interrupt() -> None:
            turn = world.bg_turn
            if turn is None or not world.bg_mid_turn[turn]:
                world.violations.append(f"an interrupt landed on background turn {turn}")
            world.bg_interrupts += 1
            if world.bg_cut is not None:
                world.bg_cut.set()

        ctx.on_interrupt(on_interrupt)
        async for _batch in ctx.batches():
            async with ctx.turn():
                world.bg_turns += 1
                turn = world.bg_turn = world.bg_turns
                cut = world.bg_cut = asyncio.Event()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(cut.wait(), world.config.bg_turn)
                world.bg_turn = world.bg_cut = None
            await send_note(world, ctx.session, "silent" if world.config.bg_silent else "spoken")
            del turn

    return bg


# -- the invariants -------------------------------------------------------------------


def owed(s: Session[Any]) -> bool:
    """An oracle stated from the parts: a follow-up is committed."""
    a = s._switches.current
    current_busy = a is not None and not a.paused and bool(a.queued or a.entering)
    switches = s._switches
    return bool(
        s._turns.in_progress
        or switches.held
        or switches.owed
        or switches.switching
        or current_busy
        or any(scheduler.owes_reply() for scheduler in s._schedulers)
    )


def check_pairs(s: Session[Any], where: str, world: World, *, closed: bool) -> None:
    calls = Counter(it.call_id for it in s.history.items if it.type == "function_call")
    outputs = Counter(it.call_id for it in s.history.items if it.type == "function_call_output")
    for cid, n in calls.items():
        if n > 1:
            world.violations.append(f"{where}: call {cid} is in the history {n} times")
        if closed and outputs[cid] != 1:
            world.violations.append(f"{where}: call {cid} has {outputs[cid]} outputs after close")
    for cid, n in outputs.items():
        if n > 1:
            world.violations.append(f"{where}: call {cid} has {n} outputs")
        if cid not in calls:
            world.violations.append(f"{where}: output {cid} has no call")


def check(s: Session[Any], world: World, where: str) -> None:
    """The invariants that hold after every step of a running session."""
    v = world.violations
    if s._closing:
        return
    derived = s._derive_agent_state()
    if s.agent_state != derived:
        v.append(f"{where}: agent_state is {s.agent_state}, the derivation says {derived}")
    if s.agent_state == "listening" and owed(s):
        v.append(f"{where}: listening while a follow-up is owed")
    away = s._away
    if away.armed and not (
        s.agent_state == "listening" and s.user_state == "listening" and not away.counting_holds()
    ):
        v.append(f"{where}: the away timer runs while it may not")
    live = {a for a in s._switches.activities if not a.closed}
    for hold in away.holds:
        if hold.owner is not None and hold.owner not in live:
            v.append(f"{where}: {hold} has no live owner")
    in_turn = world.bg_turn is not None
    if len(away.holds) != len(s._tool_runner.running) + in_turn:
        v.append(
            f"{where}: {len(away.holds)} holds for {len(s._tool_runner.running)} running "
            f"tools and {int(in_turn)} background turn"
        )
    check_pairs(s, where, world, closed=False)


def watch_switch_ends(session: Session[Any], world: World) -> None:
    """At each switch's end (after it copied the silent notes made during it onto the
    agent it made current): the notes sent while it was under way are in that agent."""
    follow = session._follow_switch

    async def followed() -> None:
        await follow()
        world.switch_ends += 1
        agent = session.current_agent
        for note, ends in list(world.following):
            if ends < world.switch_ends:
                world.following.remove((note, ends))
                if not any(note in str(getattr(it, "content", "")) for it in agent.chat_ctx.items):
                    world.violations.append(
                        f"{note}, sent during a switch, missed the agent it made current"
                    )

    session._follow_switch = followed  # type: ignore[method-assign]


async def scenario(
    config: Config, actions: list[tuple[str, Any]], close_at: int, pauses: list[float]
) -> World:
    world = World(config=config)
    loop = asyncio.get_running_loop()
    before = set(asyncio.all_tasks())
    session = Session(
        ScriptedLLM(respond),
        background=[make_background(world)],
        output=InMemoryTextOutput(chars_per_second=40),
        user_away_timeout=5.0,
    )

    def on_handoff(_: Any) -> None:
        world.handoffs += 1

    def on_state(ev: Any) -> None:
        if ev.new == "listening" and not session.closed and owed(session):
            world.violations.append("listening while a follow-up was owed")

    def on_status(ev: Any) -> None:
        if ev.status == "crashed":
            world.violations.append(f"the background crashed: {ev.error}")

    session.on("background_status", on_status)
    session.on("agent_handoff", on_handoff)
    session.on("agent_state_changed", on_state)
    watch_switch_ends(session, world)
    await session.start(Worker(world, "A"))
    check(session, world, "start")
    for i, (kind, arg) in enumerate(actions):
        if i == close_at:
            break
        if kind == "turn":
            session.push_user_turn(arg)
        elif kind == "interrupt":
            session.interrupt(force=arg)
        elif kind == "speak":
            (session.user_started_speaking if arg else session.user_stopped_speaking)()
        elif kind == "say":
            session.say("An aside.", allow_interruptions=arg)
        elif kind == "bg_message":
            if world.bg_turn is not None:
                world.bg_mid_turn[world.bg_turn] += 1
            assert session.background is not None
            session.background.deliver("bg", arg)
        elif kind == "bg_send":
            await send_note(world, session, "silent" if arg else "spoken")
        else:
            await asyncio.sleep(arg)
        check(session, world, f"step {i} {kind} {arg}")
        if i < len(pauses) and pauses[i]:
            await asyncio.sleep(pauses[i])  # the step unfolds
            check(session, world, f"after step {i}")
    await asyncio.sleep(pauses[len(actions)] if len(pauses) > len(actions) else 0.0)
    check(session, world, "before close")
    start = loop.time()
    await session.aclose()
    after_close(session, world, loop.time() - start, before)
    return world


def after_close(s: Session[Any], world: World, took: float, before: set[Any]) -> None:
    v = world.violations
    if took > 15:
        v.append(f"close took {took:.1f}s")
    leaked = [
        t.get_name()
        for t in asyncio.all_tasks()
        if t not in before and not t.done() and t is not asyncio.current_task()
    ]
    if leaked:
        v.append(f"tasks left behind: {leaked}")
    if s.agent_state != "listening":
        v.append(f"a closed session reports {s.agent_state}")
    if s._away.holds or s._away.armed:
        v.append(f"after close: holds {s._away.holds}, timer armed {s._away.armed}")
    ids = [it.id for it in s.history.items]
    if len(ids) != len(set(ids)):
        v.append("an item is in the history twice")
    finals = [
        it.call_id
        for it in s.history.items
        if it.type == "function_call_output" and it.call_id.endswith("_final")
    ]
    if len(finals) != len(set(finals)):
        v.append("a deferred result is in the history twice")
    extra = set(finals) - world.accepted_finals
    if extra:
        v.append(f"unexpected finals {extra}")
    check_pairs(s, "after close", world, closed=True)
    json.dumps(s.history.to_dicts())  # the history stays serialisable


def run_scenario(
    config: Config,
    actions: list[tuple[str, Any]],
    close_at: int = 99,
    pauses: list[float] | None = None,
) -> World:
    loop = looptime.new_event_loop(start=0.0)  # virtual time from the start
    coro = scenario(config, actions, close_at, pauses or [])
    try:
        return loop.run_until_complete(asyncio.wait_for(coro, 600))
    finally:
        loop.close()


PAUSE = st.sampled_from([0.0, 0.0, 0.3, 1.5, 4.0])  # virtual seconds between two steps


@given(
    config=CONFIGS,
    steps=st.lists(st.tuples(ACTIONS, PAUSE), min_size=6, max_size=20),
    close_at=st.one_of(st.just(99), st.integers(2, 20)),  # often after the last step
    settle=PAUSE,
)
def test_random_schedules_keep_the_invariants(
    config: Config, steps: list[tuple[tuple[str, Any], float]], close_at: int, settle: float
) -> None:
    actions = [action for action, _ in steps]
    pauses = [pause for _, pause in steps] + [settle]
    world = run_scenario(config, actions, close_at, pauses)
    # What the schedules reached (``--hypothesis-show-statistics`` lists these).
    event(f"agent switches: {min(world.handoffs, 3)}{'+' if world.handoffs > 3 else ''}")
    event(f"inline tasks completed: {min(world.tasks_done, 1)}+")
    event(f"deferred results: {min(len(world.accepted_finals), 1)}+")
    event(f"background turns interrupted: {min(world.bg_interrupts, 1)}+")
    assert world.violations == []


def test_a_known_busy_schedule() -> None:
    actions: list[tuple[str, Any]] = [
        ("turn", "defer"),
        ("wait", 1.0),
        ("turn", "chat"),
        ("wait", 2.0),
        ("turn", "handoff"),
        ("wait", 0.5),
        ("turn", "both"),
        ("interrupt", False),
        ("wait", 5.0),
        ("turn", "plain"),
        ("wait", 6.0),
    ]
    world = run_scenario(Config(), actions)
    assert world.violations == []
    assert world.accepted_finals


def test_a_known_schedule_across_tasks_handoffs_and_background_turns() -> None:
    config = Config(enter_delay=0.5, greet=True, exit_delay=0.5, exit_send="silent", bg_turn=5.0)
    actions: list[tuple[str, Any]] = [
        ("bg_message", "work"),
        ("turn", "task"),
        ("wait", 2.0),
        ("turn", "defer"),  # a deferred job inside the task ...
        ("wait", 1.5),
        ("bg_message", "more"),  # ... a message interrupts the background turn ...
        ("turn", "finish"),  # ... and the task completes while the job runs
        ("wait", 0.2),
        ("bg_send", True),  # a silent send during the hand-back
        ("wait", 3.0),
        ("turn", "handoff"),
        ("wait", 0.2),
        ("bg_send", True),  # and during a handoff
        ("wait", 8.0),
    ]
    world = run_scenario(config, actions)
    assert world.violations == []
    assert world.accepted_finals and world.bg_turns >= 2 and world.handoffs >= 3


def test_a_silent_note_sent_during_a_slow_handoff_reaches_the_new_agent() -> None:
    """Issue 25, item 15: the long run's falsifying example (seed 7). The old agent's
    ``on_exit`` takes 3 s; five user turns each ask for a handoff (two of them 1.5 s
    apart); then a silent note is sent while a switch is under way (catalog 47, 190).

    The note is sent after the switch made B current, while it retires A: it reaches
    B, the agent that switch makes current. A user turn held during the switch then
    hands off to A, a new agent with its own context (no note there, as no user turn
    to B is): the checker used to count that second switch as the note's."""
    config = Config(exit_delay=3.0, bg_turn=0.5, bg_silent=False)
    actions: list[tuple[str, Any]] = [
        ("turn", "handoff"),
        ("turn", "handoff"),
        ("turn", "handoff"),
        ("turn", "handoff"),
        ("turn", "handoff"),
        ("bg_send", True),
    ]
    world = run_scenario(config, actions, pauses=[0.0, 0.0, 0.0, 1.5, 1.5, 0.0, 4.0])
    assert world.violations == []
    assert world.handoffs == 2 and world.notes == 1
    assert world.following == [] and world.switch_ends == 2  # checked at its switch's end


def test_a_deferred_tool_of_a_retiring_agent_holds_the_away_timer_off_during_its_on_exit() -> None:
    """Issue 31's session: a falsifying example of the default profile. A deferred job
    starts (3.5 s), then a handoff retires its agent, whose ``on_exit`` takes 3 s. The
    job's hold on the user-away timer stayed with the closing agent until its
    ``on_exit`` returned: owned by no live agent, it counted for no one, and the timer
    could run while the job worked. It is the session's from the retirement's start."""
    config = Config(exit_delay=3.0, bg_turn=0.5, bg_silent=False)
    actions: list[tuple[str, Any]] = [
        ("turn", "handoff"),
        ("turn", "handoff"),
        ("turn", "handoff"),
        ("turn", "defer"),
        ("wait", 0.5),
        ("turn", "handoff"),
    ]
    world = run_scenario(config, actions, pauses=[0.0, 0.0, 0.0, 0.0, 0.0, 1.5, 1.5])
    assert world.violations == []
    assert len(world.accepted_finals) == 1  # the job ran to its end
