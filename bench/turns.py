"""The runtime's cost per turn: one session, text turns and tool turns, against a floor.

A text turn: a final user turn, the scripted model answers with five words.
A tool turn: the model calls one trivial tool (one string argument, validated
against its schema), then answers with the same text. The model has zero delay
and the output keeps nothing, so what is measured is backline itself (plus
asyncio).

Three ways to drive a turn are measured:
  push  ``session.push_user_turn(text)``, and the turn ends when the agent state
        becomes ``listening`` (an ``agent_state_changed`` listener): what a front end
        does, the lean path, and the one the targets are checked against
  idle  ``session.push_user_turn(text)`` then ``await session.wait_for_idle()``
  run   ``await session.run(user_input=text)`` (collects the turn's events, for tests)

Each scenario runs in fresh sessions, after a warm-up, from a short history and
from one of ``--history`` items (default 5,000), alternately. The history is grown
by real turns (``push_user_turn`` + ``wait_for_idle``, about 0.5 s per session for
5,000 items on a 2-vCPU VM), not inserted, so the grown session is the one a long
conversation leaves. CPU time is ``time.process_time()`` over the measured turns of
each session; wall latency is ``time.perf_counter()`` around each turn (p50/p99 over
all turns).

The floor (``FloorLoop`` in ``_common.py``: a task per reply, an async-generator
model yielding five deltas, two items appended, three callbacks, and no backline)
runs ``--floor-turns`` turns with each measured session, in the same process and
event loop, in blocks between the session's blocks of 50 turns (one before each
block and one after the last). Each session's CPU per turn is divided by its
floor's, and "x floor" is the median of those ratios over the sessions: a slower
machine or other load, even a change of speed during a session, slows both and
cancels out. The Targets block checks:
  text push ≤ 4x floor, tool push ≤ 7x floor (short history)
  text run ≤ 1.5x text push, tool run ≤ 1.5x tool push (ratios of their "x floor")
  text and tool push at the grown history ≤ 1.2x their short-history "x floor"

Cyclic garbage per turn: after a warm-up, ``gc.collect()``, ``gc.disable()``,
``--cycle-turns`` turns, then ``gc.collect()``: the unreachable objects it finds,
divided by the turns (0 means the collector never has work from a turn).

    python bench/turns.py                       # the default sizes (make bench)
    python bench/turns.py --turns 2000 --repeats 9 --history 10000
    python bench/turns.py --scenarios text,tool --history 1000
    python bench/turns.py --profile text        # cProfile one scenario, print top entries
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from _common import (
    BenchAgent,
    FloorLoop,
    Target,
    TurnWaiter,
    idle_turn,
    make_session,
    print_table,
    print_targets,
    run,
    run_turn,
    summarize_us,
    text_responder,
    tool_responder,
    write_results,
)

SCENARIOS: dict[str, tuple[str, Callable[..., Any]]] = {
    "text": ("push", text_responder),
    "tool": ("push", tool_responder),
    "text-idle": ("idle", text_responder),
    "tool-idle": ("idle", tool_responder),
    "text-run": ("run", text_responder),
    "tool-run": ("run", tool_responder),
}

TurnFn = Callable[[Any, str], Awaitable[None]]


def turn_fn(drive: str, session: Any) -> TurnFn:
    if drive == "push":
        return TurnWaiter(session).turn
    return {"idle": idle_turn, "run": run_turn}[drive]


class Rows:
    """What one (scenario, history) accumulates over its sessions."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu_us: list[float] = []
        self.floor_us: list[float] = []
        self.wall_total = 0.0
        self.measured = 0
        self.hist_start: list[int] = []
        self.hist_end: list[int] = []


@contextlib.asynccontextmanager
async def warmed_session(scenario: str, warmup: int) -> AsyncIterator[tuple[Any, TurnFn]]:
    """A started session of ``scenario`` after ``warmup`` turns, and its turn function."""
    drive, responder = SCENARIOS[scenario]
    async with make_session(responder) as session:
        await session.start(BenchAgent())
        await session.wait_for_idle()
        do_turn = turn_fn(drive, session)
        for i in range(warmup):
            await do_turn(session, f"warm-up {i}")
        yield session, do_turn


BLOCK = 50  # measured turns between two floor blocks


async def one_session(
    scenario: str, acc: Rows, *, turns: int, warmup: int, history: int, floor_turns: int
) -> None:
    """One session's turns, in blocks of ``BLOCK`` with a floor block before each
    block and after the last (``floor_turns`` in all, on one ``FloorLoop``): the
    session and its floor share every stretch of the run, so a change of the
    machine's speed during the session slows both."""
    async with warmed_session(scenario, warmup) as (session, do_turn):
        i = 0
        while len(session.history) < history:
            await idle_turn(session, f"history {i}")  # growth through real turns
            i += 1
        acc.hist_start.append(len(session.history))
        floor = FloorLoop() if floor_turns else None
        blocks = max(1, -(-turns // BLOCK))
        per_floor_block = max(1, floor_turns // (blocks + 1))
        if floor is not None:
            for j in range(100):
                await floor.turn(f"warm-up {j}")
        floor_cpu = 0.0
        floor_done = 0

        async def floor_block() -> None:
            nonlocal floor_cpu, floor_done
            if floor is None:
                return
            f0 = time.process_time()
            for j in range(per_floor_block):
                await floor.turn(f"turn {j}")
            floor_cpu += time.process_time() - f0
            floor_done += per_floor_block

        gc.collect()
        cpu = 0.0
        w0 = time.perf_counter()
        done = 0
        while done < turns:
            await floor_block()
            c0 = time.process_time()
            for i in range(done, min(turns, done + BLOCK)):
                t = time.perf_counter()
                await do_turn(session, f"turn {i}")
                acc.wall.append(time.perf_counter() - t)
            cpu += time.process_time() - c0
            done = min(turns, done + BLOCK)
        await floor_block()
        acc.wall_total += time.perf_counter() - w0
        acc.cpu_us.append(cpu / turns * 1e6)
        if floor_done:
            acc.floor_us.append(round(floor_cpu / floor_done * 1e6, 2))
        acc.measured += turns
        acc.hist_end.append(len(session.history))


async def measure(
    scenario: str,
    *,
    turns: int,
    repeats: int,
    warmup: int,
    histories: tuple[int, ...],
    floor_turns: int,
) -> list[dict[str, Any]]:
    """``repeats`` sessions per history size, alternating the sizes, each with its
    floor run in blocks between its own; one result row per history size."""
    accs = {h: Rows() for h in histories}
    for _ in range(repeats):
        for h in histories:
            await one_session(
                scenario, accs[h], turns=turns, warmup=warmup, history=h, floor_turns=floor_turns
            )
    rows = []
    for h, acc in accs.items():
        ratios = [c / f for c, f in zip(acc.cpu_us, acc.floor_us, strict=False)]
        rows.append(
            {
                "scenario": scenario,
                "drive": SCENARIOS[scenario][0],
                "history": h,
                "turns": acc.measured,
                "history_items_start": min(acc.hist_start),
                "history_items_end": max(acc.hist_end),
                **summarize_us(acc.wall),
                "turns_per_second": round(acc.measured / acc.wall_total, 1),
                # The median over the sessions resists other load on the machine.
                "cpu_us_per_turn": round(statistics.median(acc.cpu_us), 1),
                "cpu_us_per_turn_best": round(min(acc.cpu_us), 1),
                "cpu_us_per_session": [round(c, 1) for c in acc.cpu_us],
                "floor_us": round(statistics.median(acc.floor_us), 2) if ratios else None,
                "floor_us_per_session": acc.floor_us,
                # Each session against the floor run between its blocks, median over sessions.
                "x_floor": round(statistics.median(ratios), 3) if ratios else None,
            }
        )
    return rows


async def cycles_per_turn(scenario: str | None, *, turns: int, warmup: int) -> float:
    """Objects the cyclic collector finds per turn (``None`` scenario: the floor)."""
    if scenario is None:
        floor = FloorLoop()
        for i in range(warmup):
            await floor.turn(f"warm-up {i}")
        return await _garbage_per_turn(floor.turn, turns)
    async with warmed_session(scenario, warmup) as (session, do_turn):
        return await _garbage_per_turn(lambda text: do_turn(session, text), turns)


async def _garbage_per_turn(turn: Callable[[str], Awaitable[None]], turns: int) -> float:
    gc.collect()
    gc.disable()
    try:
        for i in range(turns):
            await turn(f"turn {i}")
    finally:
        found = gc.collect()
        gc.enable()
    return found / turns


def targets_from(results: list[dict[str, Any]], history: int) -> list[Target]:
    def row(scenario: str, hist: int) -> dict[str, Any] | None:
        for r in results:
            if r["scenario"] == scenario and r["history"] == hist:
                return r
        return None

    def x(scenario: str, hist: int = 0) -> float | None:
        r = row(scenario, hist)
        return None if r is None else r["x_floor"]

    def ratio(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else round(a / b, 3)

    per_session = "session CPU ÷ its interleaved floor, median"
    run_vs_push = "run's x floor ÷ push's x floor"
    grown_vs_short = "grown x floor ÷ short x floor"
    grown = f"history {history:,}"
    return [
        # The limits of issue 31 (performance round 3).
        Target("text turn (push) / floor", x("text"), 3, note=per_session),
        Target("tool turn (push) / floor", x("tool"), 5, note=per_session),
        Target("text turn: run() / push", ratio(x("text-run"), x("text")), 1.3, note=run_vs_push),
        Target("tool turn: run() / push", ratio(x("tool-run"), x("tool")), 1.3, note=run_vs_push),
        Target(
            f"text turn (push): {grown} / short",
            ratio(x("text", history), x("text")),
            1.2,
            note=grown_vs_short,
        ),
        Target(
            f"tool turn (push): {grown} / short",
            ratio(x("tool", history), x("tool")),
            1.2,
            note=grown_vs_short,
        ),
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--turns", type=int, default=400, help="measured turns per session")
    p.add_argument("--repeats", type=int, default=7, help="sessions per scenario and history")
    p.add_argument("--warmup", type=int, default=20, help="unmeasured turns first")
    p.add_argument("--history", type=int, default=5000, help="history size of the 'grown' runs")
    p.add_argument(
        "--floor-turns", type=int, default=2000, help="floor turns with each session (0: none)"
    )
    p.add_argument(
        "--cycle-turns", type=int, default=200, help="turns for cyclic garbage per turn (0: skip)"
    )
    p.add_argument(
        "--scenarios",
        default=",".join(SCENARIOS),
        help=f"comma-separated subset of {', '.join(SCENARIOS)}",
    )
    p.add_argument("--profile", metavar="SCENARIO", help="cProfile this scenario (fresh session)")
    p.add_argument("--top", type=int, default=25, help="entries printed by --profile")
    args = p.parse_args()

    if args.profile:
        if args.profile not in SCENARIOS:
            p.error(f"unknown scenario {args.profile!r}")

        async def profiled() -> None:
            rows = await measure(
                args.profile,
                turns=args.turns,
                repeats=args.repeats,
                warmup=args.warmup,
                histories=(0,),
                floor_turns=0,
            )
            print(rows[0])

        run(profiled, profile=args.profile, top=args.top)
        return

    names = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    for n in names:
        if n not in SCENARIOS:
            p.error(f"unknown scenario {n!r}")
    histories = (0, args.history) if args.history > 0 else (0,)

    async def all_runs() -> tuple[list[dict[str, Any]], dict[str, float]]:
        out = []
        for name in names:
            out += await measure(
                name,
                turns=args.turns,
                repeats=args.repeats,
                warmup=args.warmup,
                histories=histories,
                floor_turns=args.floor_turns,
            )
        cycles: dict[str, float] = {}
        if args.cycle_turns:
            for name in [None, *names]:
                found = await cycles_per_turn(name, turns=args.cycle_turns, warmup=args.warmup)
                cycles[name or "floor"] = round(found, 2)
        return out, cycles

    t0 = time.perf_counter()
    results, cycles = run(all_runs)
    elapsed = time.perf_counter() - t0
    floors = [f for r in results for f in r["floor_us_per_session"]]
    floor_median = round(statistics.median(floors), 2) if floors else None
    print_table(
        "Cost per turn (one session, zero-delay scripted LLM, in-memory text output)",
        [
            "scenario",
            "drive",
            "history",
            "turns",
            "p50 µs",
            "p99 µs",
            "turns/s",
            "CPU µs/turn",
            "best",
            "floor µs",
            "x floor",
        ],
        [
            [
                r["scenario"],
                r["drive"],
                f"{r['history_items_start']}→{r['history_items_end']}",
                r["turns"],
                r["p50_us"],
                r["p99_us"],
                r["turns_per_second"],
                r["cpu_us_per_turn"],
                r["cpu_us_per_turn_best"],
                r["floor_us"] if r["floor_us"] is not None else "-",
                f"{r['x_floor']:.2f}" if r["x_floor"] is not None else "-",
            ]
            for r in results
        ],
    )
    if floors:
        print(
            f"\nfloor (FloorLoop, {args.floor_turns} turns with each session): "
            f"median {floor_median} µs CPU per turn, best {min(floors)}, "
            f"worst {max(floors)} over {len(floors)} runs"
        )
    if cycles:
        print_table(
            f"Cyclic garbage per turn (gc disabled for {args.cycle_turns} turns, "
            "then gc.collect())",
            ["scenario", "objects per turn"],
            [[name, value] for name, value in cycles.items()],
        )
    targets = targets_from(results, args.history) if args.floor_turns else []
    if targets:
        print_targets(targets)
    print(f"\n{elapsed:.1f} s")
    write_results(
        "turns",
        args,
        {
            "floor_us": floor_median,
            "floor_us_best": min(floors) if floors else None,
            "scenarios": results,
            "cyclic_garbage_per_turn": cycles,
            "seconds": round(elapsed, 1),
        },
        targets,
    )


if __name__ == "__main__":
    main()
