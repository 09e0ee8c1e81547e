"""The plugin: adds ``backline livekit console | dev | start`` (entry point group ``backline``).

Neither loading the plugin nor registering its commands imports LiveKit: the
commands import it when they run, so other ``backline`` commands stay light.
"""

from __future__ import annotations

import click

from backline import hookimpl


@hookimpl
def register_commands(cli: click.Group) -> None:
    from .cli import livekit_group

    cli.add_command(livekit_group)
