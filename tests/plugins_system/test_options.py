"""``register_options``: plugin options on every front-end command, exported to a variable."""

from __future__ import annotations

import pytest

from .conftest import FakeSite, plugins_json, run_backline, unique

TONE = """
import os
import click
import backline
from backline.app import session_options

@backline.hookimpl
def register_options(register):
    register("--{flag}", envvar="{env}", help="The tone of the test plugin.", metavar="TONE")
    register("--{flag}-loud/--{flag}-quiet", envvar="{env}_LOUD", help="Loudness.")

@backline.hookimpl
def register_commands(cli):
    @cli.command("{command}")
    @session_options
    def show(session_options):
        '''A front end of the plugin's own: it sees every plugin option.'''
        click.echo(f"tone={{os.environ.get('{env}')}} loud={{os.environ.get('{env}_LOUD')}}")
"""

CLASHING = """
import backline

@backline.hookimpl
def register_options(register):
    register("--{flag}", envvar="OTHER_{env}", help="Same flag, another plugin.")
"""

RESERVED = """
import backline

@backline.hookimpl
def register_options(register):
    register("--model", envvar="MY_MODEL", help="Takes the voice model's flag.")
"""


@pytest.fixture
def tone(site: FakeSite) -> dict[str, str]:
    names = {
        "plugin": unique("tone"),
        "flag": unique("tone-"),
        "env": unique("TONE_").upper(),
        "command": unique("show-"),
    }
    module = unique("mod_tone_")
    site.add(
        f"backline-{names['plugin']}",
        {module: TONE.format(**names)},
        {names["plugin"]: module},
    )
    return names


def test_a_flag_on_the_command_line_is_exported_to_the_plugins_variable(
    site: FakeSite, tone: dict[str, str]
) -> None:
    env = site.env(BACKLINE_PLUGINS=tone["plugin"])
    given = run_backline(
        tone["command"], f"--{tone['flag']}", "warm", f"--{tone['flag']}-loud", env=env
    )
    assert given.returncode == 0, given.stderr
    assert given.stdout.strip() == "tone=warm loud=1"

    from_env = run_backline(tone["command"], env={**env, tone["env"]: "cold"})
    assert from_env.stdout.strip() == "tone=cold loud=None"  # the variable alone works too

    negated = run_backline(tone["command"], f"--{tone['flag']}-quiet", env=env)
    assert negated.stdout.strip() == "tone=None loud=0"


def test_built_in_front_ends_show_plugin_options_in_help(
    site: FakeSite, tone: dict[str, str]
) -> None:
    env = site.env(BACKLINE_PLUGINS=f"{tone['plugin']},anthropic")
    for command in ("console", "web"):
        shown = run_backline(command, "--help", env=env)
        assert shown.returncode == 0, shown.stderr
        assert f"--{tone['flag']} TONE" in shown.stdout
        assert "The tone of the test plugin." in shown.stdout
    listed = plugins_json(run_backline("plugins", "--json", env=env))
    assert listed[tone["plugin"]]["options"] == [f"--{tone['flag']}", f"--{tone['flag']}-loud"]


def test_an_unknown_flag_is_still_a_usage_error(site: FakeSite, tone: dict[str, str]) -> None:
    env = site.env(BACKLINE_PLUGINS=tone["plugin"])
    result = run_backline(tone["command"], "--no-such-flag", env=env)
    assert result.returncode == 2
    assert "No such option '--no-such-flag'" in result.stderr


def test_a_flag_held_by_another_plugin_or_reserved_fails_that_plugin(
    site: FakeSite, tone: dict[str, str]
) -> None:
    clashing, reserved = unique("zz-clash"), unique("zz-reserved")
    clash_module, reserved_module = unique("mod_clash_"), unique("mod_reserved_")
    site.add(
        f"backline-{clashing}", {clash_module: CLASHING.format(**tone)}, {clashing: clash_module}
    )
    site.add(f"backline-{reserved}", {reserved_module: RESERVED}, {reserved: reserved_module})
    env = site.env(BACKLINE_PLUGINS=f"{tone['plugin']},{clashing},{reserved}")
    listed = plugins_json(run_backline("plugins", "--json", env=env))
    assert listed[tone["plugin"]]["status"] == "loaded"
    assert listed[clashing]["status"] == "failed"
    assert f"front-end option '--{tone['flag']}' is registered by both" in listed[clashing]["error"]
    assert listed[reserved]["status"] == "failed"
    assert "front-end option '--model' is reserved by backline" in listed[reserved]["error"]


def test_a_repeatable_flag_exports_every_value_joined_by_commas(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import click
    from click.testing import CliRunner

    from backline.plugins._options import make_option

    monkeypatch.delenv("TEST_PASS_NAMES", raising=False)
    entry = make_option(
        "test", ["--pass-name"], envvar="TEST_PASS_NAMES", help="Names.", multiple=True
    )
    seen: list[str | None] = []

    @click.command()
    def front_end() -> None:
        import os

        seen.append(os.environ.get("TEST_PASS_NAMES"))

    front_end.params.append(entry.option)
    result = CliRunner().invoke(front_end, ["--pass-name", "A", "--pass-name", "B_2"])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(front_end, [])  # not given: nothing exported over it

    assert seen == ["A,B_2", "A,B_2"]
