"""Soak: many sessions on one event loop, each with random user turns, interrupts,
barge-ins, asides, background traffic (tasks, spoken and silent updates, state bursts)
and a random close, checked for what must never happen.

Every session runs a random script of ``--actions`` steps, real time, with a scripted
model that streams slowly enough for interrupts to land mid-reply, an output that
takes time to "speak", a tool, and one background session that works on what the
voice agent sends it and reports back. About half the sessions end gracefully (stop
the traffic, wait until idle, close); the others close at a random step, whatever is
in flight. ``--concurrency`` sessions run at once until ``--sessions`` have run.

Reported (and the exit status is 1 if any is non-zero):

- **hangs**: a session whose script, wait for idle or close does not finish within
  ``--hang-seconds`` (close alone: within 10 s);
- **leaked tasks**: tasks still alive once every session is closed;
- **lost items**: in a session that ended gracefully, a user turn, a task sent to the
  background (``backline_send``) or an update the background sent that never made it
  (into the history, or to the background);
- **duplicated items**: anything of the above, or any history item, seen twice (in any
  session);
- **invariants**: tool outputs without their call, history that does not serialise;
- **errors**: exceptions that reached the loop's handler;
- **loop lag**: how late a 10 ms timer fires while all this runs (p50, p99, max), with
  the CPU the process used over the wall time (near 100 %: the loop is saturated, and
  the lag is mostly waiting behind the other sessions' work).

Errors that backline logs (a background that crashed, a tool that failed) are printed
and counted too, but do not fail the run: they are findings to read.

    python bench/soak.py                      # 60 sessions, about 10 s (make bench)
    python bench/soak.py --sessions 2000 --concurrency 50 --actions 60   # a long soak
    python bench/soak.py --seed 7 --sessions 5  # the same scripts again (timing varies)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from _common import peak_rss_bytes, percentile, print_table, rss_bytes, run, write_results

from backline import (
    Agent,
    BackgroundContext,
    ChatMessage,
    InMemoryTextOutput,
    Session,
    background,
    function_tool,
)
from backline.testing import LLMRequest, ScriptedLLM, ScriptedResponse, text, tool_calls

MB = 2**20
CLOSE_BOUND = 10.0
ACTIONS = (
    ("turn", 30),
    ("delegate", 12),
    ("tool", 8),
    ("interrupt", 8),
    ("barge_in", 10),
    ("say", 5),
    ("bg_send", 8),
    ("bg_silent", 6),
    ("bg_state", 6),
    ("wait", 17),
)


# -- what one session saw ------------------------------------------------------------------------
@dataclass
class Ledger:
    """What a session's script did, what its background received and sent."""

    sid: int
    turns: list[str] = field(default_factory=list)
    delegated: list[str] = field(default_factory=list)
    received: list[str] = field(default_factory=list)
    sent: list[str] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    graceful: bool = False
    hung: str | None = None
    close_seconds: float = 0.0


def respond(request: LLMRequest) -> ScriptedResponse:
    """The voice model: delegates, calls a tool, relays updates, or talks (slowly)."""
    items = request.chat_ctx.items
    if request.tool_choice == "none":  # a background reply
        return text("Update noted, carrying on with the conversation.", chunk_delay=0.002)
    if items and items[-1].type == "function_call_output":
        return text("Done, anything else?", chunk_delay=0.002)
    last = request.last_message.content if request.last_message else ""
    if last.startswith("delegate "):
        marker = last.split()[1]
        return tool_calls(
            ("backline_send", {"background_session_id": "worker", "content": marker}),
            text="Passing that on.",
        )
    if last.startswith("tool "):
        return tool_calls(("lookup", {"key": last.split()[1]}))
    return text("Here is a reply of a dozen words or so, spoken slowly.", chunk_delay=0.003)


@function_tool
async def lookup(key: str) -> str:
    """Look a key up (takes a moment).

    Args:
        key: The key.
    """
    await asyncio.sleep(0.01)
    return f"value of {key}"


def make_worker(ledger: Ledger, rng: random.Random) -> Any:
    @background("worker", description="Works on tasks and reports back.")
    async def worker(ctx: BackgroundContext) -> None:
        ctx.set_state({"status": "idle"})
        async for message in ctx.messages():
            ledger.received.append(message)
            async with ctx.turn():
                ctx.set_state({"status": "working", "task": message})
                await asyncio.sleep(rng.uniform(0, 0.03))
                ctx.set_state({"status": "idle", "last": message})
            marker = f"done-{message}"
            await ctx.send(marker)
            ledger.sent.append(marker)

    return worker


# -- one session --------------------------------------------------------------------------------
async def play(ledger: Ledger, rng: random.Random, n_actions: int, hang: float) -> Session[Any]:
    session: Session[Any] = Session(
        ScriptedLLM(respond, record=False),
        output=InMemoryTextOutput(chars_per_second=2_000),
        background=[make_worker(ledger, random.Random(rng.random()))],
        tools=[lookup],
        user_away_timeout=0.5,
    )
    ledger.graceful = rng.random() < 0.5
    close_at = n_actions if ledger.graceful else rng.randrange(n_actions + 1)
    names, weights = zip(*ACTIONS, strict=True)
    try:
        async with asyncio.timeout(hang):
            await session.start(Agent("You are a voice assistant in a soak test."))
            ctx = session.background.context("worker")  # type: ignore[union-attr]
            for step in range(close_at):
                kind = rng.choices(names, weights)[0]
                ledger.counts[kind] += 1
                await act(session, ctx, ledger, kind, f"s{ledger.sid}-{step}", rng)
    except TimeoutError:
        ledger.hung = "script"
    if ledger.graceful and ledger.hung is None:
        try:
            async with asyncio.timeout(hang):
                await session.wait_for_idle()
                await settle(session, ledger)
        except TimeoutError:
            ledger.hung = "wait for idle"
    start = time.perf_counter()
    try:
        async with asyncio.timeout(CLOSE_BOUND):
            await session.aclose()
    except TimeoutError:
        ledger.hung = ledger.hung or "close"
    ledger.close_seconds = time.perf_counter() - start
    return session


async def act(
    session: Session[Any],
    ctx: BackgroundContext,
    ledger: Ledger,
    kind: str,
    marker: str,
    rng: random.Random,
) -> None:
    if kind == "turn":
        ledger.turns.append(marker)
        session.push_user_turn(f"talk {marker}")
    elif kind == "delegate":
        ledger.turns.append(marker)
        ledger.delegated.append(marker)
        session.push_user_turn(f"delegate {marker}")
    elif kind == "tool":
        ledger.turns.append(marker)
        session.push_user_turn(f"tool {marker}")
    elif kind == "interrupt":
        session.interrupt(force=rng.random() < 0.3)
    elif kind == "barge_in":
        session.user_started_speaking()
        await asyncio.sleep(rng.uniform(0, 0.02))
        ledger.turns.append(marker)
        session.push_user_turn(f"talk {marker}")
        session.user_stopped_speaking()
    elif kind == "say":
        session.say(f"An aside {marker}.", allow_interruptions=rng.random() < 0.7)
    elif kind == "bg_send":
        await ctx.send(f"update-{marker}")
        ledger.sent.append(f"update-{marker}")
    elif kind == "bg_silent":
        await ctx.send(f"note-{marker}", silent=True)
        ledger.sent.append(f"note-{marker}")
    elif kind == "bg_state":
        for n in range(rng.randrange(1, 200)):
            ctx.set_state({"progress": n, "marker": marker})
    else:
        await asyncio.sleep(rng.uniform(0, 0.05))
    await asyncio.sleep(0)


async def settle(session: Session[Any], ledger: Ledger) -> None:
    """Idle, and the background has read and answered everything it was sent."""
    while True:
        rt = session.background.runtime("worker")  # type: ignore[union-attr]
        answered = {m.removeprefix("done-") for m in ledger.sent if m.startswith("done-")}
        if rt is not None and rt.waiting == 0 and set(ledger.received) <= answered:
            await session.wait_for_idle()
            return
        await asyncio.sleep(0.005)


# -- the checks ---------------------------------------------------------------------------------
def check(session: Session[Any], ledger: Ledger) -> Counter[str]:
    """What went wrong, by kind (``lost``, ``duplicated``, ``invariant``); each case is
    described in ``ledger.violations``."""
    found: Counter[str] = Counter()

    def flag(kind: str, message: str) -> None:
        found[kind] += 1
        ledger.violations.append(message)

    items = session.history.items
    for item_id, n in Counter(it.id for it in items).items():
        if n > 1:
            flag("duplicated", f"history item {item_id} {n} times")
    user_text = " ".join(
        it.content
        for it in items
        if isinstance(it, ChatMessage) and it.role == "user" and "background_id" not in it.extra
    )
    bg_text = [
        it.content for it in items if isinstance(it, ChatMessage) and "background_id" in it.extra
    ]
    for marker in ledger.turns:
        seen = len(_exact(user_text, marker))
        if seen > 1:
            flag("duplicated", f"user turn {marker} {seen} times")
        elif seen == 0 and ledger.graceful:
            flag("lost", f"user turn {marker} lost")
    received = Counter(ledger.received)
    for marker, n in received.items():
        if n > 1:
            flag("duplicated", f"task {marker} received {n} times")
    succeeded = {
        it.call_id for it in items if it.type == "function_call_output" and not it.is_error
    }
    delegated = {
        json.loads(it.arguments)["content"]
        for it in items
        if it.type == "function_call" and it.name == "backline_send" and it.call_id in succeeded
    }
    if ledger.graceful:
        for marker in sorted(delegated - set(received)):
            flag("lost", f"task {marker} never reached the background")
    for marker in ledger.sent:
        seen = sum(len(_exact(content, marker)) for content in bg_text)
        if seen > 1:
            flag("duplicated", f"background update {marker} {seen} times")
        elif seen == 0 and ledger.graceful:
            flag("lost", f"background update {marker} lost")
    calls = {it.call_id for it in items if it.type == "function_call"}
    orphans = {it.call_id for it in items if it.type == "function_call_output"} - calls
    if orphans:
        flag("invariant", f"tool outputs without a call: {sorted(orphans)}")
    try:
        json.dumps(session.history.to_dicts())
    except (TypeError, ValueError) as e:
        flag("invariant", f"history does not serialise: {e}")
    return found


def _exact(haystack: str, marker: str) -> list[int]:
    """Positions of ``marker`` not followed by another digit (s1-2 is not s1-23)."""
    found, start = [], 0
    while (i := haystack.find(marker, start)) >= 0:
        end = i + len(marker)
        if end >= len(haystack) or not haystack[end].isdigit():
            found.append(i)
        start = end
    return found


# -- the run --------------------------------------------------------------------------------------
class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        error = record.exc_info[1] if record.exc_info else None
        cause = f": {type(error).__name__}: {error}" if error is not None else ""
        self.records.append(record.getMessage() + cause)


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    loop_errors: list[str] = []
    loop.set_exception_handler(lambda _, context: loop_errors.append(str(context.get("message"))))
    logged = _Errors()
    logging.getLogger("backline").addHandler(logged)
    master = random.Random(args.seed)
    seeds = [master.randrange(2**32) for _ in range(args.sessions)]
    lags: list[float] = []
    running = True

    async def watch_lag() -> None:
        while running:
            t0 = loop.time()
            await asyncio.sleep(0.01)
            lags.append(max(0.0, loop.time() - t0 - 0.01))

    gate = asyncio.Semaphore(args.concurrency)
    totals: Counter[str] = Counter()
    hangs: list[str] = []
    violations: list[str] = []
    close_times: list[float] = []
    found: Counter[str] = Counter()
    done = 0
    rss_start = rss_bytes()
    started = time.perf_counter()
    cpu_started = time.process_time()

    async def one(sid: int) -> None:
        nonlocal done
        async with gate:
            rng = random.Random(seeds[sid])
            ledger = Ledger(sid)
            session = await play(ledger, rng, args.actions, args.hang_seconds)
            found.update(check(session, ledger))
        totals.update(ledger.counts)
        totals["graceful" if ledger.graceful else "abrupt"] += 1
        close_times.append(ledger.close_seconds)
        if ledger.hung:
            hangs.append(f"session {sid} (seed {seeds[sid]}): {ledger.hung}")
        violations.extend(f"session {sid} (seed {seeds[sid]}): {v}" for v in ledger.violations)
        done += 1
        if args.progress and done % args.progress == 0:
            print(f"  {done}/{args.sessions} sessions", flush=True)

    monitor = asyncio.create_task(watch_lag(), name="soak lag monitor")
    try:
        await asyncio.gather(*(one(i) for i in range(args.sessions)))
    finally:
        running = False
        await monitor
    for _ in range(5):
        await asyncio.sleep(0)
    me = asyncio.current_task()
    leaked = sorted(t.get_name() for t in asyncio.all_tasks() if t is not me and not t.done())
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    logging.getLogger("backline").removeHandler(logged)
    lags.sort()
    close_times.sort()
    return {
        "sessions": args.sessions,
        "graceful": totals.pop("graceful", 0),
        "abrupt": totals.pop("abrupt", 0),
        "actions": dict(sorted(totals.items())),
        "hangs": hangs,
        "leaked_tasks": leaked,
        "lost_items": found["lost"],
        "duplicated_items": found["duplicated"],
        "invariant_violations": found["invariant"],
        "violations": violations[:50],
        "loop_errors": loop_errors[:20],
        "logged_errors": logged.records[:20],
        "logged_error_count": len(logged.records),
        "loop_lag_ms": {
            "p50": round(percentile(lags, 50) * 1e3, 2),
            "p99": round(percentile(lags, 99) * 1e3, 2),
            "max": round((lags[-1] if lags else 0.0) * 1e3, 2),
            "samples": len(lags),
        },
        "close_ms": {
            "p50": round(percentile(close_times, 50) * 1e3, 2),
            "p99": round(percentile(close_times, 99) * 1e3, 2),
            "max": round((close_times[-1] if close_times else 0.0) * 1e3, 2),
        },
        "wall_seconds": round(wall, 1),
        "cpu_percent": round(100 * cpu / wall, 1) if wall else 0.0,
        "rss_mb": {
            "start": round(rss_start / MB, 1),
            "end": round(rss_bytes() / MB, 1),
            "peak": round(max(peak_rss_bytes(), rss_bytes()) / MB, 1),
        },
    }


def report(r: dict[str, Any]) -> None:
    print_table(
        "Soak",
        ["what", "value"],
        [
            ("sessions", r["sessions"]),
            ("  graceful / abrupt close", f"{r['graceful']} / {r['abrupt']}"),
            ("actions", sum(r["actions"].values())),
            *((f"  {k}", v) for k, v in r["actions"].items()),
            ("hangs", len(r["hangs"])),
            ("leaked tasks", len(r["leaked_tasks"])),
            ("lost items", r["lost_items"]),
            ("duplicated items", r["duplicated_items"]),
            ("other invariant violations", r["invariant_violations"]),
            ("errors at the loop's handler", len(r["loop_errors"])),
            ("errors logged by backline", r["logged_error_count"]),
            ("loop lag p50 / p99 / max (ms)", "{p50} / {p99} / {max}".format(**r["loop_lag_ms"])),
            ("close p50 / p99 / max (ms)", "{p50} / {p99} / {max}".format(**r["close_ms"])),
            ("wall time (s), CPU busy", f"{r['wall_seconds']} s, {r['cpu_percent']} %"),
            ("RSS start / end / peak (MB)", "{start} / {end} / {peak}".format(**r["rss_mb"])),
        ],
    )
    for label in ("hangs", "leaked_tasks", "violations", "loop_errors", "logged_errors"):
        if r[label]:
            print(f"\n{label}:")
            for line in r[label]:
                print(f"  {line}")


def failed(r: dict[str, Any]) -> bool:
    return bool(r["hangs"] or r["leaked_tasks"] or r["violations"] or r["loop_errors"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=60, help="sessions in all (60)")
    parser.add_argument("--concurrency", type=int, default=20, help="sessions at once (20)")
    parser.add_argument("--actions", type=int, default=30, help="random steps per session (30)")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
    parser.add_argument(
        "--hang-seconds", type=float, default=60.0, help="bound on a script or an idle wait (60)"
    )
    parser.add_argument("--progress", type=int, default=0, help="print every N sessions")
    parser.add_argument("--profile", action="store_true", help="run under cProfile")
    args = parser.parse_args()
    if args.seed is None:
        args.seed = random.randrange(2**32)
    print(
        f"soak: {args.sessions} sessions, {args.concurrency} at once, {args.actions} steps "
        f"each, seed {args.seed}",
        flush=True,
    )
    results = run(lambda: soak(args), profile="soak" if args.profile else None)
    report(results)
    write_results("soak", args, results)
    if failed(results):
        print("\nsoak: FAILED (see above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
