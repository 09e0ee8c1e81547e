"""``--background ID[:NAME][=VALUE]``: which backgrounds run, and as what.

``ID`` is a background a plugin registered (``backline plugins`` lists them);
``NAME`` names this instance of it (its id in the session: the voice agent's tools,
the console's line, the page's card); ``VALUE`` configures it (what it sets is the
background's own: Claude Code's folder). ``--background claude_code`` runs the
plugin's background as it is;
``--background claude_code:api=./services/api --background claude_code:web=./web``
runs two, each its own. Everything is checked before anything starts: an unknown
plugin (with the closest name), a name given twice, a value for a background that
takes none, a value the background refuses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

from ..plugins import PluginManager, UnknownNameError

if TYPE_CHECKING:
    from ..background.definition import BackgroundDefinition

__all__ = ["BackgroundSpec", "chosen_backgrounds", "parse_background"]

_HINT = "'--background'"


@dataclass(frozen=True)
class BackgroundSpec:
    """One ``--background`` value, parsed: ``plugin`` (the registered background's id), ``name``
    (None: the plugin's id) and ``value`` (None: none given)."""

    plugin: str
    name: str | None = None
    value: str | None = None

    @property
    def id(self) -> str:
        """The id it runs as."""
        return self.name or self.plugin

    def __str__(self) -> str:
        name = "" if self.name is None else f":{self.name}"
        value = "" if self.value is None else f"={self.value}"
        return f"{self.plugin}{name}{value}"


def parse_background(text: str) -> BackgroundSpec:
    """``ID[:NAME][=VALUE]`` (the value may hold ``:`` and ``=``); a
    ``click.BadParameter`` says what is wrong."""
    head, eq, value = text.partition("=")
    plugin, colon, name = head.partition(":")
    problem = None
    if not plugin.strip():
        problem = "names no background"
    elif colon and not name.strip():
        problem = "has an empty NAME after ':'"
    elif eq and not value.strip():
        problem = "has an empty VALUE after '='"
    if problem is not None:
        raise click.BadParameter(
            f"'{text}' {problem}: write ID, ID:NAME, ID=VALUE or ID:NAME=VALUE "
            "(claude_code:api=./services/api)",
            param_hint=_HINT,
        )
    return BackgroundSpec(plugin.strip(), name.strip() if colon else None, value if eq else None)


def chosen_backgrounds(manager: PluginManager, specs: Sequence[str]) -> list[BackgroundDefinition]:
    """The definitions ``specs`` choose, in order: each plugin's own, or an instance of
    it (``definition.instance(name, value)``). Raises ``click.BadParameter`` naming
    the ``--background`` value that is wrong and how to fix it."""
    parsed = [parse_background(s) for s in specs]
    seen: dict[str, BackgroundSpec] = {}
    for spec in parsed:
        earlier = seen.get(spec.id)
        if earlier is not None:
            raise click.BadParameter(
                f"two backgrounds are named '{spec.id}' ({earlier} and {spec}): give each "
                f"its own name, as in {spec.plugin}:NAME{'' if spec.value is None else '=...'}",
                param_hint=_HINT,
            )
        seen[spec.id] = spec
    definitions = []
    for spec in parsed:
        try:
            definition = manager.background(spec.plugin)
        except UnknownNameError as e:
            raise click.BadParameter(str(e), param_hint=_HINT) from None
        if spec.name is not None or spec.value is not None:
            try:
                definition = definition.instance(spec.name, spec.value)
            except (ValueError, TypeError) as e:
                raise click.BadParameter(f"{spec}: {e}", param_hint=_HINT) from None
        definitions.append(definition)
    return definitions


def plugin_ids(specs: Sequence[str]) -> set[str]:
    """The plugins' background ids that ``specs`` run (for the plugins' options)."""
    return {parse_background(s).plugin for s in specs}
