"""Background delivery: spoken sends, silent inserts, and state read through the voice LLM.

One session with one background session (``worker``, idle on ``ctx.messages()``);
the bench calls its context directly (``session.background.context("worker")``).

  send        ``await ctx.send(text)`` on an idle session: the time until the
              reply's generation starts (the scripted model is asked for the
              reply) and until the reply completes (``background_reply`` event,
              status ``completed``). CPU per send + reply.
  silent      ``await ctx.send(text, silent=True)`` back to back: inserts per
              second, from an empty history and again once it holds ``--history``
              items (each insert copies the agent's context, so size shows).
  state       ``ctx.set_state(value)``, then a user turn in which the model calls
              ``backline_state`` and answers: the round trip, and ``set_state`` alone.
  large       ``ctx.set_state(value)`` with a huge value (``--large-items`` list items
              and a 1 MB string): the time per call, and the size of what is stored
              (and what the model and the page read), bounded by ``Limits``.

    python bench/background.py
    python bench/background.py --sends 2000 --inserts 20000 --history 5000
    python bench/background.py --profile silent
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from _common import (
    TEXT_REPLY,
    BenchAgent,
    TurnWaiter,
    make_session,
    print_table,
    run,
    summarize_us,
    write_results,
)

from backline import ChatMessage
from backline.testing import tool_calls
from backline.testing.scripted_llm import LLMRequest, ScriptedResponse

STATE_CALL = tool_calls(("backline_state", '{"background_session_id":"worker"}'))


def state_value(i: int) -> dict[str, Any]:
    """A realistic state: a few fields, a short list."""
    return {
        "status": "running the test suite",
        "step": i,
        "progress": 0.42,
        "files": ["sdk/backline/voice/session.py", "tests/test_runtime_core.py"],
        "blocked": False,
    }


async def bench_send(sends: int, warmup: int) -> dict[str, Any]:
    gen_at: list[float] = []

    def responder(_: LLMRequest) -> ScriptedResponse:
        gen_at.append(time.perf_counter())
        return TEXT_REPLY

    to_gen: list[float] = []
    to_done: list[float] = []
    async with make_session(responder, with_background=True) as session:
        await session.start(BenchAgent())
        await session.wait_for_idle()
        assert session.background is not None
        ctx = session.background.context("worker")
        loop = asyncio.get_running_loop()
        done: list[Any] = [None]

        def on_reply(event: Any) -> None:
            fut = done[0]
            if event.status == "completed" and fut is not None and not fut.done():
                fut.set_result(time.perf_counter())

        session.on("background_reply", on_reply)
        c0 = 0.0
        for i in range(warmup + sends):
            if i == warmup:
                gc.collect()
                c0 = time.process_time()
            done[0] = loop.create_future()
            gen_at.clear()
            t0 = time.perf_counter()
            await ctx.send(f"Finished step {i}: all tests pass.")
            t_done = await done[0]
            await session.wait_for_idle()
            if i >= warmup:
                to_gen.append(gen_at[0] - t0)
                to_done.append(t_done - t0)
        cpu = time.process_time() - c0
        history = len(session.history)
    g = summarize_us(to_gen)
    d = summarize_us(to_done)
    return {
        "sends": sends,
        "history_items_end": history,
        "to_generation_p50_us": g["p50_us"],
        "to_generation_p99_us": g["p99_us"],
        "to_completed_p50_us": d["p50_us"],
        "to_completed_p99_us": d["p99_us"],
        "cpu_us_per_send_and_reply": round(cpu / sends * 1e6, 1),
    }


async def bench_silent(inserts: int, history: int) -> list[dict[str, Any]]:
    out = []
    for label, target in (("fresh", 0), ("grown", history)):
        async with make_session(lambda _: TEXT_REPLY, with_background=True) as session:
            await session.start(BenchAgent())
            await session.wait_for_idle()
            assert session.background is not None
            ctx = session.background.context("worker")
            while len(session.history) < target:
                await ctx.send("filler", silent=True)
            start = len(session.history)
            gc.collect()
            c0 = time.process_time()
            w0 = time.perf_counter()
            for i in range(inserts):
                await ctx.send(f"Progress note {i}.", silent=True)
            wall = time.perf_counter() - w0
            cpu = time.process_time() - c0
            out.append(
                {
                    "history": label,
                    "history_items_start": start,
                    "history_items_end": len(session.history),
                    "inserts": inserts,
                    "inserts_per_second": round(inserts / wall, 1),
                    "cpu_us_per_insert": round(cpu / inserts * 1e6, 1),
                }
            )
    return out


async def bench_state(rounds: int, warmup: int) -> dict[str, Any]:
    def responder(request: LLMRequest) -> ScriptedResponse:
        last = request.chat_ctx.items[-1]
        if isinstance(last, ChatMessage) and last.role == "user":
            return STATE_CALL
        return TEXT_REPLY

    set_times: list[float] = []
    trips: list[float] = []
    async with make_session(responder, with_background=True) as session:
        await session.start(BenchAgent())
        await session.wait_for_idle()
        assert session.background is not None
        ctx = session.background.context("worker")
        waiter = TurnWaiter(session)
        outputs: list[str] = []
        session.on(
            "function_tools_executed",
            lambda e: outputs.extend(o.output for o in e.outputs if o is not None),
        )
        c0 = 0.0
        for i in range(warmup + rounds):
            if i == warmup:
                gc.collect()
                c0 = time.process_time()
            value = state_value(i)
            t0 = time.perf_counter()
            ctx.set_state(value)
            t1 = time.perf_counter()
            await waiter.turn(session, "What is the worker doing?")
            t2 = time.perf_counter()
            if i >= warmup:
                set_times.append(t1 - t0)
                trips.append(t2 - t0)
        cpu = time.process_time() - c0
        # The model read exactly the state that was set (checked once, not timed).
        assert json.loads(outputs[-1]) == state_value(warmup + rounds - 1), outputs[-1]
    s = summarize_us(set_times)
    r = summarize_us(trips)
    return {
        "rounds": rounds,
        "set_state_p50_us": s["p50_us"],
        "set_state_p99_us": s["p99_us"],
        "round_trip_p50_us": r["p50_us"],
        "round_trip_p99_us": r["p99_us"],
        "cpu_us_per_round_trip": round(cpu / rounds * 1e6, 1),
    }


async def bench_large_state(items: int, calls: int = 5) -> dict[str, Any]:
    from backline.io._view import preview_state

    value = {
        "status": "indexing",
        "log": "x" * 1_000_000,
        "files": [f"f{i}.py" for i in range(items)],
    }
    times: list[float] = []
    async with make_session(lambda _: TEXT_REPLY, with_background=True) as session:
        await session.start(BenchAgent())
        assert session.background is not None
        ctx = session.background.context("worker")
        for _ in range(calls):
            t0 = time.perf_counter()
            ctx.set_state(value)
            times.append(time.perf_counter() - t0)
        stored = json.dumps(ctx.state)
        t0 = time.perf_counter()
        page = json.dumps(preview_state(ctx.state, session.limits.max_page_state_chars))
        preview_us = (time.perf_counter() - t0) * 1e6
    return {
        "items": items,
        "input_json_chars": len(json.dumps(value)),
        "set_state_us": round(sorted(times)[len(times) // 2] * 1e6, 1),
        "stored_json_chars": len(stored),
        "page_json_chars": len(page),
        "page_preview_us": round(preview_us, 1),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sends", type=int, default=500, help="spoken sends measured")
    p.add_argument("--inserts", type=int, default=1000, help="silent inserts per history size")
    p.add_argument("--history", type=int, default=1000, help="history size of the 'grown' run")
    p.add_argument("--rounds", type=int, default=500, help="set_state round trips measured")
    p.add_argument("--warmup", type=int, default=20, help="unmeasured iterations first")
    p.add_argument("--large-items", type=int, default=1_000_000, help="list items of 'large'")
    p.add_argument(
        "--profile", choices=["send", "silent", "state", "large"], help="cProfile one part"
    )
    p.add_argument("--top", type=int, default=25, help="entries printed by --profile")
    args = p.parse_args()

    parts: dict[str, Callable[[], Awaitable[Any]]] = {
        "send": lambda: bench_send(args.sends, args.warmup),
        "silent": lambda: bench_silent(args.inserts, args.history),
        "state": lambda: bench_state(args.rounds, args.warmup),
        "large": lambda: bench_large_state(args.large_items),
    }
    if args.profile:

        async def profiled() -> None:
            print(await parts[args.profile]())

        run(profiled, profile=args.profile, top=args.top)
        return

    async def all_parts() -> dict[str, Any]:
        return {name: await make() for name, make in parts.items()}

    results = run(all_parts)
    send = results["send"]
    print_table(
        "Spoken send on an idle session (ctx.send → reply)",
        ["sends", "to generation p50 µs", "p99 µs", "to completed p50 µs", "p99 µs", "CPU µs"],
        [
            [
                send["sends"],
                send["to_generation_p50_us"],
                send["to_generation_p99_us"],
                send["to_completed_p50_us"],
                send["to_completed_p99_us"],
                send["cpu_us_per_send_and_reply"],
            ]
        ],
    )
    print_table(
        "Silent inserts (ctx.send(text, silent=True))",
        ["history", "items", "inserts", "inserts/s", "CPU µs/insert"],
        [
            [
                r["history"],
                f"{r['history_items_start']}→{r['history_items_end']}",
                r["inserts"],
                r["inserts_per_second"],
                r["cpu_us_per_insert"],
            ]
            for r in results["silent"]
        ],
    )
    st = results["state"]
    print_table(
        "set_state, then a backline_state tool round trip through the voice LLM",
        ["rounds", "set_state p50 µs", "p99 µs", "round trip p50 µs", "p99 µs", "CPU µs/trip"],
        [
            [
                st["rounds"],
                st["set_state_p50_us"],
                st["set_state_p99_us"],
                st["round_trip_p50_us"],
                st["round_trip_p99_us"],
                st["cpu_us_per_round_trip"],
            ]
        ],
    )
    lg = results["large"]
    print_table(
        "set_state with a huge value (stored cut at Limits.max_state_chars)",
        ["items", "input chars", "set_state µs", "stored chars", "page chars", "preview µs"],
        [
            [
                lg["items"],
                lg["input_json_chars"],
                lg["set_state_us"],
                lg["stored_json_chars"],
                lg["page_json_chars"],
                lg["page_preview_us"],
            ]
        ],
    )
    write_results("background", args, results)


if __name__ == "__main__":
    main()
