"""``backline plugins``: the installed plugins; ``backline plugins search``: those on the
package index pip uses."""

from __future__ import annotations

import json

import click

from . import app
from ._package_index import IndexUnreadable, Listing, pip_indexes, search
from .plugins import PluginInfo


@click.group("plugins", invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--all", "show_all", is_flag=True, help="Include the built-in plugins.")
@click.pass_context
def plugins_command(ctx: click.Context, as_json: bool, show_all: bool) -> None:
    """List plugins: version, hooks, what each registered, and status.

    `backline plugins search [WORDS]` finds those you can install.
    """
    if ctx.invoked_subcommand is not None:
        return
    manager = app.plugin_manager(ctx, strict_errors=False)
    infos = manager.plugins(include_builtin=show_all)
    if as_json:
        click.echo(json.dumps([i.to_dict() for i in infos], indent=2))
    elif not infos:
        click.echo(
            "No plugins installed. `backline plugins search` finds some, `backline install "
            "PACKAGE` adds one; `backline plugins --all` lists the built-in ones too."
        )
    else:
        click.echo("\n".join(_describe_plugin(i) for i in infos))
    app.plugin_manager(ctx)  # strict mode: exit non-zero after the listing


def _describe_plugin(info: PluginInfo) -> str:
    where = "built-in" if info.builtin else (info.distribution or "registered by hand")
    version = f" {info.version}" if info.version else ""
    lines = [f"{info.name} ({where}{version}): {info.status_text}"]
    if info.hooks:
        lines.append(f"  hooks: {', '.join(info.hooks)}")
    for label, names in info.registered().items():
        if names:
            lines.append(f"  {label}: {', '.join(names)}")
    if info.printed:
        lines.append(f"  printed while loading: {' '.join(info.printed.split())}")
    return "\n".join(lines)


@plugins_command.command("search")
@click.argument("words", nargs=-1)
@click.option(
    "--index-url",
    "index_urls",
    multiple=True,
    metavar="URL",
    help="Search this package index (repeatable) instead of pip's (`pip config list`: "
    "index-url and extra-index-url).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def search_command(words: tuple[str, ...], index_urls: tuple[str, ...], as_json: bool) -> None:
    """Find plugins on the package index: the distributions named backline-*, with their
    summaries and whether each is installed. WORDS narrow the list (each must appear in
    the name or the summary)."""
    indexes = list(index_urls) or pip_indexes()
    if not indexes:
        raise click.ClickException(
            "pip is configured with no index (no-index), so there is nothing to search: "
            "give one with --index-url URL, or see `pip config list`."
        )
    try:
        found, problems = search(indexes, words)
    except IndexUnreadable as e:
        raise click.ClickException(
            f"the package index could not be read ({e}). Check the network, or pip's "
            "configuration (`pip config list`), or give an index with --index-url URL."
        ) from None
    for problem in problems:
        click.echo(f"backline: skipped an index: {problem}", err=True)
    if as_json:
        click.echo(json.dumps([item.to_dict() for item in found], indent=2))
        return
    if not found:
        wanted = f" matching {' '.join(words)!r}" if words else ""
        click.echo(f"No backline plugins{wanted} on {', '.join(indexes)}.")
        return
    click.echo("\n".join(_describe_listing(item) for item in found))
    click.echo("\n`backline install NAME` installs one; docs/plugins.md says how to be listed.")


def _describe_listing(item: Listing) -> str:
    version = f" {item.version}" if item.version else ""
    if item.installed is None:
        mark = ""
    elif item.installed == item.version or item.version is None:
        mark = " [installed]"
    else:
        mark = f" [installed: {item.installed}]"
    head = f"{item.name}{version}{mark}"
    return f"{head}\n  {item.summary}" if item.summary else head
