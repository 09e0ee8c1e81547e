"""``backline mcp``: serve the voice channel over stdio, print client configurations."""

from __future__ import annotations

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
  2. backline mcp config --background cli_agent --for claude
     (add what it prints to your agent, then start the agent)

`backline console --background cli_agent --agent-cmd "claude -p"` does all of
this for you: backline runs the agent for each thing you ask (docs/mcp.md).
"""

SERVE_HELP = """Serve the voice channel of background session NAME over stdio.

This is the command an agent starts (put it in its MCP configuration:
`backline mcp config` prints it). It forwards every tool call to the running
front end, found through a file only you can read in the runtime directory
(or BACKLINE_MCP_URL and BACKLINE_MCP_TOKEN). When no front end runs, the
tools answer so, and start working once one does.
"""

CONFIG_HELP = """Print the MCP configuration that connects an agent to background
session NAME: for Claude Code, Codex, Cursor and Gemini CLI (or one, with --for).

By default the agent starts `backline mcp serve`, which finds whichever front
end is running. With --http: the running front end's URL and token directly
(valid until it stops, unless BACKLINE_MCP_TOKEN and BACKLINE_MCP_PORT fix them).
"""


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
    type=click.Choice(["claude", "codex", "cursor", "gemini"]),
    help="Only this client's configuration.",
)
@click.option("--http", is_flag=True, help="Connect over HTTP to the running front end.")
def config(background_id: str, client: str | None, http: bool) -> None:
    from ._snippets import CLIENTS, Target, backline_command, snippet

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
        click.echo(
            f"# Valid while this front end runs: its token and port change at each start "
            f"unless {ENV_TOKEN} and {ENV_PORT} are set.\n"
        )
    target = Target(background_id, backline_command(), runtime_dir(), url=url, token=token)
    click.echo("\n".join(snippet(c, target) for c in ([client] if client else CLIENTS)))


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
