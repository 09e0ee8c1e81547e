"""Real installs: pip-install a plugin, see it discovered and listed, uninstall it.

Everything is installed into ``overlay_python`` (a venv layered over the dev
venv), offline, and uninstalled at the end whatever happens.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import (
    SUBPROCESS_TIMEOUT,
    build_wheel,
    clean_env,
    plugins_json,
    run_backline,
    unique,
)

PLUGIN = """
import click
import backline

@backline.background({bg!r}, description="An installed background.")
async def bg(ctx):
    async for message in ctx.messages():
        await ctx.send(message)

@backline.function_tool
async def {tool}(query: str) -> str:
    '''Search.

    Args:
        query: What to look for.
    '''
    return query

@backline.hookimpl
def register_background_sessions(register):
    register(bg)

@backline.hookimpl
def register_tools(register):
    register({tool})

@backline.hookimpl
def register_commands(cli):
    @cli.command({command!r})
    def hello():
        '''Say hello.'''
        click.echo("hello from an installed plugin")
"""


@pytest.fixture
def uninstall_after(overlay_python: Path) -> Iterator[list[str]]:
    """Distributions to uninstall from the overlay venv at the end, whatever happens."""
    dists: list[str] = []
    yield dists
    if dists:
        subprocess.run(
            [str(overlay_python), "-m", "pip", "uninstall", "-y", *dists],
            capture_output=True,
            env=clean_env(),
            timeout=SUBPROCESS_TIMEOUT,
            check=False,
        )


def test_an_installed_plugin_is_discovered_listed_run_and_uninstalled(
    overlay_python: Path, tmp_path: Path, uninstall_after: list[str]
) -> None:
    name = unique("installed")
    dist = f"backline-{name}"
    bg, tool, command = unique("bg_"), unique("tool_"), unique("hello-")
    package = name
    wheel = build_wheel(
        tmp_path,
        dist,
        {
            f"{package}.__init__": "",
            f"{package}.plugin": PLUGIN.format(bg=bg, tool=tool, command=command),
        },
        {name: f"{package}.plugin"},
        version="0.3.0",
    )
    uninstall_after.append(dist)
    env = {"BACKLINE_PLUGINS": f"{name},anthropic"}

    installed = run_backline("install", str(wheel), python=overlay_python, env=env)
    assert installed.returncode == 0, installed.stdout + installed.stderr

    listed = plugins_json(run_backline("plugins", "--json", python=overlay_python, env=env))
    assert listed[name]["status"] == "loaded"
    assert (listed[name]["distribution"], listed[name]["version"]) == (dist, "0.3.0")
    assert listed[name]["hooks"] == [
        "register_background_sessions",
        "register_commands",
        "register_tools",
    ]
    assert (listed[name]["backgrounds"], listed[name]["tools"]) == ([bg], [tool])
    assert listed[name]["commands"] == [command]

    ran = run_backline(command, python=overlay_python, env=env)
    assert (ran.returncode, ran.stdout) == (0, "hello from an installed plugin\n")

    removed = run_backline("uninstall", dist, python=overlay_python, env=env)
    assert removed.returncode == 0, removed.stderr
    after = plugins_json(run_backline("plugins", "--json", python=overlay_python, env=env))
    assert name not in after
    assert run_backline(command, python=overlay_python, env=env).returncode == 2


def test_an_installed_plugin_that_fails_is_listed_and_isolated(
    overlay_python: Path, tmp_path: Path, uninstall_after: list[str]
) -> None:
    broken, good = unique("brokeninst"), unique("goodinst")
    bg, tool, command = unique("bg_"), unique("tool_"), unique("hello-")
    wheels = [
        build_wheel(
            tmp_path,
            f"backline-{broken}",
            {broken: "import backline_not_installed_anywhere\n"},
            {broken: broken},
        ),
        build_wheel(
            tmp_path,
            f"backline-{good}",
            {good: PLUGIN.format(bg=bg, tool=tool, command=command)},
            {good: good},
        ),
    ]
    uninstall_after.extend([f"backline-{broken}", f"backline-{good}"])
    env = {"BACKLINE_PLUGINS": f"{broken},{good}"}

    installed = run_backline("install", *map(str, wheels), python=overlay_python, env=env)
    assert installed.returncode == 0, installed.stdout + installed.stderr

    listed = plugins_json(run_backline("plugins", "--json", python=overlay_python, env=env))
    assert listed[broken]["status"] == "failed"
    assert listed[broken]["error"] == (
        "ModuleNotFoundError: No module named 'backline_not_installed_anywhere'"
    )
    assert listed[good]["status"] == "loaded"
    strict = run_backline(
        "plugins", python=overlay_python, env={**env, "BACKLINE_STRICT_PLUGINS": "1"}
    )
    assert strict.returncode == 1
    assert f"{broken}: ModuleNotFoundError" in strict.stderr
