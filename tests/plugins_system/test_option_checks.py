"""No option is accepted and ignored (issue 26, item 4): a plugin's option for a background
that is not chosen, or a value the option does not take, is a usage error (status 2) that
names the fix, before anything starts, in every front end; names get a "did you mean"."""

from __future__ import annotations

from typing import Any

import click
import pytest
from click.testing import CliRunner

import backline
from backline import BackgroundContext, background
from backline.app import SessionOptions, check_options, prepare_session, session_options
from backline.plugins import PluginManager, attach_options
from backline.testing import ScriptedLLM

from .conftest import run_backline


@background("weather", description="Watches the weather.")
async def weather(ctx: BackgroundContext) -> None:
    async for _ in ctx.messages():
        pass


def _no_digits(value: str) -> None:
    if any(c.isdigit() for c in value):
        raise ValueError(f"a city has no digits (got {value!r})")


class WeatherPlugin:
    @backline.hookimpl
    def register_background_sessions(self, register: Any) -> None:
        register(weather)

    @backline.hookimpl
    def register_llms(self, register: Any) -> None:
        register("scripted", lambda **options: ScriptedLLM(["Sunny."]))

    @backline.hookimpl
    def register_options(self, register: Any) -> None:
        register(
            "--units",
            envvar="WEATHER_UNITS",
            help="Units.",
            background="weather",
            choices=["metric", "imperial"],
        )
        register(
            "--city",
            envvar="WEATHER_CITY",
            help="The city.",
            background="weather",
            validate=_no_digits,
        )
        register(
            "--feed",
            envvar="WEATHER_FEED",
            help="A feed any background may read.",
            choices=lambda manager: manager.llm_names(),  # names known once plugins loaded
        )
        register(
            "--weather-loud",
            envvar="WEATHER_LOUD",
            help="Loud.",
            is_flag=True,
            background="weather",
        )


@pytest.fixture
def manager(plugin_manager: PluginManager) -> PluginManager:
    plugin_manager.register(WeatherPlugin(), name="weather")
    return plugin_manager


@pytest.fixture
def front(manager: PluginManager, monkeypatch: pytest.MonkeyPatch) -> click.Command:
    """A front end built like ``backline console``: it records what it built."""
    for name in ("WEATHER_UNITS", "WEATHER_CITY", "WEATHER_FEED", "WEATHER_LOUD"):
        monkeypatch.delenv(name, raising=False)

    @click.command()
    @session_options
    def command(session_options: SessionOptions) -> None:
        prepare_session(manager, session_options)
        click.echo("session built")

    attach_options(command, manager.options())
    return command


def invoke(front: click.Command, *args: str, **env: str) -> Any:
    return CliRunner().invoke(front, ["--llm", "scripted", "--no-log", *args], env=env)


def test_an_option_of_a_background_not_chosen_is_a_usage_error_naming_the_fix(
    front: click.Command,
) -> None:
    result = invoke(front, "--units", "metric", "--weather-loud")
    assert result.exit_code == 2
    assert "session built" not in result.output
    assert (
        "--units is an option of the weather background, which this session does not run: "
        "add --background weather, or leave --units out." in result.output
    )
    assert "--weather-loud is an option of the weather background" in result.output
    chosen = invoke(front, "-b", "weather", "--units", "metric", "--weather-loud")
    assert chosen.exit_code == 0, chosen.output
    assert "session built" in chosen.output


def test_the_variable_of_a_background_not_chosen_is_left_alone(front: click.Command) -> None:
    # The environment is configuration for the day the background runs: no error.
    result = invoke(front, WEATHER_UNITS="kelvin")
    assert result.exit_code == 0, result.output


def test_a_value_not_among_the_choices_is_a_usage_error_with_did_you_mean(
    front: click.Command,
) -> None:
    result = invoke(front, "-b", "weather", "--units", "metrik")
    assert result.exit_code == 2
    assert "session built" not in result.output
    assert "Invalid value for '--units': 'metrik' is not one of: metric, imperial." in (
        result.output
    )
    assert "Did you mean 'metric'?" in result.output


def test_choices_from_the_loaded_plugins_and_a_validator_are_checked(
    front: click.Command,
) -> None:
    feed = invoke(front, "--feed", "scriptd")
    assert feed.exit_code == 2
    assert "'scriptd' is not one of: anthropic, scripted. Did you mean 'scripted'?" in feed.output
    assert invoke(front, "--feed", "scripted").exit_code == 0

    city = invoke(front, "-b", "weather", "--city", "Oslo2")
    assert city.exit_code == 2
    assert "Invalid value for '--city': a city has no digits (got 'Oslo2')" in city.output
    assert invoke(front, "-b", "weather", "--city", "Oslo").exit_code == 0


def test_a_wrong_value_in_the_variable_is_reported_with_the_variable(
    front: click.Command,
) -> None:
    result = invoke(front, "-b", "weather", WEATHER_UNITS="kelvin")
    assert result.exit_code == 2
    assert "Invalid value for '--units' (from $WEATHER_UNITS): 'kelvin' is not one of" in (
        result.output
    )


def test_check_options_reads_the_given_options_without_a_command(manager: PluginManager) -> None:
    options = SessionOptions(llm="scripted", plugin_options={"--units": "metric"})
    with pytest.raises(click.UsageError, match="add --background weather"):
        check_options(manager, options)
    check_options(manager, SessionOptions(llm="scripted", backgrounds=("weather",)))


def test_a_background_name_gets_a_did_you_mean(manager: PluginManager) -> None:
    with pytest.raises(click.BadParameter, match="Did you mean 'weather'"):
        check_options(manager, SessionOptions(llm="scripted", backgrounds=("Weather",)))


@pytest.mark.parametrize(
    ("bad", "fix"),
    [
        (["--registered-nowhere"], "No such option"),
        (["--background", "claude-code"], "Did you mean 'claude_code'?"),
        (["--claude-allow-bash"], "add --background claude_code, or leave --claude-allow-bash"),
        (["--agent-cmd", "claude -p"], "add --background cli_agent, or leave --agent-cmd out"),
        (["--search", "tavily"], "add --background deep_research, or leave --search out"),
        (["-b", "deep_research", "--search", "googel"], "'googel' is not one of: brave, ddgs,"),
    ],
)
@pytest.mark.parametrize("command", ["console", "web"])
def test_first_party_options_fail_before_anything_starts(
    command: str, bad: list[str], fix: str
) -> None:
    # No API key: the option's error comes first, and nothing is served or started.
    result = run_backline(command, "--no-log", *bad, env={"ANTHROPIC_API_KEY": ""})
    assert result.returncode == 2, result.stderr
    assert fix in result.stderr
    assert "ANTHROPIC_API_KEY" not in result.stderr
    assert result.stdout == ""
