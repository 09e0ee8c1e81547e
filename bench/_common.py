"""Shared helpers for the benchmarks: the harness, statistics, tables, JSON results.

Not a benchmark itself (``make bench`` skips files starting with ``_``).

The harness: a ``ScriptedLLM`` with zero delay and ``record=False`` (no copy of
the context per request), a ``TextOutput`` that keeps nothing (the base class:
playout is reported at flush, nothing is stored, so long runs do not grow), and
the default user-away timer (15 s), as a front end would run it.

The floor: ``FloorLoop`` is the least a task-per-reply runtime can do per turn on
asyncio (no backline in it); ``measure_floor`` times it in the running loop, so a
benchmark can print its figures as ratios to a floor run in the same process, and
machine noise (a slower VM, other load) cancels. ``Target`` rows and
``print_targets`` print those ratios beside their limits; ``write_results`` stores
them (``targets`` in the JSON), and ``bench/report.py`` gathers them.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import os
import platform
import pstats
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from backline import Agent, ChatMessage, Session, TextOutput, background, function_tool
from backline.testing import ScriptedLLM, text, tool_calls
from backline.testing.scripted_llm import LLMRequest, ScriptedResponse

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"
REPO = BENCH_DIR.parent

REPLY_TEXT = "Sure, that is done."  # five words: five text deltas per reply
TEXT_REPLY = text(REPLY_TEXT)
# Arguments as JSON text, as a model adapter hands them over (no dumps in the fake model).
TOOL_CALL = tool_calls(("lookup", '{"key":"alpha"}'))


# -- the agent and the scripted model -------------------------------------------------
class BenchAgent(Agent):
    """A voice agent with one trivial tool (an argument, so validation runs)."""

    def __init__(self) -> None:
        super().__init__("You are a concise voice assistant used in a benchmark.")

    @function_tool
    async def lookup(self, key: str) -> str:
        """Look a key up.

        Args:
            key: The key to look up.
        """
        return f"value of {key}"


def text_responder(_: LLMRequest) -> ScriptedResponse:
    """Every request is answered with the same short text."""
    return TEXT_REPLY


def tool_responder(request: LLMRequest) -> ScriptedResponse:
    """A user message gets a tool call; the tool's output gets the text answer."""
    last = request.chat_ctx.items[-1]
    if isinstance(last, ChatMessage) and last.role == "user":
        return TOOL_CALL
    return TEXT_REPLY


async def idle_worker(ctx: Any) -> None:
    """A background that waits for messages and does nothing with them."""
    async for _ in ctx.messages():
        pass


WORKER = background("worker", description="A benchmark worker that does nothing.")(idle_worker)


def make_session(
    responder: Callable[[LLMRequest], Any],
    *,
    with_background: bool = False,
    output: TextOutput | None = None,
) -> Session[Any]:
    return Session(
        ScriptedLLM(responder, record=False),
        output=output if output is not None else TextOutput(),
        background=[WORKER] if with_background else None,
    )


class TurnWaiter:
    """Waits for a turn the way a front end sees it end: ``agent_state_changed`` to
    ``listening`` (a synchronous event listener: no polling, no extra wake-ups)."""

    def __init__(self, session: Session[Any]) -> None:
        self._fut: asyncio.Future[None] | None = None
        session.on("agent_state_changed", self._changed)

    def _changed(self, event: Any) -> None:
        fut = self._fut
        if event.new == "listening" and fut is not None and not fut.done():
            fut.set_result(None)

    async def turn(self, session: Session[Any], user_text: str) -> None:
        self._fut = asyncio.get_running_loop().create_future()
        session.push_user_turn(user_text)
        await self._fut


async def idle_turn(session: Session[Any], user_text: str) -> None:
    """One turn through the public wait: ``push_user_turn``, then ``wait_for_idle()``."""
    session.push_user_turn(user_text)
    await session.wait_for_idle()


async def run_turn(session: Session[Any], user_text: str) -> None:
    """One turn through ``session.run()`` (collects the turn's events)."""
    await session.run(user_input=user_text)


# -- the floor ------------------------------------------------------------------------
FLOOR_WORDS = tuple(f"{w} " for w in REPLY_TEXT.split())  # the same five deltas


class FloorItem:
    """A conversation item at its smallest: a role and a text."""

    __slots__ = ("content", "role")

    def __init__(self, role: str, content: str) -> None:
        self.role = role
        self.content = content


class FloorLoop:
    """The least a task-per-reply voice runtime does per turn, on asyncio alone.

    Per turn: the user item is appended to the history, one task is created for the
    reply; the reply calls an async-generator "model" that yields five text deltas,
    joins them, appends the assistant item, and notifies three state changes
    (``thinking``, ``speaking``, ``listening``) to a listener; the ``listening``
    callback resolves the future the driver awaits, as ``TurnWaiter`` does with a
    session. No backline code runs: it is what a turn costs on this interpreter
    and machine before any runtime feature, the denominator of the "x floor" ratios.
    """

    def __init__(self) -> None:
        self.history: list[FloorItem] = []
        self._listeners: list[Callable[[str], None]] = [self._state_changed]
        self._fut: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None

    async def _model(self, items: list[FloorItem]) -> AsyncIterator[str]:
        for word in FLOOR_WORDS:
            yield word

    def _notify(self, state: str) -> None:
        for listener in self._listeners:
            listener(state)

    def _state_changed(self, state: str) -> None:
        fut = self._fut
        if state == "listening" and fut is not None and not fut.done():
            fut.set_result(None)

    async def _reply(self) -> None:
        self._notify("thinking")
        parts = [delta async for delta in self._model(self.history)]
        self.history.append(FloorItem("assistant", "".join(parts)))
        self._notify("speaking")
        self._notify("listening")

    async def turn(self, user_text: str) -> None:
        loop = asyncio.get_running_loop()
        self._fut = loop.create_future()
        self.history.append(FloorItem("user", user_text))
        self._task = loop.create_task(self._reply())  # held, as a runtime holds its tasks
        await self._fut


@dataclass
class FloorResult:
    """CPU µs per floor turn: the median and the best of the repeats (and all)."""

    median_us: float
    best_us: float
    samples_us: list[float]


async def measure_floor(turns: int = 2000, repeats: int = 5, warmup: int = 200) -> FloorResult:
    """CPU per turn of ``FloorLoop`` in the running loop (``time.process_time()``
    over ``turns`` turns, each repeat on a fresh loop object after ``warmup`` turns),
    median and best over ``repeats``."""
    samples: list[float] = []
    for _ in range(repeats):
        floor = FloorLoop()
        for i in range(warmup):
            await floor.turn(f"warm-up {i}")
        c0 = time.process_time()
        for i in range(turns):
            await floor.turn(f"turn {i}")
        samples.append((time.process_time() - c0) / turns * 1e6)
    return FloorResult(
        median_us=round(statistics.median(samples), 2),
        best_us=round(min(samples), 2),
        samples_us=[round(x, 2) for x in samples],
    )


def floor_cpu_us(turns: int = 2000, repeats: int = 5, warmup: int = 200) -> tuple[float, float]:
    """``measure_floor`` on a loop of its own: (median, best) CPU µs per floor turn."""
    r = asyncio.run(measure_floor(turns, repeats, warmup))
    return r.median_us, r.best_us


# -- targets ----------------------------------------------------------------------------
@dataclass
class Target:
    """One target: a measured figure against its limit.

    ``op`` is ``"<="`` (at most the limit) or ``">="`` (at least); ``measured`` is
    ``None`` when the figure was not measured in this run (``met`` is then ``None``).
    ``unit`` is printed after both numbers (``"x"`` for a ratio).
    """

    name: str
    measured: float | None
    limit: float
    unit: str = "x"
    op: str = "<="
    note: str = ""

    @property
    def met(self) -> bool | None:
        if self.measured is None or self.measured != self.measured:  # missing or nan
            return None
        if self.op == ">=":
            return self.measured >= self.limit
        return self.measured <= self.limit

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "met": self.met}


def _fmt_figure(value: float | None, unit: str, *, limit: bool = False) -> str:
    if value is None or value != value:
        return "-"
    if limit:
        text = f"{value:,g}"  # as written: 4, 1.2, 400
    elif abs(value) >= 1000 or value == int(value):
        text = f"{value:,.0f}"
    else:
        text = f"{value:,.2f}" if unit == "x" else f"{value:,.1f}"
    return f"{text}x" if unit == "x" else f"{text} {unit}".rstrip()


def verdict(met: bool | None) -> str:
    return "not measured" if met is None else ("met" if met else "NOT met")


def print_targets(targets: Sequence[Target | dict[str, Any]], title: str = "Targets") -> None:
    """A Targets block: each target, its figure, its limit, and whether it is met."""
    dicts = [t.as_dict() if isinstance(t, Target) else t for t in targets]
    notes = any(d.get("note") for d in dicts)
    rows = []
    for d in dicts:
        sign = "≤" if d["op"] == "<=" else "≥"
        row = [
            d["name"],
            _fmt_figure(d["measured"], d["unit"]),
            f"{sign} {_fmt_figure(d['limit'], d['unit'], limit=True)}",
            verdict(d["met"]),
        ]
        rows.append([*row, d.get("note", "")] if notes else row)
    columns = ["target", "measured", "limit", "verdict"]
    print_table(title, [*columns, "how"] if notes else columns, rows)
    met = sum(d["met"] is True for d in dicts)
    print(f"{met} of {len(dicts)} targets met")


# -- statistics and output ------------------------------------------------------------
def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of already-sorted values (``q`` in 0..100)."""
    if not sorted_values:
        return float("nan")
    k = max(0, min(len(sorted_values) - 1, round(q / 100 * (len(sorted_values) - 1))))
    return sorted_values[k]


def summarize_us(samples_s: Sequence[float]) -> dict[str, float]:
    """p50 / p99 / mean / max of durations given in seconds, reported in µs."""
    s = sorted(samples_s)
    if not s:
        return {"p50_us": float("nan"), "p99_us": float("nan"), "mean_us": float("nan")}
    return {
        "p50_us": round(percentile(s, 50) * 1e6, 1),
        "p99_us": round(percentile(s, 99) * 1e6, 1),
        "mean_us": round(sum(s) / len(s) * 1e6, 1),
        "max_us": round(s[-1] * 1e6, 1),
    }


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    def fmt(v: Any) -> str:
        if isinstance(v, float):
            if v != v:  # nan
                return "-"
            return f"{v:,.1f}" if abs(v) < 1e6 else f"{v:,.0f}"
        if isinstance(v, int):
            return f"{v:,}"
        return str(v)

    cells = [[fmt(v) for v in row] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print(f"\n{title}")

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            v.rjust(w) if i else v.ljust(w)
            for i, (v, w) in enumerate(zip(values, widths, strict=True))
        )

    print(line(list(columns)))
    print("  ".join("-" * w for w in widths))
    for r in cells:
        print(line(r))


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def machine() -> dict[str, Any]:
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "commit": git_commit(),
    }


def write_results(
    name: str,
    args: argparse.Namespace,
    results: Any,
    targets: Sequence[Target] = (),
) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    payload = {
        "benchmark": name,
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "argv": sys.argv[1:],
        "options": {k: v for k, v in vars(args).items() if k != "profile"},
        "machine": machine(),
        "results": results,
        "targets": [t.as_dict() for t in targets],
    }
    path.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"\nwrote {path.relative_to(REPO)}")
    return path


# -- memory -----------------------------------------------------------------------------
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_bytes() -> int:
    """Current resident set size (Linux ``/proc/self/statm``; peak RSS elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * _PAGE
    except OSError:
        return peak_rss_bytes()


def peak_rss_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def import_rss() -> dict[str, Any]:
    """RSS of a fresh interpreter before and after ``import backline`` (a subprocess)."""
    code = (
        "import os, sys, time, resource\n"
        "def rss():\n"
        "    return int(open('/proc/self/statm').read().split()[1]) * os.sysconf('SC_PAGE_SIZE')\n"
        "before = rss(); t = time.perf_counter()\n"
        "import backline\n"
        "dt = time.perf_counter() - t; after = rss()\n"
        "heavy = [m for m in ('jsonschema', 'anthropic', 'mcp', 'pluggy', 'prompt_toolkit',"
        " 'httpx', 'pydantic', 'click') if m in sys.modules]\n"
        "peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024\n"
        "print(before, after, peak, dt, ','.join(heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    before, after, peak, dt = int(out[0]), int(out[1]), int(out[2]), float(out[3])
    heavy = out[4].split(",") if len(out) > 4 else []
    return {
        "interpreter_rss_mb": round(before / 2**20, 2),
        "rss_after_import_mb": round(after / 2**20, 2),
        "peak_rss_mb": round(peak / 2**20, 2),
        "import_delta_mb": round((after - before) / 2**20, 2),
        "import_seconds": round(dt, 4),
        "heavy_modules_loaded": heavy,
    }


# -- running ----------------------------------------------------------------------------
def run(main: Callable[[], Any], *, profile: str | None = None, top: int = 25) -> Any:
    """``asyncio.run(main())``, optionally under cProfile (top entries printed)."""
    gc.collect()
    if not profile:
        return asyncio.run(main())
    prof = cProfile.Profile()
    prof.enable()
    try:
        return asyncio.run(main())
    finally:
        prof.disable()
        stats = pstats.Stats(prof).strip_dirs()
        print(f"\n== cProfile ({profile}), top {top} by tottime")
        stats.sort_stats("tottime").print_stats(top)
        print(f"== cProfile ({profile}), top {top} by cumtime")
        stats.sort_stats("cumulative").print_stats(top)
