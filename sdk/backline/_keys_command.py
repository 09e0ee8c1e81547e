"""``backline keys``: store API keys (``set``, never echoed), list their names, show the file."""

from __future__ import annotations

import os
import sys

import click

from .keys import (
    KeyStoreError,
    delete_key,
    key_name,
    key_names,
    keys_path,
    set_key,
)


@click.group("keys")
def keys_group() -> None:
    """Store API keys for the providers (the environment variable wins over a stored key).

    A key is stored under its environment variable's name, e.g.
    `backline keys set ANTHROPIC_API_KEY` (a lower-case name is taken in upper case);
    the file is readable by you only.
    """


def _read_secret(name: str) -> str:
    if sys.stdin.isatty():
        value: str = click.prompt(f"Key for {name} (input is hidden)", hide_input=True)
        return value
    return sys.stdin.readline()  # piped: `printf %s "$KEY" | backline keys set NAME`


@keys_group.command("set")
@click.argument("name")
def set_command(name: str) -> None:
    """Store the key NAME (read without echo, or from standard input).

    NAME is the provider's environment variable, e.g. ANTHROPIC_API_KEY; a lower-case
    name is stored in upper case, the name every provider looks up.
    """
    try:
        stored = key_name(name)
        path = set_key(stored, _read_secret(stored))
    except KeyStoreError as e:
        raise click.ClickException(str(e)) from None
    if stored != name:
        click.echo(
            f"Note: key names are upper case, the environment variable's name: "
            f"{name} is stored as {stored}."
        )
    click.echo(f"Stored {stored} in {path}.")
    if os.environ.get(stored):
        click.echo(f"Note: {name} is also set in the environment, and that value is used.")


@keys_group.command("list")
def list_command() -> None:
    """List the names of the stored keys (never the keys)."""
    try:
        names = key_names()
    except KeyStoreError as e:
        raise click.ClickException(str(e)) from None
    if not names:
        click.echo("No stored keys. `backline keys set NAME` stores one.", err=True)
    for name in names:
        if name != name.upper():  # stored before names were taken in upper case
            where = (
                f"  (never used: providers look up {name.upper()}; "
                f"`backline keys set {name.upper()}`, then `backline keys remove {name}`)"
            )
        elif os.environ.get(name):
            where = "  (the environment variable is set and wins)"
        else:
            where = ""
        click.echo(f"{name}{where}")


@keys_group.command("path")
def path_command() -> None:
    """Print the file the keys are stored in."""
    click.echo(str(keys_path()))


@keys_group.command("remove")
@click.argument("name")
def remove_command(name: str) -> None:
    """Remove the stored key NAME (in upper case unless stored otherwise)."""
    try:
        stored = name if name in key_names() else key_name(name)
        removed = delete_key(stored)
    except KeyStoreError as e:
        raise click.ClickException(str(e)) from None
    if not removed:
        raise click.ClickException(f"no stored key named {stored} (`backline keys list`)")
    click.echo(f"Removed {stored}.")
    if os.environ.get(stored):
        click.echo(f"Note: {stored} is still set in the environment.")
