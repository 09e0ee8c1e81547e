"""Plugin options on front-end commands (the ``register_options`` hook).

A plugin registers ``--flag`` with an environment variable; every front-end
command (one built with ``backline.app.session_options``) gains the option, and a
value given on the command line is exported to the variable before the command
runs. The plugin reads its configuration from the environment when a session
starts, so the variable alone works as well as the flag.

An option may belong to a background (``background="claude_code"``) and may say
which values it takes (``choices=``, ``validate=``): ``backline.app`` refuses it
before a session is built when that background is not chosen or the value is not
one it takes. In ``--help`` each plugin's options are a section of their own.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import click
from click.core import ParameterSource

from ._help import OptionSection, add_section

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

GIVEN_OPTIONS_KEY = "backline.plugins.given_options"
"""Where a command's ``ctx.meta`` keeps the plugin options given on its command line
(flag -> value), for ``session_options`` to pass on in ``SessionOptions``."""

Choices: TypeAlias = Sequence[str] | Callable[[Any], Iterable[str]]
"""The values an option takes: names, or ``choices(manager)`` returning them (for names
other plugins register, known once every plugin has loaded)."""


@dataclass(frozen=True)
class OptionEntry:
    """A front-end option a plugin registered: the click option and its variable.

    ``option`` is a ``click.Option`` that exports its command-line value to
    ``envvar`` (see ``backline.app``); ``flag`` is its first long flag.
    ``background``: the background session the option configures (the option is
    refused when that background is not chosen), or None. ``choices`` and
    ``validate(value)`` (raising ``ValueError``) say which values it takes; both are
    checked by ``backline.app.check_options`` before a session is built.
    """

    flag: str
    envvar: str
    option: click.Option
    plugin: str
    background: str | None = None
    choices: Choices | None = None
    validate: Callable[[str], object] | None = None

    def known_values(self, manager: Any) -> list[str] | None:
        """The values ``choices`` allows (None when any value goes)."""
        if self.choices is None:
            return None
        found = self.choices(manager) if callable(self.choices) else self.choices
        return [str(v) for v in found]


_REFUSED = ("default", "callback", "expose_value", "envvar", "required", "nargs")
_SECTIONS: dict[str, OptionSection] = {}


def plugin_section(plugin: str) -> OptionSection:
    """The help section of ``plugin``'s options (one per plugin name)."""
    section = _SECTIONS.get(plugin)
    if section is None:
        section = _SECTIONS[plugin] = _PluginSection(f"Plugin {plugin}")
    return section


class _PluginSection(OptionSection):
    """A plugin's section; it says which background its options need, when they share one."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        record = super().get_help_record(ctx)
        if record is None:
            return None
        needs = {getattr(o, "backline_background", None) for o in self.get_options(ctx).values()}
        if len(needs) == 1 and None not in needs:
            return record[0], f"with --background {needs.pop()}"
        return record


def make_option(
    plugin: str,
    param_decls: Sequence[str],
    *,
    envvar: str,
    help: str,
    background: str | None = None,
    choices: Choices | None = None,
    validate: Callable[[str], object] | None = None,
    **kwargs: Any,
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
    if background is not None and (
        not isinstance(background, str) or not background or any(c.isspace() for c in background)
    ):
        raise ValueError(
            f"register_options: background must be a background session id, got {background!r}"
        )
    if choices is not None and not callable(choices):
        if isinstance(choices, str) or not all(isinstance(c, str) for c in choices):
            raise TypeError("register_options: choices must be names, or choices(manager)")
        choices = tuple(choices)
    if validate is not None and not callable(validate):
        raise TypeError("register_options: validate must be callable: validate(value)")
    try:
        option = plugin_section(plugin).option(
            *param_decls, envvar=envvar, help=help, expose_value=False, **kwargs
        )
    except (TypeError, ValueError) as e:
        raise ValueError(f"register_options: {e}") from None
    longs = [o for o in option.opts if o.startswith("--")]
    if not longs:
        raise ValueError(f"register_options: {list(param_decls)} needs a long flag (--name)")
    option.callback = _exporter(envvar, longs[0])
    option.backline_background = background  # type: ignore[attr-defined]
    return OptionEntry(
        flag=longs[0],
        envvar=envvar,
        option=option,
        plugin=plugin,
        background=background,
        choices=choices,
        validate=validate,
    )


def _exporter(envvar: str, flag: str) -> Any:
    def export(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if param.name is not None and ctx.get_parameter_source(param.name) is (
            ParameterSource.COMMANDLINE
        ):
            ctx.meta.setdefault(GIVEN_OPTIONS_KEY, {})[flag] = value
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
    """Add ``entries`` to every front-end command under ``root`` (once each), each
    plugin's options in a help section of their own."""
    for command in front_end_commands(root):
        taken = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
        by_plugin: dict[str, list[click.Option]] = {}
        for entry in entries:
            opts = {*entry.option.opts, *entry.option.secondary_opts}
            if not opts & taken:
                by_plugin.setdefault(entry.plugin, []).append(entry.option)
                taken |= opts
        for plugin, options in sorted(by_plugin.items()):
            add_section(command, plugin_section(plugin), options)
