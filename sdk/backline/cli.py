"""The ``backline`` command (click).

Built-in commands: ``plugins``, ``install``, ``uninstall``, ``new-plugin``, ``keys``, ``logs``.
Plugins add more through the ``register_commands(cli)`` hook; they are loaded
only when a command is not a built-in one, or for ``--help``, and a plugin that
fails is reported, never fatal (unless ``BACKLINE_STRICT_PLUGINS=1``).

Front ends (``console``, ``web``) build their session with ``build_session``
from the options ``session_options`` adds, so every front end takes the same
``--background`` / ``--llm`` / ``--model`` / ``--instructions`` / ``--agent``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import click

from . import __version__
from ._keys_command import keys_group
from ._logs_command import logs_group
from .keys import KeyStoreError, get_key
from .llm.llm import LLMError
from .plugins import PluginError, PluginManager, UnknownNameError

if TYPE_CHECKING:
    from .background.definition import BackgroundDefinition
    from .plugins import PluginInfo
    from .session import Session
    from .voice.agent import Agent

F = TypeVar("F", bound=Callable[..., Any])

_FRONT_END_MARK = "__backline_front_end__"  # = plugins._options.FRONT_END_MARK (kept light)

DEFAULT_LLM = "anthropic"
DEFAULT_INSTRUCTIONS = (
    "You are a friendly, concise voice assistant. Background sessions do long-running "
    "work for the user: give them tasks and corrections with backline_send, check on "
    "them with backline_state when the user asks how things are going, and relay their "
    "updates briefly and naturally."
)


class BacklineGroup(click.Group):
    """The root group: built-in commands at once, plugin commands on demand."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._manager: PluginManager | None = None
        self._plugin_error: PluginError | None = None

    def plugin_manager(self, *, strict_errors: bool = True) -> PluginManager:
        """The plugins, loaded once (with their commands registered on this group).

        In strict mode a failure raises ``click.ClickException`` unless
        ``strict_errors`` is false.
        """
        if self._manager is None:
            manager = PluginManager.from_environment()
            self._manager = manager
            try:
                manager.load()
                manager.register_commands(self)
            except PluginError as e:
                self._plugin_error = e
            from .plugins._options import attach_options

            attach_options(self, manager.options())
        if self._plugin_error is not None and strict_errors:
            raise click.ClickException(str(self._plugin_error))
        return self._manager

    def list_commands(self, ctx: click.Context) -> list[str]:
        try:
            self.plugin_manager()
        except click.ClickException as e:
            click.echo(f"backline: plugin commands are not listed: {e.message}", err=True)
        return sorted(self.commands)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = self.commands.get(cmd_name)
        if found is None:
            self.plugin_manager()
            found = self.commands.get(cmd_name)
        elif getattr(found.callback, _FRONT_END_MARK, False):
            # A front end builds a session from plugins anyway: load them now, so their
            # options (register_options) parse and show in --help. A failure is
            # reported by the command itself.
            self.plugin_manager(strict_errors=False)
        return found


def plugin_manager(
    ctx: click.Context | None = None, *, strict_errors: bool = True
) -> PluginManager:
    """The CLI's loaded plugin manager, for any command (built-in or from a plugin).

    In strict mode a failed plugin raises ``click.ClickException`` unless
    ``strict_errors`` is false.
    """
    ctx = ctx or click.get_current_context()
    root = ctx.find_root().command
    if isinstance(root, BacklineGroup):
        return root.plugin_manager(strict_errors=strict_errors)
    return PluginManager.from_environment().load()  # a command run outside `backline`


# -- building a session from options (shared by console, web, ...) ----------------------------
@dataclass(frozen=True)
class SessionOptions:
    """What a front end's options say about the session to build.

    ``backgrounds``: background ids to run (none unless named: a background can
    change files, so the user chooses); ``llm``:
    an LLM name from ``register_llms`` and ``model`` its model; the agent is
    ``Agent(instructions)`` or, with ``agent`` (``module:Class``), that class.
    ``log``: write the conversation to the conversation log (``--no-log`` turns it
    off; so does ``BACKLINE_LOG=0``).
    ``mcp_config``: a ``.mcp.json`` file whose MCP servers' tools the voice agent gets.
    """

    backgrounds: tuple[str, ...] = ()
    llm: str = DEFAULT_LLM
    model: str | None = None
    instructions: str | None = None
    agent: str | None = None
    log_file: str | None = None
    log: bool = True
    mcp_config: str | None = None


def session_options(command: F) -> F:
    """Add the session options to a click command; it receives ``session_options``.

    The command becomes a front end: options plugins register with
    ``register_options`` are added to it when plugins load.
    """

    @functools.wraps(command)
    def wrapper(
        *args: Any,
        background: tuple[str, ...],
        llm: str,
        model: str | None,
        instructions: str | None,
        agent: str | None,
        log_file: str | None,
        no_log: bool,
        mcp_config: str | None,
        **kwargs: Any,
    ) -> Any:
        options = SessionOptions(
            backgrounds=tuple(background),
            llm=llm,
            model=model,
            instructions=instructions,
            agent=agent,
            log_file=log_file,
            log=not no_log,
            mcp_config=mcp_config,
        )
        return command(*args, session_options=options, **kwargs)

    setattr(wrapper, _FRONT_END_MARK, True)
    decorators = [
        click.option(
            "--background",
            "-b",
            multiple=True,
            metavar="NAME",
            help="A background session to run (repeatable). Without it none runs; "
            "`backline plugins` lists those installed.",
        ),
        click.option(
            "--llm",
            default=lambda: os.environ.get("BACKLINE_LLM", DEFAULT_LLM),
            show_default="anthropic, or $BACKLINE_LLM",
            metavar="NAME",
            help="The LLM to use (a name registered by a plugin).",
        ),
        click.option("--model", "-m", metavar="MODEL", help="The model name for that LLM."),
        click.option("--instructions", metavar="TEXT", help="Instructions of the voice agent."),
        click.option(
            "--agent",
            metavar="MODULE:CLASS",
            help="Use this Agent class (built with no arguments) instead of --instructions.",
        ),
        click.option(
            "--log-file",
            metavar="PATH",
            envvar="BACKLINE_LOG_FILE",
            help="Where error details go (default: ~/.local/state/backline/backline.log).",
        ),
        click.option(
            "--no-log",
            is_flag=True,
            help="Do not write this conversation to the conversation log (`backline logs`).",
        ),
        click.option(
            "--mcp-config",
            metavar="PATH",
            help="A .mcp.json file: its MCP servers' tools become the voice agent's "
            "(<server>__<tool>). See docs/mcp.md.",
        ),
    ]
    result: Callable[..., Any] = wrapper
    for decorate in reversed(decorators):
        result = decorate(result)
    return result  # type: ignore[return-value]


def build_session(
    manager: PluginManager, options: SessionOptions, **session_kwargs: Any
) -> tuple[Session[Any], Agent]:
    """Build an unstarted ``Session`` and its first ``Agent`` from ``options``.

    The session gets every plugin tool, the chosen background sessions and the
    chosen LLM; ``session_kwargs`` (``output=...``, ...) go to ``Session``. The
    manager is activated, so plugins observe the session's start and close.
    Start it with ``async with session: await session.start(agent)``.
    """
    from .session import Session

    backgrounds = check_options(manager, options)
    llm_options: dict[str, Any] = {} if options.model is None else {"model": options.model}
    try:
        llm = manager.llm(options.llm, **llm_options)
    except UnknownNameError as e:
        raise click.BadParameter(str(e), param_hint="'--llm'") from None
    except (LLMError, KeyStoreError) as e:  # the factory says what is missing (a key, a model)
        raise click.ClickException(str(e)) from None
    agent = _make_agent(options, backgrounds)
    mcp_servers = _mcp_servers(options)
    manager.activate()
    session: Session[Any] = Session(
        llm,
        tools=manager.tools(),
        background=backgrounds,
        mcp_servers=mcp_servers,
        **session_kwargs,
    )
    if options.log:
        _attach_log(session, options, agent)
    return session, agent


def _attach_log(session: Session[Any], options: SessionOptions, agent: Agent) -> None:
    """Record the session in the conversation log, unless ``BACKLINE_LOG=0``."""
    from .logs import attach_log, logging_enabled

    if not logging_enabled():
        return
    ctx = click.get_current_context(silent=True)
    front_end = ctx.command_path.partition(" ")[2] or ctx.command_path if ctx else None
    attach_log(
        session,
        front_end=front_end,
        llm=options.llm,
        agent=agent.label,
        backgrounds=session.background.sorted_ids() if session.background else (),
    )


def check_options(manager: PluginManager, options: SessionOptions) -> list[BackgroundDefinition]:
    """Check the user's choices (names, combinations) before anything else, credentials
    included; returns the chosen background definitions."""
    if options.agent is not None and options.instructions is not None:
        raise click.UsageError("use --instructions or --agent, not both")
    try:
        backgrounds = manager.background_definitions(options.backgrounds)
    except UnknownNameError as e:
        raise click.BadParameter(str(e), param_hint="'--background'") from None
    if options.llm not in manager.llm_names():
        try:
            manager.llm(options.llm)
        except UnknownNameError as e:
            raise click.BadParameter(str(e), param_hint="'--llm'") from None
    _mcp_servers(options)
    return backgrounds


def _mcp_servers(options: SessionOptions) -> list[Any]:
    """The servers of ``--mcp-config`` (a clear usage error when the file is wrong)."""
    if options.mcp_config is None:
        return []
    from .mcp import load_mcp_config

    try:
        return load_mcp_config(options.mcp_config)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="'--mcp-config'") from None


def prepare_session(
    manager: PluginManager, options: SessionOptions, **session_kwargs: Any
) -> tuple[Session[Any], Agent]:
    """What every front end does: check the options, then the credentials, then build."""
    check_options(manager, options)
    preflight(options)
    return build_session(manager, options, **session_kwargs)


def available_backgrounds(manager: PluginManager) -> str:
    """A line per installed background (id and description), for "none was chosen"."""
    import re

    lines = []
    for definition in manager.background_definitions():
        text = " ".join((definition.description or "").split())
        first = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]  # its first sentence
        if len(first) > 90:
            first = first[:89] + "…"
        lines.append(f"  {definition.id}: {first}".rstrip(": "))
    return "\n".join(lines)


def default_instructions(backgrounds: Sequence[BackgroundDefinition]) -> str:
    """The default voice agent's instructions, with each background's own guidance."""
    parts = [DEFAULT_INSTRUCTIONS]
    parts += [d.voice_instructions for d in backgrounds if d.voice_instructions]
    return "\n\n".join(parts)


def _make_agent(options: SessionOptions, backgrounds: Sequence[BackgroundDefinition]) -> Agent:
    from .voice.agent import Agent

    if options.agent is None:
        return Agent(options.instructions or default_instructions(backgrounds))
    module_name, _, attr = options.agent.partition(":")
    if not module_name or not attr:
        raise click.BadParameter("expected MODULE:CLASS", param_hint="'--agent'")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as e:
        raise click.BadParameter(
            f"cannot load {options.agent}: {e}", param_hint="'--agent'"
        ) from None
    agent = target() if callable(target) and not isinstance(target, Agent) else target
    if not isinstance(agent, Agent):
        raise click.BadParameter(
            f"{options.agent} is not an Agent (got {type(agent).__name__})",
            param_hint="'--agent'",
        )
    return agent


# -- the commands ---------------------------------------------------------------------------
@click.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--all", "show_all", is_flag=True, help="Include the built-in plugins.")
@click.pass_context
def plugins_command(ctx: click.Context, as_json: bool, show_all: bool) -> None:
    """List plugins: version, hooks, what each registered, and status."""
    manager = plugin_manager(ctx, strict_errors=False)
    infos = manager.plugins(include_builtin=show_all)
    if as_json:
        click.echo(json.dumps([i.to_dict() for i in infos], indent=2))
    elif not infos:
        click.echo(
            "No plugins installed. `backline install PACKAGE` adds one; "
            "`backline plugins --all` lists the built-in ones too."
        )
    else:
        click.echo("\n".join(_describe_plugin(i) for i in infos))
    plugin_manager(ctx)  # strict mode: exit non-zero after the listing


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


@click.command()
@click.argument("packages", nargs=-1)
@click.option("-U", "--upgrade", is_flag=True, help="Upgrade packages to the newest version.")
@click.option(
    "-e", "--editable", multiple=True, metavar="PATH", help="Install a project in editable mode."
)
def install(packages: tuple[str, ...], upgrade: bool, editable: tuple[str, ...]) -> None:
    """Install plugins (pip, into the interpreter backline runs in)."""
    if not packages and not editable:
        raise click.UsageError("name at least one package, or -e PATH")
    args = ["install", *(["-U"] if upgrade else []), *packages]
    for path in editable:
        args += ["-e", path]
    _pip(args)


@click.command()
@click.argument("packages", nargs=-1, required=True)
def uninstall(packages: tuple[str, ...]) -> None:
    """Uninstall plugins (pip uninstall -y)."""
    import importlib.metadata as md

    missing = []
    for package in packages:
        try:
            md.distribution(package)
        except md.PackageNotFoundError:
            missing.append(package)
    if missing:
        raise click.ClickException(
            f"not installed: {', '.join(missing)} (nothing was uninstalled). "
            "`backline plugins` lists the installed plugins and their distributions."
        )
    _pip(["uninstall", "-y", *packages])


def _pip(args: Sequence[str]) -> None:
    code = subprocess.call([sys.executable, "-m", "pip", *args])
    if code:
        raise SystemExit(code)


@click.command("new-plugin")
@click.argument("name")
@click.option(
    "--dir",
    "directory",
    default=".",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where to create the package folder.",
)
def new_plugin(name: str, directory: str) -> None:
    """Write a new plugin package NAME (a background session, a test, a README)."""
    from .plugins._scaffold import create_plugin

    try:
        root, files = create_plugin(name, directory)
    except (ValueError, FileExistsError) as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"Created {root}:")
    for path in files:
        click.echo(f"  {path.relative_to(root)}")
    click.echo(
        f"\nNext:\n  cd {root}\n  pip install -e '.[test]' && pytest\n"
        f"  backline install -e .   (then `backline plugins` lists it)"
    )


# -- front ends -----------------------------------------------------------------------------
def preflight(options: SessionOptions, environ: Any = None) -> None:
    """Fail early, with what to do, when the chosen LLM cannot work."""
    env = os.environ if environ is None else environ
    if options.llm != "anthropic" or env.get("ANTHROPIC_AUTH_TOKEN"):
        return
    try:
        key = get_key("ANTHROPIC_API_KEY", env)
    except KeyStoreError as e:
        raise click.ClickException(str(e)) from None
    if not key:
        raise click.ClickException(
            "ANTHROPIC_API_KEY is not set, so the voice agent cannot reach Claude. "
            "Set it (export ANTHROPIC_API_KEY=sk-ant-...) or store it with `backline keys "
            "set ANTHROPIC_API_KEY`, or choose another LLM with --llm (see `backline "
            "plugins --all`)."
        )


def run_console_command(
    ctx: click.Context | None, options: SessionOptions, *, plain: bool = False
) -> None:
    """Build the session from ``options`` and run the text console until the user quits."""
    import asyncio

    from .io._diagnostics import log_to_file
    from .io.console import run_console

    manager = plugin_manager(ctx)
    session, agent = prepare_session(manager, options)
    log_path = log_to_file(options.log_file)
    if session.background:
        names = ", ".join(session.background.sorted_ids())
        banner = f"backline console (background sessions: {names}). /quit or Ctrl-D to leave."
    else:
        installed = available_backgrounds(manager)
        hint = (
            f"Installed:\n{installed}\nStart one with `backline console --background NAME`."
            if installed
            else "None is installed (`backline install PACKAGE` adds one)."
        )
        banner = (
            f"backline console: no background session is running. {hint}\n/quit or Ctrl-D to leave."
        )

    async def main() -> None:
        # The hook that serves the voice channel to MCP agents while the console runs.
        async with hosting_voice_channel(session, "backline console"):
            await run_console(
                session,
                agent,
                rich=False if plain else None,
                banner=banner,
                log_path=log_path,
                llm=options.llm,
            )

    try:
        asyncio.run(main())
    except KeyboardInterrupt:  # pragma: no cover - a second Ctrl-C during close
        pass


@click.command("console")
@session_options
@click.option("--plain", is_flag=True, help="Plain lines (no prompt toolkit), e.g. for logs.")
@click.pass_context
def console(ctx: click.Context, session_options: SessionOptions, plain: bool) -> None:
    """Talk to the voice agent in the terminal, in text, with live background state."""
    run_console_command(ctx, session_options, plain=plain)


def hosting_voice_channel(
    session: Session[Any] | None, front_end: str, *, say_when_ready: bool = False
) -> contextlib.AbstractAsyncContextManager[Any]:
    """While a front end runs, serve its background sessions' voice channel over MCP
    (``backline.mcp``; announced for ``backline mcp serve``). A console whose session
    has no background session serves nothing. It starts in a task of its own; with
    ``say_when_ready`` a line on stdout says when agents can connect."""
    if session is not None and session.background is None:
        return contextlib.nullcontext()
    from .mcp import hosted_voice_channel

    def ready(host: Any) -> None:
        click.echo(
            f"{front_end}: coding agents can talk to you over MCP ({host.url}/mcp/<background>); "
            "`backline mcp config --background NAME` prints their configuration"
        )

    return hosted_voice_channel(announce=front_end, on_ready=ready if say_when_ready else None)


def build_web_session(options: SessionOptions) -> tuple[Session[Any], Agent]:
    """A fresh session for one browser tab (``backline web`` calls it per tab)."""
    return prepare_session(plugin_manager(), options)


def _web_command() -> click.Command:
    from .io.web import build_web_command  # cheap: the server loads on first use

    return build_web_command(session_options, build_web_session)


web = _web_command()


def _mcp_command() -> click.Command:
    from .mcp._command import mcp_command  # cheap: mcp loads when a subcommand runs

    return mcp_command


def _fake_anthropic_command() -> click.Command:
    from ._offline import fake_anthropic  # cheap: the server loads on first use

    return fake_anthropic


BUILTIN_COMMANDS: list[click.Command] = [
    plugins_command,
    install,
    uninstall,
    new_plugin,
    console,
    web,
    _mcp_command(),
    _fake_anthropic_command(),
    keys_group,
    logs_group,
]
"""The built-in commands (``console`` and ``web`` join them here)."""


def make_cli() -> BacklineGroup:
    """A fresh root group with the built-in commands (plugins load on demand)."""

    @click.group(cls=BacklineGroup, name="backline")
    @click.version_option(__version__, prog_name="backline")
    def backline() -> None:
        """backline: background agents behind a voice conversation.

        Plugins add background sessions, tools, LLMs and commands:
        `backline plugins` lists them, `backline install PACKAGE` adds one.
        """

    assert isinstance(backline, BacklineGroup)
    for command in BUILTIN_COMMANDS:
        backline.add_command(command)
    return backline


def main(argv: Sequence[str] | None = None, *, prog_name: str = "backline") -> None:
    """Run the ``backline`` command (the console script)."""
    logging.basicConfig(level=logging.WARNING, format="backline: %(message)s")
    make_cli().main(args=list(argv) if argv is not None else None, prog_name=prog_name)


if __name__ == "__main__":  # pragma: no cover
    main()
