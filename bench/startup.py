"""Start-up: the CPU ``backline console`` spends until its first prompt, in a terminal.

``backline console`` runs in a pseudo-terminal (the prompt_toolkit front end, as a user
sees it) with the built-in Anthropic LLM and two backgrounds installed (claude_code and
deep_research; no LiveKit: ``BACKLINE_PLUGINS``). The process's CPU time
(``/proc/PID/stat``: user + system) is read the moment its prompt (``you>``) appears.
Then, as the user types, the model's package is imported in a thread (``warm_up``): the
CPU after it settles is stated too, as is ``backline --help``'s. Target (issue 31):
≤ 0.5 s CPU to the first prompt.

    python bench/startup.py               # 5 runs each (make bench)
"""

from __future__ import annotations

import argparse
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from _common import Target, print_table, print_targets, run, write_results

BIN = Path(sys.executable).parent
TICK = os.sysconf("SC_CLK_TCK")
PLUGINS = "anthropic,claude_code,deep_research"


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def console_once(settle: float) -> dict[str, float]:
    env = {
        **os.environ,
        "BACKLINE_PLUGINS": PLUGINS,
        "ANTHROPIC_API_KEY": "bench",
        "TERM": "xterm",
        "COLUMNS": "100",
        "LINES": "30",
    }
    env.pop("ANTHROPIC_AUTH_TOKEN", None)
    main, child = pty.openpty()
    started = time.perf_counter()
    proc = subprocess.Popen(
        [str(BIN / "backline"), "console", "--no-log"],
        stdin=child,
        stdout=child,
        stderr=child,
        env=env,
        close_fds=True,
    )
    os.close(child)
    seen = b""
    try:
        deadline = time.monotonic() + 30
        while b"you>" not in seen:
            if time.monotonic() > deadline:
                raise RuntimeError(f"no prompt within 30 s: {seen[-400:]!r}")
            ready, _, _ = select.select([main], [], [], 0.5)
            if ready:
                seen += os.read(main, 65536)
        at_prompt = cpu_seconds(proc.pid)
        wall = time.perf_counter() - started
        # The user types; meanwhile the model's package loads in a thread.
        end = time.monotonic() + settle
        while time.monotonic() < end:
            ready, _, _ = select.select([main], [], [], 0.1)
            if ready:
                os.read(main, 65536)
        settled = cpu_seconds(proc.pid)
        os.write(main, b"/quit\r")
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        os.close(main)
    return {"prompt_cpu_s": at_prompt, "prompt_wall_s": wall, "settled_cpu_s": settled}


def help_once() -> float:
    before = os.times()
    subprocess.run([str(BIN / "backline"), "--help"], capture_output=True, check=True)
    after = os.times()
    return (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )


def median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


async def main(args: argparse.Namespace) -> None:
    runs = [console_once(args.settle) for _ in range(args.runs)]
    helps = [help_once() for _ in range(args.runs)]
    prompt = median([r["prompt_cpu_s"] for r in runs])
    rows = [
        [
            "backline console: CPU to the first prompt",
            f"{prompt:.2f}",
            f"{min(r['prompt_cpu_s'] for r in runs):.2f}",
        ],
        [
            "  wall time to the first prompt",
            f"{median([r['prompt_wall_s'] for r in runs]):.2f}",
            "",
        ],
        [
            f"  CPU {args.settle:g} s later (the model's package loaded)",
            f"{median([r['settled_cpu_s'] for r in runs]):.2f}",
            "",
        ],
        ["backline --help: CPU", f"{median(helps):.2f}", f"{min(helps):.2f}"],
    ]
    print_table(
        f"Start-up ({args.runs} runs; plugins {PLUGINS}; a pseudo-terminal)",
        ["measure", "median s", "best s"],
        rows,
    )
    targets = [Target("backline console start to first prompt (CPU)", prompt, 0.5, unit="s")]
    print_targets(targets)
    write_results("startup", args, {"console": runs, "help_cpu_s": helps}, targets)


def cli() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--settle", type=float, default=4.0)
    p.add_argument("--profile", help="cProfile (unused)")
    args = p.parse_args()
    run(lambda: main(args))


if __name__ == "__main__":
    cli()
