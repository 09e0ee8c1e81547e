"""The ``backline`` command (click): parses arguments and calls the layers below.

Built-in commands: ``plugins`` (and ``plugins search``), ``install``, ``uninstall``,
``new-plugin``, ``console``, ``web``, ``voice``, ``mcp``, ``fake-anthropic``, ``keys``, ``logs``,
``models``. Plugins add
more through the ``register_commands(cli)`` hook; they are loaded only when a
command is not a built-in one, or for ``--help``, and a plugin that fails is
reported, never fatal (unless ``BACKLINE_STRICT_PLUGINS=1``).

Front ends (``console``, ``web``, and plugins' own) take the session options and
build their sessions through ``backline.app``, the front-end contract.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import warnings
from collections.abc import Sequence
from typing import Any

import click

from . import app
from ._keys_command import keys_group
from ._logs_command import logs_group
from ._models_command import models_command
from ._plugins_command import plugins_command
from ._speech_command import speech_group
from ._version import __version__
from .plugins import PluginError, PluginManager, attach_options, is_front_end

__all__ = ["BUILTIN_COMMANDS", "BacklineGroup", "console", "main", "make_cli", "web"]


class BacklineGroup(click.Group):
    """The root group: built-in commands at once, plugin commands on demand.

    It is the ``backline.app.PluginSource`` of every command under it: the plugins
    load once, registering their commands here and their options on every front end.
    """

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
        elif is_front_end(found):
            # A front end builds a session from plugins anyway: load them now, so their
            # options (register_options) parse and show in --help. A failure is
            # reported by the command itself.
            self.plugin_manager(strict_errors=False)
        return found


# -- plugins --------------------------------------------------------------------------------
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
    from .plugins import create_plugin

    try:
        root, files = create_plugin(name, directory)
    except (ValueError, FileExistsError) as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"Created {root}:")
    for path in files:
        click.echo(f"  {path.relative_to(root)}")
    click.echo(
        f"\nNext:\n  cd {root}\n  pip install -e '.[test]' && pytest\n"
        f"  backline install -e .   (then `backline plugins` lists it)\n"
        f"  backline try {root.name.removeprefix('backline-')}   (talk to it, no key needed)"
    )


# -- front ends -----------------------------------------------------------------------------
@click.command("console")
@app.session_options
@click.option("--plain", is_flag=True, help="Plain lines (no prompt toolkit), e.g. for logs.")
@click.pass_context
def console(ctx: click.Context, session_options: app.SessionOptions, plain: bool) -> None:
    """Talk to the voice agent in the terminal, in text, with live background state."""
    from .io.console import run_console_front_end

    run_console_front_end(session_options, manager=app.plugin_manager(ctx), plain=plain)


def _web_command() -> click.Command:
    from .io.web import build_web_command  # cheap: the server loads on first use

    return build_web_command()


web = _web_command()


def _voice_command() -> click.Command:
    from .io.voice import voice_command  # cheap: devices and engines load when it runs

    return voice_command


def _mcp_command() -> click.Command:
    from .mcp.channel import mcp_command  # cheap: mcp loads when a subcommand runs

    return mcp_command


def _fake_anthropic_command() -> click.Command:
    from ._offline import fake_anthropic  # cheap: the server loads on first use

    return fake_anthropic


def _try_command() -> click.Command:
    from ._offline import try_offline  # cheap: the server loads on first use

    return try_offline


BUILTIN_COMMANDS: list[click.Command] = [
    plugins_command,
    install,
    uninstall,
    new_plugin,
    console,
    web,
    _voice_command(),
    _mcp_command(),
    _fake_anthropic_command(),
    _try_command(),
    keys_group,
    logs_group,
    models_command,
    speech_group,
]
"""The built-in commands."""


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


# The front-end names this module had before ``backline.app``: still found here, with a
# DeprecationWarning, so plugins written against them keep working.
_MOVED_TO_APP = frozenset(
    {
        "DEFAULT_INSTRUCTIONS",
        "DEFAULT_LLM",
        "SessionOptions",
        "available_backgrounds",
        "build_session",
        "check_options",
        "default_instructions",
        "hosting_voice_channel",
        "plugin_manager",
        "preflight",
        "prepare_session",
        "session_options",
    }
)


def __getattr__(name: str) -> Any:
    if name in _MOVED_TO_APP:
        warnings.warn(
            f"backline.cli.{name} moved to backline.app.{name}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":  # pragma: no cover
    main()
