"""``backline keys``: store API keys (``set``, never echoed), list their names, show the file."""

from __future__ import annotations

import os
import sys

import click

from .keys import (
    KeyStoreError,
    check_name,
    delete_key,
    get_key,
    key_names,
    keys_path,
    set_key,
)


@click.group("keys")
def keys_group() -> None:
    """Store API keys for the providers (the environment variable wins over a stored key).

    A key is stored under its environment variable's name, e.g.
    `backline keys set ANTHROPIC_API_KEY`; the file is readable by you only.
    """


def _read_secret(name: str) -> str:
    if sys.stdin.isatty():
        value: str = click.prompt(f"Key for {name} (input is hidden)", hide_input=True)
        return value
    return sys.stdin.readline()  # piped: `printf %s "$KEY" | backline keys set NAME`


@keys_group.command("set")
@click.argument("name")
def set_command(name: str) -> None:
    """Store the key NAME (read without echo, or from standard input)."""
    try:
        check_name(name)
        path = set_key(name, _read_secret(name))
    except KeyStoreError as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"Stored {name} in {path}.")
    if os.environ.get(name):
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
        where = "  (the environment variable is set and wins)" if os.environ.get(name) else ""
        click.echo(f"{name}{where}")


@keys_group.command("path")
def path_command() -> None:
    """Print the file the keys are stored in."""
    click.echo(str(keys_path()))


@keys_group.command("remove")
@click.argument("name")
def remove_command(name: str) -> None:
    """Remove the stored key NAME."""
    try:
        removed = delete_key(name)
    except KeyStoreError as e:
        raise click.ClickException(str(e)) from None
    if not removed:
        raise click.ClickException(f"no stored key named {name} (`backline keys list`)")
    click.echo(f"Removed {name}.")
    if get_key(name):
        click.echo(f"Note: {name} is still set in the environment.")
