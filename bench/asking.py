"""Asking the user from a background (``ctx.ask``): how long the round trip takes in backline.

One session with one background session (``worker``); the bench asks through its context
(``session.background.context("worker")``), with a zero-delay scripted voice model that
reads the question out (the scheduled reply) and forwards the user's words with
``backline_send``. Each round:

  to spoken   from ``ctx.ask(question, choices=...)`` to the question's first text
              reaching the output (``TextOutput.on_text``): the spoken message, the
              reply scheduler, the model's reply, the output.
  to answer   from the user's answer (``push_user_turn("yes please")``, once the question
              was spoken and the session is idle) to ``ask`` returning the ``Answer``
              (the model's turn, its ``backline_send`` call, the delivery to the open
              question, matching the choices).
  from call   the last leg alone: from the scripted model handing over its
              ``backline_send`` call to ``ask`` returning (the call streamed, parsed,
              run; the delivery; the match).

    python bench/asking.py
    python bench/asking.py --rounds 2000
    python bench/asking.py --profile
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import time
from typing import Any

from _common import make_session, print_table, run, summarize_us, write_results

from backline import Agent, ChatMessage, FunctionCallOutput, TextOutput
from backline.testing import text, tool_calls
from backline.testing.scripted_llm import LLMRequest, ScriptedResponse

QUESTION = "Claude Code wants to run `npm test`. Allow once, always for this command, or no?"
CHOICES = ("once", "always", "no")
ANSWER = "yes, allow it once"


class SpokenClock(TextOutput):
    """An instant output that notes when a segment's first text arrives."""

    def __init__(self) -> None:
        super().__init__()
        self.first_text: asyncio.Future[float] | None = None

    def on_text(self, text: str) -> None:
        fut = self.first_text
        if fut is not None and not fut.done():
            fut.set_result(time.perf_counter())


CALLED_AT: list[float] = []
"""When the scripted model handed over its last ``backline_send`` call."""


def responder(request: LLMRequest) -> ScriptedResponse:
    """The voice model: reads a background update out, forwards the user's words."""
    if request.tool_choice == "none":  # a scheduled background reply
        return text(QUESTION)
    last = request.chat_ctx.items[-1]
    if isinstance(last, FunctionCallOutput):
        return text("Okay.")
    assert isinstance(last, ChatMessage) and last.role == "user"
    args = json.dumps({"background_session_id": "worker", "content": last.content})
    CALLED_AT[:] = [time.perf_counter()]
    return tool_calls(("backline_send", args))


async def bench_ask(rounds: int, warmup: int) -> dict[str, Any]:
    output = SpokenClock()
    to_spoken: list[float] = []
    to_answer: list[float] = []
    from_call: list[float] = []
    async with make_session(responder, with_background=True, output=output) as session:
        await session.start(Agent("You are a concise voice assistant used in a benchmark."))
        await session.wait_for_idle()
        assert session.background is not None
        ctx = session.background.context("worker")
        loop = asyncio.get_running_loop()
        c0 = 0.0
        for i in range(warmup + rounds):
            if i == warmup:
                gc.collect()
                c0 = time.process_time()
            output.first_text = loop.create_future()
            CALLED_AT.clear()
            t0 = time.perf_counter()
            asking = asyncio.ensure_future(ctx.ask(QUESTION, choices=CHOICES, timeout=30))
            t_spoken = await output.first_text
            await session.wait_for_idle()
            t1 = time.perf_counter()
            session.push_user_turn(ANSWER)
            answer = await asking
            t2 = time.perf_counter()
            assert answer.choice == "once" and not answer.timed_out, answer
            await session.wait_for_idle()
            if i >= warmup:
                to_spoken.append(t_spoken - t0)
                to_answer.append(t2 - t1)
                from_call.append(t2 - CALLED_AT[0])
        cpu = time.process_time() - c0
    s, a, f = summarize_us(to_spoken), summarize_us(to_answer), summarize_us(from_call)
    return {
        "rounds": rounds,
        "ask_to_spoken_p50_us": s["p50_us"],
        "ask_to_spoken_p99_us": s["p99_us"],
        "answer_to_background_p50_us": a["p50_us"],
        "answer_to_background_p99_us": a["p99_us"],
        "call_to_background_p50_us": f["p50_us"],
        "call_to_background_p99_us": f["p99_us"],
        "cpu_us_per_round": round(cpu / rounds * 1e6, 1),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rounds", type=int, default=500, help="questions asked and answered")
    p.add_argument("--warmup", type=int, default=20, help="unmeasured rounds first")
    p.add_argument("--profile", action="store_true", help="cProfile the rounds")
    p.add_argument("--top", type=int, default=25, help="entries printed by --profile")
    args = p.parse_args()

    async def measured() -> dict[str, Any]:
        return await bench_ask(args.rounds, args.warmup)

    results = run(measured, profile="ask" if args.profile else None, top=args.top)
    print_table(
        "ctx.ask: the question spoken, the answer back (zero-delay scripted model)",
        [
            "rounds",
            "ask → spoken p50 µs",
            "p99 µs",
            "answer → background p50 µs",
            "p99 µs",
            "model's call → background p50 µs",
            "CPU µs/round",
        ],
        [
            [
                results["rounds"],
                results["ask_to_spoken_p50_us"],
                results["ask_to_spoken_p99_us"],
                results["answer_to_background_p50_us"],
                results["answer_to_background_p99_us"],
                results["call_to_background_p50_us"],
                results["cpu_us_per_round"],
            ]
        ],
    )
    write_results("asking", args, {"ask": results})


if __name__ == "__main__":
    main()
