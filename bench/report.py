"""One summary of a ``make bench`` run: every target, and the figures of the newer paths.

Reads ``bench/results/*.json`` (what the other scripts wrote) and prints:

  Targets       every target any script stored (``targets`` in its JSON): the
                figure, the limit, met / NOT met, and how many are met
  stated        figures with no limit: the floor, GC's share of the 10,000-session
                run, cyclic garbage per turn
  newer paths   MCP ``send_to_user`` → reply start (``mcp_bridge.json``), a mounted
                MCP tool call (``mcp_bridge.json``), the LiveKit bridge's added latency
                (``livekit_bridge.json``), the conversation log's cost per turn
                (``logs.json``), the deep-research offline round (``deep_research.json``)

A missing file is named, with the script that writes it, and skipped. ``make bench``
runs this last with ``--since`` set to the run's start, so a file left by an earlier
run is named as stale and not read. It measures nothing and always exits 0 (no
target fails the build: the figures are for reading).

    python bench/report.py                     # every results file present
    python bench/report.py --since 1767225600  # only files written since (epoch seconds)
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from _common import RESULTS_DIR, print_table, print_targets


def load(results_dir: Path, since: float | None) -> tuple[dict[str, Any], list[str]]:
    """Every ``<name>.json`` in ``results_dir`` by name, and the names of stale ones."""
    found: dict[str, Any] = {}
    stale: list[str] = []
    for path in sorted(results_dir.glob("*.json")):
        if since is not None and path.stat().st_mtime < since:
            stale.append(path.name)
            continue
        try:
            found[path.stem] = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            print(f"{path.name}: unreadable ({exc}), skipped")
    return found, stale


def missing(name: str) -> None:
    print(f"\n{name}.json: not in this run (python bench/{name}.py writes it), skipped")


def us(value: float | None) -> str:
    """A duration given in µs: in µs under a millisecond, else in ms."""
    if value is None:
        return "-"
    return f"{value:,.1f} µs" if abs(value) < 1000 else f"{value / 1000:,.2f} ms"


def report_targets(data: dict[str, Any]) -> None:
    rows = []
    for name, payload in data.items():
        for t in payload.get("targets") or []:
            rows.append({**t, "name": f"{name}: {t['name']}"})
    if not rows:
        print("\nNo targets in this run's results.")
        return
    print_targets(rows, "Targets (every benchmark of this run)")


def report_stated(data: dict[str, Any]) -> None:
    rows: list[list[Any]] = []
    turns = data.get("turns")
    if turns is not None:
        r = turns["results"]
        rows.append(["floor (FloorLoop), CPU per turn", us(r.get("floor_us")), "turns"])
        cycles = r.get("cyclic_garbage_per_turn") or {}
        if cycles:
            rows.append(
                [
                    "cyclic garbage per turn (objects)",
                    ", ".join(f"{k} {v}" for k, v in cycles.items()),
                    "turns",
                ]
            )
    sessions = data.get("sessions")
    if sessions is not None:
        for r in sessions["results"]["sizes"]:
            gen = "/".join(str(c) for c in r.get("gc_collections_during_turns", []))
            share = r.get("gc_share")
            rows.append(
                [
                    f"GC's share of the turns, {r['sessions']:,} sessions "
                    f"(threshold {','.join(map(str, r['gc_threshold']))})",
                    "-" if share is None else f"{share * 100:.1f} % (g0/g1/g2 runs {gen})",
                    "sessions",
                ]
            )
    if rows:
        print_table("Stated (no limit)", ["figure", "value", "from"], rows)


def report_mcp(data: dict[str, Any]) -> None:
    payload = data.get("mcp_bridge")
    if payload is None:
        missing("mcp_bridge")
        return
    r = payload["results"]
    print_table(
        "MCP send_to_user → voice reply generation starts (idle session, streamable HTTP)",
        ["protocol", "p50", "p99", "tool answer p50"],
        [
            [
                c["protocol"],
                us(c["to_generation_p50_us"]),
                us(c["to_generation_p99_us"]),
                us(c["answer_p50_us"]),
            ]
            for c in r.get("channel", [])
        ],
    )
    print_table(
        "One tool call (invoke, validation included)",
        ["tool", "p50", "p99"],
        [[t["tool"], us(t["p50_us"]), us(t["p99_us"])] for t in r.get("tools", [])],
    )


def report_livekit(data: dict[str, Any]) -> None:
    payload = data.get("livekit_bridge")
    if payload is None:
        missing("livekit_bridge")
        return
    r = payload["results"]
    lat = {x["kind"]: x for x in r.get("latency", [])}
    added = r.get("added", {})
    rows = [[kind, us(x["p50_us"]), us(x["p99_us"]), us(x["mean_us"])] for kind, x in lat.items()]
    rows.append(
        [
            "added by the bridge",
            us(added.get("p50_us")),
            us(added.get("p99_us")),
            us(added.get("mean_us")),
        ]
    )
    print_table(
        "LiveKit bridge: recognised turn → first text out (difference of the two)",
        ["pipeline", "p50", "p99", "mean"],
        rows,
    )


def report_logs(data: dict[str, Any]) -> None:
    payload = data.get("logs")
    if payload is None:
        missing("logs")
        return
    rows = []
    for r in payload["results"]:
        if r.get("log") != "on":
            continue
        rows.append(
            [
                r["scenario"],
                us(r.get("loop_cpu_us_added")),
                us(r.get("cpu_us_added")),
                r.get("records_per_turn", "-"),
                r.get("db_bytes_per_turn", "-"),
            ]
        )
    print_table(
        "The conversation log's cost per turn (push path, log on minus off)",
        ["scenario", "loop CPU added", "process CPU added", "records", "DB bytes"],
        rows,
    )


def report_deep_research(data: dict[str, Any]) -> None:
    payload = data.get("deep_research")
    if payload is None:
        missing("deep_research")
        return
    r = payload["results"]
    durations = r.get("durations_s") or []
    calls = r.get("calls_per_round") or {}
    if not durations:
        print("\ndeep_research.json: no rounds recorded")
        return
    print_table(
        "Deep research: one offline round (scripted models, corpus on loopback)",
        ["rounds", "median s", "first s", "max s", "model calls per round"],
        [
            [
                len(durations),
                f"{statistics.median(durations):.3f}",
                f"{durations[0]:.3f}",
                f"{max(durations):.3f}",
                f"{sum(calls.values())} ({', '.join(f'{k} {v}' for k, v in calls.items())})",
            ]
        ],
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--since",
        type=float,
        help="read only results written since this time (epoch seconds; make bench sets it)",
    )
    p.add_argument("--results", type=Path, default=RESULTS_DIR, help="the results directory")
    args = p.parse_args()

    data, stale = load(args.results, args.since)
    when = (
        ""
        if args.since is None
        else f" since {time.strftime('%H:%M:%S', time.localtime(args.since))}"
    )
    print(f"== bench report: {len(data)} results file(s){when}: {', '.join(data) or 'none'}")
    if stale:
        print(f"stale (an earlier run), not read: {', '.join(stale)}")
    machine = next((d.get("machine") for d in data.values() if d.get("machine")), None)
    if machine:
        print(
            f"machine: {machine['cpu']}, {machine['cores']} cores, "
            f"{machine['implementation']} {machine['python']}, commit {machine['commit']}"
        )
    report_targets(data)
    report_stated(data)
    print("\n-- newer paths")
    report_mcp(data)
    report_livekit(data)
    report_logs(data)
    report_deep_research(data)


if __name__ == "__main__":
    main()
