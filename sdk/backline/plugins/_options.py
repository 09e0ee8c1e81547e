"""Plugin options on front-end commands (the ``register_options`` hook).

A plugin registers ``--flag`` with an environment variable; every front-end
command (one built with ``backline.cli.session_options``) gains the option, and a
value given on the command line is exported to the variable before the command
runs. The plugin reads its configuration from the environment when a session
starts, so the variable alone works as well as the flag.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import click
from click.core import ParameterSource

FRONT_END_MARK = "__backline_front_end__"
"""Set on a command's callback by ``session_options``: the command is a front end."""

RESERVED_OPTIONS = frozenset(
    {
        "--background",
        "-b",
        "--llm",
        "--model",
        "-m",
        "--instructions",
        "--agent",
        "--no-log",
        "--log-file",
        "--mcp-config",
        "--help",
    }
)
"""Flags the front ends own (``session_options``): a plugin cannot register them."""


@dataclass(frozen=True)
class OptionEntry:
    """A front-end option a plugin registered: the click option and its variable.

    ``option`` is a ``click.Option`` that exports its command-line value to
    ``envvar`` (see ``backline.cli``); ``flag`` is its first long flag.
    """

    flag: str
    envvar: str
    option: click.Option
    plugin: str


_REFUSED = ("default", "callback", "expose_value", "envvar", "required", "nargs")


def make_option(
    plugin: str, param_decls: Sequence[str], *, envvar: str, help: str, **kwargs: Any
) -> OptionEntry:
    """A validated ``OptionEntry`` for ``register_options``' ``register`` callback."""
    if not isinstance(envvar, str) or not envvar or not envvar.replace("_", "").isalnum():
        raise ValueError(
            f"register_options: envvar must be an environment variable name, got {envvar!r}"
        )
    if not isinstance(help, str) or not help.strip():
        raise ValueError("register_options: every option needs help text (help='...')")
    refused = sorted(k for k in kwargs if k in _REFUSED)
    if refused:
        raise TypeError(
            f"register_options: {', '.join(refused)} cannot be set on a front-end option "
            "(the plugin's own default applies when the flag and the variable are absent)"
        )
    try:
        option = click.Option(
            list(param_decls),
            envvar=envvar,
            help=help,
            expose_value=False,
            callback=_exporter(envvar),
            **kwargs,
        )
    except (TypeError, ValueError) as e:
        raise ValueError(f"register_options: {e}") from None
    longs = [o for o in option.opts if o.startswith("--")]
    if not longs:
        raise ValueError(f"register_options: {list(param_decls)} needs a long flag (--name)")
    return OptionEntry(flag=longs[0], envvar=envvar, option=option, plugin=plugin)


def _exporter(envvar: str) -> Any:
    def export(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if param.name is not None and ctx.get_parameter_source(param.name) is (
            ParameterSource.COMMANDLINE
        ):
            if isinstance(value, bool):
                os.environ[envvar] = "1" if value else "0"
            elif isinstance(value, tuple):  # multiple=True: every value given, in order
                os.environ[envvar] = ",".join(str(v) for v in value)
            elif value is not None:
                os.environ[envvar] = str(value)
        return value

    return export


def is_front_end(command: click.Command) -> bool:
    return bool(getattr(command.callback, FRONT_END_MARK, False))


def front_end_commands(root: click.Command) -> Iterable[click.Command]:
    """Every front-end command under ``root`` (groups are walked)."""
    if is_front_end(root):
        yield root
    if isinstance(root, click.Group):
        for command in root.commands.values():
            yield from front_end_commands(command)


def attach_options(root: click.Command, entries: Sequence[OptionEntry]) -> None:
    """Add ``entries`` to every front-end command under ``root`` (once each)."""
    for command in front_end_commands(root):
        taken = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
        for entry in entries:
            opts = {*entry.option.opts, *entry.option.secondary_opts}
            if not opts & taken:
                command.params.append(entry.option)
                taken |= opts
