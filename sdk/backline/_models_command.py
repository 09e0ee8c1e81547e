"""``backline models``: each registered LLM and the models it knows (like ``llm models``)."""

from __future__ import annotations

import json
import os
from typing import Any

import click

from . import app
from .plugins import LLMEntry, PluginManager


@click.command("models")
@click.argument("llm", required=False, metavar="[LLM]")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def models_command(ctx: click.Context, llm: str | None, as_json: bool) -> None:
    """List the LLMs plugins registered (for --llm NAME) and the models each knows
    (for -m MODEL), the one used without -m first."""
    manager = app.plugin_manager(ctx, strict_errors=False)
    entries = manager.llms()
    if llm is not None:
        chosen = [e for e in entries if e.name == llm]
        if not chosen:
            try:
                manager.llm(llm)  # raises, listing the LLMs and the closest name
            except LookupError as e:
                raise click.BadParameter(str(e), param_hint="'LLM'") from None
        entries = chosen
    listed = [_listing(manager, entry) for entry in entries]
    if as_json:
        click.echo(json.dumps(listed, indent=2))
    else:
        click.echo("\n".join(_describe(item) for item in listed))
    app.plugin_manager(ctx)  # strict mode: exit non-zero after the listing


def _listing(manager: PluginManager, entry: LLMEntry) -> dict[str, Any]:
    info = next((i for i in manager.plugins() if i.name == entry.plugin), None)
    if info is None or info.builtin:
        source = "built-in"
    else:
        source = " ".join(p for p in (info.distribution or info.name, info.version) if p)
    item: dict[str, Any] = {
        "name": entry.name,
        "plugin": entry.plugin,
        "source": source,
        "description": entry.description,
        "voice_default": entry.name == os.environ.get("BACKLINE_LLM", app.DEFAULT_LLM),
        "default_model": None,
        "models": [],
    }
    try:
        item["default_model"] = entry.default()
        item["models"] = entry.known_models()
    except Exception as e:  # a plugin's listing failed: say so, list the others
        item["error"] = f"{type(e).__name__}: {e}"
    return item


def _describe(item: dict[str, Any]) -> str:
    used = ", used without --llm" if item["voice_default"] else ""
    head = f"{item['name']} ({item['source']}{used})"
    lines = [f"{head}: {item['description']}" if item["description"] else head]
    if "error" in item:
        lines.append(f"  (its models could not be listed: {item['error']})")
    elif not item["models"]:
        lines.append("  (no models listed: name one with -m MODEL)")
    for name in item["models"]:
        lines.append(f"  {name} (default)" if name == item["default_model"] else f"  {name}")
    return "\n".join(lines)
