"""What the conversation log adds to a turn: the same turns with the log off and on.

One session per run, text turns and tool turns on the push path (``push_user_turn``,
the turn ends at ``agent_state_changed`` → ``listening``), as in ``bench/turns.py``.
With the log on, a ``SessionRecorder`` is told each fact of a turn by the session
(``session.add_recorder``), queues one entry per turn, and a writer thread makes the
records and commits them to SQLite (WAL) in a temporary directory.

Reported per turn: the event loop's own CPU (``time.thread_time()`` on the loop's
thread: what a turn pays, the writer thread excluded), the whole process's CPU (the
writer included), wall latency p50/p99; with the log on also the records written
per turn, how long the writer took to catch up after the last turn (``flush``) and
the database's size per turn. Medians over the sessions; sessions with the log off
and on alternate, so a drifting machine weighs on both alike.

    python bench/logs.py                       # the default sizes (make bench)
    python bench/logs.py --turns 2000 --repeats 7
"""

from __future__ import annotations

import argparse
import gc
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import (
    BenchAgent,
    Target,
    TurnWaiter,
    make_session,
    print_table,
    print_targets,
    run,
    summarize_us,
    text_responder,
    tool_responder,
    write_results,
)

from backline.logs import ConversationLog, attach_log

SCENARIOS = {"text": text_responder, "tool": tool_responder}
TABLES = ("turns", "tool_calls", "tool_outputs", "state_changes", "llm_requests")


async def one_session(
    scenario: str, *, turns: int, warmup: int, log_dir: Path | None
) -> dict[str, Any]:
    log = ConversationLog(log_dir / "conversations.db") if log_dir is not None else None
    wall: list[float] = []
    async with make_session(SCENARIOS[scenario]) as session:
        if log is not None:
            attach_log(session, log, front_end="bench")
        await session.start(BenchAgent())
        await session.wait_for_idle()
        waiter = TurnWaiter(session)
        for i in range(warmup):
            await waiter.turn(session, f"warm-up {i}")
        if log is not None:
            log.flush(60)
        gc.collect()
        loop0, cpu0 = time.thread_time(), time.process_time()
        for i in range(turns):
            t = time.perf_counter()
            await waiter.turn(session, f"turn {i}")
            wall.append(time.perf_counter() - t)
        loop_cpu, cpu = time.thread_time() - loop0, time.process_time() - cpu0
        flushed = time.perf_counter()
        caught_up = log.flush(60) if log is not None else True
        flush_s = time.perf_counter() - flushed
    out: dict[str, Any] = {
        "loop_cpu_us": loop_cpu / turns * 1e6,
        "cpu_us": cpu / turns * 1e6,
        "wall": wall,
    }
    if log is not None:
        assert caught_up and log.close(60) and log.error is None, log.error
        db = log.path
        with sqlite3.connect(db) as conn:
            written = sum(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES)
        size = sum(p.stat().st_size for p in db.parent.iterdir())
        out |= {
            "records_per_turn": written / (turns + warmup),
            "flush_ms": flush_s * 1e3,
            "db_bytes_per_turn": size / (turns + warmup),
            "dropped": log.dropped,
        }
    return out


async def measure(scenario: str, *, turns: int, repeats: int, warmup: int) -> list[dict[str, Any]]:
    results = []
    by_mode: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    # Off and on alternate (off, on, off, on, ...): a machine that drifts over the run
    # (frequency, memory, other load) weighs on both alike.
    for _ in range(repeats):
        for mode in ("off", "on"):
            with tempfile.TemporaryDirectory() as tmp:
                by_mode[mode].append(
                    await one_session(
                        scenario,
                        turns=turns,
                        warmup=warmup,
                        log_dir=Path(tmp) if mode == "on" else None,
                    )
                )
    for mode, runs in by_mode.items():
        wall = [w for r in runs for w in r["wall"]]
        row: dict[str, Any] = {
            "scenario": scenario,
            "log": mode,
            "turns": turns * repeats,
            "loop_cpu_us_per_turn": round(statistics.median(r["loop_cpu_us"] for r in runs), 1),
            "cpu_us_per_turn": round(statistics.median(r["cpu_us"] for r in runs), 1),
            **summarize_us(wall),
        }
        if mode == "on":
            for key in ("records_per_turn", "flush_ms", "db_bytes_per_turn"):
                row[key] = round(statistics.median(r[key] for r in runs), 2)
            row["dropped"] = sum(r["dropped"] for r in runs)
        results.append(row)
    off, on = results
    on["loop_cpu_us_added"] = round(on["loop_cpu_us_per_turn"] - off["loop_cpu_us_per_turn"], 1)
    on["cpu_us_added"] = round(on["cpu_us_per_turn"] - off["cpu_us_per_turn"], 1)
    return results


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--turns", type=int, default=500, help="measured turns per session")
    p.add_argument("--repeats", type=int, default=5, help="sessions per scenario and mode")
    p.add_argument("--warmup", type=int, default=20, help="unmeasured turns first")
    p.add_argument("--scenarios", default="text,tool", help="comma-separated: text, tool")
    args = p.parse_args()
    names = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    for n in names:
        if n not in SCENARIOS:
            p.error(f"unknown scenario {n!r}")

    async def all_runs() -> list[dict[str, Any]]:
        out = []
        for name in names:
            out += await measure(name, turns=args.turns, repeats=args.repeats, warmup=args.warmup)
        return out

    results = run(all_runs)
    print_table(
        "The conversation log's cost per turn (push path; loop CPU = the event loop's thread)",
        [
            "scenario",
            "log",
            "turns",
            "loop CPU µs",
            "+",
            "process CPU µs",
            "+",
            "p50 µs",
            "p99 µs",
            "records",
            "flush ms",
            "DB bytes",
        ],
        [
            [
                r["scenario"],
                r["log"],
                r["turns"],
                r["loop_cpu_us_per_turn"],
                r.get("loop_cpu_us_added", "-"),
                r["cpu_us_per_turn"],
                r.get("cpu_us_added", "-"),
                r["p50_us"],
                r["p99_us"],
                r.get("records_per_turn", "-"),
                r.get("flush_ms", "-"),
                r.get("db_bytes_per_turn", "-"),
            ]
            for r in results
        ],
    )
    added = [
        r["loop_cpu_us_added"]
        for r in results
        if r["scenario"] == "text" and "loop_cpu_us_added" in r
    ]
    targets = [
        Target(
            "conversation log, loop CPU per text turn",
            added[0] if added else None,
            15,
            unit="µs",
            note="log on - log off, the event loop's thread",
        )
    ]
    print_targets(targets)
    write_results("logs", args, results, targets)


if __name__ == "__main__":
    main()
