"""Plugins' options, checked before a session is built: none is accepted and ignored.

An option a plugin registered for a background (``register(..., background=...)``)
is a usage error when that background is not chosen; a value the option does not
take (``choices=``, ``validate=``) is one too, whether it came from the flag or from
the option's environment variable, but only when the option is in force.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import click

from ..plugins import OptionEntry, PluginManager
from ..plugins._errors import closest
from ._backgrounds import plugin_ids
from ._options import SessionOptions


def check_plugin_options(
    manager: PluginManager, options: SessionOptions, environ: Mapping[str, str] | None = None
) -> None:
    """Raise a click usage error (exit status 2) naming the fix when a plugin option is
    given for a background that is not chosen, or has a value it does not take."""
    env = os.environ if environ is None else environ
    chosen = plugin_ids(options.backgrounds)  # an instance's options are its plugin's
    installed = set(manager.background_ids())
    stray: list[str] = []
    for entry in manager.options():
        given = entry.flag in options.plugin_options
        if entry.background is not None and entry.background not in chosen:
            if given:
                stray.append(_stray(entry, installed))
            continue
        if given:
            value: Any = options.plugin_options[entry.flag]
            hint = f"'{entry.flag}'"
        else:
            value = env.get(entry.envvar)
            hint = f"'{entry.flag}' (from ${entry.envvar})"
        if value is None or isinstance(value, bool) or value == "":
            continue
        problem = _value_problem(entry, str(value), manager)
        if problem is not None:
            raise click.BadParameter(problem, param_hint=hint)
    if stray:
        raise click.UsageError("\n".join(stray))


def _stray(entry: OptionEntry, installed: set[str]) -> str:
    background = entry.background
    if background not in installed:
        return (
            f"{entry.flag} is an option of the {background} background, which is not "
            f"installed (`backline plugins` says why): leave {entry.flag} out."
        )
    return (
        f"{entry.flag} is an option of the {background} background, which this session "
        f"does not run: add --background {background}, or leave {entry.flag} out."
    )


def _value_problem(entry: OptionEntry, value: str, manager: PluginManager) -> str | None:
    known = entry.known_values(manager)
    if known is not None and value not in known:
        text = f"'{value}' is not one of: {', '.join(known) or 'none'}"
        suggestion = closest(value, known)
        return f"{text}. Did you mean '{suggestion}'?" if suggestion else f"{text}."
    if entry.validate is not None:
        try:
            entry.validate(value)
        except ValueError as e:
            return str(e) or f"'{value}' is not a value it takes"
    return None
