"""Sessions per process: K concurrent sessions, each with one background session.

Each size runs in a fresh child process (so peak RSS is its own):
  1. the interpreter imports backline: baseline RSS;
  2. K sessions start (an agent with one tool, a background session waiting on
     ``ctx.messages()``) and settle: RSS per idle session = (RSS - baseline) / K;
  3. every session runs ``--turns`` text turns, all sessions concurrently (one
     asyncio loop): wall time, turns per second, CPU per turn, peak RSS and
     peak RSS per session;
  4. all sessions close (timed).
The RSS of ``import backline`` itself is measured in another fresh interpreter.
Memory is read from ``/proc/self/statm`` (current) and ``ru_maxrss`` (peak).

The garbage collector's share: a ``gc.callbacks`` hook sums the time between each
collection's "start" and "stop" and counts the collections per generation; the
share is that time over the wall time of step 3 (the turns). The collector keeps
Python's settings unless ``--gc-threshold`` is given.

The Targets block (with Python's GC settings): 10,000 sessions x 20 turns complete
in one process, their peak RSS ≤ 400 MB, closing all of them ≤ 2 s, and an idle
session with one background ≤ 15 KB (at 10,000 sessions, or the largest size run).

    python bench/sessions.py                          # 10, 100, 1000, 10000 (make bench)
                                                      # (a size is skipped when less than
                                                      # 2 x 200 KB per session is available)
    python bench/sessions.py --sizes 10000,20000 --turns 50
    python bench/sessions.py --gc-threshold 20000,20,20   # a tuned garbage collector
    python bench/sessions.py --child 1000 --profile   # one size in-process, cProfiled

With thousands of sessions on one loop, each turn's short-lived objects outlive
several young-generation collections (thousands of other turns allocate in
between), get promoted, and CPython's full collections come often and walk
every live object: with the default thresholds they take a large share of the
time. ``--gc-threshold`` shows what ``gc.set_threshold`` changes (see
docs/performance.md); the default run keeps Python's defaults.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import subprocess
import sys
import time
from typing import Any

from _common import (
    BenchAgent,
    Target,
    TurnWaiter,
    import_rss,
    make_session,
    peak_rss_bytes,
    print_table,
    print_targets,
    rss_bytes,
    run,
    text_responder,
    write_results,
)

MB = 2**20
NEED_PER_SESSION = 200 * 1024  # bytes: a generous bound (about 45 KB are measured)


def available_memory() -> int | None:
    """MemAvailable from /proc/meminfo, in bytes (None where unknown)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class GCTimer:
    """A ``gc.callbacks`` hook: time spent collecting, and collections per generation."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = [0, 0, 0]
        self._started: float | None = None

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            self.seconds += time.perf_counter() - self._started
            self.collections[info["generation"]] += 1
            self._started = None

    def snapshot(self) -> tuple[float, list[int]]:
        return self.seconds, list(self.collections)


async def child(k: int, turns: int) -> dict[str, Any]:
    gc.collect()
    gc_before = [s["collections"] for s in gc.get_stats()]
    timer = GCTimer()
    gc.callbacks.append(timer)
    base = rss_bytes()
    t0 = time.perf_counter()
    sessions = []
    for _ in range(k):
        s = make_session(text_responder, with_background=True)
        await s.start(BenchAgent())
        sessions.append(s)
    await asyncio.gather(*(s.wait_for_idle() for s in sessions))
    start_s = time.perf_counter() - t0
    gc.collect()
    idle = rss_bytes()

    async def drive(session: Any) -> None:
        waiter = TurnWaiter(session)
        for i in range(turns):
            await waiter.turn(session, f"turn {i}")

    gc_s0, gc_n0 = timer.snapshot()
    c0 = time.process_time()
    w0 = time.perf_counter()
    await asyncio.gather(*(drive(s) for s in sessions))
    wall = time.perf_counter() - w0
    cpu = time.process_time() - c0
    gc_s1, gc_n1 = timer.snapshot()
    after = rss_bytes()
    peak = peak_rss_bytes()
    gc_runs = [s["collections"] - b for s, b in zip(gc.get_stats(), gc_before, strict=True)]
    done = sum(len(s.history) for s in sessions)
    assert done == k * turns * 2, f"expected {k * turns * 2} history items, got {done}"

    t1 = time.perf_counter()
    await asyncio.gather(*(s.aclose() for s in sessions))
    close_s = time.perf_counter() - t1
    gc_s2, _ = timer.snapshot()
    gc.callbacks.remove(timer)
    n = k * turns
    return {
        "sessions": k,
        "turns_per_session": turns,
        "baseline_rss_mb": round(base / MB, 1),
        "start_seconds": round(start_s, 3),
        "idle_rss_mb": round(idle / MB, 1),
        "idle_kb_per_session": round((idle - base) / k / 1024, 1),
        "wall_seconds": round(wall, 3),
        "turns_per_second": round(n / wall, 1),
        "cpu_us_per_turn": round(cpu / n * 1e6, 1),
        "rss_after_turns_mb": round(after / MB, 1),
        "kb_per_session_after_turns": round((after - base) / k / 1024, 1),
        "peak_rss_mb": round(peak / MB, 1),
        "peak_kb_per_session": round((peak - base) / k / 1024, 1),
        "close_seconds": round(close_s, 3),
        "gc_threshold": list(gc.get_threshold()),
        "gc_collections_by_generation": gc_runs,
        # The collector during the turns (step 3): its time, its share of the wall
        # time, and its collections per generation (gc.callbacks).
        "gc_seconds": round(gc_s1 - gc_s0, 3),
        "gc_share": round((gc_s1 - gc_s0) / wall, 4),
        "gc_collections_during_turns": [b - a for a, b in zip(gc_n0, gc_n1, strict=True)],
        "gc_seconds_during_close": round(gc_s2 - gc_s1, 3),
    }


TARGET_SESSIONS = 10_000


def row_for(rows: list[dict[str, Any]], k: int) -> dict[str, Any] | None:
    return next((r for r in rows if r["sessions"] == k), None)


def targets_from(rows: list[dict[str, Any]], turns: int, failed: list[int]) -> list[Target]:
    """The issue's targets, read from the 10,000-session row (not run: not measured;
    failed: 0 sessions completed); the idle size from that row, else from the
    largest size run."""
    big = row_for(rows, TARGET_SESSIONS)
    completed: float | None = None if big is None else big["sessions"]
    if TARGET_SESSIONS in failed:
        completed = 0
    largest = max(rows, key=lambda r: r["sessions"], default=None)
    idle_row = big if big is not None else largest
    at = f"{TARGET_SESSIONS:,} sessions"
    return [
        Target(
            f"{at} x {turns} turns, one background each, complete",
            completed,
            TARGET_SESSIONS,
            unit="sessions",
            op=">=",
            note="one process, one event loop",
        ),
        Target(
            f"peak RSS, {at}",
            None if big is None else big["peak_rss_mb"],
            250,
            unit="MB",
            note="ru_maxrss of the child",
        ),
        Target(
            f"close of all, {at}",
            None if big is None else big["close_seconds"],
            1,
            unit="s",
            note="gather(aclose()) after the turns",
        ),
        Target(
            "idle session with one background",
            None if idle_row is None else idle_row["idle_kb_per_session"],
            15,
            unit="KB",
            note=(
                "-"
                if idle_row is None
                else f"RSS after start / sessions, at {idle_row['sessions']:,} sessions"
            ),
        ),
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", default="10,100,1000,10000", help="comma-separated session counts")
    p.add_argument("--turns", type=int, default=20, help="text turns per session")
    p.add_argument(
        "--gc-threshold",
        metavar="A,B,C",
        help="gc.set_threshold(A, B, C) in each child (default: Python's, 700,10,10)",
    )
    p.add_argument("--child", type=int, metavar="K", help=argparse.SUPPRESS)
    p.add_argument("--profile", action="store_true", help="with --child: cProfile it")
    p.add_argument("--top", type=int, default=25, help="entries printed by --profile")
    args = p.parse_args()

    if args.gc_threshold:
        gc.set_threshold(*(int(x) for x in args.gc_threshold.split(",")))
    if args.child is not None:
        result = run(
            lambda: child(args.child, args.turns),
            profile="sessions" if args.profile else None,
            top=args.top,
        )
        print(json.dumps(result))
        return

    sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    imp = import_rss()
    rows = []
    skipped = []
    failed: list[int] = []
    for k in sizes:
        free = available_memory()
        if free is not None and k * NEED_PER_SESSION > free // 2:
            print(f"  {k} sessions skipped: {free // MB} MB available", flush=True)
            skipped.append(k)
            continue
        cmd = [sys.executable, __file__, "--child", str(k), "--turns", str(args.turns)]
        if args.gc_threshold:
            cmd += ["--gc-threshold", args.gc_threshold]
        out = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode != 0:
            sys.stderr.write(out.stderr[-4000:])
            print(f"  {k} sessions FAILED (exit status {out.returncode})", flush=True)
            failed.append(k)
            continue
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(f"  {k} sessions done in {rows[-1]['wall_seconds']:.1f}s", flush=True)

    print_table(
        "import backline (fresh interpreter)",
        ["RSS before", "RSS after", "delta MB", "seconds", "heavy modules loaded"],
        [
            [
                f"{imp['interpreter_rss_mb']} MB",
                f"{imp['rss_after_import_mb']} MB",
                imp["import_delta_mb"],
                imp["import_seconds"],
                ", ".join(imp["heavy_modules_loaded"]) or "none",
            ]
        ],
    )
    print_table(
        f"Concurrent sessions, one background each, {args.turns} text turns per session "
        f"(gc threshold {args.gc_threshold or 'default'})",
        [
            "sessions",
            "idle KB/session",
            "wall s",
            "turns/s",
            "CPU µs/turn",
            "peak RSS MB",
            "peak KB/session",
            "close s",
            "close GC s",
            "GC %",
            "GC runs g0/g1/g2",
        ],
        [
            [
                r["sessions"],
                r["idle_kb_per_session"],
                r["wall_seconds"],
                r["turns_per_second"],
                r["cpu_us_per_turn"],
                r["peak_rss_mb"],
                r["peak_kb_per_session"],
                r["close_seconds"],
                r["gc_seconds_during_close"],
                round(r["gc_share"] * 100, 1),
                "/".join(str(c) for c in r["gc_collections_during_turns"]),
            ]
            for r in rows
        ],
    )
    print(
        "GC % = time in the collector (gc.callbacks, start to stop) over the wall time of the "
        "turns; close GC s = its time during the close"
    )
    targets = targets_from(rows, args.turns, failed)
    targets.append(
        Target(
            "import backline RSS",
            imp["rss_after_import_mb"],
            30,
            unit="MB",
            note="a fresh interpreter's RSS after the import",
        )
    )
    title = "Targets"
    if args.gc_threshold:
        title += f" (gc threshold {args.gc_threshold}: the targets are for Python's defaults)"
    print_targets(targets, title)
    big = row_for(rows, TARGET_SESSIONS)
    if big is not None:
        print(
            f"GC's share of the {TARGET_SESSIONS:,}-session run: {big['gc_share'] * 100:.1f} % "
            f"({big['gc_seconds']} s of {big['wall_seconds']} s; collections per generation "
            f"{big['gc_collections_during_turns']}; gc threshold {big['gc_threshold']})"
        )
    write_results(
        "sessions",
        args,
        {"import": imp, "sizes": rows, "skipped_sizes": skipped, "failed_sizes": failed},
        targets,
    )
    if failed:
        raise SystemExit(f"sessions.py: the child for {failed} sessions failed")


if __name__ == "__main__":
    main()
