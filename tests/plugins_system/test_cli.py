"""The ``backline`` command: listing, help, isolation, strict mode, install.

Subprocess tests run ``python -m backline`` with plugins on ``PYTHONPATH``, as a
user's shell would; argument plumbing is checked in process with click's runner.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from click.testing import CliRunner

from backline import cli as cli_module
from backline.cli import make_cli

from .conftest import FakeSite, clean_env, plugins_json, run_backline, unique

PLUGIN = """
import click
import backline

@backline.background({bg!r}, description="Test background.")
async def bg(ctx):
    async for message in ctx.messages():
        await ctx.send(message)

@backline.hookimpl
def register_background_sessions(register):
    register(bg)

@backline.hookimpl
def register_commands(cli):
    @cli.command({command!r})
    def greet():
        '''Greet from a plugin.'''
        click.echo("greetings from {command}")
"""

RAISING = """
import backline

@backline.hookimpl
def register_background_sessions(register):
    raise KeyError("missing setting")
"""


@pytest.fixture
def plugins(site: FakeSite) -> dict[str, str]:
    """A working plugin (a background and a command), one that fails to import, and
    one whose registration hook raises."""
    names = {
        "good": unique("good"),
        "bad": unique("bad"),
        "bg": unique("bg_"),
        "command": unique("greet-"),
    }
    module = unique("mod_cli_")
    site.add(
        f"backline-{names['good']}",
        {module: PLUGIN.format(bg=names["bg"], command=names["command"])},
        {names["good"]: module},
        version="2.3.4",
    )
    bad_module = unique("mod_bad_")
    site.add(
        f"backline-{names['bad']}",
        {bad_module: "import backline_no_such_dependency\n"},
        {names["bad"]: bad_module},
    )
    names["raising"] = unique("raising")
    raising_module = unique("mod_raising_")
    site.add(
        f"backline-{names['raising']}",
        {raising_module: RAISING},
        {names["raising"]: raising_module},
    )
    names["allow"] = f"{names['good']},{names['bad']},{names['raising']},anthropic"
    return names


def env_for(site: FakeSite, plugins: dict[str, str], **extra: str) -> dict[str, str]:
    return site.env(BACKLINE_PLUGINS=plugins["allow"], **extra)


def test_plugins_json_lists_name_version_hooks_registrations_and_status(
    site: FakeSite, plugins: dict[str, str]
) -> None:
    listed = plugins_json(run_backline("plugins", "--json", env=env_for(site, plugins)))

    assert "anthropic" not in listed  # built-ins only with --all
    good = listed[plugins["good"]]
    assert good == {
        "name": plugins["good"],
        "distribution": f"backline-{plugins['good']}",
        "version": "2.3.4",
        "module": good["module"],
        "builtin": False,
        "status": "loaded",
        "error": None,
        "disabled_by": None,
        "printed": None,
        "hooks": ["register_background_sessions", "register_commands"],
        "backgrounds": [plugins["bg"]],
        "tools": [],
        "llms": [],
        "commands": [plugins["command"]],
        "options": [],
    }
    bad = listed[plugins["bad"]]
    assert bad["status"] == "failed"
    assert bad["error"] == "ModuleNotFoundError: No module named 'backline_no_such_dependency'"
    raising = listed[plugins["raising"]]
    assert raising["status"] == "failed"
    assert raising["error"] == "register_background_sessions raised KeyError: 'missing setting'"
    assert raising["hooks"] == ["register_background_sessions"]


def test_plugins_all_includes_the_built_ins(site: FakeSite, plugins: dict[str, str]) -> None:
    listed = plugins_json(run_backline("plugins", "--json", "--all", env=env_for(site, plugins)))

    assert listed["anthropic"]["builtin"] is True
    assert listed["anthropic"]["llms"] == ["anthropic"]


def test_plugins_text_output(site: FakeSite, plugins: dict[str, str]) -> None:
    result = run_backline("plugins", env=env_for(site, plugins))

    assert result.returncode == 0, result.stderr
    assert f"{plugins['good']} (backline-{plugins['good']} 2.3.4): loaded" in result.stdout
    assert f"  backgrounds: {plugins['bg']}" in result.stdout
    assert f"  commands: {plugins['command']}" in result.stdout
    assert f"{plugins['bad']} (backline-{plugins['bad']} 1.0.0): failed: ModuleNotFoundError" in (
        result.stdout
    )


def test_allow_and_deny_variables_reach_the_cli(site: FakeSite, plugins: dict[str, str]) -> None:
    none = plugins_json(
        run_backline("plugins", "--json", "--all", env=site.env(BACKLINE_PLUGINS=""))
    )
    assert {p["status"] for p in none.values()} == {"disabled"}

    denied = plugins_json(
        run_backline(
            "plugins",
            "--json",
            env=env_for(site, plugins, BACKLINE_DISABLE_PLUGINS=plugins["bad"]),
        )
    )
    assert denied[plugins["bad"]]["status"] == "disabled"
    assert denied[plugins["good"]]["status"] == "loaded"


def test_help_lists_plugin_commands_and_survives_a_broken_plugin(
    site: FakeSite, plugins: dict[str, str]
) -> None:
    result = run_backline("--help", env=env_for(site, plugins))

    assert result.returncode == 0
    assert plugins["command"] in result.stdout
    assert "new-plugin" in result.stdout
    assert f"plugin '{plugins['bad']}' failed to load" in result.stderr


def test_a_plugin_command_runs(site: FakeSite, plugins: dict[str, str]) -> None:
    result = run_backline(plugins["command"], env=env_for(site, plugins))

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"greetings from {plugins['command']}\n"


def test_strict_mode_fails_the_cli_but_not_help(site: FakeSite, plugins: dict[str, str]) -> None:
    env = env_for(site, plugins, BACKLINE_STRICT_PLUGINS="1")

    listing = run_backline("plugins", env=env)
    assert listing.returncode == 1
    assert f"{plugins['bad']} (backline-{plugins['bad']} 1.0.0): failed" in listing.stdout
    assert "2 plugin(s) failed to load (BACKLINE_STRICT_PLUGINS=1)" in listing.stderr

    command = run_backline(plugins["command"], env=env)
    assert command.returncode == 1
    assert "BACKLINE_STRICT_PLUGINS=1" in command.stderr

    help_ = run_backline("--help", env=env)
    assert help_.returncode == 0
    assert "plugin commands are not listed" in help_.stderr


def test_help_imports_no_heavy_module(site: FakeSite, plugins: dict[str, str]) -> None:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "backline", "--help"],
        capture_output=True,
        text=True,
        env=clean_env(env_for(site, plugins)),
        timeout=60,
        check=True,
    )
    imported = {
        line.rsplit("|", 1)[-1].strip()
        for line in result.stderr.splitlines()
        if line.startswith("import time:")
    }
    heavy = {"anthropic", "mcp", "jsonschema", "httpx", "claude_agent_sdk", "prompt_toolkit"}
    assert not {m for m in imported if m.split(".")[0] in heavy}
    assert "backline.llm.anthropic" not in imported
    assert plugins["command"] in result.stdout


def test_version_and_python_dash_m() -> None:
    result = run_backline("--version")

    assert result.returncode == 0
    assert result.stdout.strip() == "backline, version 0.1.0"


def test_the_console_script_runs_the_cli() -> None:
    script = Path(sysconfig.get_path("scripts")) / "backline"
    assert script.exists(), "the backline console script is missing: pip install -e '.[dev]'"

    result = subprocess.run(
        [str(script), "--version"],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=60,
        check=False,
    )

    assert (result.returncode, result.stdout.strip()) == (0, "backline, version 0.1.0")


# -- in process: argument plumbing ---------------------------------------------------------
@pytest.fixture
def pip_calls(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    calls: list[list[str]] = []

    def fake_call(args: list[str]) -> int:
        calls.append(args)
        return 0

    monkeypatch.setattr(cli_module.subprocess, "call", fake_call)
    monkeypatch.setenv("BACKLINE_PLUGINS", "")
    return calls


def test_install_runs_pip_in_this_interpreter_passing_upgrade_and_editable(
    pip_calls: list[list[str]],
) -> None:
    result = CliRunner().invoke(make_cli(), ["install", "-U", "backline-x", "-e", "./dev"])

    assert result.exit_code == 0, result.output
    assert pip_calls == [
        [sys.executable, "-m", "pip", "install", "-U", "backline-x", "-e", "./dev"]
    ]


def test_uninstall_runs_pip_uninstall_yes(pip_calls: list[list[str]]) -> None:
    installed = ["backline-claude-code", "pluggy"]  # pip itself is faked
    result = CliRunner().invoke(make_cli(), ["uninstall", *installed])

    assert result.exit_code == 0, result.output
    assert pip_calls == [[sys.executable, "-m", "pip", "uninstall", "-y", *installed]]


def test_uninstall_of_something_not_installed_is_an_error_that_uninstalls_nothing(
    pip_calls: list[list[str]],
) -> None:
    result = CliRunner().invoke(make_cli(), ["uninstall", "pluggy", "backline-not-installed"])

    assert result.exit_code == 1
    assert "not installed: backline-not-installed (nothing was uninstalled)" in result.output
    assert pip_calls == []


def test_install_needs_a_package_and_reports_pip_failures(
    pip_calls: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert CliRunner().invoke(make_cli(), ["install"]).exit_code == 2
    monkeypatch.setattr(cli_module.subprocess, "call", lambda args: 7)
    assert CliRunner().invoke(make_cli(), ["install", "nope"]).exit_code == 7


# -- front ends: safe defaults, checks in the right order ---------------------------------------
def test_console_without_background_starts_none_and_lists_the_installed_ones(
    site: FakeSite, plugins: dict[str, str]
) -> None:
    env = env_for(
        site, plugins, ANTHROPIC_API_KEY="sk-ant-test", ANTHROPIC_BASE_URL="http://127.0.0.1:9"
    )
    result = subprocess.run(
        [sys.executable, "-m", "backline", "console", "--plain"],
        input="/quit\n",
        capture_output=True,
        text=True,
        env=clean_env(env),
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "no background session is running" in result.stdout
    assert f"  {plugins['bg']}: Test background." in result.stdout
    assert "backline console --background NAME" in result.stdout


def test_an_unknown_background_is_reported_before_a_missing_key(
    site: FakeSite, plugins: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    env = env_for(site, plugins)
    for command in ("console", "web"):
        result = run_backline(command, "--background", "nonexistent", env=env)
        assert result.returncode == 2, result.stderr
        assert "unknown background session 'nonexistent'" in result.stderr
        assert "ANTHROPIC_API_KEY" not in result.stderr
    result = run_backline("console", "--llm", "nonexistent", env=env)
    assert result.returncode == 2
    assert "unknown LLM 'nonexistent'" in result.stderr
