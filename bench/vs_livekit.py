"""Against livekit-agents: the same turns through backline and through LiveKit Agents.

A figure, not a target: nothing here has a limit (no Targets block).

Both sides run in text mode with a zero-delay model and the same script:
  backline  ``backline.Session`` with the harness's ``ScriptedLLM`` (``record=False``)
            and ``BenchAgent``, the base ``TextOutput``, the default away timer (15 s)
  livekit   ``livekit.agents.AgentSession(llm=..., vad=None,
            turn_handling={"turn_detection": None})`` with no room and no audio or
            transcription output, its ``Agent`` with the same tool, the default away
            timer (15 s); its model a fake ``llm.LLM`` written here, streaming the same
            deltas as ``ScriptedLLM`` (``"Sure, " "that " "is " "done."``)
A text turn is ``await session.run(user_input=...)`` answered with that text; a tool
turn is one call of ``lookup(key: str)`` (arguments ``{"key":"alpha"}``), then the
same text. ``vad=None`` with ``turn_detection=None``: without ``vad=None`` LiveKit
builds its bundled Silero VAD; with it alone LiveKit warns that its default turn
detector needs a VAD.

1. CPU per turn, in this process: for each of ``--sessions`` rounds and each of
   text and tool, a ``measure_floor`` block (2,000 floor turns), then a backline
   session; another floor block, then a LiveKit session. Each session runs
   ``--warmup`` turns, then ``--turns`` measured turns (``time.process_time()``),
   from a short history (with the defaults 40 -> 440 items, as ``bench/turns.py``'s
   short history). Medians over the sessions of CPU µs per turn and of x floor (each
   session over the floor block right before it).
2. History growth: one session per side and kind runs ``--growth-turns`` turns; CPU
   per turn of its first and its last block of 50 (LiveKit copies the chat context
   per request; backline's figure is ``bench/turns.py``'s "flat with history").
3. Memory per idle session: per side, a fresh child process (multiprocessing spawn,
   no shared heap) runs one warm-up session (one text and one tool turn), then
   starts ``--idle`` sessions and leaves them idle: (RSS after, minus before,
   after ``gc.collect()``) / sessions. Also each side's ``import`` RSS in a fresh
   interpreter.
4. Sessions per process before the collector dominates: per side and per K in
   ``--sizes`` (10, 100, 1,000), a fresh child process starts K sessions and runs
   ``--many-turns`` text turns in each, all concurrently on one loop: turns per
   second, CPU per turn, and GC's share of the wall time of the turns (a
   ``gc.callbacks`` timer, as ``bench/sessions.py``); the first K whose share passes
   50 % for each side, or "not reached". Python's GC settings untouched.

Ratios are livekit ÷ backline throughout (above 1: LiveKit spends more, or, for
turns per second, does more). Skipped with a message when ``livekit.agents`` is not
importable (``pip install -e plugins/livekit``).

    python bench/vs_livekit.py                      # about 1 min (make bench)
    python bench/vs_livekit.py --sessions 7 --turns 400 --sizes 10,100,1000,3000
    python bench/vs_livekit.py --growth-turns 0     # without the history growth
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import multiprocessing
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from _common import (
    REPLY_TEXT,
    BenchAgent,
    make_session,
    measure_floor,
    print_table,
    rss_bytes,
    run,
    text_responder,
    tool_responder,
    write_results,
)
from sessions import GCTimer

MB = 2**20
SIDES = ("backline", "livekit")
KINDS = ("text", "tool")
GROWTH_BLOCK = 50
# The deltas ScriptedLLM streams for REPLY_TEXT: word by word, each keeping its space.
_WORDS = REPLY_TEXT.split(" ")
DELTAS = (*(w + " " for w in _WORDS[:-1]), _WORDS[-1])
TOOL_ARGUMENTS = '{"key":"alpha"}'


def livekit_version() -> str | None:
    """The installed livekit-agents version, or None when it cannot be imported."""
    try:
        import livekit.agents
    except ImportError:
        return None
    return str(livekit.agents.__version__)


# -- the LiveKit side ------------------------------------------------------------------------
def _livekit_classes() -> tuple[type[Any], type[Any]]:
    """LiveKit's fake LLM and agent (defined on first use: LiveKit may be missing)."""
    from livekit.agents import Agent, function_tool, llm
    from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, APIConnectOptions

    text_chunks = tuple(
        llm.ChatChunk(id="bench", delta=llm.ChoiceDelta(role="assistant", content=d))
        for d in DELTAS
    )
    call_ids = itertools.count()

    class ZeroStream(llm.LLMStream):
        """Streams the reply's deltas at once; a tool call first when asked for and the
        last item is the user's message (as ``tool_responder``)."""

        async def _run(self) -> None:
            last = self.chat_ctx.items[-1]
            if self._llm.with_tool and last.type == "message" and last.role == "user":
                call = llm.FunctionToolCall(
                    name="lookup", arguments=TOOL_ARGUMENTS, call_id=f"call_{next(call_ids)}"
                )
                self._event_ch.send_nowait(
                    llm.ChatChunk(
                        id="bench", delta=llm.ChoiceDelta(role="assistant", tool_calls=[call])
                    )
                )
                return
            for chunk in text_chunks:
                self._event_ch.send_nowait(chunk)

    class ZeroLLM(llm.LLM):  # type: ignore[type-arg]
        def __init__(self, *, with_tool: bool) -> None:
            super().__init__()
            self.with_tool = with_tool

        def chat(
            self,
            *,
            chat_ctx: llm.ChatContext,
            tools: list[llm.Tool] | None = None,
            conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
            **_: Any,
        ) -> llm.LLMStream:
            return ZeroStream(self, chat_ctx=chat_ctx, tools=tools or [], conn_options=conn_options)

    class LKBenchAgent(Agent):
        """``BenchAgent``'s counterpart: the same instructions and tool."""

        def __init__(self) -> None:
            super().__init__(instructions="You are a concise voice assistant used in a benchmark.")

        @function_tool
        async def lookup(self, key: str) -> str:
            """Look a key up.

            Args:
                key: The key to look up.
            """
            return f"value of {key}"

    return ZeroLLM, LKBenchAgent


_LK: tuple[type[Any], type[Any]] | None = None


async def _start_livekit(kind: str) -> tuple[Any, Callable[[], Awaitable[Any]]]:
    global _LK
    from livekit.agents import AgentSession

    if _LK is None:
        _LK = _livekit_classes()
    zero_llm, agent = _LK
    session: Any = AgentSession(
        llm=zero_llm(with_tool=kind == "tool"),
        vad=None,
        turn_handling={"turn_detection": None},
    )
    await session.start(agent())
    return session, session.aclose


async def _start_backline(kind: str) -> tuple[Any, Callable[[], Awaitable[Any]]]:
    session = make_session(tool_responder if kind == "tool" else text_responder)
    await session.start(BenchAgent())
    return session, session.aclose


async def start(side: str, kind: str) -> tuple[Any, Callable[[], Awaitable[Any]]]:
    """A started session of ``side`` for ``kind`` turns, and its close."""
    return await (_start_livekit(kind) if side == "livekit" else _start_backline(kind))


def check_turn(side: str, kind: str, result: Any) -> None:
    """The run's events are what the turn should have caused (both sides' ``RunResult``
    events have a ``type`` and an ``item``)."""
    types = [e.type for e in result.events]
    final = result.events[-1].item.text_content if result.events else None
    want = ["function_call", "function_call_output", "message"] if kind == "tool" else ["message"]
    if types != want or (final or "").strip() != REPLY_TEXT:
        raise RuntimeError(f"{side} {kind} turn did not run as scripted: {types} {final!r}")


# -- 1 and 2: CPU per turn, in this process ---------------------------------------------------
async def cpu_session(side: str, kind: str, warmup: int, turns: int) -> float:
    """CPU µs per turn of one fresh session after ``warmup`` turns."""
    session, close = await start(side, kind)
    try:
        for i in range(warmup):
            result = await session.run(user_input=f"warm-up {i}")
        check_turn(side, kind, result)
        c0 = time.process_time()
        for i in range(turns):
            await session.run(user_input=f"turn {i}")
        return (time.process_time() - c0) / turns * 1e6
    finally:
        await close()


async def growth(side: str, kind: str, turns: int) -> dict[str, Any]:
    """CPU µs per turn of the first and the last block of ``GROWTH_BLOCK`` turns."""
    session, close = await start(side, kind)
    blocks: list[float] = []
    try:
        for b in range(max(1, turns // GROWTH_BLOCK)):
            c0 = time.process_time()
            for i in range(GROWTH_BLOCK):
                await session.run(user_input=f"turn {b}.{i}")
            blocks.append((time.process_time() - c0) / GROWTH_BLOCK * 1e6)
        items = len(session.history.items) if side == "livekit" else len(session.history)
    finally:
        await close()
    return {
        "side": side,
        "kind": kind,
        "turns": len(blocks) * GROWTH_BLOCK,
        "history_items": items,
        "first_block_us": round(blocks[0], 1),
        "last_block_us": round(blocks[-1], 1),
        "last_over_first": round(blocks[-1] / blocks[0], 2),
    }


async def cpu_main(args: argparse.Namespace) -> dict[str, Any]:
    samples: dict[tuple[str, str], list[dict[str, float]]] = {
        (s, k): [] for s in SIDES for k in KINDS
    }
    for _ in range(args.sessions):
        for kind in KINDS:
            for side in SIDES:
                gc.collect()
                floor = await measure_floor(turns=args.floor_turns, repeats=1)
                us = await cpu_session(side, kind, args.warmup, args.turns)
                samples[(side, kind)].append({"us": us, "floor_us": floor.median_us})
    rows = []
    for (side, kind), ss in samples.items():
        rows.append(
            {
                "side": side,
                "kind": kind,
                "sessions": len(ss),
                "turns": args.turns,
                "cpu_us_median": round(statistics.median(s["us"] for s in ss), 1),
                "cpu_us_best": round(min(s["us"] for s in ss), 1),
                "x_floor_median": round(statistics.median(s["us"] / s["floor_us"] for s in ss), 2),
                "floor_us_median": round(statistics.median(s["floor_us"] for s in ss), 2),
                "samples_us": [round(s["us"], 1) for s in ss],
            }
        )
    grown = []
    if args.growth_turns:
        for kind in KINDS:
            for side in SIDES:
                gc.collect()
                grown.append(await growth(side, kind, args.growth_turns))
    return {"cpu": rows, "growth": grown}


# -- 3 and 4: child processes (multiprocessing spawn) -----------------------------------------
def _settle() -> Awaitable[None]:
    return asyncio.sleep(0.05)


async def _idle_child(side: str, k: int) -> dict[str, Any]:
    for kind in KINDS:  # every lazy path loaded: one turn of each kind, then closed
        session, close = await start(side, kind)
        await session.run(user_input="warm-up")
        await close()
    await _settle()
    gc.collect()
    before = rss_bytes()
    started = [await start(side, "text") for _ in range(k)]
    if side == "backline":
        await asyncio.gather(*(s.wait_for_idle() for s, _ in started))
    await _settle()
    gc.collect()
    after = rss_bytes()
    await asyncio.gather(*(close() for _, close in started))
    return {
        "side": side,
        "sessions": k,
        "rss_before_mb": round(before / MB, 1),
        "rss_idle_mb": round(after / MB, 1),
        "kb_per_idle_session": round((after - before) / k / 1024, 1),
    }


async def _many_child(side: str, k: int, turns: int) -> dict[str, Any]:
    session, close = await start(side, "text")
    await session.run(user_input="warm-up")
    await close()
    gc.collect()
    t0 = time.perf_counter()
    started = [await start(side, "text") for _ in range(k)]
    start_s = time.perf_counter() - t0
    await _settle()
    gc.collect()
    timer = GCTimer()
    gc.callbacks.append(timer)

    async def drive(session: Any) -> None:
        for i in range(turns):
            await session.run(user_input=f"turn {i}")

    c0 = time.process_time()
    w0 = time.perf_counter()
    await asyncio.gather(*(drive(s) for s, _ in started))
    wall = time.perf_counter() - w0
    cpu = time.process_time() - c0
    gc_s, collections = timer.snapshot()
    gc.callbacks.remove(timer)
    peak = rss_bytes()
    await asyncio.gather(*(close() for _, close in started))
    n = k * turns
    return {
        "side": side,
        "sessions": k,
        "turns_per_session": turns,
        "start_seconds": round(start_s, 3),
        "wall_seconds": round(wall, 3),
        "turns_per_second": round(n / wall, 1),
        "cpu_us_per_turn": round(cpu / n * 1e6, 1),
        "gc_seconds": round(gc_s, 3),
        "gc_share": round(gc_s / wall, 4),
        "gc_collections": collections,
        "rss_after_turns_mb": round(peak / MB, 1),
        "gc_threshold": list(gc.get_threshold()),
    }


def _child_entry(what: str, *params: Any) -> dict[str, Any]:
    """Runs in the spawned child."""
    if what == "idle":
        return run(lambda: _idle_child(*params))  # type: ignore[no-any-return]
    return run(lambda: _many_child(*params))  # type: ignore[no-any-return]


def in_child(what: str, *params: Any) -> dict[str, Any]:
    """``_child_entry`` in a fresh spawned process (its own heap and collector)."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(_child_entry, (what, *params))  # type: ignore[no-any-return]


def import_rss(module: str) -> float:
    """RSS growth in MB of ``import module`` in a fresh interpreter."""
    code = (
        "import os\n"
        "def rss():\n"
        "    return int(open('/proc/self/statm').read().split()[1]) * os.sysconf('SC_PAGE_SIZE')\n"
        f"before = rss()\nimport {module}\nprint(rss() - before)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return round(int(out.stdout.split()[-1]) / MB, 1)


# -- output -------------------------------------------------------------------------------------
def ratio(lk: float, bl: float) -> str:
    """livekit ÷ backline, to three significant digits."""
    if not bl:
        return "-"
    v = lk / bl
    return f"{v:,.0f}x" if v >= 100 else f"{v:.3g}x"


def crossing(rows: list[dict[str, Any]], side: str) -> str:
    mine = sorted((r for r in rows if r["side"] == side), key=lambda r: r["sessions"])
    for r in mine:
        if r["gc_share"] > 0.5:
            return f"{r['sessions']:,} sessions ({r['gc_share'] * 100:.1f} %)"
    if not mine:
        return "not measured"
    top = mine[-1]
    return f"not reached ({top['gc_share'] * 100:.1f} % at {top['sessions']:,} sessions)"


def report(
    version: str, cpu: dict[str, Any], idle: list[dict[str, Any]], many: list[dict[str, Any]]
) -> dict[str, str]:
    by = {(r["side"], r["kind"]): r for r in cpu["cpu"]}
    rows = []
    for kind in KINDS:
        bl, lk = by[("backline", kind)], by[("livekit", kind)]
        for side, r in (("backline", bl), ("livekit", lk)):
            rows.append(
                [
                    kind,
                    side,
                    r["cpu_us_median"],
                    r["cpu_us_best"],
                    f"{r['x_floor_median']:.2f}x",
                    ratio(lk["cpu_us_median"], bl["cpu_us_median"]) if side == "livekit" else "",
                    ratio(lk["x_floor_median"], bl["x_floor_median"]) if side == "livekit" else "",
                ]
            )
    floor = statistics.median(r["floor_us_median"] for r in cpu["cpu"])
    first = cpu["cpu"][0]
    print_table(
        f"CPU per turn, session.run(user_input=...), livekit-agents {version} "
        f"(median of {first['sessions']} sessions x {first['turns']} turns; floor {floor:.1f} µs)",
        ["turn", "side", "CPU µs", "best µs", "x floor", "lk ÷ bl (µs)", "lk ÷ bl (x floor)"],
        rows,
    )
    if cpu["growth"]:
        print_table(
            f"History growth: CPU µs per turn, first and last block of {GROWTH_BLOCK} turns",
            ["turn", "side", "turns", "history items", "first µs", "last µs", "last ÷ first"],
            [
                [
                    g["kind"],
                    g["side"],
                    g["turns"],
                    g["history_items"],
                    g["first_block_us"],
                    g["last_block_us"],
                    f"{g['last_over_first']:.2f}x",
                ]
                for g in cpu["growth"]
            ],
        )
    ib = {r["side"]: r for r in idle}
    print_table(
        f"Memory per idle session ({ib['backline']['sessions']:,} started and idle, "
        "a fresh spawned process per side)",
        ["side", "import +MB", "RSS before MB", "RSS idle MB", "KB/idle session", "lk ÷ bl"],
        [
            [
                s,
                ib[s]["import_mb"],
                ib[s]["rss_before_mb"],
                ib[s]["rss_idle_mb"],
                ib[s]["kb_per_idle_session"],
                ratio(ib["livekit"]["kb_per_idle_session"], ib["backline"]["kb_per_idle_session"])
                if s == "livekit"
                else "",
            ]
            for s in SIDES
        ],
    )
    mb = {(r["side"], r["sessions"]): r for r in many}
    many_rows = []
    for k in sorted({r["sessions"] for r in many}):
        for s in SIDES:
            r = mb.get((s, k))
            if r is None:
                continue
            bl = mb.get(("backline", k))
            many_rows.append(
                [
                    k,
                    s,
                    r["turns_per_second"],
                    r["cpu_us_per_turn"],
                    round(r["gc_share"] * 100, 1),
                    "/".join(str(c) for c in r["gc_collections"]),
                    r["rss_after_turns_mb"],
                    ratio(r["turns_per_second"], bl["turns_per_second"])
                    if s == "livekit" and bl
                    else "",
                ]
            )
    turns = many[0]["turns_per_session"] if many else 0
    print_table(
        f"K concurrent sessions x {turns} text turns, one loop, a fresh spawned process each",
        [
            "sessions",
            "side",
            "turns/s",
            "CPU µs/turn",
            "GC %",
            "GC runs g0/g1/g2",
            "RSS MB",
            "lk ÷ bl (turns/s)",
        ],
        many_rows,
    )
    cross = {s: crossing(many, s) for s in SIDES}
    print(
        "GC % = time in the collector (gc.callbacks, start to stop) over the wall time of "
        "the turns; Python's GC thresholds untouched"
    )
    print(
        f"GC's share passes 50 %: backline {cross['backline']}; livekit-agents {cross['livekit']}"
    )
    print("\n(a figure, not a target: no Targets block)")
    return cross


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sessions", type=int, default=5, help="CPU: sessions per side and kind")
    p.add_argument("--turns", type=int, default=200, help="CPU: measured turns per session")
    p.add_argument("--warmup", type=int, default=20, help="CPU: unmeasured turns first")
    p.add_argument("--floor-turns", type=int, default=2000, help="CPU: floor turns per block")
    p.add_argument("--growth-turns", type=int, default=500, help="history growth (0: skip)")
    p.add_argument("--idle", type=int, default=200, help="memory: idle sessions per side")
    p.add_argument("--sizes", default="10,100,1000", help="concurrent session counts")
    p.add_argument("--many-turns", type=int, default=5, help="text turns per session there")
    args = p.parse_args()

    version = livekit_version()
    if version is None:
        print(
            "vs_livekit.py skipped: livekit.agents is not importable "
            "(pip install -e plugins/livekit, or livekit-agents)"
        )
        return

    t0 = time.perf_counter()
    cpu = run(lambda: cpu_main(args))
    print(f"  CPU per turn done ({time.perf_counter() - t0:.0f} s)", flush=True)
    imports = {"backline": import_rss("backline"), "livekit": import_rss("livekit.agents")}
    idle = []
    for side in SIDES:
        idle.append({**in_child("idle", side, args.idle), "import_mb": imports[side]})
    print(f"  idle memory done ({time.perf_counter() - t0:.0f} s)", flush=True)
    many = []
    for k in (int(x) for x in args.sizes.split(",") if x.strip()):
        for side in SIDES:
            many.append(in_child("many", side, k, args.many_turns))
            print(
                f"  {k} {side} sessions done in {many[-1]['wall_seconds']:.1f} s "
                f"({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )
    cross = report(version, cpu, idle, many)
    write_results(
        "vs_livekit",
        args,
        {
            "livekit_agents_version": version,
            **cpu,
            "idle": idle,
            "concurrent": many,
            "gc_passes_half_at": cross,
        },
    )


if __name__ == "__main__":
    main()
