"""``backline mcp``: serve the voice channel over stdio, print client configurations."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Protocol, runtime_checkable

import click

from ._discovery import (
    ENV_PORT,
    ENV_TOKEN,
    ENV_URL,
    Probe,
    announcements,
    from_environment,
    probe,
    runtime_dir,
)

MCP_HELP = """Let a coding agent (Claude Code, Codex, Cursor, Gemini CLI ...) talk to you
through backline, over MCP.

While a front end runs (`backline console`, `backline web`), every background
session has a voice channel: MCP tools the agent calls to speak to you
(send_to_user), leave notes for the voice assistant (add_context), report its
status (set_status), and hear what you say (wait_for_user, ask_user).

\b
Quick start, in two terminals:
  1. backline console --background cli_agent
  2. backline mcp config --background cli_agent --for claude > .mcp.json
     (then start the agent: claude --mcp-config .mcp.json ...)

`backline console --background cli_agent --agent-cmd "claude -p"` does all of
this for you: backline runs the agent for each thing you ask (docs/mcp.md).
"""

SERVE_HELP = """Serve the voice channel of a background session over stdio (the one
given with -b/--background NAME).

This is the command an agent starts (put it in its MCP configuration:
`backline mcp config` prints it). It forwards every tool call to the running
front end, found through a file only you can read in the runtime directory
(or BACKLINE_MCP_URL and BACKLINE_MCP_TOKEN). When no front end runs, the
tools answer so, and start working once one does.
"""

CONFIG_HELP = """Print the MCP configuration that connects an agent to a background
session (the one given with -b/--background NAME), for one client (--for,
default claude).

The configuration alone goes to stdout (JSON; TOML for codex), so it can be
piped (`| jq`) or saved (`> .mcp.json`); where it goes and how to use it go to
stderr.

By default the agent starts `backline mcp serve`, which finds whichever front
end is running. With --http: the running front end's URL and token directly
(valid until it stops, unless BACKLINE_MCP_TOKEN and BACKLINE_MCP_PORT fix them).
"""

CLIENT_NAMES = ("claude", "codex", "cursor", "gemini")


@runtime_checkable
class _PluginSource(Protocol):
    """The root command when it knows the installed plugins (``backline``'s does): how
    ``config`` learns the installed background sessions without importing a layer above."""

    def plugin_manager(self, *, strict_errors: bool = True) -> _Backgrounds: ...


class _Backgrounds(Protocol):
    def background_ids(self) -> list[str]: ...


def _background_name(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    if not value or not all(c.isalnum() or c in "_-." for c in value):
        raise click.BadParameter(
            f"{value!r} is not a background session id (letters, digits, '_', '-', '.'); "
            "`backline plugins` lists the installed ones"
        )
    return value


_background_option = click.option(
    "--background",
    "-b",
    "background_id",
    required=True,
    metavar="NAME",
    callback=_background_name,
    help="The background session the agent works for (e.g. cli_agent).",
)


@click.group("mcp", help=MCP_HELP)
def mcp_command() -> None:
    pass


@mcp_command.command("serve", help=SERVE_HELP)
@_background_option
def serve(background_id: str) -> None:
    import asyncio

    from ._proxy import serve_stdio

    try:
        asyncio.run(serve_stdio(background_id))
    except KeyboardInterrupt:  # pragma: no cover - the agent stops its server with a signal
        pass


@mcp_command.command("config", help=CONFIG_HELP)
@_background_option
@click.option(
    "--for",
    "client",
    type=click.Choice(CLIENT_NAMES),
    default="claude",
    show_default=True,
    help="The client to configure.",
)
@click.option("--http", is_flag=True, help="Connect over HTTP to the running front end.")
@click.pass_context
def config(ctx: click.Context, background_id: str, client: str, http: bool) -> None:
    from ._snippets import Target, backline_command, snippet

    _check_background(ctx, background_id)
    url = token = None
    if http:
        given = from_environment()
        if given is not None:
            url, token = given
        else:
            running = announcements()
            if not running:
                raise click.ClickException(
                    "--http needs a running front end, and none is (start `backline console` "
                    "or `backline web` first), or leave out --http to use `backline mcp serve`, "
                    "which works whenever one runs"
                )
            url, token = running[0].endpoint(background_id), running[0].token
    target = Target(background_id, backline_command(), runtime_dir(), url=url, token=token)
    made = snippet(client, target)
    for hint in made.hints:
        click.echo(hint, err=True)
    if http:
        click.echo(
            f"Valid while this front end runs: its token and port change at each start "
            f"unless {ENV_TOKEN} and {ENV_PORT} are set.",
            err=True,
        )
    others = " | ".join(c for c in CLIENT_NAMES if c != client)
    click.echo(f"(other clients: --for {others})", err=True)
    click.echo(made.config)


def _check_background(ctx: click.Context, background_id: str) -> None:
    """A usage error (status 2) when ``background_id`` is neither installed nor served by
    a running front end, naming those that are (and the closest one)."""
    installed = _installed_backgrounds(ctx)
    if installed is None or background_id in installed:
        return
    served = _served_backgrounds()
    if background_id in served:
        return
    known = sorted(set(installed) | served)
    close = difflib.get_close_matches(background_id.replace("-", "_"), known, n=1)
    if not close:
        close = difflib.get_close_matches(background_id, known, n=1)
    hint = f" Did you mean '{close[0]}'?" if close else ""
    which = "installed or served now" if served - set(installed) else "installed"
    listed = (
        f"Those {which}: {', '.join(known)} (`backline plugins` lists the installed ones)."
        if known
        else "None is installed (`backline install PACKAGE` adds one)."
    )
    raise click.BadParameter(
        f"'{background_id}' is not a background session.{hint} {listed}",
        ctx=ctx,
        param_hint="'--background' / '-b'",
    )


def _installed_backgrounds(ctx: click.Context) -> list[str] | None:
    """The installed background sessions, or ``None`` when the command runs outside
    ``backline`` (nothing to check against then)."""
    root = ctx.find_root().command
    if not isinstance(root, _PluginSource):
        return None
    return list(root.plugin_manager(strict_errors=False).background_ids())


def _served_backgrounds() -> set[str]:
    """The background sessions the running front ends serve now (they may run ones of
    their own, not installed as plugins)."""
    served: set[str] = set()
    for url, token in _endpoints():
        served.update(probe(url, token).backgrounds or ())
    return served


def _endpoints() -> Iterable[tuple[str, str]]:
    given = from_environment()
    if given is not None:
        yield given
    for found in announcements():
        yield found.url, found.token


@mcp_command.command("status")
def status() -> None:
    """Show the running front ends' MCP endpoints (what `backline mcp serve` would use),
    and check their tokens (exit status 1 when the one it would use is refused)."""
    given = from_environment()
    refused = False
    if given is not None:
        checked = probe(*given)
        click.echo(f"{ENV_URL} is set: agents use {given[0]}")
        fix = (
            f"unset {ENV_URL} and {ENV_TOKEN} (`backline mcp serve` then finds the running "
            "front end by itself), or set the front end's token (`backline mcp config --http` "
            "prints it)"
        )
        click.echo(f"  {_verdict(checked, f'the token in {ENV_TOKEN}', fix)}")
        refused = checked.verdict == "refused"
    running = announcements()
    if not running:
        click.echo(f"No backline front end is running (none announced in {runtime_dir()}).")
    for i, found in enumerate(running):
        used = i == 0 and given is None
        mark = "  (used by `backline mcp serve`)" if used else ""
        click.echo(f"{found.front_end} (pid {found.pid}): {found.url}/mcp/<background>{mark}")
        checked = probe(found.url, found.token)
        fix = "another program may answer on its port: restart the front end"
        click.echo(f"  {_verdict(checked, f'its token (from {found.path})', fix)}")
        refused = refused or (used and checked.verdict == "refused")
    if refused:
        raise click.exceptions.Exit(1)


def _verdict(checked: Probe, token: str, fix: str) -> str:
    """One line: what the endpoint said to ``token``."""
    if checked.verdict == "accepted":
        if checked.backgrounds is None:
            return f"{token}: accepted"
        serving = ", ".join(checked.backgrounds) or "no background session yet"
        return f"{token}: accepted; serving {serving}"
    if checked.verdict == "refused":
        return f"{token}: REFUSED (401 Unauthorized), agents using it cannot connect: {fix}"
    if checked.verdict == "unreachable":
        return f"not reachable ({checked.detail}): the front end may have stopped"
    return f"unexpected answer ({checked.detail}): is this a backline front end?"
