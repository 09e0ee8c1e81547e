"""The runtime's cost per turn: one session, text turns and tool turns.

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

Each scenario runs in a fresh session, after a warm-up, and again once the
history holds ``--history`` items (grown by real turns), so the cost of growth
shows. CPU time is ``time.process_time()`` over the measured turns of each
session, reported as the median over the sessions (and the best); wall latency
is ``time.perf_counter()`` around each turn (p50/p99 over all turns).

    python bench/turns.py                       # the default sizes (make bench)
    python bench/turns.py --turns 2000 --repeats 5 --history 5000
    python bench/turns.py --profile text        # cProfile one scenario, print top entries
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from _common import (
    BenchAgent,
    TurnWaiter,
    idle_turn,
    make_session,
    print_table,
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


async def measure(
    scenario: str, *, turns: int, repeats: int, warmup: int, history: int
) -> dict[str, Any]:
    drive, responder = SCENARIOS[scenario]
    wall: list[float] = []
    cpu_per_repeat: list[float] = []
    wall_total = 0.0
    measured = 0
    hist_start: list[int] = []
    hist_end: list[int] = []
    for _ in range(repeats):
        async with make_session(responder) as session:
            await session.start(BenchAgent())
            await session.wait_for_idle()
            do_turn: TurnFn = {
                "push": TurnWaiter(session).turn,
                "idle": idle_turn,
                "run": run_turn,
            }[drive]
            for i in range(warmup):
                await do_turn(session, f"warm-up {i}")
            i = 0
            while len(session.history) < history:
                await idle_turn(session, f"history {i}")  # growth through real turns
                i += 1
            hist_start.append(len(session.history))
            gc.collect()
            c0 = time.process_time()
            w0 = time.perf_counter()
            for i in range(turns):
                t = time.perf_counter()
                await do_turn(session, f"turn {i}")
                wall.append(time.perf_counter() - t)
            wall_total += time.perf_counter() - w0
            cpu_per_repeat.append((time.process_time() - c0) / turns)
            measured += turns
            hist_end.append(len(session.history))
    stats = summarize_us(wall)
    return {
        "scenario": scenario,
        "drive": drive,
        "turns": measured,
        "history_items_start": min(hist_start),
        "history_items_end": max(hist_end),
        **stats,
        "turns_per_second": round(measured / wall_total, 1),
        # The median over the sessions resists other load on the machine; best = lowest.
        "cpu_us_per_turn": round(statistics.median(cpu_per_repeat) * 1e6, 1),
        "cpu_us_per_turn_best": round(min(cpu_per_repeat) * 1e6, 1),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--turns", type=int, default=200, help="measured turns per session")
    p.add_argument("--repeats", type=int, default=5, help="sessions per scenario")
    p.add_argument("--warmup", type=int, default=20, help="unmeasured turns first")
    p.add_argument("--history", type=int, default=1000, help="history size of the 'grown' runs")
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
            r = await measure(
                args.profile, turns=args.turns, repeats=args.repeats, warmup=args.warmup, history=0
            )
            print(r)

        run(profiled, profile=args.profile, top=args.top)
        return

    names = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    for n in names:
        if n not in SCENARIOS:
            p.error(f"unknown scenario {n!r}")

    async def all_runs() -> list[dict[str, Any]]:
        out = []
        for name in names:
            for hist in (0, args.history):
                r = await measure(
                    name,
                    turns=args.turns,
                    repeats=args.repeats,
                    warmup=args.warmup,
                    history=hist,
                )
                out.append(r)
        return out

    results = run(all_runs)
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
            ]
            for r in results
        ],
    )
    write_results("turns", args, results)


if __name__ == "__main__":
    main()
