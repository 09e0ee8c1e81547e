"""``backline logs``: the conversation log (latest first, search, one conversation, its path).

``sqlite3`` and the log's modules load only when a subcommand runs.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click


def _path() -> Path:
    from .logs import default_path

    return default_path()


def _fail(error: Exception) -> click.ClickException:
    return click.ClickException(str(error))


@click.group("logs", invoke_without_command=True)
@click.option("-n", "--count", default=10, show_default=True, help="How many to show.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--background", "-b", metavar="NAME", help="Only conversations that ran NAME.")
@click.option(
    "-q", "--search", metavar="TEXT", help="Full-text search of what was said (FTS5 syntax)."
)
@click.pass_context
def logs_group(
    ctx: click.Context, count: int, as_json: bool, background: str | None, search: str | None
) -> None:
    """The conversation log: every conversation a front end ran (in which something
    was said), latest first.

    `backline logs show ID` prints one conversation; `--no-log` or BACKLINE_LOG=0
    turns logging off; BACKLINE_LOG_RETENTION_DAYS (default 30) bounds its age.
    """
    if ctx.invoked_subcommand is not None:
        return
    if count < 1:
        raise click.BadParameter("must be at least 1", param_hint="'-n'")
    from .logs._query import LogError, list_sessions, open_log
    from .logs._query import search as search_log

    if not _path().exists():
        click.echo("[]" if as_json else f"No conversations logged yet ({_path()} does not exist).")
        return
    try:
        conn = open_log(_path())
    except LogError as e:
        raise _fail(e) from None
    try:
        if search is not None:
            hits = search_log(conn, search, limit=count, background=background)
            click.echo(json.dumps(hits, indent=2) if as_json else _format_hits(hits))
            return
        sessions = list_sessions(conn, limit=count, background=background)
    finally:
        conn.close()
    if as_json:
        click.echo(json.dumps(sessions, indent=2))
    elif not sessions:
        click.echo("No conversations logged" + (f" with {background}." if background else "."))
    else:
        click.echo(_format_sessions(sessions))


@logs_group.command("show")
@click.argument("ref", required=False, metavar="[ID]")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--states", is_flag=True, help="Include the agent's and the user's state changes.")
def show_command(ref: str | None, as_json: bool, states: bool) -> None:
    """Print one conversation (ID or a prefix of it; default: the latest)."""
    from .logs._query import LogError, find_session, open_log, timeline

    try:
        conn = open_log(_path())
        try:
            detail = timeline(conn, find_session(conn, ref), states=states)
        finally:
            conn.close()
    except LogError as e:
        raise _fail(e) from None
    click.echo(json.dumps(detail, indent=2) if as_json else _format_timeline(detail))


@logs_group.command("path")
def path_command() -> None:
    """Print the conversation log's file."""
    click.echo(str(_path()))


# -- text output ------------------------------------------------------------------------
def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "open"
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def _short(text: str | None, width: int) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


_COLUMNS = ("ID", "STARTED", "LENGTH", "FRONT END", "LLM", "BACKGROUNDS", "TURNS", "FIRST WORDS")
_RIGHT = {"TURNS"}


def _session_cells(s: dict[str, Any]) -> list[str]:
    llm = s["llm"] + (f" {s['model']}" if s.get("model") else "")
    first = f'"{_short(s["first_words"], 50)}"' if s.get("first_words") else ""
    return [
        s["id"],
        _when(s["started_at"]),
        _duration(s["duration"]),
        s.get("front_end") or "-",
        llm,
        ",".join(s["backgrounds"]) or "-",
        str(s["turns"]),
        first,
    ]


def _format_sessions(sessions: list[dict[str, Any]]) -> str:
    """A table with a header line; the last column (the first words) is not padded."""
    table = [list(_COLUMNS), *(_session_cells(s) for s in sessions)]
    widths = [max(len(row[i]) for row in table) for i in range(len(_COLUMNS) - 1)]
    lines = []
    for row in table:
        cells = [
            cell.rjust(width) if name in _RIGHT else cell.ljust(width)
            for name, cell, width in zip(_COLUMNS, row, widths, strict=False)
        ]
        lines.append(("  ".join(cells) + "  " + row[-1]).rstrip())
    return "\n".join(lines)


def _format_hits(hits: list[dict[str, Any]]) -> str:
    if not hits:
        return "Nothing found."
    return "\n".join(f"{h['session_id']}  {_when(h['at'])}  {h['kind']}: {h['text']}" for h in hits)


_LABELS = {"user": "you", "agent": "agent"}


def _format_event(e: dict[str, Any], start: float) -> str:
    offset = f"+{e['at'] - start:7.1f}s"
    kind, who, text, detail = e["kind"], e["who"], e["text"] or "", e["detail"]
    if kind in _LABELS:
        name = _LABELS[kind] if kind == "user" or not who else f"agent ({who})"
        return f"{offset}  {name}: {text}" + (" [interrupted]" if detail else "")
    if kind == "tool_call":
        return f"{offset}  [tool call] {who} {_short(text, 200)}"
    if kind == "tool_output":
        return f"{offset}  [tool output{', error' if detail else ''}] {who}: {_short(text, 200)}"
    if kind == "background":
        return f"{offset}  [{who}, {detail}] {text}"
    if kind == "llm":
        return f"{offset}  [llm] {who} {text}: {detail}"
    if kind == "error":
        return f"{offset}  [error] {who}: {text}"
    change = f"{detail} → {text}" if detail else text
    return f"{offset}  [{who}] {_short(change, 200)}"


def _format_timeline(d: dict[str, Any]) -> str:
    llm = d["llm"] + (f" ({d['model']})" if d.get("model") else "")
    head = [
        f"Conversation {d['id']}: {d.get('front_end') or '-'}, {llm}, agent {d.get('agent') or '-'}"
        + (f", backgrounds: {', '.join(d['backgrounds'])}" if d["backgrounds"] else ""),
        f"Started {_when(d['started_at'])}, "
        + (
            f"lasted {_duration(d['duration'])} (closed: {d.get('close_reason')})"
            if d["duration"] is not None
            else "not closed (still running, or the process stopped)"
        )
        + (f"; {d['dropped']} records were not logged" if d.get("dropped") else ""),
    ]
    if d.get("options"):
        head.append("Options: " + ", ".join(f"{k}={v}" for k, v in sorted(d["options"].items())))
    head.append("")
    return "\n".join(head + [_format_event(e, d["started_at"]) for e in d["events"]])
